"""A detached git worktree of an earlier revision, for the benches' "before" measured in the
same run as "after" (bench/cold_start.py, bench/transfer_network.py)."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """A detached git worktree of `revision`, removed after."""
    parent = Path(tempfile.mkdtemp(prefix="azurebank-bench-before-"))
    checkout = parent / "checkout"
    try:
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(checkout), revision],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        yield checkout
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(checkout)], cwd=REPO, check=False
        )
        shutil.rmtree(parent, ignore_errors=True)
