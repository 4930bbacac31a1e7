"""What the commands share: argument types, and how a report is printed."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from shared.clock import utc_text
from shared.identity import tokens
from shared.notices.status import LeaseHolder

T = TypeVar("T")


def whole_number(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse `type`: a whole number from `low` to `high`; anything else is a usage error
    that names the range."""

    def parse(text: str) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be {what} from {low} to {high}")
        return int(text)

    return parse


def user_id(text: str) -> str:
    """An argparse `type`: the verifier's own rule for a token's `sub` (shared.identity.tokens),
    so a token it would refuse is refused here, and no surrounding spaces (no Id holds them)."""
    if tokens.user_id(text) is None or text != text.strip():
        raise argparse.ArgumentTypeError("must be an AspNetUsers.Id (1 to 450 characters)")
    return text


def print_report(
    report: T,
    *,
    as_json: bool,
    document: Callable[[T], Mapping[str, Any]],
    lines: Callable[[T], Iterable[str]],
) -> None:
    """`--json`: one JSON object on stdout; otherwise the report's text lines."""
    if as_json:
        print(json.dumps(document(report)))
    else:
        for line in lines(report):
            print(line)


def holder_json(holder: LeaseHolder) -> dict[str, Any]:
    """A runner holding owed rows, as `notices status --json` and `notify --json` name it."""
    return {
        "runner": holder.runner,
        "rows": holder.rows,
        "firstLapse": utc_text(holder.first_lapse),
        "leasedUntil": utc_text(holder.last_lapse),
    }
