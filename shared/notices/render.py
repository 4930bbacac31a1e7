"""A notice as the RFC 5322 bytes the standard library's `email` package writes (no mail library:
ADR-0048 alternatives declined), and whether a user's `Email` can stand as its `To` (D7 there)."""

from __future__ import annotations

import enum
import re
import uuid
from datetime import UTC, datetime
from email import policy
from email.headerregistry import BaseHeader, HeaderRegistry
from email.message import EmailMessage
from email.utils import format_datetime
from typing import Any

from shared.db.schema import NoticeKind


class _HeaderClassCache(HeaderRegistry):
    """The standard registry, building each header's class once rather than with `type()` for
    every header it parses, a large share of a notice's rendering (bench/README.md, Relay)."""

    def __init__(self) -> None:
        super().__init__()
        self._classes: dict[str, type[BaseHeader]] = {}

    def __getitem__(self, name: str) -> type[BaseHeader]:
        key = name.lower()
        # setdefault: two threads that race here both get the first class stored.
        return self._classes.get(key) or self._classes.setdefault(key, super().__getitem__(name))

    def map_to_type(self, name: str, cls: type[BaseHeader]) -> None:
        super().map_to_type(name, cls)
        self._classes.pop(name.lower(), None)  # a remapped name builds its new class next time


# SMTPUTF8, but for where header classes come from: "usable" means "this renderer can write it".
MESSAGE_POLICY = policy.SMTPUTF8.clone(header_factory=_HeaderClassCache())

# RFC 5321 §4.5.3.1.3: a path is at most 256 octets including the angle brackets.
_MAX_ADDRESS = 254


class AddressProblem(enum.StrEnum):
    """Why an address is unusable; safe to log."""

    MISSING = "missing"  # no Email on the user's row
    BLANK = "blank"  # an Email of whitespace only
    INVALID = "invalid"  # not one bare addr-spec this renderer can write


def address_problem(raw: str | None) -> AddressProblem | None:
    """None when `raw` (stripped) is one plain addr-spec; otherwise why it is not."""
    if raw is None:
        return AddressProblem.MISSING
    value = raw.strip()
    if not value:
        return AddressProblem.BLANK
    if len(value) > _MAX_ADDRESS or any(ord(c) < 0x20 or c == "\x7f" for c in value):
        return AddressProblem.INVALID
    if not all(value.rpartition("@")):  # a local part, an "@" and a domain
        return AddressProblem.INVALID
    try:
        header = MESSAGE_POLICY.header_factory("To", value)
    except Exception:  # the parser raises IndexError and friends on some malformed input
        return AddressProblem.INVALID
    addresses: tuple[Any, ...] = tuple(getattr(header, "addresses", ()))
    # One address, no defect, and the addr-spec as given: a display name, a list or a repaired
    # form would mean the renderer writes something other than the row holds.
    if header.defects or len(addresses) != 1 or addresses[0].addr_spec != value:
        return AddressProblem.INVALID
    return None


# RFC 5322 §3.6 requires a From; the pickup's consumer rewrites this reserved (RFC 2606) one.
NOTICE_SENDER = "AzureBank security notices <notices@azurebank.invalid>"
# A Message-ID's left is the notice's Id, a stable key a downstream consumer de-duplicates on.
MESSAGE_ID_DOMAIN = "notices.azurebank"

_SUBJECTS: dict[str, str] = {
    NoticeKind.PIN_ENROLLED: "A PIN was set on your AzureBank account",
    NoticeKind.PIN_CHANGED: "Your AzureBank PIN was changed",
}
_EVENTS: dict[str, str] = {
    NoticeKind.PIN_ENROLLED: "A transfer PIN was set on your AzureBank account.",
    NoticeKind.PIN_CHANGED: "The transfer PIN of your AzureBank account was changed.",
}


def _parsed(name: str, value: str) -> BaseHeader:
    header: BaseHeader = MESSAGE_POLICY.header_factory(name, value)
    return header


# Parsed once: a policy stores a parsed header as it is (EmailPolicy.header_store_parse), and it
# is immutable, so every message may share it.
_FROM = _parsed("From", NOTICE_SENDER)
AUTO_SUBMITTED = "auto-generated"  # RFC 3834: no auto-reply loops
_AUTO_SUBMITTED = _parsed("Auto-Submitted", AUTO_SUBMITTED)
_SUBJECT_HEADERS = {kind: _parsed("Subject", subject) for kind, subject in _SUBJECTS.items()}


class UnrenderableKind(Exception):
    """The notice's Kind has no message."""


def message_id(notice_id: uuid.UUID) -> str:
    return f"<{notice_id}@{MESSAGE_ID_DOMAIN}>"


def render_notice(
    *,
    notice_id: uuid.UUID,
    kind: str,
    occurred_at: datetime,
    address: str,
    contact: str,
    now: datetime,
) -> bytes:
    """The message for one owed notice, CRLF line endings; `address` must already be usable."""
    event = _EVENTS.get(kind)
    if event is None or kind not in _SUBJECTS:
        raise UnrenderableKind(kind)
    when = occurred_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    date = format_datetime(now.astimezone(UTC))
    # NIST SP 800-63B-4 §4.6: the contact is mandatory content of every notice.
    body = (
        f"{event}\n\n"
        f"When: {when}\nReference: {notice_id}\n\n"
        "If this was you, there is nothing to do.\n"
        f"If it was not, contact us at once: {contact}\n"
    )
    if _PLAIN_ADDRESS.fullmatch(address) and _PLAIN_CONTACT.fullmatch(contact):
        return _plain_message(notice_id, kind, address, date, body)
    return _email_package_message(notice_id, kind, address, date, body)


# A dot-atom address and a printable ASCII contact that fit their lines are what the package
# writes with no folding, no encoding and a 7bit body: written directly, since refolding every
# header is a notice's largest CPU cost (bench/README.md, Relay). tests/unit/test_notice_render.py
# holds both forms to the stock policy's bytes.
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
_LINE = MESSAGE_POLICY.max_line_length or 78
_PLAIN_ADDRESS = re.compile(
    rf"(?=.{{1,{_LINE - len('To: ')}}}$){_ATOM}(?:\.{_ATOM})*@{_ATOM}(?:\.{_ATOM})*"
)
_PLAIN_CONTACT = re.compile(
    rf"[\x20-\x7e]{{0,{_LINE - len('If it was not, contact us at once: ')}}}"
)


def _plain_message(notice_id: uuid.UUID, kind: str, address: str, date: str, body: str) -> bytes:
    lines = body.replace("\n", "\r\n")
    return (
        f"From: {NOTICE_SENDER}\r\n"
        f"To: {address}\r\n"
        f"Subject: {_SUBJECTS[kind]}\r\n"
        f"Date: {date}\r\n"
        f"Message-ID: {message_id(notice_id)}\r\n"
        f"Auto-Submitted: {AUTO_SUBMITTED}\r\n"
        'Content-Type: text/plain; charset="utf-8"\r\n'
        "Content-Transfer-Encoding: 7bit\r\n"
        "MIME-Version: 1.0\r\n"
        f"\r\n{lines}"
    ).encode("ascii")


def _email_package_message(
    notice_id: uuid.UUID, kind: str, address: str, date: str, body: str
) -> bytes:
    msg = EmailMessage(policy=MESSAGE_POLICY)
    msg["From"] = _FROM
    msg["To"] = address
    msg["Subject"] = _SUBJECT_HEADERS[kind]
    msg["Date"] = date
    msg["Message-ID"] = message_id(notice_id)
    msg["Auto-Submitted"] = _AUTO_SUBMITTED
    msg.set_content(body)
    return msg.as_bytes()
