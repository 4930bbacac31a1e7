"""The Azure Functions Python worker that runs this app on Azure and under Core Tools, built from
its vendored source (`../shared/vendor/azure-functions-python-worker-4.34.0.tar.gz` beside the
checkout, or the tarball AZUREBANK_PYTHON_WORKER names), once, into a git-ignored cache:

    .azurebank/python-worker/<key>/
      workers/python/3.11/LINUX/X64/  the layout Core Tools ships: worker.py, worker.config.json,
                                      azure_functions_worker (its gRPC modules generated), and
                                      the worker's own pinned dependencies beside them
      host/                           what the stand-in host imports: the same grpcio and
                                      protobuf, and the generated modules
      python/                         a bare interpreter (a virtualenv with nothing installed)

The key is the tarball's hash, the pins and this interpreter's version: a new tarball or pin
builds anew. The gRPC modules are generated with grpcio-tools from the worker's protos, and their
imports rewritten to `azure_functions_worker.protos...`, as the worker's own build does.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from tests.support.checkout import REPO

WORKER_VERSION = "4.34.0"
TARBALL_VARIABLE = "AZUREBANK_PYTHON_WORKER"
DEFAULT_TARBALL = (
    REPO.parent / "shared" / "vendor" / f"azure-functions-python-worker-{WORKER_VERSION}.tar.gz"
)
# What the worker's 4.34.0 release pins for itself (Python 3.8-3.12); the app's copy of any of
# these, first on the path on Azure, must satisfy the same pin.
WORKER_REQUIREMENTS = (
    "grpcio~=1.59.0",
    "protobuf~=4.25.3",
    "python-dateutil~=2.9.0",
    "azurefunctions-extensions-base",
)
# Only to generate the gRPC modules; never on the worker's path.
PROTOC_REQUIREMENT = "grpcio-tools~=1.59.0"
# Core Tools' folder for the worker: `workers/python/<version>/<OS>/<arch>`, which the worker
# also recognises as its own dependencies' path (utils/dependency.py).
WORKER_SUBDIR = Path(
    "workers", "python", f"{sys.version_info[0]}.{sys.version_info[1]}", "LINUX", "X64"
)
CACHE = REPO / ".azurebank" / "python-worker"
_PROTOS = (
    Path("shared", "NullableTypes.proto"),
    Path("identity", "ClaimsIdentityRpc.proto"),
    Path("FunctionRpc.proto"),
)


class WorkerUnavailable(Exception):
    """The worker cannot be built here: the tarball is missing, or a build step failed."""


@dataclass(frozen=True)
class PythonWorker:
    """A built worker: its folder (worker.py inside), the stand-in host's imports, and the bare
    interpreter."""

    root: Path

    @property
    def worker_dir(self) -> Path:
        return self.root / WORKER_SUBDIR

    @property
    def worker_py(self) -> Path:
        return self.worker_dir / "worker.py"

    @property
    def host_dir(self) -> Path:
        return self.root / "host"

    @property
    def bare_python(self) -> Path:
        return self.root / "python" / "bin" / "python"

    def versions(self) -> dict[str, str]:
        """The distributions in the worker's folder, by normalised name."""
        return dict(json.loads((self.root / "versions.json").read_text(encoding="utf-8")))


def tarball() -> Path:
    return Path(os.environ.get(TARBALL_VARIABLE) or DEFAULT_TARBALL)


def python_worker() -> PythonWorker:
    """The worker, built on first use (about half a minute) and reused while its key holds."""
    source = tarball()
    if not source.is_file():
        raise WorkerUnavailable(
            f"the worker's source {source} is missing (set {TARBALL_VARIABLE} to the tarball)"
        )
    digest = hashlib.sha256(source.read_bytes())
    digest.update("\n".join((*WORKER_REQUIREMENTS, PROTOC_REQUIREMENT, sys.version)).encode())
    built = PythonWorker(CACHE / f"{WORKER_VERSION}-{digest.hexdigest()[:16]}")
    with build_lock(CACHE):
        if not (built.root / "complete").exists():
            _build(source, built.root)
    return built


@contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    """One build at a time (the suite and a bench may start together)."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _build(source: Path, root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    with tempfile.TemporaryDirectory(dir=root.parent, prefix=".building-") as tmp:
        work = Path(tmp)
        src = work / "src"
        with tarfile.open(source) as archive:
            archive.extractall(src, filter="data")
        staged = PythonWorker(work / "out")
        worker_dir = staged.worker_dir
        worker_dir.mkdir(parents=True)
        for name in ("worker.py", "worker.config.json"):
            shutil.copy2(src / "python" / "prodV4" / name, worker_dir / name)
        shutil.copytree(src / "azure_functions_worker", worker_dir / "azure_functions_worker")
        _pip("--target", str(worker_dir), *WORKER_REQUIREMENTS)
        tools = work / "protoc"
        _pip("--target", str(tools), PROTOC_REQUIREMENT)
        _generate_protos(src / "azure_functions_worker" / "protos", worker_dir, tools, work)
        _host_side(worker_dir, staged.host_dir)
        run_step([sys.executable, "-m", "venv", "--without-pip", str(staged.root / "python")])
        versions = _distributions(worker_dir)
        (staged.root / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
        (staged.root / "complete").write_text(f"azure-functions-python-worker {WORKER_VERSION}\n")
        staged.root.rename(root)


PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check")


def _pip(*args: str) -> None:
    run_step([*PIP_INSTALL, "--no-input", *args])


def run_step(
    command: list[str], cwd: Path | str | None = None, env: dict[str, str] | None = None
) -> None:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise WorkerUnavailable(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")


def _generate_protos(protos: Path, worker_dir: Path, tools: Path, work: Path) -> None:
    """protoc over the worker's three protos, laid out under `azure_functions_worker/protos`
    as its build lays them out, then each `import X_pb2` / `from identity import ...` made
    absolute (protoc writes them relative to its include root)."""
    staging = work / "staging"
    shutil.copytree(
        protos / "_src" / "src" / "proto", staging / "azure_functions_worker" / "protos"
    )
    out = work / "generated"
    out.mkdir()
    env = {**os.environ, "PYTHONPATH": str(tools)}
    include = str(Path("azure_functions_worker", "protos"))
    for proto in _PROTOS:
        outputs = ["--python_out", str(out), "--grpc_python_out", str(out)]
        protoc = [sys.executable, "-m", "grpc_tools.protoc", "-I", include, *outputs]
        run_step([*protoc, str(Path(include, proto))], cwd=staging, env=env)
    generated = sorted(out.rglob("*.py"))
    if not generated:
        raise WorkerUnavailable("grpc_tools.protoc generated no Python module")
    for module in generated:
        text = module.read_text(encoding="utf-8")
        text = re.sub(
            r"^import (\w+_pb2)", r"from azure_functions_worker.protos import \1", text, flags=re.M
        )
        text = re.sub(
            r"^from (identity|shared) import",
            r"from azure_functions_worker.protos.\1 import",
            text,
            flags=re.M,
        )
        target = worker_dir / "azure_functions_worker" / "protos" / module.relative_to(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _host_side(worker_dir: Path, host_dir: Path) -> None:
    """The stand-in host speaks the protocol with the worker's own grpcio and protobuf and the
    same generated modules, imported from here and not from the worker's folder (whose
    python-dateutil must not shadow the suite's)."""
    host_dir.mkdir(parents=True)
    for entry in worker_dir.iterdir():
        if entry.name in ("grpc", "google") or re.match(
            r"(grpcio|protobuf)-.*\.dist-info$", entry.name
        ):
            shutil.copytree(entry, host_dir / entry.name)
    package = host_dir / "azure_functions_worker"
    package.mkdir()
    shutil.copy2(worker_dir / "azure_functions_worker" / "__init__.py", package / "__init__.py")
    shutil.copytree(
        worker_dir / "azure_functions_worker" / "protos",
        package / "protos",
        ignore=shutil.ignore_patterns("_src"),
    )


def _distributions(directory: Path) -> dict[str, str]:
    found = {}
    for info in directory.glob("*.dist-info"):
        name, version = info.name[: -len(".dist-info")].rsplit("-", 1)
        found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return dict(sorted(found.items()))


def import_protocol(worker: PythonWorker) -> tuple[Any, SimpleNamespace]:
    """`grpc`, and every message and the service of the worker's protocol in one namespace, for
    the stand-in host, from `host_dir`, which goes last on sys.path: nothing the suite already
    imports can be replaced by it."""
    host = str(worker.host_dir)
    if host not in sys.path:
        sys.path.append(host)
    import grpc
    from azure_functions_worker.protos import (
        FunctionRpc_pb2,
        FunctionRpc_pb2_grpc,
    )
    from azure_functions_worker.protos.identity import (
        ClaimsIdentityRpc_pb2,
    )
    from azure_functions_worker.protos.shared import (
        NullableTypes_pb2,
    )

    modules = (
        grpc,
        FunctionRpc_pb2,
        FunctionRpc_pb2_grpc,
        ClaimsIdentityRpc_pb2,
        NullableTypes_pb2,
    )
    for module in modules:
        if not str(module.__file__).startswith(host):
            raise WorkerUnavailable(f"{module.__name__} came from {module.__file__}, not {host}")
    names: dict[str, Any] = {}
    for module in modules[1:]:
        names.update((k, v) for k, v in vars(module).items() if not k.startswith("_"))
    return grpc, SimpleNamespace(**names)
