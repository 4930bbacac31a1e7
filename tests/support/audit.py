"""Running `azurebank audit verify` as a real process on the checkout's code."""

from __future__ import annotations

import subprocess

from tests.support.checkout import run_python
from tests.support.hosts import CHAIN_KEY


def run_audit_verify(
    url: str, *args: str, key: str | None = CHAIN_KEY
) -> subprocess.CompletedProcess[str]:
    settings = {"Database__Url": url}
    if key is not None:
        settings["Audit__ChainKey"] = key
    return run_python("-m", "azurebank_cli", "audit", "verify", *args, settings=settings)
