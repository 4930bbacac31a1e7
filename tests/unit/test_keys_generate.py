"""`azurebank keys generate`: each key is fresh at every call and is what the settings model
accepts for its key (the chain key base64 of 32 bytes, the signing key 32 characters or more)."""

from __future__ import annotations

import base64

import pytest

from azurebank_cli import exits
from azurebank_cli.main import main
from shared.settings import load_settings


def _generate(capsys: pytest.CaptureFixture[str], setting: str) -> str:
    assert main(["keys", "generate", setting]) == exits.OK
    return capsys.readouterr().out.strip()


def test_a_generated_chain_key_is_32_random_bytes_the_settings_accept(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, second = _generate(capsys, "Audit__ChainKey"), _generate(capsys, "Audit__ChainKey")
    assert first != second
    assert len(base64.b64decode(first, validate=True)) == 32
    assert load_settings({"Audit__ChainKey": first}).Audit.ChainKey == first


def test_a_generated_signing_key_is_long_enough_and_fresh(
    capsys: pytest.CaptureFixture[str],
) -> None:
    first, second = _generate(capsys, "Auth__SigningKey"), _generate(capsys, "Auth__SigningKey")
    assert first != second and len(first) >= 64
    assert load_settings({"Auth__SigningKey": first}).Auth.SigningKey == first


def test_a_key_the_app_does_not_have_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as exited:
        main(["keys", "generate", "Database__Url"])
    assert exited.value.code == exits.USAGE
