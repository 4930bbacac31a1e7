"""The Functions host's half of `FunctionRpc.EventStream`, played against the real Python worker
(tests/support/python_worker.py) by the worker ring, the package test and bench/cold_start.py.

It does what the host does, in the host's order: it listens for gRPC on 127.0.0.1, starts the
worker process with the host's arguments (`--host --port --workerId --requestId
--grpcMaxMessageLength`), waits for StartStream, sends WorkerInitRequest, FunctionsMetadataRequest
(the worker indexes function_app.py), one FunctionLoadRequest per indexed Function, then one
InvocationRequest per request or tick. HTTP requests are routed by the indexed routes and
methods and shaped as the host shapes them for this worker's capabilities (RawHttpBodyBytes,
RpcHttpBodyOnly, RpcHttpTriggerMetadataRemoved): the full URL, header names lower-cased with
repeated values joined by commas, the query without empty values, the route's parameters, the
body as bytes (only when there is one), and the caller's identities (the function key's
`WebJobsAuthLevel` identity on a Function-level route, an anonymous one otherwise). A timer tick
carries TimerInfo as the host serialises it. The worker's log messages are kept, not shown.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.support.python_worker import PythonWorker, import_protocol

HOST_VERSION = "4.1037.0"  # the Functions host line this stand-in follows (v4)
MAX_MESSAGE = 2_147_483_647  # what the host passes as --grpcMaxMessageLength
ROUTE_PREFIX = "api"  # host.json's extensions.http.routePrefix
BASE_URL = "http://localhost:7071"
# The claims the host's key authentication puts on a request that presented a function key.
AUTH_LEVEL_CLAIM = "http://schemas.microsoft.com/2017/07/functions/claims/authlevel"
KEY_ID_CLAIM = "http://schemas.microsoft.com/2017/07/functions/claims/keyid"


class WorkerFailed(Exception):
    """The worker answered a request with StatusResult Failure; the message is its exception's."""


class WorkerGone(Exception):
    """The worker's process exited or its stream ended before it answered."""


@dataclass(frozen=True)
class Launch:
    """How the worker's process is started: the command before the host's arguments, its
    environment (the app settings included) and working directory, and the app's folder as the
    worker sees it (`function_app_directory`)."""

    command: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    script_root: str
    worker_directory: str


@dataclass(frozen=True)
class Indexed:
    """One Function as the worker indexed it: its id, name and bindings (raw, by name)."""

    function_id: str
    name: str
    bindings: dict[str, dict[str, Any]]
    metadata: Any = field(repr=False)

    def trigger(self) -> dict[str, Any]:
        (trigger,) = [b for b in self.bindings.values() if b["type"].endswith("Trigger")]
        return trigger


@dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes
    at: float  # when it was answered, in seconds after the worker's process was started

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass(frozen=True)
class LogLine:
    level: str
    category: str
    message: str


class _EventStream:
    """The server side of the one EventStream call: what the host sends comes from `outbox`,
    what the worker sends goes to `inbox` (its log messages to `logs`)."""

    def __init__(self, protos: Any) -> None:
        self.protos = protos
        self.outbox: queue.Queue[Any] = queue.Queue()
        self.inbox: queue.Queue[tuple[float, Any]] = queue.Queue()
        self.logs: list[Any] = []

    # The gRPC service's own method name, as grpcio-tools generates it.
    def EventStream(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        threading.Thread(target=self._read, args=(requests,), daemon=True).start()
        while (message := self.outbox.get()) is not None:
            yield message

    def _read(self, requests: Iterator[Any]) -> None:
        try:
            for message in requests:
                if message.WhichOneof("content") == "rpc_log":
                    self.logs.append(message.rpc_log)
                else:
                    self.inbox.put((time.perf_counter(), message))
        except Exception:  # noqa: S110 - the stream ends with the worker; `_expect` reports it
            pass
        finally:
            self.inbox.put((time.perf_counter(), None))


class WorkerSession:
    """One worker process and its stream, driven step by step. `marks` holds when each step was
    answered, in seconds after the process was started."""

    def __init__(
        self,
        protos: Any,
        stream: _EventStream,
        process: subprocess.Popen[bytes],
        launch: Launch,
        request_id: str,
        started: float,
        logs_dir: Path,
    ) -> None:
        self.protos = protos
        self._stream = stream
        self.process = process
        self.launch = launch
        self.request_id = request_id
        self.started = started
        self.logs_dir = logs_dir
        self.marks: dict[str, float] = {}
        self.functions: dict[str, Indexed] = {}
        self._early: list[tuple[float, Any]] = []

    # --- the host's steps ----------------------------------------------------------------

    def initialize(self, timeout: float = 60) -> None:
        """StartStream, then WorkerInitRequest and its answer."""
        self._expect("start_stream", timeout)
        p = self.protos
        self._send(
            worker_init_request=p.WorkerInitRequest(
                host_version=HOST_VERSION,
                worker_directory=self.launch.worker_directory,
                function_app_directory=self.launch.script_root,
            )
        )
        answer = self._expect("worker_init_response", timeout)
        self._check(answer.worker_init_response.result)

    def index(self, timeout: float = 60) -> dict[str, Indexed]:
        """FunctionsMetadataRequest: the worker imports function_app.py and answers with every
        Function; WorkerFailed with the worker's message when indexing failed."""
        p = self.protos
        self._send(
            functions_metadata_request=p.FunctionsMetadataRequest(
                function_app_directory=self.launch.script_root
            )
        )
        answer = self._expect("function_metadata_response", timeout).function_metadata_response
        self._check(answer.result)
        for metadata in answer.function_metadata_results:
            bindings = {}
            for raw in metadata.raw_bindings:
                binding = json.loads(raw)
                bindings[binding["name"]] = binding
            self.functions[metadata.name] = Indexed(
                metadata.function_id, metadata.name, bindings, metadata
            )
        return self.functions

    def load(self, timeout: float = 60) -> None:
        """One FunctionLoadRequest per indexed Function, sent together, as the host sends them."""
        p = self.protos
        for fn in self.functions.values():
            self._send(
                function_load_request=p.FunctionLoadRequest(
                    function_id=fn.function_id, metadata=fn.metadata
                )
            )
        for _ in self.functions:
            self._check(
                self._expect("function_load_response", timeout).function_load_response.result
            )
        self.marks["loaded"] = self.marks.pop("function_load_response")

    def start(self, timeout: float = 60) -> dict[str, Indexed]:
        """Initialize, index and load: the worker is ready for invocations."""
        self.initialize(timeout)
        functions = self.index(timeout)
        self.load(timeout)
        return functions

    def http(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str] | None = None,
        body: bytes | None = None,
        timeout: float = 60,
    ) -> HttpAnswer:
        """One HTTP request, routed as the host routes it (route template and method), answered
        with the Function's HTTP response."""
        fn, params = self._route(method, path)
        p = self.protos
        url = BASE_URL + path
        request = p.RpcHttp(method=method, url=url, params=params)
        for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
            if value:
                joined = request.query.get(name)
                request.query[name] = value if joined is None else f"{joined},{value}"
        sent = {"host": urlsplit(BASE_URL).netloc, **(headers or {})}
        if body:
            sent["content-length"] = str(len(body))
            request.body.CopyFrom(p.TypedData(bytes=body))
        for name, value in sent.items():
            request.headers[name.lower()] = value
        request.identities.append(self._identity(fn))
        trigger = fn.trigger()
        answer = self._invoke(
            fn,
            [p.ParameterBinding(name=trigger["name"], data=p.TypedData(http=request))],
            {name: p.TypedData(string=value) for name, value in params.items()},
            timeout,
        )
        http = answer.return_value.http
        data = http.body
        kind = data.WhichOneof("data")
        raw = data.bytes if kind == "bytes" else data.string.encode() if kind == "string" else b""
        at = self.marks["invocation_response"]
        return HttpAnswer(int(http.status_code or 200), dict(http.headers), raw, at)

    def tick(self, function: str, *, past_due: bool = False, timeout: float = 60) -> None:
        """One timer invocation, TimerInfo serialised as the host serialises it."""
        fn = self.functions[function]
        now = datetime.now(UTC)
        info = json.dumps(
            {
                "Schedule": {"AdjustForDST": True},
                "ScheduleStatus": {
                    "Last": (now - timedelta(minutes=1)).isoformat(),
                    "Next": (now + timedelta(minutes=1)).isoformat(),
                    "LastUpdated": now.isoformat(),
                },
                "IsPastDue": past_due,
            }
        )
        p = self.protos
        name = fn.trigger()["name"]
        self._invoke(
            fn,
            [p.ParameterBinding(name=name, data=p.TypedData(json=info))],
            {name: p.TypedData(json=info)},
            timeout,
        )

    def log_lines(self) -> list[LogLine]:
        levels = self.protos.RpcLog.Level
        return [LogLine(levels.Name(r.level), r.category, r.message) for r in self._stream.logs]

    def stderr(self) -> str:
        return (self.logs_dir / "worker.stderr").read_text(encoding="utf-8", errors="replace")

    # --- plumbing --------------------------------------------------------------------------

    def _invoke(
        self, fn: Indexed, inputs: list[Any], metadata: dict[str, Any], timeout: float
    ) -> Any:
        p = self.protos
        invocation_id = str(uuid.uuid4())
        metadata = dict(metadata)
        metadata["sys"] = p.TypedData(
            json=json.dumps(
                {
                    "MethodName": fn.name,
                    "UtcNow": datetime.now(UTC).isoformat(),
                    "RandGuid": str(uuid.uuid4()),
                }
            )
        )
        request = p.InvocationRequest(
            invocation_id=invocation_id,
            function_id=fn.function_id,
            input_data=inputs,
            trigger_metadata=metadata,
            trace_context=p.RpcTraceContext(
                trace_parent=f"00-{uuid.uuid4().hex}-{uuid.uuid4().hex[:16]}-00",
                attributes={"OperationName": fn.name},
            ),
        )
        self._send(invocation_request=request)
        while True:
            answer = self._expect("invocation_response", timeout).invocation_response
            if answer.invocation_id == invocation_id:
                break
        self._check(answer.result)
        return answer

    def _route(self, method: str, path: str) -> tuple[Indexed, dict[str, str]]:
        prefix = f"/{ROUTE_PREFIX}/"
        assert path.startswith(prefix), path
        local = urlsplit(path).path[len(prefix) :]
        for fn in self.functions.values():
            trigger = fn.trigger()
            if trigger["type"] != "httpTrigger":
                continue
            methods = [m.upper() for m in trigger.get("methods") or []]
            match = _template(trigger["route"]).fullmatch(local)
            if match and (not methods or method.upper() in methods):
                return fn, {k: v for k, v in match.groupdict().items() if v}
        raise LookupError(f"no Function serves {method} {path}")

    def _identity(self, fn: Indexed) -> Any:
        p = self.protos
        if fn.trigger().get("authLevel", "FUNCTION").upper() == "ANONYMOUS":
            return p.RpcClaimsIdentity()
        identity = p.RpcClaimsIdentity(
            authentication_type=p.NullableString(value="WebJobsAuthLevel"),
        )
        identity.claims.append(p.RpcClaim(type=AUTH_LEVEL_CLAIM, value="Function"))
        identity.claims.append(p.RpcClaim(type=KEY_ID_CLAIM, value="default"))
        return identity

    def _send(self, **content: Any) -> None:
        self._stream.outbox.put(self.protos.StreamingMessage(request_id=self.request_id, **content))

    def _expect(self, kind: str, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        for i, (at, message) in enumerate(self._early):
            if message.WhichOneof("content") == kind:
                del self._early[i]
                self.marks[kind] = at - self.started
                return message
        while time.monotonic() < deadline:
            try:
                at, message = self._stream.inbox.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise WorkerGone(self._gone(kind)) from None
                continue
            if message is None:
                raise WorkerGone(self._gone(kind))
            if message.WhichOneof("content") == kind:
                self.marks[kind] = at - self.started
                return message
            self._early.append((at, message))
        raise WorkerGone(f"no {kind} within {timeout} s\n{self.stderr()[-3000:]}")

    def _gone(self, kind: str) -> str:
        return (
            f"the worker stopped (exit {self.process.poll()}) before its {kind}\n"
            f"{self.stderr()[-3000:]}"
        )

    def _check(self, result: Any) -> None:
        if result.status != self.protos.StatusResult.Success:
            raise WorkerFailed(result.exception.message or "failure without a message")


def _template(route: str) -> re.Pattern[str]:
    """A host route template (`pin`, `docs/{*asset}`, `items/{id}`) as a regular expression."""
    pattern = ""
    for part in re.split(r"(\{[^}]+\})", route):
        if part.startswith("{"):
            name = part.strip("{}")
            catch_all = name.startswith("*")
            name = name.lstrip("*").split(":")[0].rstrip("?")
            pattern += f"(?P<{name}>.*)" if catch_all else f"(?P<{name}>[^/]+)"
        else:
            pattern += re.escape(part)
    return re.compile(pattern, re.IGNORECASE)


@contextmanager
def worker_session(worker: PythonWorker, launch: Launch, logs_dir: Path) -> Iterator[WorkerSession]:
    """The gRPC server and the worker's process, started as the host starts them, stopped at the
    end (SIGTERM, then kill): a session ready for `start()`."""
    grpc, protos = import_protocol(worker)
    options = [
        ("grpc.max_receive_message_length", MAX_MESSAGE),
        ("grpc.max_send_message_length", MAX_MESSAGE),
    ]
    server = grpc.server(ThreadPoolExecutor(max_workers=4), options=options)
    stream = _EventStream(protos)
    protos.add_FunctionRpcServicer_to_server(stream, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    logs_dir.mkdir(parents=True, exist_ok=True)
    worker_id, request_id = str(uuid.uuid4()), str(uuid.uuid4())
    arguments = ["--host", "127.0.0.1", "--port", str(port), "--workerId", worker_id]
    arguments += ["--requestId", request_id, "--grpcMaxMessageLength", str(MAX_MESSAGE)]
    try:
        with (
            open(logs_dir / "worker.stdout", "wb") as out,
            open(logs_dir / "worker.stderr", "wb") as err,
        ):
            started = time.perf_counter()
            process = subprocess.Popen(
                [*launch.command, *arguments],
                cwd=launch.cwd,
                env=dict(launch.env),
                stdout=out,
                stderr=err,
                stdin=subprocess.DEVNULL,
            )
        session = WorkerSession(protos, stream, process, launch, request_id, started, logs_dir)
        try:
            yield session
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
    finally:
        stream.outbox.put(None)
        server.stop(grace=0)
