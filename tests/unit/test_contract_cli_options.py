"""Contract audit of docs/cli.md: bad input to every option of `users add` is a
clear message and exit 64, never a traceback; what it accepts it can store on every dialect
(Numeric(18,4), AspNetUsers' column lengths) and use afterwards (an address a notice can carry,
a password the API accepts at PIN enrolment)."""

from __future__ import annotations

from pathlib import Path

import pytest

from azurebank_cli import exits
from azurebank_cli.main import main

GOOD = {
    "--email": "someone@example.test",
    "--password": "correct horse battery staple",
    "--azure-tag": "someone",
}


@pytest.fixture(autouse=True)
def _no_database_in_the_checkout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # A bad option stops argparse before any database is opened; should one slip through, it
    # lands here, not in the default sqlite:///azurebank.db of the working directory.
    monkeypatch.setenv("Database__Url", f"sqlite:///{tmp_path}/unused.db")


def _argv(**options: str) -> list[str]:
    merged = {**GOOD, **{f"--{k.replace('_', '-')}": v for k, v in options.items()}}
    return ["users", "add", *(x for pair in merged.items() for x in pair)]


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("balance", "1e400"),  # Decimal accepts it; quantize raised InvalidOperation
        ("balance", "1e20"),  # beyond Numeric(18,4): OverflowError on SQLite, DataError on PG
        ("balance", "1000000000.01"),
        ("balance", "abc"),
        ("balance", "-1"),
        ("balance", "1.001"),
        ("balance", "NaN"),
        ("email", ""),
        ("email", "   "),
        ("email", "not-an-address"),
        ("email", "a@" + "b" * 300 + ".test"),  # AspNetUsers.Email is 256
        ("email", "Someone <someone@example.test>"),
        ("azure_tag", ""),
        ("azure_tag", "t" * 65),  # AspNetUsers.AzureTag is 64, as the API's payee field
        # SQL Server's `=` ignores trailing spaces (docs/database.md): refused on every dialect.
        ("azure_tag", "bob "),
        ("azure_tag", " bob"),
        ("password", ""),
        ("password", "p" * 1025),  # POST /api/pin refuses a longer password
    ],
)
def test_a_bad_option_to_users_add_exits_64_naming_it(
    option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(_argv(**{option: value}))
    assert exited.value.code == exits.USAGE == 64
    err = capsys.readouterr().err
    assert f"argument --{option.replace('_', '-')}:" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("user", ["", "   ", "u" * 451])
def test_token_refuses_a_user_no_aspnetusers_id_can_be_with_64(
    user: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A token whose `sub` is blank or longer than AspNetUsers.Id (450) verifies for nobody."""
    monkeypatch.setenv("Auth__SigningKey", "k" * 40)
    with pytest.raises(SystemExit) as exited:
        main(["token", "--user", user])
    assert exited.value.code == exits.USAGE
    assert "argument --user:" in capsys.readouterr().err


def test_users_add_help_says_what_it_prints_and_each_options_range(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["users", "add", "--help"])
    assert exited.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert '{"userId": …, "accountIds": […]}' in out
    assert "1000000000" in out and "1 to 100" in out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["serve", "--help"], ["default 127.0.0.1", "default 7071"]),
        (["token", "--help"], ["1 to 1440", "default 60"]),
    ],
)
def test_help_names_each_options_default(
    argv: list[str], words: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(argv)
    out = " ".join(capsys.readouterr().out.split())
    for word in words:
        assert word in out


# Digits of other scripts pass str.isdigit(): "٣" is read as 3 by int(), "²" is refused by it.
@pytest.mark.parametrize("value", ["٣", "²", "+3", " 3", "1" * 5000])
def test_a_whole_number_option_takes_ascii_digits_only_and_names_its_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(_argv(accounts=value))
    assert exited.value.code == exits.USAGE
    assert "argument --accounts: must be a whole number from 1 to 100" in capsys.readouterr().err


@pytest.mark.parametrize("url", ["http://[", "http://[::1", "ftp://app.example", "app.example"])
def test_smoke_refuses_a_base_url_that_is_not_an_http_url_naming_the_form(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["smoke", "--base-url", url])
    assert exited.value.code == exits.USAGE
    assert "argument --base-url: must be an http(s) URL" in capsys.readouterr().err
