"""A notice is an RFC 5322 message from the standard library; what makes an address
usable; the runner's name (ADR-0048 D5)."""

from __future__ import annotations

import email
import os
import re
import socket
import time
import uuid
from datetime import UTC, datetime
from email import policy
from email.headerregistry import AddressHeader, HeaderRegistry, UnstructuredHeader

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.db.schema import NoticeKind
from shared.notices.hosted import make_runner_name, runner_kind
from shared.notices.render import (
    AddressProblem,
    UnrenderableKind,
    _HeaderClassCache,
    address_problem,
    message_id,
    render_notice,
)
from tests.support.hosts import CONTACT

NOTICE_ID = uuid.UUID("0b9f3c52-6d1e-4c1a-9e43-2f8a1d6c7b10")
OCCURRED = datetime(2026, 9, 7, 11, 58, 30, tzinfo=UTC)
NOW = datetime(2026, 9, 7, 12, 0, tzinfo=UTC)


def _render(kind: str = NoticeKind.PIN_CHANGED) -> email.message.EmailMessage:
    raw = render_notice(
        notice_id=NOTICE_ID,
        kind=kind,
        occurred_at=OCCURRED,
        address="ada@example.com",
        contact=CONTACT,
        now=NOW,
    )
    assert b"\r\n" in raw  # CRLF, as a pickup directory's consumer expects
    parsed = email.message_from_bytes(raw, policy=policy.default)
    assert isinstance(parsed, email.message.EmailMessage)
    return parsed


@pytest.mark.parametrize("kind", [NoticeKind.PIN_ENROLLED, NoticeKind.PIN_CHANGED])
def test_a_notice_is_an_rfc5322_message_with_to_subject_date_and_a_message_id_from_its_id(
    kind: str,
) -> None:
    msg = _render(kind)
    assert msg["To"] == "ada@example.com"
    assert msg["Subject"]
    assert msg["From"]  # RFC 5322 §3.6: From and Date are required
    assert msg["Date"] == "Mon, 07 Sep 2026 12:00:00 +0000"
    assert msg["Message-ID"] == message_id(NOTICE_ID) == f"<{NOTICE_ID}@notices.azurebank>"


@pytest.mark.adr("0048", "D6")
def test_the_body_names_the_event_its_utc_time_the_reference_and_the_contact() -> None:
    body = _render(NoticeKind.PIN_CHANGED).get_content()
    assert "PIN of your AzureBank account was changed" in body
    assert "2026-09-07 11:58:30 UTC" in body
    assert f"Reference: {NOTICE_ID}" in body
    # ADR-0048 D6 (NIST SP 800-63B-4 §4.6): the contact is in every notice.
    assert CONTACT in body


def test_the_date_and_the_time_in_the_body_are_utc_whatever_the_hosts_local_zone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        msg = _render(NoticeKind.PIN_CHANGED)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert msg["Date"] == "Mon, 07 Sep 2026 12:00:00 +0000"
    assert "When: 2026-09-07 11:58:30 UTC" in msg.get_content()


def test_a_kind_with_no_message_is_unrenderable_not_a_crash_of_another_kind() -> None:
    with pytest.raises(UnrenderableKind):
        _render("PasswordChanged")


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (None, AddressProblem.MISSING),
        ("", AddressProblem.BLANK),
        ("   ", AddressProblem.BLANK),
        ("not-an-address", AddressProblem.INVALID),
        ("a@", AddressProblem.INVALID),
        ("@example.com", AddressProblem.INVALID),
        ("a b@example.com", AddressProblem.INVALID),
        ("a@example.com, b@example.com", AddressProblem.INVALID),
        ("Ada <a@example.com>", AddressProblem.INVALID),
        ("a@example.com\r\nBcc: b@example.com", AddressProblem.INVALID),
        ("a@example..com", AddressProblem.INVALID),
        ("x" * 250 + "@example.com", AddressProblem.INVALID),
        ("x" * 243 + "@example.com", AddressProblem.INVALID),  # 255: one over the bound
        # A tab inside a quoted local part, which the header parser takes without a defect.
        ('"a\tb"@example.com', AddressProblem.INVALID),
        # A local part ending in a dot: the parser reads it back as given, with a defect.
        ("ada.@example.com", AddressProblem.INVALID),
    ],
)
def test_an_unusable_address_is_named_by_its_problem(raw: str | None, problem: str) -> None:
    assert address_problem(raw) == problem


@pytest.mark.parametrize(
    "raw",
    [
        "a@example.com",
        " ada.lovelace+pin@bank.example.org ",
        '"ada lovelace"@example.com',  # a space inside a quoted local part is no control
        "x" * 242 + "@example.com",  # 254 characters, the longest an address may be
    ],
)
def test_a_plain_addr_spec_is_usable(raw: str) -> None:
    assert address_problem(raw) is None


def test_the_header_registry_builds_each_class_once_as_the_stock_one_and_anew_after_a_remap() -> (
    None
):
    registry, stock = _HeaderClassCache(), HeaderRegistry()
    to = registry["To"]
    assert registry["TO"] is to  # one class per name, whatever its case
    assert to.__mro__[1:] == stock["To"].__mro__[1:]  # the stock registry's class for the name
    parsed = registry("To", "ada@example.com")
    assert (str(parsed), parsed.defects) == ("ada@example.com", ())
    assert issubclass(registry["X-Notice-Test"], UnstructuredHeader)
    registry.map_to_type("X-Notice-Test", AddressHeader)
    registry.map_to_type("X-Never-Read", AddressHeader)  # a name with no class built yet
    assert issubclass(registry["x-never-read"], AddressHeader)
    # The remapped name gets its new class, under any case, and only that name changes.
    assert issubclass(registry["x-notice-test"], AddressHeader)
    assert registry["To"] is to


@pytest.mark.parametrize(
    ("hostname", "host"),
    [
        ("web-7f9c.internal.example.org", "web-7f9c"),  # the first label only
        ("my box/7\tb.example", "my-box-7-b"),  # '/' and whitespace would split the name
        ("", "unknown-host"),
        ("h" * 80, "h" * 63),  # a DNS label's length at most
    ],
)
def test_a_runner_names_host_is_its_first_label_made_safe_to_split(
    monkeypatch: pytest.MonkeyPatch, hostname: str, host: str
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: hostname)
    assert make_runner_name("api").split("/")[:2] == ["api", host]


def test_a_runner_name_of_an_unknown_kind_is_refused_naming_the_kind() -> None:
    with pytest.raises(ValueError) as refused:
        make_runner_name("cron")  # type: ignore[arg-type]
    assert str(refused.value) == "unknown runner kind 'cron'"


@pytest.mark.adr("0048", "D5")
@pytest.mark.parametrize("kind", ["api", "function", "verb"])
def test_a_runner_name_is_kind_host_pid_and_eight_hex(kind: str) -> None:
    name = make_runner_name(kind)  # type: ignore[arg-type]
    assert re.fullmatch(rf"{kind}/[^/\s]+/\d+/[0-9a-f]{{8}}", name)
    # The host part is this machine's own first label, as the announcement line shows it.
    host = re.sub(r"[/\s]", "-", socket.gethostname().split(".")[0])[:63]
    assert name.split("/")[1:3] == [host or "unknown-host", str(os.getpid())]
    assert make_runner_name(kind) != name  # type: ignore[arg-type]
    # The kind is read back from the name alone (the verb's lease, telemetry's runner kind).
    assert runner_kind(name) == kind


def _render_with_the_stock_policy(
    kind: str,
    address: str,
    contact: str,
    *,
    notice_id: uuid.UUID = NOTICE_ID,
    occurred_at: datetime = OCCURRED,
    now: datetime = NOW,
) -> bytes:
    """The message as written before the renderer cached header classes and parsed headers: the
    stock SMTPUTF8 policy, every header set from its text."""
    from email.message import EmailMessage
    from email.utils import format_datetime

    subjects = {
        NoticeKind.PIN_ENROLLED: "A PIN was set on your AzureBank account",
        NoticeKind.PIN_CHANGED: "Your AzureBank PIN was changed",
    }
    events = {
        NoticeKind.PIN_ENROLLED: "A transfer PIN was set on your AzureBank account.",
        NoticeKind.PIN_CHANGED: "The transfer PIN of your AzureBank account was changed.",
    }
    msg = EmailMessage(policy=policy.SMTPUTF8)
    msg["From"] = "AzureBank security notices <notices@azurebank.invalid>"
    msg["To"] = address
    msg["Subject"] = subjects[kind]
    msg["Date"] = format_datetime(now.astimezone(UTC))
    msg["Message-ID"] = message_id(notice_id)
    msg["Auto-Submitted"] = "auto-generated"
    msg.set_content(
        f"{events[kind]}\n\nWhen: {occurred_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC\n"
        f"Reference: {notice_id}\n\n"
        f"If this was you, there is nothing to do.\nIf it was not, contact us at once: {contact}\n"
    )
    return msg.as_bytes()


@pytest.mark.parametrize("kind", [NoticeKind.PIN_ENROLLED, NoticeKind.PIN_CHANGED])
@pytest.mark.parametrize(
    ("address", "contact"),
    [
        ("ada@example.com", CONTACT),
        # A To line past the fold width; a non-ASCII contact makes the body 8bit; a contact
        # longer than a line makes it quoted-printable: every branch the stock policy takes.
        ("a" * 64 + "@" + "sub." * 40 + "example.com", CONTACT),
        ("ada@example.com", "Sécurité AzureBank, +33 1 23 45 67 89"),
        ("ada@example.com", "call " * 30),
    ],
)
def test_the_renderer_writes_every_byte_the_stock_email_policy_writes(
    kind: str, address: str, contact: str
) -> None:
    """The renderer caches header classes and the headers every notice shares (bench/README.md,
    Relay); neither may change what it writes."""
    assert address_problem(address) is None
    for _ in range(2):  # a shared, already-folded header folds the same way again
        rendered = render_notice(
            notice_id=NOTICE_ID,
            kind=kind,
            occurred_at=OCCURRED,
            address=address,
            contact=contact,
            now=NOW,
        )
        assert rendered == _render_with_the_stock_policy(kind, address, contact)


_ATOM = st.text(alphabet="abcXYZ019!#$%&'*+/=?^_`{|}~-", min_size=1, max_size=12)
_PLAIN_ADDRESSES = st.builds(
    lambda local, domain: ".".join(local) + "@" + ".".join(domain),
    st.lists(_ATOM, min_size=1, max_size=3),
    st.lists(_ATOM, min_size=1, max_size=6),
)
_ADDRESSES = st.one_of(
    _PLAIN_ADDRESSES,
    # Near the fold width, quoted local parts, non-ASCII: the forms the email package writes.
    st.builds(lambda n: "a" * n + "@example.com", st.integers(50, 90)),
    st.builds(lambda s: f'"{s}"@example.com', st.text("ab .", min_size=1, max_size=8)),
    st.builds(lambda s: f"{s}@exämple.com", st.text("aé", min_size=1, max_size=8)),
).filter(lambda a: address_problem(a) is None)
_CONTACTS = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=60),
    st.text(max_size=60).filter(lambda c: "\r" not in c and "\n" not in c),
)
_INSTANTS = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(
    kind=st.sampled_from([NoticeKind.PIN_ENROLLED, NoticeKind.PIN_CHANGED]),
    address=_ADDRESSES,
    contact=_CONTACTS,
    notice_id=st.uuids(),
    occurred_at=_INSTANTS,
    now=_INSTANTS,
)
def test_every_notice_is_the_bytes_the_stock_email_policy_writes(
    kind: str,
    address: str,
    contact: str,
    notice_id: uuid.UUID,
    occurred_at: datetime,
    now: datetime,
) -> None:
    """The message is the standard library's, whichever way the renderer writes it
    (directly for a plain address and contact, through the email package otherwise)."""
    rendered = render_notice(
        notice_id=notice_id,
        kind=kind,
        occurred_at=occurred_at,
        address=address,
        contact=contact,
        now=now,
    )
    assert rendered == _render_with_the_stock_policy(
        kind, address, contact, notice_id=notice_id, occurred_at=occurred_at, now=now
    )
