"""What `azurebank smoke` shows of an answer: the status, and the body's errorCode when it names
one an operator's terminal can print as it is."""

from __future__ import annotations

import pytest

from azurebank_cli.smoke import Answer


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"errorCode": "DAILY_LIMIT_EXCEEDED"}', "422 DAILY_LIMIT_EXCEEDED"),
        (b'{"errorCode": ""}', "422"),
        (b'{"errorCode": "  "}', "422"),
        (b'{"errorCode": "X\\u001b[2J"}', "422"),  # a terminal escape is not shown
        (b'{"errorCode": 7}', "422"),
        (b"not json", "422"),
        (b'["errorCode"]', "422"),
    ],
)
def test_an_answer_shows_its_status_and_a_printable_error_code_only(
    body: bytes, shown: str
) -> None:
    assert Answer(status=422, body=body, headers={}).shown() == shown
