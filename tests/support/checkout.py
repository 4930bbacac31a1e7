"""This checkout: its root, and a fresh interpreter on its code."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The two files nothing here runs (no Docker, no GitHub Actions): their schemas and values are
# checked instead.
COMPOSE = REPO / "compose.yaml"
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def run_python(
    *args: str,
    settings: Mapping[str, str] | None = None,
    check: bool = False,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """`python ARGS` in a fresh interpreter on this checkout's code, with the test's environment
    (hermetic_settings has already removed the developer's app settings) plus `settings`."""
    env = {**os.environ, **(settings or {}), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=check,
    )
