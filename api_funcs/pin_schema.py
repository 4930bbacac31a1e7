"""A PIN as the document declares it (4 to 6 ASCII digits, docs/security.md#pins-and-passwords).

The pattern is documentation, not a body rule: docs/http.md puts a malformed PIN on the service's
own rung (pin_enrol: after INVALID_PASSWORD and PIN_ALREADY_ENROLLED; pin_change: after
PIN_REQUIRED; the mint: a PIN that does not verify is INVALID_PIN), so a pydantic `pattern`,
which refuses before the handler runs, would answer 400 on the wrong rung. The only body rule is
the length bound that caps the work a request can ask of PBKDF2."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from shared.identity.pins import PIN_PATTERN

PIN_JSON_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": f"^{PIN_PATTERN.pattern}$",
    "minLength": 4,
    "maxLength": 6,
    "description": "4 to 6 ASCII digits.",
}

# The body's one rule, far above any PIN: it caps the PBKDF2 work a request can ask for.
Pin = Annotated[str, Field(max_length=64), WithJsonSchema(PIN_JSON_SCHEMA)]
