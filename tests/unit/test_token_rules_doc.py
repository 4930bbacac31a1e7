"""docs/security.md states the token rules the verifier applies: its numbers are the code's."""

from __future__ import annotations

from shared.identity.jwks import JwksKeys
from shared.identity.tokens import NUMERIC_DATE_MAX, USER_ID_MAX_UTF16_UNITS, TokenVerifier
from tests.support.checkout import REPO

DOC = (REPO / "docs" / "security.md").read_text(encoding="utf-8")


def test_the_token_rules_page_states_the_verifiers_numbers_and_algorithms() -> None:
    stated = {
        "leeway": f"**Leeway**: {TokenVerifier.LEEWAY_SECONDS} seconds",
        "refetch bound": f"at most once every {JwksKeys.REFETCH_SECONDS} seconds, whatever asks",
        "max age": f"set held is {JwksKeys.MAX_AGE_SECONDS} seconds old",
        "fetch timeout": f"A fetch waits at most {JwksKeys.TIMEOUT_SECONDS} seconds",
        "latest time": f"from 0 to {NUMERIC_DATE_MAX}",
        "sub length": f"at most {USER_ID_MAX_UTF16_UNITS} UTF-16 code units",
        "jwks algorithms": " | "
        + ", ".join(f"`{a}`" for a in TokenVerifier.JWKS_ALGORITHMS)
        + " |",
        "local algorithms": " | "
        + ", ".join(f"`{a}`" for a in TokenVerifier.LOCAL_ALGORITHMS)
        + " |",
    }
    assert {name: text in DOC for name, text in stated.items()} == dict.fromkeys(stated, True)


def test_the_readme_links_the_token_rules_page() -> None:
    assert "(docs/security.md)" in (REPO / "README.md").read_text(encoding="utf-8")
