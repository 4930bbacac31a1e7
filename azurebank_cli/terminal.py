"""When a command may show progress (docs/cli.md: long work shows progress on a terminal, not when
output is piped)."""

from __future__ import annotations

import sys


def shows_progress() -> bool:
    """True only when both the output and the progress stream (stderr) are a terminal: output
    piped (`| tee run.log`) shows none even though stderr is still the operator's terminal."""
    return sys.stdout.isatty() and sys.stderr.isatty()
