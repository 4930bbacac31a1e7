"""docs/cli.md: `azurebank` answers a wrong command line with 64 and refused
settings with 78, naming the key and the fix — never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from azurebank_cli import exits
from azurebank_cli.main import main


@pytest.mark.parametrize(
    "argv",
    [[], ["frobnicate"], ["db"], ["serve", "--port", "0"], ["token"], ["users", "add"]],
    ids=["nothing", "unknown-command", "db-without-verb", "bad-port", "token-no-user", "add-bare"],
)
def test_a_wrong_command_line_exits_64(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == exits.USAGE == 64
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize(
    "user",
    ["\U0001f600" * 300, " u1", "u1 ", ""],
    ids=["600-utf16-units", "leading-space", "trailing-space", "blank"],
)
def test_token_refuses_a_user_id_the_verifier_would_refuse_with_64(
    user: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The token's `sub` is held to the verifier's rule (shared.identity.tokens.user_id):
    AspNetUsers.Id counts UTF-16 units, so 300 emoji are 600 of its 450."""
    with pytest.raises(SystemExit) as exited:
        main(["token", "--user", user])
    assert exited.value.code == exits.USAGE
    assert "AspNetUsers.Id" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "db" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["db", "upgrade"], ["token", "--user", "u1"], ["serve"]])
def test_refused_settings_exit_78_naming_the_key_and_the_fix(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("Notices__BatchSize", "0")
    assert main(argv) == exits.CONFIG == 78
    err = capsys.readouterr().err
    assert "Notices__BatchSize" in err and "Fix:" in err
    assert "Traceback" not in err


def test_token_without_a_signing_key_exits_78(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["token", "--user", "u1"]) == exits.CONFIG
    assert "Auth__SigningKey" in capsys.readouterr().err


def test_db_upgrade_migrates_a_new_sqlite_file_and_is_repeatable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("Database__Url", f"sqlite:///{tmp_path}/cli.db")
    assert main(["db", "upgrade"]) == exits.OK
    assert main(["db", "upgrade"]) == exits.OK
    assert "upgraded" in capsys.readouterr().out
