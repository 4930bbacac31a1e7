"""The pickup directory's guard, asked at every delivering host's start
(docs/decisions.md#adr-0048-d6)."""

from __future__ import annotations

import subprocess
from pathlib import Path


def pickup_directory_problem(directory: Path) -> str | None:
    """The pickup directory is a spool of addresses at rest: it must exist and sit outside any
    git tree. The message never echoes the path (it may name a user's home)."""
    if not directory.is_dir():
        return (
            "Notices__PickupDirectory: the directory does not exist. Fix: create it, or "
            "set Notices__PickupDirectory to an existing directory outside any git tree."
        )
    if _inside_git_tree(directory):
        return (
            "Notices__PickupDirectory: the directory sits inside a git tree, where notices "
            "(addresses at rest) could be committed. Fix: set Notices__PickupDirectory to a "
            "directory outside any git tree."
        )
    return None


def _inside_git_tree(directory: Path) -> bool:
    # Walk up looking for .git ourselves, and ask git too when it is installed (worktrees,
    # GIT_DIR layouts); either saying yes is enough to refuse.
    resolved = directory.resolve()
    for parent in (resolved, *resolved.parents):
        if (parent / ".git").exists():
            return True
    try:
        result = subprocess.run(
            ["git", "-C", str(resolved), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and result.stdout.strip() == "true"
