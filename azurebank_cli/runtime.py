"""What the commands share: how each is added, argument types, progress, reports and failures."""

from __future__ import annotations

import argparse
import json
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from enum import Enum
from typing import Any, TypeVar

from shared.clock import utc_text
from shared.identity import tokens

T = TypeVar("T")
Run = Callable[[argparse.Namespace], int]


def command(sub: Any, name: str, run: Run, with_json: bool = False, **options: Any) -> Any:
    """Add the command `name` that `run` runs, with --json if asked; `options` are add_parser's."""
    parser = sub.add_parser(name, **options)
    parser.set_defaults(run=run)
    if with_json:
        parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    return parser


def commands(sub: Any, name: str, help: str) -> Any:
    """Add `name`, a group of commands (`azurebank db upgrade`) one of which must be given."""
    group = sub.add_parser(name, help=help)
    return group.add_subparsers(dest=f"{name}_command", required=True, parser_class=type(group))


def checked(
    parse: Callable[[str], T], message: str, holds: Callable[[T], bool] = lambda _value: True
) -> Callable[[str], T]:
    """An argparse `type`: what `parse` reads, if it `holds`; else a usage error, `message`."""

    def check(text: str) -> T:
        try:
            value = parse(text)
        except (ValueError, ArithmeticError):  # Decimal's InvalidOperation is an ArithmeticError
            raise argparse.ArgumentTypeError(message) from None
        if not holds(value):
            raise argparse.ArgumentTypeError(message)
        return value

    return check


def whole_number(low: int, high: int, what: str = "a whole number") -> Callable[[str], int]:
    """An argparse `type`: digits from `low` to `high`; else a usage error that names the range."""

    def parse(text: str) -> int:
        # ASCII only: str.isdigit() also passes other scripts' digits, which int() reads or not.
        digits = text.isascii() and text.isdigit() and len(text) <= len(str(high))
        if not digits or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"must be {what} from {low} to {high}")
        return int(text)

    return parse


# The verifier's own rule for a token's `sub`, so a token it would refuse is refused here, and no
# surrounding spaces (no Id holds them).
user_id = checked(
    str,
    "must be an AspNetUsers.Id (1 to 450 characters)",
    lambda text: tokens.user_id(text) is not None and text == text.strip(),
)


def shows_progress() -> bool:
    """Both stdout and stderr a terminal: piped output (`| tee run.log`) shows no progress."""
    return sys.stdout.isatty() and sys.stderr.isatty()


def fields(thing: object, *names: str) -> dict[str, Any]:
    """`thing`'s attributes `names` as --json prints them: camelCase keys (`notice_id` as noticeId),
    ids as text, enums as their value, instants as utc_text."""
    return {_camel(name): _plain(getattr(thing, name)) for name in names}


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.capitalize() for word in rest)


def _plain(value: object) -> object:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, datetime):
        return utc_text(value)
    return value.value if isinstance(value, Enum) else value


def print_report(as_json: bool, document: Mapping[str, Any], lines: Iterable[str]) -> None:
    """`--json`: the document, one JSON object on stdout; otherwise the report's text lines."""
    print(json.dumps(document) if as_json else "\n".join(lines))


def fail(code: int, message: str) -> int:
    """`message` on stderr, and the `code` the command exits with."""
    print(message, file=sys.stderr)
    return code
