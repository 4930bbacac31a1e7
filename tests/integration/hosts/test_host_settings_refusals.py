"""ADR-0048 D6 and ADR-0051 D3: each host asks only about itself, the
ranges apply whatever the runner, and a partial set stops the host with a message naming the key
and the fix — importing `function_app` raises, `serve` and `notify` exit 78.

Each host is started for real: the Function host by importing `function_app` in a fresh
interpreter, `serve` and `notify` through the `azurebank` entry point. None of the refused sets
gets as far as opening the database.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from azurebank_cli import exits
from azurebank_cli.main import main
from shared.settings import check_host, load_settings
from tests.support.checkout import REPO, run_python
from tests.support.hosts import CHAIN_KEY, CONTACT

SAMPLE = REPO / "local.settings.sample.json"

# The value of Notices__Runner that names each host; `notify` (the verb) always delivers.
NAMES = {"function": "Function", "serve": "Api", "notify": "None"}


def _pickup(tmp: Path) -> str:
    directory = tmp / "pickup"
    directory.mkdir(exist_ok=True)
    return str(directory)


def _in_git_tree(tmp: Path) -> str:
    tree = tmp / "repo"
    (tree / "pickup").mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(tree)], check=True, timeout=30)
    return str(tree / "pickup")


@dataclass(frozen=True)
class Case:
    id: str
    key: str  # the key the message must name
    hosts: tuple[str, ...]
    # Settings over a valid base; `{runner}` is the value naming the host under test.
    env: Callable[[Path, str], dict[str, str]] = field(default=lambda tmp, runner: {})
    drop: tuple[str, ...] = ()


ALL = ("function", "serve", "notify")


def _named(**extra: str) -> Callable[[Path, str], dict[str, str]]:
    def build(tmp: Path, runner: str) -> dict[str, str]:
        env = {"Notices__Runner": runner, "Notices__Contact": CONTACT}
        env.update(extra)
        return env

    return build


CASES = (
    # D6: the ranges apply whatever the runner (the flag is left at None here).
    Case(
        "period-zero", "Notices__PeriodSeconds", ALL, lambda t, r: {"Notices__PeriodSeconds": "0"}
    ),
    Case(
        "period-too-long",
        "Notices__PeriodSeconds",
        ALL,
        lambda t, r: {"Notices__PeriodSeconds": "3601"},
    ),
    Case("lease-one", "Notices__LeaseSeconds", ALL, lambda t, r: {"Notices__LeaseSeconds": "1"}),
    Case("batch-zero", "Notices__BatchSize", ALL, lambda t, r: {"Notices__BatchSize": "0"}),
    Case("batch-too-big", "Notices__BatchSize", ALL, lambda t, r: {"Notices__BatchSize": "1001"}),
    Case("batch-not-a-number", "Notices__BatchSize", ALL, lambda t, r: {"Notices__BatchSize": "x"}),
    Case("runner-unknown", "Notices__Runner", ALL, lambda t, r: {"Notices__Runner": "Both"}),
    # D6: the host the flag names needs exactly one target and the contact.
    Case("no-target", "Notices__PickupDirectory", ALL, _named()),
    Case(
        "both-targets",
        "Notices__PickupDirectory",
        ALL,
        lambda t, r: (
            _named(Notices__PickupContainer="notices")(t, r)
            | {
                "Notices__PickupDirectory": _pickup(t),
                "NoticesStorage": "UseDevelopmentStorage=true",
            }
        ),
    ),
    Case(
        "missing-directory",
        "Notices__PickupDirectory",
        ALL,
        lambda t, r: _named()(t, r) | {"Notices__PickupDirectory": str(t / "absent")},
    ),
    Case(
        "directory-in-a-git-tree",
        "Notices__PickupDirectory",
        ALL,
        lambda t, r: _named()(t, r) | {"Notices__PickupDirectory": _in_git_tree(t)},
    ),
    Case(
        "container-without-storage",
        "NoticesStorage",
        ALL,
        _named(Notices__PickupContainer="notices"),
    ),
    Case(
        "no-contact",
        "Notices__Contact",
        ALL,
        lambda t, r: {"Notices__Runner": r, "Notices__PickupDirectory": _pickup(t)},
    ),
    # ADR-0051 D3: only the Function host asks about the schedule and insists on a database.
    Case("no-database", "Database__Url", ("function",), drop=("Database__Url",)),
    # The hosts that write audit rows (PIN, transfers) refuse to start without the key.
    Case("no-audit-chain-key", "Audit__ChainKey", ("function", "serve"), drop=("Audit__ChainKey",)),
    Case(
        "schedule-five-fields",
        "Notices__Schedule",
        ("function",),
        lambda t, r: {"Notices__Schedule": "*/1 * * * *"},
    ),
    Case(
        "schedule-seven-fields",
        "Notices__Schedule",
        ("function",),
        lambda t, r: {"Notices__Schedule": "0 */1 * * * * 2030"},
    ),
    Case(
        "schedule-out-of-range",
        "Notices__Schedule",
        ("function",),
        lambda t, r: {"Notices__Schedule": "99 * * * * *"},
    ),
    Case(
        "schedule-never-fires",
        "Notices__Schedule",
        ("function",),
        lambda t, r: {"Notices__Schedule": "0 0 0 31 2 *"},
    ),
    # ADR-0048 D6: only the API host asks lease >= 2 x period.
    Case(
        "lease-under-twice-the-period",
        "Notices__LeaseSeconds",
        ("serve",),
        lambda t, r: (
            _named()(t, r)
            | {
                "Notices__PickupDirectory": _pickup(t),
                "Notices__PeriodSeconds": "60",
                "Notices__LeaseSeconds": "90",
            }
        ),
    ),
)

PARAMS = [pytest.param(case, host, id=f"{host}-{case.id}") for case in CASES for host in case.hosts]


def _environment(tmp: Path, case: Case, host: str) -> dict[str, str]:
    env = {
        "Database__Url": f"sqlite:///{tmp / 'never-opened.db'}",
        "Audit__ChainKey": CHAIN_KEY,
    }
    env.update(case.env(tmp, NAMES[host]))
    for key in case.drop:
        env.pop(key, None)
    return env


def _import_function_app(settings_env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return run_python("-c", "import function_app", settings=settings_env)


def _refusal_message(
    host: str,
    settings_env: Mapping[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> str:
    if host == "function":
        done = _import_function_app(settings_env)
        assert done.returncode != 0, "importing function_app should have raised"
        assert "shared.settings.SettingsError: Settings refused:" in done.stderr
        return done.stderr
    for key, value in settings_env.items():
        monkeypatch.setenv(key, value)
    code = main([host])
    assert code == exits.CONFIG
    err = capsys.readouterr().err
    assert err.startswith("Settings refused:")
    return err


@pytest.mark.adr("0048", "D6")
@pytest.mark.parametrize(("case", "host"), PARAMS)
def test_a_partial_or_out_of_range_set_stops_the_host_naming_the_key_and_the_fix(
    case: Case,
    host: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    message = _refusal_message(host, _environment(tmp_path, case, host), monkeypatch, capsys)
    line = next((ln for ln in message.splitlines() if ln.strip().startswith(f"- {case.key}")), "")
    assert line, f"no line names {case.key}:\n{message}"
    assert "Fix:" in line
    # The message never echoes a pickup path (it may name a user's home).
    assert str(tmp_path) not in message


@pytest.mark.parametrize(
    ("host", "env"),
    [
        # ADR-0051 D3: each host asks only about itself.
        pytest.param(
            "function",
            {"Notices__Runner": "Api", "Notices__LeaseSeconds": "10"},
            id="function-host-not-named-asks-no-target-and-no-lease-rule",
        ),
        pytest.param(
            "function",
            {
                "Notices__Runner": "Function",
                "Notices__Contact": CONTACT,
                "dir": "1",
                "Notices__PeriodSeconds": "60",
                "Notices__LeaseSeconds": "90",
            },
            id="function-host-named-asks-no-lease-rule",
        ),
        pytest.param(
            "api",
            {"Notices__Runner": "Function", "Notices__Schedule": "not a schedule"},
            id="api-host-not-named-asks-no-target-and-never-reads-the-schedule",
        ),
        pytest.param(
            "api",
            {
                "Notices__Runner": "None",
                "Notices__PeriodSeconds": "60",
                "Notices__LeaseSeconds": "90",
            },
            id="api-host-not-named-asks-no-lease-rule",
        ),
    ],
)
@pytest.mark.adr("0051", "D3")
def test_each_host_asks_only_about_itself(host: str, env: dict[str, str], tmp_path: Path) -> None:
    """ADR-0051 D3: a host asks the relay's settings only about itself."""
    settings_env = {
        "Database__Url": f"sqlite:///{tmp_path / 'never-opened.db'}",
        "Audit__ChainKey": CHAIN_KEY,
    }
    settings_env.update({k: v for k, v in env.items() if k != "dir"})
    if "dir" in env:
        settings_env["Notices__PickupDirectory"] = _pickup(tmp_path)
    assert check_host(load_settings(settings_env), host) == []  # type: ignore[arg-type]
    if host == "function":
        done = _import_function_app(settings_env)
        assert done.returncode == 0, done.stderr


def _sample_values() -> dict[str, str]:
    # The sample ships with the app: a missing file is a failure, never a skip.
    values: dict[str, str] = json.loads(SAMPLE.read_text(encoding="utf-8"))["Values"]
    return values


def test_the_shipped_sample_settings_pass_every_host_check_for_runner_none() -> None:
    values = _sample_values()
    settings = load_settings(values)
    assert settings.Notices.Runner.value == "None"
    for host in ("function", "api", "cli"):
        assert check_host(settings, host) == [], host  # type: ignore[arg-type]


def test_the_shipped_sample_settings_let_the_function_app_load() -> None:
    done = _import_function_app(_sample_values())
    assert done.returncode == 0, done.stderr
