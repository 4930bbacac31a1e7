"""When a command may show progress (docs/cli.md: long work shows progress on a terminal, not when
output is piped)."""

from __future__ import annotations

import sys


def shows_progress() -> bool:
    """True only when both the output and the progress stream are a terminal: progress goes to
    stderr, and `azurebank notify | tee run.log` or `> run.log` is output piped, so it shows
    none even though stderr is still the operator's terminal."""
    return sys.stdout.isatty() and sys.stderr.isatty()
