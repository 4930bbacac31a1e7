"""The request hash is stored in every IdempotencyRecord and compared with the retry's, which
may be served by the next release: its text is fixed, SHA-256 of the canonical JSON
`{"operation":…,"request":{…}}` (keys sorted, no spaces). A change to it makes every retry that
spans a deployment 422 IDEMPOTENCY_KEY_REUSED, so these vectors pin it."""

from __future__ import annotations

import hashlib

import pytest

from shared.money.idempotency import request_hash

ACCOUNT = "0b9d1e52-7a4e-4c49-9f3e-4d2b8f1c6a10"


@pytest.mark.parametrize(
    ("operation", "canonical", "text"),
    [
        (
            "deposit",
            {"amount": "10.00", "accountId": ACCOUNT},
            '{"operation":"deposit","request":'
            '{"accountId":"0b9d1e52-7a4e-4c49-9f3e-4d2b8f1c6a10","amount":"10.00"}}',
        ),
        (
            "transfer",
            {"authorizationId": ACCOUNT},
            '{"operation":"transfer","request":'
            '{"authorizationId":"0b9d1e52-7a4e-4c49-9f3e-4d2b8f1c6a10"}}',
        ),
    ],
)
def test_the_request_hash_is_sha256_of_the_operation_and_its_canonical_fields(
    operation: str, canonical: dict[str, str], text: str
) -> None:
    assert request_hash(operation, canonical) == hashlib.sha256(text.encode()).hexdigest()
