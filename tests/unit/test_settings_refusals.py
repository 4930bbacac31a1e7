"""Every bad setting is refused with the key as an operator spells it and the fix.

An unknown runner, a non-number period, out-of-range batch, lease and
period, a bad database URL — each message names `Section__Key` and says "Fix:".
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.settings import NoticeRunner, SettingsError, load_settings
from tests.support.hosts import setting_keys

# (environment, the operator's key the message must name)
BAD_SETTINGS: list[tuple[dict[str, str], str]] = [
    ({"Notices__Runner": "Sometimes"}, "Notices__Runner"),
    ({"Notices__Runner": ""}, "Notices__Runner"),
    ({"Notices__PeriodSeconds": "fast"}, "Notices__PeriodSeconds"),
    ({"Notices__PeriodSeconds": "15.5"}, "Notices__PeriodSeconds"),
    ({"Notices__PeriodSeconds": "0"}, "Notices__PeriodSeconds"),
    ({"Notices__PeriodSeconds": "3601"}, "Notices__PeriodSeconds"),
    ({"Notices__LeaseSeconds": "1"}, "Notices__LeaseSeconds"),
    ({"Notices__LeaseSeconds": "86401"}, "Notices__LeaseSeconds"),
    ({"Notices__LeaseSeconds": "9" * 30}, "Notices__LeaseSeconds"),
    ({"Notices__BatchSize": "0"}, "Notices__BatchSize"),
    ({"Notices__BatchSize": "1001"}, "Notices__BatchSize"),
    ({"Notices__BatchSize": "-3"}, "Notices__BatchSize"),
    ({"Notices__BatchSize": ""}, "Notices__BatchSize"),
    ({"Database__Url": "not a url"}, "Database__Url"),
    ({"Database__Url": "mysql://someone@db.example/bank"}, "Database__Url"),
    ({"Database__Url": ""}, "Database__Url"),
    ({"Database__Url": "postgresql+psycopg://ops:pw@db.example:54x2/bank"}, "Database__Url"),
    ({"Database__Url": "postgresql+psycopg://ops@[::1]:port/bank"}, "Database__Url"),
    ({"Database__PoolSize": "0"}, "Database__PoolSize"),
    ({"Database__PoolSize": "101"}, "Database__PoolSize"),
    ({"Database__MaxOverflow": "-1"}, "Database__MaxOverflow"),
    ({"Database__MaxOverflow": "many"}, "Database__MaxOverflow"),
    ({"Database__ConnectTimeoutSeconds": "1"}, "Database__ConnectTimeoutSeconds"),
    ({"Database__StatementTimeoutSeconds": "301"}, "Database__StatementTimeoutSeconds"),
    ({"Database__LockTimeoutSeconds": "0"}, "Database__LockTimeoutSeconds"),
    ({"Database__PoolTimeoutSeconds": "61"}, "Database__PoolTimeoutSeconds"),
    ({"Database__KeepaliveSeconds": "0"}, "Database__KeepaliveSeconds"),
    ({"Health__ReadyTimeoutSeconds": "0"}, "Health__ReadyTimeoutSeconds"),
    ({"DailyLimit__Amount": "100000"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "250000"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "0"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "-5"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "12.345"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "NaN"}, "DailyLimit__Amount"),
    ({"DailyLimit__Amount": "lots"}, "DailyLimit__Amount"),
    ({"DailyLimit__LockTimeoutSeconds": "30"}, "DailyLimit__LockTimeoutSeconds"),
    ({"DailyLimit__LockTimeoutSeconds": "0"}, "DailyLimit__LockTimeoutSeconds"),
    ({"Audit__ChainKey": "c2hvcnQ="}, "Audit__ChainKey"),  # base64 of 5 bytes
    ({"Audit__ChainKey": "not base64 at all!"}, "Audit__ChainKey"),
    ({"Pin__MaxFailedAttempts": "6"}, "Pin__MaxFailedAttempts"),  # PSD2 RTS Art. 4: five
    ({"Pin__LockoutMinutes": "0"}, "Pin__LockoutMinutes"),
    ({"Transfers__AuthorizationSeconds": "10"}, "Transfers__AuthorizationSeconds"),
    (
        {"Auth__SigningKey": "k" * 40, "Auth__JwksUrl": "https://login.example/keys"},
        "Auth__SigningKey",
    ),
    # The other spellings are read too, and the message still names the `__` key.
    ({"Notices:BatchSize": "0"}, "Notices__BatchSize"),
    ({"notices__batchsize": "5000"}, "Notices__BatchSize"),
    ({"NOTICES:RUNNER": "Both"}, "Notices__Runner"),
    ({"dailylimit:amount": "100000"}, "DailyLimit__Amount"),
]


@pytest.mark.parametrize(
    ("environ", "key"),
    BAD_SETTINGS,
    ids=[f"{k}={next(iter(e.values()))!r}" for e, k in BAD_SETTINGS],
)
def test_a_bad_setting_is_refused_naming_the_operators_key_and_the_fix(
    environ: dict[str, str], key: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(environ)
    message = str(refused.value)
    problem = next((p for p in refused.value.problems if p.startswith(f"{key}:")), None)
    assert problem is not None, message
    assert "Fix:" in problem
    # The fix itself names the key too, so the operator never has to translate a field path.
    assert key in problem.split("Fix:", 1)[1]
    # Never the model's internal spelling of the location.
    assert "('Notices'," not in message


@pytest.mark.parametrize(
    ("environ", "secret"),
    [
        ({"Audit__ChainKey": "c2hvcnQ="}, "c2hvcnQ="),
        ({"Database__Url": "mysql://ops:hunter2hunter2@db.example/bank"}, "hunter2hunter2"),
        (
            {"Auth__SigningKey": "s3cret-signing-key-" * 3, "Auth__JwksUrl": "https://x.example"},
            "s3cret-signing-key-",
        ),
    ],
    ids=["chain-key", "database-url-password", "signing-key"],
)
def test_a_refused_secret_is_never_echoed_in_the_message(
    environ: dict[str, str], secret: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(environ)
    assert secret not in str(refused.value)


def test_every_problem_is_reported_at_once_not_only_the_first() -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings(
            {"Notices__BatchSize": "0", "Notices__Runner": "x", "Pin__LockoutMinutes": "0"}
        )
    keys = {p.split(":", 1)[0] for p in refused.value.problems}
    assert keys == {"Notices__BatchSize", "Notices__Runner", "Pin__LockoutMinutes"}


def test_the_defaults_of_design_section_4_hold_when_nothing_is_set() -> None:
    s = load_settings({})
    assert s.Database.Url is None
    assert (s.Database.PoolSize, s.Database.MaxOverflow) == (10, 20)
    database = s.Database
    assert (
        database.ConnectTimeoutSeconds,
        database.StatementTimeoutSeconds,
        database.LockTimeoutSeconds,
        database.PoolTimeoutSeconds,
        database.KeepaliveSeconds,
    ) == (5, 15, 5, 5, 10)
    assert s.Health.ReadyTimeoutSeconds == 3
    assert s.Notices.Runner is NoticeRunner.NONE
    assert (s.Notices.PeriodSeconds, s.Notices.LeaseSeconds, s.Notices.BatchSize) == (15, 120, 100)
    assert s.Notices.Schedule == "0 */1 * * * *"
    assert s.Notices.PickupDirectory is None and s.Notices.PickupContainer is None
    assert s.DailyLimit.Amount == Decimal("5000")
    assert s.DailyLimit.LockTimeoutSeconds == 10
    assert (s.Pin.MaxFailedAttempts, s.Pin.LockoutMinutes) == (5, 15)
    assert s.Transfers.AuthorizationSeconds == 300
    assert s.Audit.ChainKey is None and s.Auth.SigningKey is None


@pytest.mark.parametrize(
    "environ",
    [
        {"Notices__BatchSize": "7"},
        {"Notices:BatchSize": "7"},
        {"notices__batchsize": "7"},
        {"NOTICES:BATCHSIZE": "7"},
    ],
    ids=["double-underscore", "colon", "lower-case", "upper-case-colon"],
)
def test_either_spelling_of_a_key_is_read_in_any_case(environ: dict[str, str]) -> None:
    assert load_settings(environ).Notices.BatchSize == 7


def test_unrelated_environment_variables_are_ignored() -> None:
    s = load_settings({"PATH": "/usr/bin", "Notices": "x", "Notices__Nonsense": "1", "HOME": "/"})
    assert s.Notices.BatchSize == 100


def test_the_process_environment_is_read_when_no_mapping_is_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("Notices__LeaseSeconds", "300")
    assert load_settings().Notices.LeaseSeconds == 300
    monkeypatch.setenv("Notices__LeaseSeconds", "1")
    with pytest.raises(SettingsError, match="Notices__LeaseSeconds"):
        load_settings()


@given(st.integers().filter(lambda n: not 1 <= n <= 1000))
def test_any_batch_size_outside_1_to_1000_is_refused_naming_the_key(size: int) -> None:
    with pytest.raises(SettingsError) as refused:
        load_settings({"Notices__BatchSize": str(size)})
    assert [p.split(":", 1)[0] for p in refused.value.problems] == ["Notices__BatchSize"]
    assert "Fix:" in str(refused.value)


@given(st.integers(min_value=1, max_value=1000))
def test_any_batch_size_from_1_to_1000_is_accepted(size: int) -> None:
    assert load_settings({"Notices__BatchSize": str(size)}).Notices.BatchSize == size


@pytest.mark.parametrize(
    ("spelled", "meant"), [("function", "Function"), ("API", "Api"), (" none ", "None")]
)
def test_notices_runner_is_read_in_any_case_as_the_dotnet_binder_reads_enums(
    spelled: str, meant: str
) -> None:
    assert load_settings({"Notices__Runner": spelled}).Notices.Runner.value == meant


def test_the_default_schedule_passes_the_check_the_host_skips_for_it() -> None:
    # The Functions host checks a schedule with croniter only when it is not the default
    # (shared/settings.py), so the default itself must be one that check accepts.
    from shared.settings import DEFAULT_SCHEDULE, _schedule_problems

    assert _schedule_problems(DEFAULT_SCHEDULE) == []
    assert load_settings({}).Notices.Schedule == DEFAULT_SCHEDULE


@given(
    st.dictionaries(
        st.sampled_from(sorted(setting_keys())),
        st.text(alphabet=st.characters(codec="utf-8"), max_size=40),
        max_size=6,
    )
)
def test_any_text_in_any_key_is_read_or_refused_naming_its_keys_never_another_error(
    environ: dict[str, str],
) -> None:
    # The settings' own parsing (shared/settings.py's Rules) meets every text an app setting can
    # hold: a value, or SettingsError whose every problem names a key and its fix.
    try:
        load_settings(environ)
    except SettingsError as refused:
        for problem in refused.problems:
            key = problem.split(":", 1)[0]
            assert key in setting_keys() or key == "NoticesStorage", problem
            assert "Fix:" in problem


@given(st.integers(min_value=-(10**30), max_value=10**30), st.sampled_from(["", " ", "+"]))
def test_a_whole_number_setting_reads_what_int_reads_within_its_bounds(
    number: int, prefix: str
) -> None:
    text = f"{prefix}{number}" if number >= 0 or prefix != "+" else str(number)
    try:
        value = load_settings({"Notices__LeaseSeconds": text}).Notices.LeaseSeconds
    except SettingsError:
        assert not 2 <= number <= 86400
    else:
        assert value == number and 2 <= number <= 86400
