"""App settings: one pydantic model read from `Section__Key` (or `Section:Key`) variables.

Every error names the key as an operator spells it (`Notices__BatchSize`) and says the fix
(docs/settings.md). Range and enum rules live on the model; the rules that depend on which host is
asking (ADR-0048 D6, ADR-0051 D3) live in `check_host`, so each host asks only about itself.
"""

from __future__ import annotations

import base64
import enum
import os
import re
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from shared.notices.pickup_guard import pickup_directory_problem

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
    API = "Api"  # the API's hosted loop (`azurebank serve`)
    FUNCTION = "Function"  # the timer-triggered Function (ADR-0051)


# The flag value that names each hosted runner (ADR-0048 D6).
_NAMED_BY: dict[Host, NoticeRunner] = {
    "api": NoticeRunner.API,
    "function": NoticeRunner.FUNCTION,
}


def is_named(settings: Settings, host: Host) -> bool:
    """ADR-0048 D1: the flag, not the lease, says whether this host's runner delivers (a host
    that runs no relay never is)."""
    return settings.Notices.Runner is _NAMED_BY.get(host)


class _Section(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class DatabaseSettings(_Section):
    Url: str | None = None
    # Per process (per Functions instance): the connections kept open, and the extra ones opened
    # under load and closed when returned; instances x (PoolSize + MaxOverflow) must stay within
    # what the database tier accepts (docs/settings.md).
    PoolSize: int = Field(10, ge=1, le=100)
    MaxOverflow: int = Field(20, ge=0, le=100)
    # Every wait on the database, in seconds (docs/settings.md, "Waits on the database").
    ConnectTimeoutSeconds: int = Field(5, ge=2, le=60)
    StatementTimeoutSeconds: int = Field(15, ge=2, le=300)
    LockTimeoutSeconds: int = Field(5, ge=1, le=299)
    PoolTimeoutSeconds: int = Field(5, ge=1, le=60)
    KeepaliveSeconds: int = Field(10, ge=1, le=300)


class HealthSettings(_Section):
    ReadyTimeoutSeconds: int = Field(3, ge=1, le=60)


class NoticesSettings(_Section):
    Runner: NoticeRunner = NoticeRunner.NONE
    PickupDirectory: str | None = None
    PickupContainer: str | None = None
    Contact: str | None = None
    PeriodSeconds: int = Field(15, ge=1, le=3600)
    LeaseSeconds: int = Field(120, ge=2, le=86400)
    BatchSize: int = Field(100, ge=1, le=1000)
    Schedule: str = "0 */1 * * * *"

    @field_validator("Runner", mode="before")
    @classmethod
    def _runner_any_case(cls, value: Any) -> Any:
        # The .NET configuration binder parses enums case-insensitively; an operator who writes
        # `function` in the portal means Function, and the two hosts must agree on it.
        if isinstance(value, str):
            for runner in NoticeRunner:
                if value.strip().lower() == runner.value.lower():
                    return runner
        return value

    @field_validator("PickupDirectory", "PickupContainer", "Contact", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


class NoticesStorageSettings(_Section):
    """Beyond the ADR: where the blob pickup container lives (a connection string, or an
    account URI reached with a managed identity)."""

    ConnectionString: str | None = None
    blobServiceUri: str | None = None


class DailyLimitSettings(_Section):
    Amount: Decimal = Field(Decimal("5000"), gt=0, lt=MONEY_MAX, decimal_places=2)
    LockTimeoutSeconds: int = Field(10, ge=1, le=29)


class AuthSettings(_Section):
    Issuer: str | None = None
    Audience: str | None = None
    JwksUrl: str | None = None
    SigningKey: str | None = None


class AuditSettings(_Section):
    ChainKey: str | None = None

    @field_validator("ChainKey")
    @classmethod
    def _base64_of_32_bytes(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            raise ValueError("must be base64") from None
        if len(raw) < 32:
            raise ValueError("must decode to at least 32 bytes")
        return value


class PinSettings(_Section):
    # PSD2 RTS Art. 4: at most five tries.
    MaxFailedAttempts: int = Field(5, ge=1, le=5)
    LockoutMinutes: int = Field(15, ge=1, le=1440)


class TransfersSettings(_Section):
    AuthorizationSeconds: int = Field(300, ge=30, le=3600)


class ApiDocsSettings(_Section):
    """Beyond the ADRs: the API page (`GET /api/docs`). Unset: on under `serve`, off under the
    Functions host."""

    Enabled: bool | None = None

    @field_validator("Enabled", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value


_SECTIONS: dict[str, type[_Section]] = {
    "Database": DatabaseSettings,
    "Health": HealthSettings,
    "Notices": NoticesSettings,
    "NoticesStorage": NoticesStorageSettings,
    "DailyLimit": DailyLimitSettings,
    "Auth": AuthSettings,
    "Audit": AuditSettings,
    "Pin": PinSettings,
    "Transfers": TransfersSettings,
    "ApiDocs": ApiDocsSettings,
}

# The fix an operator reads beside each key. A key with a range on its field reads that range from
# the field itself (`_range_fix`), with what this table adds after it.
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
    """The sentence an operator reads to repair `key`."""
    ranged = _range_fix(key)
    if ranged is None:
        return _FIXES.get(key, f"correct {key}")
    return f"{ranged}, {_FIXES[key]}" if key in _FIXES else ranged


def _range_fix(key: str) -> str | None:
    """`set KEY to …` spelled from the field's own bounds (ge/le for a whole number, gt/lt and
    decimal_places for an amount), so nobody needs the source; None for a field without them."""
    section, _, name = key.partition("__")
    field = _SECTIONS[section].model_fields.get(name) if section in _SECTIONS else None
    if field is None:
        return None
    bounds = {
        attribute: getattr(rule, attribute)
        for rule in field.metadata
        for attribute in ("ge", "le", "gt", "lt", "decimal_places")
        if getattr(rule, attribute, None) is not None
    }
    if {"ge", "le"} <= bounds.keys():
        return f"set {key} to a whole number from {bounds['ge']} to {bounds['le']}"
    if {"gt", "lt", "decimal_places"} <= bounds.keys():
        places = _IN_WORDS.get(bounds["decimal_places"], bounds["decimal_places"])
        return (
            f"set {key} to a number above {bounds['gt']} and below {bounds['lt']}, "
            f"with at most {places} decimals"
        )
    return None


_IN_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}


def missing(key: str, why: str) -> str:
    """The problem line for an unset `key`: why this host needs it, and the fix."""
    return f"{key}: missing; {why}. Fix: {fix_for(key)}."


# Refused both by the host check at start and by the code that needs the value (which may be
# built without the check), in one wording.
CONTACT_MISSING = missing("Notices__Contact", "it is mandatory content of every notice")
NO_STORAGE_NAMED = (
    "NoticesStorage: Notices__PickupContainer is set but no storage is named. Fix: set "
    "NoticesStorage to a connection string, or NoticesStorage__blobServiceUri to the "
    "account's blob URI (identity)."
)


def read_app_settings(environ: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """Group `Section__Key` and `Section:Key` variables by section (Azure app settings on Linux
    allow only the first; local.settings.json and the .NET API use the second). Section and key
    match case-insensitively, as the .NET configuration binder does. `NoticesStorage` alone is
    the connection string."""
    sections = {name.lower(): name for name in _SECTIONS}
    fields = {name: {f.lower(): f for f in cls.model_fields} for name, cls in _SECTIONS.items()}
    out: dict[str, dict[str, str]] = {}
    for raw_key, value in environ.items():
        parts = raw_key.replace(":", "__").split("__")
        section = sections.get(parts[0].lower())
        if section is None:
            continue
        if len(parts) == 1 and section == "NoticesStorage":
            out.setdefault(section, {})["ConnectionString"] = value
        elif len(parts) == 2 and parts[1].lower() in fields[section]:
            out.setdefault(section, {})[fields[section][parts[1].lower()]] = value
    return out


class Settings(BaseModel):
    """Every app setting (docs/settings.md), grouped by section as the .NET API groups them.
    `load_settings` reads the environment itself (read_app_settings) and hands the sections in,
    so no second spelling of a key can silently win. A plain model, not pydantic-settings'
    BaseSettings: with the environment read here it added no source, and importing it cost a
    cold instance's indexing ~10 ms of CPU (bench/cold_start.py); `validate_default` is what
    BaseSettings set."""

    model_config = ConfigDict(extra="ignore", frozen=True, validate_default=True)

    Database: DatabaseSettings = DatabaseSettings()
    Health: HealthSettings = HealthSettings()
    Notices: NoticesSettings = NoticesSettings()
    NoticesStorage: NoticesStorageSettings = NoticesStorageSettings()
    DailyLimit: DailyLimitSettings = DailyLimitSettings()
    Auth: AuthSettings = AuthSettings()
    Audit: AuditSettings = AuditSettings()
    Pin: PinSettings = PinSettings()
    Transfers: TransfersSettings = TransfersSettings()
    ApiDocs: ApiDocsSettings = ApiDocsSettings()


def _message(error: Any) -> str:
    loc = error.get("loc", ())
    key = "__".join(str(p) for p in loc[:2]) if loc else "settings"
    given = error.get("input")
    shown = (
        f" (got {given!r})"
        if isinstance(given, str | int | float) and key not in _SECRET_KEYS
        else ""
    )
    return f"{key}: {error.get('msg', 'invalid')}{shown}. Fix: {fix_for(key)}."


_SECRET_KEYS = {
    "Audit__ChainKey",
    "Auth__SigningKey",
    "NoticesStorage__ConnectionString",
    "Database__Url",
}


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate the settings every host shares; raise SettingsError naming each key."""
    data = read_app_settings(os.environ if environ is None else environ)
    try:
        settings = Settings(**data)
    except ValidationError as exc:
        raise SettingsError([_message(e) for e in exc.errors()]) from None
    problems = _cross_field_problems(settings)
    if problems:
        raise SettingsError(problems)
    return settings


# A SQLAlchemy URL opens with `backend[+driver]://` (SQLAlchemy's own pattern for the name). Read
# here without SQLAlchemy: the Functions host checks its settings while the worker indexes, and
# SQLAlchemy costs a cold instance ~0.2 s that only the first request needs (bench/cold_start.py).
_URL_NAME = re.compile(r"([\w+]+)://")
# The port of a SQLAlchemy URL, read as make_url reads it (after any user and password, after the
# host or a bracketed IPv6 host), so a URL make_url would refuse is refused at the host's start.
_URL_PORT = re.compile(r"[\w+]+://(?:[^:/]*(?::[^@]*)?@)?(?:\[[^/?]+\]|[^/:?]+)?(?::([^/?]*))?")


def database_backend(url: str) -> str | None:
    """The backend a SQLAlchemy URL names (`postgresql` for `postgresql+psycopg://…`), or None
    when it is no SQLAlchemy URL."""
    found = _URL_NAME.match(url)
    return found.group(1).split("+")[0] if found else None


def _url_problem(url: str) -> str | None:
    if database_backend(url) not in {"sqlite", "postgresql", "mssql"}:
        return (
            "Database__Url: not a SQLAlchemy URL for sqlite, postgresql or mssql. "
            f"Fix: {fix_for('Database__Url')}."
        )
    port = _URL_PORT.match(url)
    if port is not None and port.group(1) and not port.group(1).isdigit():
        # The URL itself is never echoed: it may hold a password.
        return f"Database__Url: its port is not a number. Fix: {fix_for('Database__Url')}."
    return None


def _cross_field_problems(s: Settings) -> list[str]:
    problems: list[str] = []
    url = s.Database.Url
    if url is not None and (problem := _url_problem(url)) is not None:
        problems.append(problem)
    problems += _wait_problems(s)
    if s.Auth.SigningKey and s.Auth.JwksUrl:
        problems.append(
            "Auth__SigningKey: refused because Auth__JwksUrl is set. "
            f"Fix: {fix_for('Auth__SigningKey')}."
        )
    return problems


def _wait_problems(s: Settings) -> list[str]:
    """A lock wait must run out before the statement waiting on it does: otherwise the statement
    timeout answers first, and a lock held by a dead session reads as a stalled database."""
    statement = s.Database.StatementTimeoutSeconds
    problems: list[str] = []
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
    return problems


# --- per-host checks (ADR-0048 D6, ADR-0051 D3): each host asks only about itself -------------


def check_host(settings: Settings, host: Host) -> list[str]:
    """The problems this host must refuse to start with; empty when it may start.

    `function` and `api` ask about delivery only when `Notices__Runner` names them; `verb` always
    delivers, so it always asks; `cli` (every other command) asks nothing beyond the ranges.
    """
    n = settings.Notices
    problems: list[str] = []
    if host == "function" and not settings.Database.Url:
        problems.append(
            missing("Database__Url", "the Functions host never falls back to a local file")
        )
    if host == "function":
        problems += _schedule_problems(n.Schedule)
    if host in ("function", "api") and not settings.Audit.ChainKey:
        # Every host that writes audit rows (PIN enrolment and change, transfers)
        # needs the chain's key; refusing at start beats a 503 on a customer's first PIN.
        problems.append(missing("Audit__ChainKey", "this host writes audit rows"))
    if is_named(settings, host) or host == "verb":
        problems += _target_problems(settings)
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
    """Raise SettingsError when this host must not start."""
    problems = check_host(settings, host)
    if problems:
        raise SettingsError(problems)


def _schedule_problems(schedule: str) -> list[str]:
    from croniter import croniter

    fields = schedule.split()
    if len(fields) != 6:
        return [
            f"Notices__Schedule: {schedule!r} has {len(fields)} fields, NCRONTAB needs six "
            f"(seconds first). Fix: {fix_for('Notices__Schedule')}."
        ]
    try:
        # Without second_at_beginning croniter reads the six fields minutes first.
        cron = croniter(schedule, second_at_beginning=True)
    except ValueError:
        return [
            f"Notices__Schedule: {schedule!r} does not parse. Fix: {fix_for('Notices__Schedule')}."
        ]
    try:
        # A schedule that parses yet never fires (`0 0 0 31 2 *`) would leave notices owed.
        cron.get_next(float)
    except ValueError:
        return [
            f"Notices__Schedule: {schedule!r} never fires. Fix: {fix_for('Notices__Schedule')}."
        ]
    return []


def pickup_target_problem(settings: Settings) -> str | None:
    """Why `Notices` names no one pickup target (exactly one of the directory and the container,
    the container with its storage), or None; the file system is not asked."""
    n = settings.Notices
    if bool(n.PickupDirectory) == bool(n.PickupContainer):
        which = "both are set" if n.PickupDirectory else "neither is set"
        return (
            f"Notices__PickupDirectory: exactly one of Notices__PickupDirectory and "
            f"Notices__PickupContainer must be set, and {which}. Fix: "
            f"{fix_for('Notices__PickupDirectory')}."
        )
    storage = settings.NoticesStorage
    if n.PickupContainer and not storage.ConnectionString and not storage.blobServiceUri:
        return NO_STORAGE_NAMED
    return None


def notice_contact(settings: Settings) -> str:
    """Notices__Contact, which every notice names; SettingsError while it is unset."""
    if not settings.Notices.Contact:
        raise SettingsError([CONTACT_MISSING])
    return settings.Notices.Contact


def _target_problems(settings: Settings) -> list[str]:
    problem = pickup_target_problem(settings)
    if problem is None and settings.Notices.PickupDirectory:
        problem = pickup_directory_problem(Path(settings.Notices.PickupDirectory))
    return [problem] if problem else []
