"""The package Azure deploys, run as Azure runs it: built by a remote build's rules (.funcignore
as Core Tools reads it, then `pip install --target .python_packages/lib/site-packages -r
requirements.txt`), at /home/site/wwwroot, read-only, under a bare interpreter whose only app
packages are the package's own, in the real worker. One worker, run with PYTHONVERBOSE so that
every file it loads is named, serves the app's paths: indexing, health, readiness (the schema's
migrations), a bearer's accounts and a deposit on PostgreSQL, and a timer tick that delivers."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from shared.clock import SystemClock
from shared.settings import load_settings
from tests.support.app_imports import reachable
from tests.support.functions_host import WorkerSession
from tests.support.hosts import SIGNING_KEY, relay_environ
from tests.support.notices import just_now, notice_row, owed_notices
from tests.support.python_worker import WORKER_REQUIREMENTS, PythonWorker
from tests.support.remote_build import WWWROOT, Package, mounts_wwwroot
from tests.support.tokens import bearer
from tests.support.users import make_user
from tests.worker.conftest import StartWorker

pytestmark = [pytest.mark.worker, pytest.mark.postgres]

# Files the package holds for the platform rather than for the app's code: the host's
# configuration and what the remote build installs from.
FOR_THE_PLATFORM = frozenset({"host.json", "requirements.txt"})
# The app's own top-level packages and modules.
APP_MODULES = ("function_app", "api_funcs", "relay_func", "shared")
_LOADED = re.compile(r"^# (?:code object from|extension module '[^']+' loaded from) '?([^']+?)'?$")


@dataclass(frozen=True)
class VerboseRun:
    """What one verbose worker served, and every file it loaded (absolute paths, sources)."""

    loaded: frozenset[str]
    app_root: Path
    site_packages: Path
    answers: dict[str, int]
    delivered: bool


def _source(path: str) -> str:
    """A loaded file as its source: `x/__pycache__/m.cpython-311.pyc` is `x/m.py`."""
    found = re.match(r"^(.*)/__pycache__/([^/.]+)\.[^/]+\.pyc$", path)
    return f"{found.group(1)}/{found.group(2)}.py" if found else path


@pytest.fixture(scope="module")
def verbose_run(
    postgres_url: str,
    deployed: Package,
    start_module_worker: StartWorker,
    tmp_path_factory: pytest.TempPathFactory,
) -> VerboseRun:
    pickup = tmp_path_factory.mktemp("pickup")
    settings = {
        **relay_environ(postgres_url, pickup, "Function"),
        "Auth__SigningKey": SIGNING_KEY,
        "PYTHONVERBOSE": "1",
    }
    session: WorkerSession = start_module_worker(settings)
    session.start()
    user = make_user(postgres_url, balance="5.00")
    auth = bearer(load_settings(settings), SystemClock(), user.user_id)
    owed = owed_notices(postgres_url, start=just_now())[0]
    answers = {
        "health": session.http("GET", "/api/health").status,
        "ready": session.http("GET", "/api/health/ready").status,
        "accounts": session.http("GET", "/api/accounts", auth).status,
        "deposit": session.http(
            "POST",
            "/api/transactions/deposit",
            {**auth, "Idempotency-Key": uuid.uuid4().hex, "Content-Type": "application/json"},
            json.dumps({"accountId": str(user.primary), "amount": 1}).encode(),
        ).status,
    }
    session.tick("notice_relay")
    loaded = frozenset(
        _source(m.group(1)) for line in session.stderr().splitlines() if (m := _LOADED.match(line))
    )
    mounted = mounts_wwwroot()
    app_root = Path(WWWROOT) if mounted else deployed.app
    site = app_root / ".python_packages/lib/site-packages" if mounted else deployed.site_packages
    delivered = notice_row(postgres_url, owed.id).DeliveredAt is not None
    return VerboseRun(loaded, app_root, site, answers, delivered)


def _stdlib(worker: PythonWorker) -> list[Path]:
    out = subprocess.run(
        [
            str(worker.bare_python),
            "-c",
            "import json, sysconfig; print(json.dumps(sysconfig.get_paths()))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    paths = json.loads(out.stdout)
    return [Path(p) for p in sorted({paths["stdlib"], paths["platstdlib"]})]


def _under(path: str, root: Path | str) -> bool:
    return path.startswith(str(root).rstrip("/") + "/")


def test_the_package_serves_every_path_of_the_run(verbose_run: VerboseRun) -> None:
    assert verbose_run.answers == {"health": 200, "ready": 200, "accounts": 200, "deposit": 201}
    assert verbose_run.delivered


def test_every_module_the_app_loads_comes_from_the_package(
    verbose_run: VerboseRun, built_worker: PythonWorker, deployed: Package
) -> None:
    stdlib = _stdlib(built_worker)
    run = verbose_run
    elsewhere = [
        p
        for p in run.loaded
        if not any(_under(p, root) for root in (run.app_root, run.site_packages, *stdlib))
        and not _under(p, built_worker.worker_dir)
    ]
    assert elsewhere == [], "loaded from outside the package, the worker and the interpreter"
    app_files = {
        p for p in run.loaded if _under(p, run.app_root) and not _under(p, run.site_packages)
    }
    assert run.app_root / "function_app.py" in {Path(p) for p in app_files}
    tops = {Path(p).relative_to(run.app_root).parts[0].removesuffix(".py") for p in app_files}
    assert tops <= set(APP_MODULES), tops
    # What the worker's own folder supplied is the worker's: none of it is a package the app's
    # code imports (those come from .python_packages, which is first on the path).
    from_worker = {
        Path(p).relative_to(built_worker.worker_dir).parts[0].removesuffix(".py").split(".")[0]
        for p in run.loaded
        if _under(p, built_worker.worker_dir)
    }
    assert "azure_functions_worker" in from_worker
    assert from_worker & reachable(deployed.app).third_party == set()
    assert from_worker <= {"azure_functions_worker", "grpc", "google", "azurefunctions"}, (
        from_worker
    )


def test_the_package_holds_nothing_the_app_does_not_load(
    verbose_run: VerboseRun, deployed: Package
) -> None:
    shipped = {
        p.relative_to(deployed.app).as_posix()
        for p in deployed.app.rglob("*")
        if p.is_file() and ".python_packages" not in p.relative_to(deployed.app).parts
    }
    loaded = {
        Path(p).relative_to(verbose_run.app_root).as_posix()
        for p in verbose_run.loaded
        if _under(p, verbose_run.app_root) and not _under(p, verbose_run.site_packages)
    }
    could_load = reachable(deployed.app).files
    unexplained = sorted(shipped - loaded - could_load - FOR_THE_PLATFORM)
    assert unexplained == [], "shipped, yet neither loaded by the app nor imported by its code"
    assert could_load - shipped == set(), "the app's code imports modules the package lacks"


def test_every_package_the_apps_code_can_import_is_installed_in_the_package(
    deployed: Package,
) -> None:
    # A run loads only what its paths reach; an import on a path the run does not take (the
    # schedule check of a non-default Notices__Schedule imports croniter) must be installed
    # too, or that path fails on Azure with ModuleNotFoundError.
    site = deployed.site_packages
    missing = sorted(
        name
        for name in reachable(deployed.app).third_party
        if not (site / name).is_dir()
        and not any(site.glob(f"{name}.py"))
        and not any(site.glob(f"{name}.*.so"))
    )
    assert missing == [], "imported by the app's code, yet not installed by requirements.txt"


def test_the_packages_the_app_shares_with_the_worker_satisfy_the_workers_own_pins(
    deployed: Package,
) -> None:
    installed = {}
    for info in deployed.site_packages.glob("*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        installed[canonicalize_name(name)] = version
    clashes = {
        str(pin): installed[canonicalize_name(pin.name)]
        for pin in map(Requirement, WORKER_REQUIREMENTS)
        if canonicalize_name(pin.name) in installed
        and not pin.specifier.contains(installed[canonicalize_name(pin.name)], prereleases=True)
    }
    assert clashes == {}, "on Azure the app's copy, first on the path, is the worker's too"
