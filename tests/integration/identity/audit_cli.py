"""Running `azurebank audit verify` as a real process on the checkout's code."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support import CHAIN_KEY

ROOT = Path(__file__).resolve().parents[3]


def run_audit_verify(
    url: str, *args: str, key: str | None = CHAIN_KEY
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("Audit", "Database"))}
    env.update({"PYTHONPATH": str(ROOT), "Database__Url": url})
    if key is not None:
        env["Audit__ChainKey"] = key
    return subprocess.run(
        [sys.executable, "-m", "shared.cli", "audit", "verify", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
