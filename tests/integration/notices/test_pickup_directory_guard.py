"""The pickup directory's guard (ADR-0048 D6): a spool of addresses at rest is refused inside any
git tree, whether a `.git` beside an ancestor or git itself says so, and the refusal names the
setting and the fix in full. Real directories and the real git; a stand-in git on PATH only where
the test is what git's absence or a hung git does."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from shared.notices import transports
from shared.notices.transports import pickup_directory_problem

MISSING = (
    "Notices__PickupDirectory: the directory does not exist. Fix: create it, or set"
    " Notices__PickupDirectory to an existing directory outside any git tree."
)
INSIDE = (
    "Notices__PickupDirectory: the directory sits inside a git tree, where notices (addresses at"
    " rest) could be committed. Fix: set Notices__PickupDirectory to a directory outside any git"
    " tree."
)


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, timeout=30)


def _spool(tmp_path: Path) -> Path:
    directory = tmp_path / "outside" / "spool"
    directory.mkdir(parents=True)
    return directory


def _path_with(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, git: str | None) -> None:
    """PATH holds only a stand-in `git` whose body is the shell text `git` (beside the system's
    own tools), or no git at all (None)."""
    bin_dir = tmp_path / "tools" / "bin"
    bin_dir.mkdir(parents=True)
    if git is not None:
        script = bin_dir / "git"
        script.write_text(f"#!/bin/sh\n{git}\n", encoding="utf-8")
        script.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    else:
        monkeypatch.setenv("PATH", str(bin_dir))


@pytest.mark.adr("0048", "D6")
def test_a_missing_directory_is_refused_with_the_key_and_the_fix(tmp_path: Path) -> None:
    assert pickup_directory_problem(tmp_path / "no-such-directory") == MISSING


@pytest.mark.adr("0048", "D6")
def test_a_directory_outside_any_git_tree_is_accepted(tmp_path: Path) -> None:
    assert pickup_directory_problem(_spool(tmp_path)) is None


@pytest.mark.adr("0048", "D6")
def test_a_git_tree_above_the_directory_is_refused_with_the_key_and_the_fix(
    tmp_path: Path,
) -> None:
    _git("init", "-q", str(tmp_path / "outside"))
    assert pickup_directory_problem(_spool(tmp_path)) == INSIDE


@pytest.mark.adr("0048", "D6")
def test_a_dot_git_above_the_directory_is_refused_where_git_is_not_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _spool(tmp_path)
    (tmp_path / ".git").mkdir()
    _path_with(monkeypatch, tmp_path, git=None)
    assert pickup_directory_problem(directory) == INSIDE


@pytest.mark.adr("0048", "D6")
def test_no_git_installed_and_no_dot_git_reads_as_outside_any_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = _spool(tmp_path)
    _path_with(monkeypatch, tmp_path, git=None)
    assert pickup_directory_problem(directory) is None


@pytest.mark.adr("0048", "D6")
def test_a_work_tree_git_names_through_git_dir_is_refused_with_no_dot_git_in_sight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The repository's store lives elsewhere (GIT_DIR) and its work tree holds no .git: only git
    # itself can say the directory is inside it.
    store = tmp_path / "store.git"
    _git("init", "-q", "--bare", str(store))
    monkeypatch.setenv("GIT_DIR", str(store))
    monkeypatch.setenv("GIT_WORK_TREE", str(tmp_path / "outside"))
    directory = _spool(tmp_path)
    assert not any((p / ".git").exists() for p in (directory, *directory.parents))
    assert pickup_directory_problem(directory) == INSIDE


@pytest.mark.adr("0048", "D6")
def test_git_answering_false_is_not_a_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # git exits 0 and prints "false" where a repository is bare: no work tree holds the spool.
    store = tmp_path / "store.git"
    _git("init", "-q", "--bare", str(store))
    monkeypatch.setenv("GIT_DIR", str(store))
    assert pickup_directory_problem(_spool(tmp_path)) is None


@pytest.mark.adr("0048", "D6")
def test_a_git_that_fails_reads_as_outside_any_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A git that prints "true" but exits non-zero has answered nothing.
    _path_with(monkeypatch, tmp_path, git="echo true; exit 1")
    assert pickup_directory_problem(_spool(tmp_path)) is None


@pytest.mark.adr("0048", "D6")
def test_a_hung_git_reads_as_outside_any_tree_once_its_bound_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transports, "GIT_ANSWERS_WITHIN", 0.5)
    _path_with(monkeypatch, tmp_path, git="exec sleep 600")
    assert pickup_directory_problem(_spool(tmp_path)) is None
