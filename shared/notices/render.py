"""A notice as an RFC 5322 message, written with the standard library's `email` package
(DESIGN §6; no mail library in any runner, ADR-0048 "Verified by")."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from email.headerregistry import BaseHeader
from email.message import EmailMessage
from email.utils import format_datetime

from shared.db.schema import NoticeKind
from shared.notices.address import MESSAGE_POLICY

# RFC 5322 §3.6 requires a From; no setting names a sender (nothing here sends, ADR-0048), so the
# pickup's consumer rewrites this reserved-domain (RFC 2606 `.invalid`) address before sending.
NOTICE_SENDER = "AzureBank security notices <notices@azurebank.invalid>"
# The right-hand side of every Message-ID; the left is the notice's Id, a stable key a
# downstream consumer de-duplicates on (ADR-0048 D3).
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


# The headers that are the same in every notice of a kind, parsed once: a policy stores a header
# object whose name matches as it is, without parsing it again (email.policy.EmailPolicy.
# header_store_parse), and a parsed header is immutable, so every message may share it.
_FROM = _parsed("From", NOTICE_SENDER)
_AUTO_SUBMITTED = _parsed("Auto-Submitted", "auto-generated")  # RFC 3834: no auto-reply loops
_SUBJECT_HEADERS = {kind: _parsed("Subject", subject) for kind, subject in _SUBJECTS.items()}


class UnrenderableKind(Exception):
    """The notice's Kind has no message; an outcome at Warning, never a crash (ADR-0048 D7)."""


def message_id(notice_id: uuid.UUID) -> str:
    """The Message-ID derived from the notice's Id."""
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
    subject = _SUBJECT_HEADERS.get(kind)
    event = _EVENTS.get(kind)
    if subject is None or event is None:
        raise UnrenderableKind(kind)
    when = occurred_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    msg = EmailMessage(policy=MESSAGE_POLICY)
    msg["From"] = _FROM
    msg["To"] = address
    msg["Subject"] = subject
    msg["Date"] = format_datetime(now.astimezone(UTC))
    msg["Message-ID"] = message_id(notice_id)
    msg["Auto-Submitted"] = _AUTO_SUBMITTED
    # NIST SP 800-63B-4 §4.6 (ADR-0048 D6): the contact is mandatory content of every notice.
    msg.set_content(
        f"{event}\n"
        "\n"
        f"When: {when}\n"
        f"Reference: {notice_id}\n"
        "\n"
        "If this was you, there is nothing to do.\n"
        f"If it was not, contact us at once: {contact}\n"
    )
    return msg.as_bytes()
