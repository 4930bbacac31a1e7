"""App settings: frozen dataclasses read from `Section__Key` (or `Section:Key`) variables; each
field's `Rule` states what its key accepts, `check_host` what each host needs (ADR-0048 D6), and
every error names the key as an operator spells it and its fix (docs/settings.md). Not pydantic,
and each class has a docstring and no `__repr__`/`__eq__`: the worker checks the settings while
it indexes (bench/README.md), and nothing prints a secret."""

from __future__ import annotations

import base64
import contextlib
import enum
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from shared.notices.transports import pickup_directory_problem

# ADR-0046: MONEY_MAX is the one published maximum of a single request.
MONEY_MAX = Decimal("100000")

Host = Literal["function", "api", "verb", "cli"]
# The hosts that run the relay when the flag names them (ADR-0048 D1, D6).
HostedKind = Literal["api", "function"]


class SettingsError(Exception):
    """Settings refused; the message names each key as the operator spells it, and its fix."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("Settings refused:\n" + "\n".join(f"  - {p}" for p in problems))


class NoticeRunner(enum.StrEnum):
    """Which kind of runner delivers owed notices (ADR-0048 D6); the flag, not the lease,
    keeps two kinds of runner from both sending."""

    NONE = "None"  # nobody delivers; the verb is the only way out
    API = "Api"  # `azurebank serve`'s hosted loop
    FUNCTION = "Function"  # the timer-triggered Function (ADR-0051)


def is_named(settings: Settings, host: Host) -> bool:
    """ADR-0048 D1: whether the flag names this host's runner (no value names `verb` or `cli`)."""
    return settings.Notices.Runner.lower() == host


# Once a minute (NCRONTAB, seconds first).
DEFAULT_SCHEDULE = "0 */1 * * * *"

# A Rule's `blank` when a blank value is parsed like any other text.
_PARSED = object()


@dataclass(frozen=True, repr=False, eq=False)
class Rule:
    """How one setting's text becomes its value: the parse, a number's bounds, a blank's value;
    a secret's text is never echoed."""

    parse: Callable[[str], Any]
    low: int | Decimal | None = None
    high: int | Decimal | None = None
    places: int | None = None
    blank: Any = _PARSED
    secret: bool = False


class _Refused(ValueError):
    """A setting's text cannot be its value; the message is what the operator reads."""


def _whole(text: str) -> int:
    # ASCII digits only, and few enough that int() never meets its own digit limit.
    if not re.fullmatch(r"[+-]?[0-9]{1,100}", text.strip()):
        raise _Refused("Input should be a valid integer")
    return int(text)


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text.strip())
    except ArithmeticError:
        raise _Refused("Input should be a valid decimal") from None
    if not value.is_finite():
        raise _Refused("Input should be a finite number")
    return value


def _flag(text: str) -> bool:
    # pydantic's spellings, which the .NET binder's true/false are among.
    word = text.strip().lower()
    if word in {"1", "on", "t", "true", "y", "yes"}:
        return True
    if word in {"0", "off", "f", "false", "n", "no"}:
        return False
    raise _Refused("Input should be a valid boolean, unable to interpret input")


def _runner(text: str) -> NoticeRunner:
    # The .NET configuration binder parses enums case-insensitively; an operator who writes
    # `function` in the portal means Function, and the two hosts must agree on it.
    for runner in NoticeRunner:
        if text.strip().lower() == runner.value.lower():
            return runner
    raise _Refused("Input should be 'None', 'Api' or 'Function'")


def _chain_key(text: str) -> str:
    try:
        raw = base64.b64decode(text, validate=True)
    except ValueError:
        raise _Refused("must be base64") from None
    if len(raw) < 32:
        raise _Refused("must decode to at least 32 bytes")
    return text


def setting(default: Any, parse: Callable[[str], Any], **rule: Any) -> Any:
    return field(default=default, metadata={"rule": Rule(parse, **rule)})


def whole(default: int, low: int, high: int) -> Any:
    return setting(default, _whole, low=low, high=high)


def text(*, blank_is_unset: bool = False, secret: bool = False) -> Any:
    return setting(None, str, blank=None if blank_is_unset else _PARSED, secret=secret)


@dataclass(frozen=True, repr=False, eq=False)
class DatabaseSettings:
    """`Database__*`: where the database is, its pool, and every wait on it."""

    Url: str | None = text(secret=True)
    # Per process: instances x (PoolSize + MaxOverflow) must fit the database's tier.
    PoolSize: int = whole(10, 1, 100)
    MaxOverflow: int = whole(20, 0, 100)
    # In seconds (docs/settings.md, "Waits on the database").
    ConnectTimeoutSeconds: int = whole(5, 2, 60)
    StatementTimeoutSeconds: int = whole(15, 2, 300)
    LockTimeoutSeconds: int = whole(5, 1, 299)
    PoolTimeoutSeconds: int = whole(5, 1, 60)
    KeepaliveSeconds: int = whole(10, 1, 300)


@dataclass(frozen=True, repr=False, eq=False)
class HealthSettings:
    """`Health__*`: the readiness probe's bound."""

    ReadyTimeoutSeconds: int = whole(3, 1, 60)


@dataclass(frozen=True, repr=False, eq=False)
class NoticesSettings:
    """`Notices__*`: who delivers owed notices, where, and at what pace (ADR-0048)."""

    Runner: NoticeRunner = setting(NoticeRunner.NONE, _runner)  # noqa: RUF009 - a field()
    PickupDirectory: str | None = text(blank_is_unset=True)
    PickupContainer: str | None = text(blank_is_unset=True)
    Contact: str | None = text(blank_is_unset=True)
    PeriodSeconds: int = whole(15, 1, 3600)
    LeaseSeconds: int = whole(120, 2, 86400)
    BatchSize: int = whole(100, 1, 1000)
    Schedule: str = setting(DEFAULT_SCHEDULE, str)


@dataclass(frozen=True, repr=False, eq=False)
class NoticesStorageSettings:
    """Where the blob pickup container lives: a connection string, or a managed identity's URI."""

    ConnectionString: str | None = text(secret=True)
    blobServiceUri: str | None = text()


@dataclass(frozen=True, repr=False, eq=False)
class DailyLimitSettings:
    """`DailyLimit__*`: the per-user UTC-day limit and its lock's wait (ADR-0050)."""

    Amount: Decimal = setting(  # noqa: RUF009 - a field()
        Decimal(5000), _amount, low=Decimal(0), high=MONEY_MAX, places=2
    )
    LockTimeoutSeconds: int = whole(10, 1, 29)


@dataclass(frozen=True, repr=False, eq=False)
class AuthSettings:
    """`Auth__*`: how bearer tokens are verified (docs/security.md)."""

    Issuer: str | None = text()
    Audience: str | None = text()
    JwksUrl: str | None = text()
    SigningKey: str | None = text(secret=True)


@dataclass(frozen=True, repr=False, eq=False)
class AuditSettings:
    """`Audit__*`: the audit chain's key."""

    ChainKey: str | None = setting(None, _chain_key, blank=None, secret=True)


@dataclass(frozen=True, repr=False, eq=False)
class PinSettings:
    """`Pin__*`: the PIN's tries and lockout."""

    # PSD2 RTS Art. 4: at most five tries.
    MaxFailedAttempts: int = whole(5, 1, 5)
    LockoutMinutes: int = whole(15, 1, 1440)


@dataclass(frozen=True, repr=False, eq=False)
class TransfersSettings:
    """`Transfers__*`: how long a minted transfer authorization lives."""

    AuthorizationSeconds: int = whole(300, 30, 3600)


@dataclass(frozen=True, repr=False, eq=False)
class ApiDocsSettings:
    """The API page (`GET /api/docs`); unset: on under `serve`, off under the Functions host."""

    Enabled: bool | None = setting(None, _flag, blank=None)


@dataclass(frozen=True, repr=False, eq=False)
class Settings:
    """Every app setting (docs/settings.md), grouped by section as the .NET API groups them."""

    Database: DatabaseSettings = field(default_factory=DatabaseSettings)
    Health: HealthSettings = field(default_factory=HealthSettings)
    Notices: NoticesSettings = field(default_factory=NoticesSettings)
    NoticesStorage: NoticesStorageSettings = field(default_factory=NoticesStorageSettings)
    DailyLimit: DailyLimitSettings = field(default_factory=DailyLimitSettings)
    Auth: AuthSettings = field(default_factory=AuthSettings)
    Audit: AuditSettings = field(default_factory=AuditSettings)
    Pin: PinSettings = field(default_factory=PinSettings)
    Transfers: TransfersSettings = field(default_factory=TransfersSettings)
    ApiDocs: ApiDocsSettings = field(default_factory=ApiDocsSettings)


_SECTION_TYPES: dict[str, Callable[..., Any]] = {
    section.name: section.default_factory  # type: ignore[misc]
    for section in fields(Settings)
}
_SECTIONS: dict[str, dict[str, Field[Any]]] = {
    name: {f.name: f for f in fields(section)}  # type: ignore[arg-type]
    for name, section in _SECTION_TYPES.items()
}


# The fix beside each key; a ranged key's fix starts with its field's own range (`fix_for`).
_FIXES: dict[str, str] = {
    "Database__Url": "set Database__Url to a SQLAlchemy URL, e.g. "
    "postgresql+psycopg://user@host/db, mssql+pyodbc://… or sqlite:///azurebank.db",
    "Database__StatementTimeoutSeconds": "above Database__LockTimeoutSeconds and "
    "DailyLimit__LockTimeoutSeconds",
    "Database__LockTimeoutSeconds": "below Database__StatementTimeoutSeconds",
    "Notices__Runner": "set Notices__Runner to one of None, Api, Function",
    "Notices__Schedule": "set Notices__Schedule to a six-field NCRONTAB expression, seconds first, "
    "e.g. '0 */1 * * * *'",
    "Notices__PickupDirectory": "set Notices__PickupDirectory to an existing directory outside any "
    "git tree (or use Notices__PickupContainer)",
    "Notices__PickupContainer": "set Notices__PickupContainer to a blob container name",
    "NoticesStorage": "set NoticesStorage to a connection string, or "
    "NoticesStorage__blobServiceUri to the account's blob URI (identity)",
    "Notices__Contact": "set Notices__Contact to the contact every notice must name "
    "(e.g. a support address or phone number)",
    "DailyLimit__LockTimeoutSeconds": "below Database__StatementTimeoutSeconds",
    "Audit__ChainKey": "set Audit__ChainKey to base64 of at least 32 random bytes "
    "(e.g. `openssl rand -base64 32`)",
    "ApiDocs__Enabled": "set ApiDocs__Enabled to true or false, or leave it unset (on under "
    "serve, off under the Functions host)",
    "Auth__SigningKey": "unset Auth__SigningKey where Auth__JwksUrl is set (HS256 is for local "
    "use only), or use a key of at least 32 characters",
}


def fix_for(key: str) -> str:
    # A ranged key's fix is spelled from its field's own bounds, so nobody needs the source.
    section, _, name = key.partition("__")
    found = _SECTIONS.get(section, {}).get(name)
    rule: Rule | None = found.metadata.get("rule") if found is not None else None
    if rule is None or rule.low is None or rule.high is None:
        return _FIXES.get(key, f"correct {key}")
    if rule.places is None:
        ranged = f"set {key} to a whole number from {rule.low} to {rule.high}"
    else:
        places = _IN_WORDS.get(rule.places, rule.places)
        ranged = (
            f"set {key} to a number above {rule.low} and below {rule.high}, "
            f"with at most {places} decimals"
        )
    return f"{ranged}, {_FIXES[key]}" if key in _FIXES else ranged


_IN_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def refusal(key: str, why: str) -> str:
    return f"{key}: {why}. Fix: {fix_for(key)}."


def missing(key: str, why: str) -> str:
    return refusal(key, f"missing; {why}")


# One wording for the host check at start and for the code that needs the value.
CONTACT_MISSING = missing("Notices__Contact", "it is mandatory content of every notice")


# Every key, lower-cased as `Section__Key`, to its section and name.
_SPELLINGS = {f"{s}__{k}".lower(): (s, k) for s, keys in _SECTIONS.items() for k in keys}
_SPELLINGS["noticesstorage"] = ("NoticesStorage", "ConnectionString")


def read_app_settings(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """`Section__Key` and `Section:Key` variables by section, matched case-insensitively as the
    .NET binder does; `NoticesStorage` alone is the connection string."""
    out: dict[str, dict[str, str]] = {}
    for raw_key, value in environ.items():
        found = _SPELLINGS.get(raw_key.replace(":", "__").lower())
        if found is not None:
            out.setdefault(found[0], {})[found[1]] = value
    return out


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """The settings every host shares; SettingsError naming each key refused."""
    data = read_app_settings(os.environ if environ is None else environ)
    problems: list[str] = []
    values: dict[str, dict[str, Any]] = {section: {} for section in _SECTIONS}
    for section, parsed_values in values.items():
        for name, raw in data.get(section, {}).items():
            rule: Rule = _SECTIONS[section][name].metadata["rule"]
            try:
                parsed_values[name] = _value(rule, raw)
            except _Refused as refused:
                shown = "" if rule.secret else f" (got {raw!r})"
                problems.append(refusal(f"{section}__{name}", f"{refused}{shown}"))
    if not problems:
        settings = Settings(**{name: _SECTION_TYPES[name](**kw) for name, kw in values.items()})
        problems = _cross_field_problems(settings)
    if problems:
        raise SettingsError(problems)
    return settings


def _value(rule: Rule, raw: str) -> Any:
    if rule.blank is not _PARSED and not raw.strip():
        return rule.blank
    value = rule.parse(raw)
    # A whole number's bounds are inclusive, an amount's exclusive.
    inclusive, equal = (True, " or equal to") if rule.places is None else (False, "")
    if rule.low is not None and (value < rule.low or (value == rule.low and not inclusive)):
        raise _Refused(f"Input should be greater than{equal} {rule.low}")
    if rule.high is not None and (value > rule.high or (value == rule.high and not inclusive)):
        raise _Refused(f"Input should be less than{equal} {rule.high}")
    if rule.places is None:
        return value
    exponent = value.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > rule.places:
        raise _Refused(f"Decimal input should have no more than {rule.places} decimal places")
    return value


# `backend[+driver]://` and the port as make_url reads them, so a URL it would refuse is refused
# here without SQLAlchemy, which costs a cold instance's indexing ~0.2 s (bench/cold_start.py).
_URL = re.compile(r"([\w+]+)://(?:[^:/]*(?::[^@]*)?@)?(?:\[[^/?]+\]|[^/:?]+)?(?::([^/?]*))?")


def _cross_field_problems(s: Settings) -> list[str]:
    problems: list[str] = []
    url = s.Database.Url
    if url is not None:
        found = _URL.match(url)
        if found is None or found.group(1).split("+")[0] not in {"sqlite", "postgresql", "mssql"}:
            problems.append(
                refusal("Database__Url", "not a SQLAlchemy URL for sqlite, postgresql or mssql")
            )
        elif found.group(2) and not found.group(2).isdigit():
            # The URL itself is never echoed: it may hold a password.
            problems.append(refusal("Database__Url", "its port is not a number"))
    # A lock wait must run out before its statement's does, or a lock held by a dead session
    # reads as a stalled database.
    statement = s.Database.StatementTimeoutSeconds
    for key, seconds in (
        ("Database__LockTimeoutSeconds", s.Database.LockTimeoutSeconds),
        ("DailyLimit__LockTimeoutSeconds", s.DailyLimit.LockTimeoutSeconds),
    ):
        if seconds >= statement:
            problems.append(
                f"{key}: {seconds}s is not below Database__StatementTimeoutSeconds "
                f"({statement}s). Fix: lower {key}, or raise Database__StatementTimeoutSeconds "
                f"above {seconds}."
            )
    if s.Auth.SigningKey and s.Auth.JwksUrl:
        problems.append(refusal("Auth__SigningKey", "refused because Auth__JwksUrl is set"))
    return problems


def check_host(settings: Settings, host: Host) -> list[str]:
    """The problems this host must refuse to start with (docs/settings.md, "What each host asks"):
    `function` and `api` ask about delivery only when `Notices__Runner` names them."""
    n = settings.Notices
    problems: list[str] = []
    if host == "function" and not settings.Database.Url:
        problems.append(
            missing("Database__Url", "the Functions host never falls back to a local file")
        )
    if host == "function" and n.Schedule != DEFAULT_SCHEDULE:
        # The default is checked by the tests; croniter costs a cold start's indexing ~7 ms.
        problems += _schedule_problems(n.Schedule)
    if host in ("function", "api") and not settings.Audit.ChainKey:
        # Refusing at start beats a 503 on a customer's first PIN.
        problems.append(missing("Audit__ChainKey", "this host writes audit rows"))
    if is_named(settings, host) or host == "verb":
        target = pickup_target_problem(settings)
        if target is None and n.PickupDirectory:
            target = pickup_directory_problem(Path(n.PickupDirectory))
        problems += [target] if target else []
        if not n.Contact:
            problems.append(CONTACT_MISSING)
    if host == "api" and is_named(settings, host) and n.LeaseSeconds < 2 * n.PeriodSeconds:
        problems.append(
            f"Notices__LeaseSeconds: {n.LeaseSeconds}s is less than twice "
            f"Notices__PeriodSeconds ({n.PeriodSeconds}s). Fix: set Notices__LeaseSeconds to at "
            f"least {2 * n.PeriodSeconds}, or lower Notices__PeriodSeconds."
        )
    return problems


def require_host(settings: Settings, host: Host) -> None:
    problems = check_host(settings, host)
    if problems:
        raise SettingsError(problems)


def _schedule_problems(schedule: str) -> list[str]:
    from croniter import croniter

    fields = schedule.split()
    # Each step names what is wrong should the next one fail.
    why = f"has {len(fields)} fields, NCRONTAB needs six (seconds first)"
    with contextlib.suppress(ValueError):
        if len(fields) == 6:
            why = "does not parse"
            # Without second_at_beginning croniter reads the six fields minutes first.
            cron = croniter(schedule, second_at_beginning=True)
            # A schedule that parses yet never fires (`0 0 0 31 2 *`) would leave notices owed.
            why = "never fires"
            cron.get_next(float)
            return []
    return [refusal("Notices__Schedule", f"{schedule!r} {why}")]


def pickup_target_problem(settings: Settings) -> str | None:
    """Why `Notices` names no one pickup target, or None; the file system is not asked."""
    n = settings.Notices
    if bool(n.PickupDirectory) == bool(n.PickupContainer):
        which = "both are set" if n.PickupDirectory else "neither is set"
        return refusal(
            "Notices__PickupDirectory",
            "exactly one of Notices__PickupDirectory and Notices__PickupContainer must be set, "
            f"and {which}",
        )
    storage = settings.NoticesStorage
    if n.PickupContainer and not storage.ConnectionString and not storage.blobServiceUri:
        return refusal("NoticesStorage", "Notices__PickupContainer is set but no storage is named")
    return None
