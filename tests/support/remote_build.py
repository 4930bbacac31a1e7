"""The package Azure deploys, built as a remote build builds it, and how the suite and the
cold-start bench start the real worker on it.

A remote build (`func azure functionapp publish` without `--build local`) zips the project's
files that `.funcignore` leaves, by Core Tools' rules (`FuncIgnore`, `deployed_files`), and the
platform runs `pip install --target .python_packages/lib/site-packages -r requirements.txt` on
them; nothing else. On Linux the worker then runs from `/home/site/wwwroot`, read-only, with
`.python_packages/lib/site-packages` first on its path (its worker.py re-executes itself with
that PYTHONPATH when WEBSITE_INSTANCE_ID or CONTAINER_NAME is set).

`azure_launch` starts the worker that way: the package's files bound read-only at
/home/site/wwwroot in a private mount namespace of the worker's process (nothing changes outside
it), a bare interpreter (a virtualenv with nothing installed), worker.py with WEBSITE_INSTANCE_ID
set. Where no mount namespace can be made, it runs what worker.py re-executes, with the same
PYTHONPATH pointing at the package where it lies.

The pip install is cached under .azurebank/python-packages/, keyed by requirements.txt's hash.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.support.checkout import REPO
from tests.support.functions_host import Launch
from tests.support.python_worker import PIP_INSTALL, PythonWorker, build_lock, run_step

WWWROOT = "/home/site/wwwroot"
SITE_PACKAGES = Path(".python_packages", "lib", "site-packages")
PACKAGES_CACHE = REPO / ".azurebank" / "python-packages"
# Core Tools leaves these out wherever they are, whatever .funcignore says (GetLocalFiles).
SKIPPED_DIRECTORIES = frozenset({".git", ".vscode"})
SKIPPED_FILES = frozenset({".funcignore", ".gitignore", "local.settings.json", "project.lock.json"})


class FuncIgnore:
    """`.funcignore` read as Core Tools reads it (its port of the gitignore-parser package):
    comments and blank lines dropped, a leading `/` dropped, `!` negates; every other pattern is
    a regular expression anchored at the start of the path relative to the app's root and
    matched as a prefix, `**` standing for any characters and `*` for one or more characters
    other than `/`. A path is accepted when a negated pattern matches it or no pattern does. So
    `__pycache__/` leaves out only the root's folder, and `.venv` also `.venv-main`."""

    def __init__(self, text: str) -> None:
        positive: list[str] = []
        negative: list[str] = []
        for line in (raw.strip() for raw in text.split("\n")):
            if not line or line.startswith("#"):
                continue
            negated = line.startswith("!")
            line = line[1:] if negated else line
            line = line[1:] if line.startswith("/") else line
            (negative if negated else positive).append(line)
        self._positive = _alternatives(positive)
        self._negative = _alternatives(negative)

    def accepts(self, path: str) -> bool:
        path = "" if path == "/" else path
        return bool(self._negative.match(path)) or not self._positive.match(path)


def _alternatives(patterns: list[str]) -> re.Pattern[str]:
    if not patterns:
        return re.compile(r"$^")
    parts = [_regex(p) for p in sorted(patterns)]
    return re.compile("^((" + ")|(".join(parts) + "))")


def _regex(pattern: str) -> str:
    escaped = re.sub(r"[\-\[\]/{}()+?.\\^$|]", lambda m: "\\" + m.group(0), pattern)
    return escaped.replace("**", "(.+)").replace("*", "([^\\/]+)")


def deployed_files(root: Path = REPO) -> list[str]:
    """The files a remote build zips from `root`, as paths relative to it: every file (symbolic
    links to folders followed, as .NET's directory walk follows them) but those Core Tools
    always leaves out and those `.funcignore` refuses."""
    ignore_file = root / ".funcignore"
    ignore = FuncIgnore(ignore_file.read_text(encoding="utf-8")) if ignore_file.exists() else None
    return sorted(p for p in _walk(root, root) if ignore is None or ignore.accepts(p))


def _walk(root: Path, directory: Path) -> Iterator[str]:
    entries = sorted(directory.iterdir())
    for entry in entries:
        if entry.is_file() and entry.name.lower() not in SKIPPED_FILES:
            yield entry.relative_to(root).as_posix()
    for entry in entries:
        if entry.is_dir() and entry.name.lower() not in SKIPPED_DIRECTORIES:
            yield from _walk(root, entry)


@dataclass(frozen=True)
class Package:
    """A built package: the app's files (`app`, with an empty `.python_packages` folder where
    the installed packages go) and the installed packages' folder (`packages`, holding
    `.python_packages`), cached apart because they are most of it."""

    app: Path
    packages: Path

    @property
    def site_packages(self) -> Path:
        return self.packages / SITE_PACKAGES


def build_package(into: Path, root: Path = REPO, files: list[str] | None = None) -> Package:
    """The package of `root` as a remote build makes it: its deployed files copied into `into`
    (or `files`, for an app the bench builds), and requirements.txt installed (cached)."""
    into.mkdir(parents=True, exist_ok=True)
    for name in deployed_files(root) if files is None else files:
        target = into / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, target)
    (into / ".python_packages").mkdir(exist_ok=True)
    return Package(into, installed_requirements(root / "requirements.txt"))


def installed_requirements(requirements: Path) -> Path:
    """`pip install --target .python_packages/lib/site-packages -r requirements.txt`, once per
    content of requirements.txt (and interpreter): the folder holding `.python_packages`."""
    digest = hashlib.sha256(requirements.read_bytes() + sys.version.encode()).hexdigest()[:16]
    done = PACKAGES_CACHE / digest
    with build_lock(PACKAGES_CACHE):
        if not (done / "complete").exists():
            shutil.rmtree(done, ignore_errors=True)
            with tempfile.TemporaryDirectory(dir=PACKAGES_CACHE, prefix=".installing-") as tmp:
                staged = Path(tmp) / "out"
                shutil.copy2(requirements, Path(tmp) / "requirements.txt")
                target = ["--target", str(staged / SITE_PACKAGES)]
                run_step([*PIP_INSTALL, "--no-input", *target, "-r", "requirements.txt"], cwd=tmp)
                (staged / "complete").write_text(requirements.read_text(encoding="utf-8"))
                staged.rename(done)
        (done / "complete").touch()
        _prune(PACKAGES_CACHE, keep=3)
    return done


def _prune(cache: Path, keep: int) -> None:
    """The installs used last stay (a planted defect and its revert each have one)."""
    installs = sorted(cache.glob("*/complete"), key=lambda p: p.stat().st_mtime, reverse=True)
    for stale in installs[keep:]:
        shutil.rmtree(stale.parent, ignore_errors=True)


# --- starting the worker -------------------------------------------------------------------


def _host_environ(script_root: str, worker: PythonWorker) -> dict[str, str]:
    """What the host puts in every worker's environment, beside the app settings."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "FUNCTIONS_WORKER_RUNTIME_VERSION": f"{sys.version_info[0]}.{sys.version_info[1]}",
        "FUNCTIONS_WORKER_DIRECTORY": str(worker.worker_dir),
        "FUNCTIONS_APPLICATION_DIRECTORY": script_root,
        "AzureWebJobsScriptRoot": script_root,
    }


# Runs inside the worker's own mount namespace: /home is covered by a tmpfs on which every
# entry of the real /home is bound back, plus site/wwwroot with the package bound read-only.
_MOUNT_WWWROOT = r"""
set -eu
stage=$1; app=$2; packages=$3; shift 3
mkdir -p "$stage/home"
mount --rbind /home "$stage/home"
mount -t tmpfs -o mode=755 tmpfs /home
for entry in "$stage/home"/* "$stage/home"/.[!.]*; do
  [ -e "$entry" ] || continue
  name=${entry##*/}
  [ "$name" = site ] && continue
  if [ -d "$entry" ]; then mkdir "/home/$name"; else : > "/home/$name"; fi
  mount --rbind "$entry" "/home/$name"
done
mkdir -p /home/site/wwwroot
mount --bind "$app" /home/site/wwwroot
mount --bind "$packages/.python_packages" /home/site/wwwroot/.python_packages
mount -o remount,bind,ro /home/site/wwwroot/.python_packages
mount -o remount,bind,ro /home/site/wwwroot
cd /home/site/wwwroot
exec "$@"
"""


@functools.cache
def _namespace_prefix() -> tuple[str, ...] | None:
    """`unshare` for a private mount namespace (as root, or in a user namespace of one's own),
    or None where neither can be made here."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (
        ("unshare", "--mount", "--propagation", "private"),
        ("unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"),
    ):
        probe = subprocess.run(
            [*prefix, "sh", "-c", "mount -t tmpfs tmpfs /mnt"],
            capture_output=True,
            check=False,
        )
        if probe.returncode == 0:
            return prefix
    return None


def mounts_wwwroot() -> bool:
    """Whether `azure_launch` runs the package at /home/site/wwwroot, read-only (else it runs it
    where it lies, with worker.py's PYTHONPATH)."""
    return _namespace_prefix() is not None


def azure_launch(
    worker: PythonWorker, package: Package, settings: Mapping[str, str], stage: Path
) -> Launch:
    """The worker as Azure starts it on Linux, on `package`; `stage` is an empty folder of the
    caller's (outside /home/site) for the namespace's bind mounts."""
    prefix = _namespace_prefix()
    python = str(worker.bare_python)
    azure = {"WEBSITE_INSTANCE_ID": uuid.uuid4().hex, "WEBSITE_SITE_NAME": "azurebank-stand-in"}
    if prefix is not None:
        env = {**_host_environ(WWWROOT, worker), "HOME": "/home", **azure, **settings}
        command = (
            *prefix,
            "sh",
            "-c",
            _MOUNT_WWWROOT,
            "sh",
            str(stage),
            str(package.app),
            str(package.packages),
            python,
            str(worker.worker_py),
        )
        return Launch(command, env, Path("/"), WWWROOT, str(worker.worker_dir))
    # What worker.py re-executes on Azure, the package's own path in place of /home/site/wwwroot.
    root = str(package.app)
    env = {**_host_environ(root, worker), "HOME": str(stage), **azure, **settings}
    env["PYTHONPATH"] = f"{package.site_packages}:{worker.worker_dir}"
    return Launch(
        (python, "-m", "azure_functions_worker"), env, package.app, root, str(worker.worker_dir)
    )
