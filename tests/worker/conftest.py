"""The worker ring: this app run by the real Azure Functions Python worker (4.34.0, built once
from its vendored source: tests/support/python_worker.py) from the package a remote build
deploys (tests/support/remote_build.py), driven by the suite's stand-in host over gRPC
(tests/support/functions_host.py). Every module here is marked `worker`. Where the worker's source
is missing the ring is skipped; under CI=true that is a failure, and so is any failed build.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.support.functions_host import WorkerSession, worker_session
from tests.support.python_worker import PythonWorker, WorkerUnavailable, python_worker
from tests.support.remote_build import Package, azure_launch, build_package
from tests.support.services import service_missing

StartWorker = Callable[[Mapping[str, str]], WorkerSession]


@pytest.fixture(scope="session")
def built_worker() -> PythonWorker:
    try:
        return python_worker()
    except WorkerUnavailable as missing:
        service_missing(f"the Azure Functions Python worker ({missing})")
        raise


@pytest.fixture(scope="session")
def deployed(built_worker: PythonWorker, tmp_path_factory: pytest.TempPathFactory) -> Package:
    """This checkout's package, built once per run as a remote build builds it."""
    return build_package(tmp_path_factory.mktemp("package") / "wwwroot")


def _starter(worker: PythonWorker, package: Package, stack: ExitStack, where: Path) -> StartWorker:
    numbers = itertools.count()

    def start(settings: Mapping[str, str]) -> WorkerSession:
        folder = where / f"worker-{next(numbers)}"
        (folder / "stage").mkdir(parents=True)
        launch = azure_launch(worker, package, settings, folder / "stage")
        return stack.enter_context(worker_session(worker, launch, folder))

    return start


@pytest.fixture
def start_worker(
    built_worker: PythonWorker, deployed: Package, tmp_path: Path
) -> Iterator[StartWorker]:
    """Start a worker on the package with these app settings; stopped after the test."""
    with ExitStack() as stack:
        yield _starter(built_worker, deployed, stack, tmp_path)


@pytest.fixture(scope="module")
def start_module_worker(
    built_worker: PythonWorker, deployed: Package, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[StartWorker]:
    """The same, for a worker the tests of one module share."""
    with ExitStack() as stack:
        yield _starter(built_worker, deployed, stack, tmp_path_factory.mktemp("workers"))
