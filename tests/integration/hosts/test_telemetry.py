"""Telemetry an operator can alert on (api_funcs/telemetry.py, telemetry_recorder.py), read back
through the OpenTelemetry SDK's in-memory exporters: no Azure. Each metric and a trace per HTTP
operation and per sweep, and no address, PIN, token, tag or user id in any exported attribute,
span name or metric dimension (ADR-0017, ADR-0048 D4)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from api_funcs.telemetry import CONNECTION_STRING, host_telemetry
from api_funcs.telemetry_recorder import OpenTelemetryRecorder
from shared.bootstrap import Host
from shared.db.engine import get_engine
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.money.refusals import ConcurrencyConflict
from shared.notices.status import owed_backlog_reader
from shared.settings import load_settings
from shared.telemetry import NO_TELEMETRY
from tests.support.checkout import run_python
from tests.support.clock import FakeClock
from tests.support.hosts import CHAIN_KEY, CONTACT, host_environ, make_app
from tests.support.money import Bank, unique_key
from tests.support.notices import START, add_notice
from tests.support.users import PIN, WRONG_PIN, add_user


@dataclass
class Exported:
    spans: InMemorySpanExporter
    metrics: InMemoryMetricReader
    recorder: OpenTelemetryRecorder

    def metric_points(self) -> dict[str, list[tuple[dict[str, Any], float]]]:
        """Every data point by metric name: (attributes, value)."""
        points: dict[str, list[tuple[dict[str, Any], float]]] = {}
        data = self.metrics.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        value = float(point.value)  # type: ignore[union-attr]
                        points.setdefault(metric.name, []).append((dict(point.attributes), value))
        return points

    def everything_exported(self) -> str:
        """Span names and attributes, events, status text and metric dimensions, as one text."""
        spans = [
            {
                "name": s.name,
                "attributes": dict(s.attributes or {}),
                "status": s.status.description,
                "events": [dict(e.attributes or {}) for e in s.events],
            }
            for s in self.spans.get_finished_spans()
        ]
        return json.dumps({"spans": spans, "metrics": self.metric_points()}, default=str)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + timedelta(hours=1))


@pytest.fixture
def exported(sqlite_url: str, clock: FakeClock) -> Iterator[Exported]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    recorder = OpenTelemetryRecorder(
        tracer_provider, meter_provider, backlog=owed_backlog_reader(get_engine(sqlite_url), clock)
    )
    yield Exported(spans, reader, recorder)
    meter_provider.shutdown()
    tracer_provider.shutdown()


def _one(points: dict[str, list[tuple[dict[str, Any], float]]], name: str) -> float:
    (only,) = points[name]
    return only[1]


def test_each_sweep_is_a_trace_and_counts_delivered_refused_and_failed_by_runner_kind(
    sqlite_url: str, clock: FakeClock, exported: Exported, tmp_path: Path
) -> None:
    pickup = tmp_path / "pickup"
    pickup.mkdir()
    with unit_of_work(get_engine(sqlite_url)) as session:
        good = add_user(session)
        nobody = add_user(session, email=None).user_id
        delivered = add_notice(session, good.user_id, created_at=START)
        refused = add_notice(session, good.user_id, created_at=START + timedelta(minutes=1))
        add_notice(session, nobody, created_at=START + timedelta(minutes=2))
        session.commit()
    (pickup / f"{refused}.eml").write_bytes(b"an earlier attempt's file (ADR-0048 D3)")
    # Before the sweep: three owed, the oldest an hour old (the gauges read the database).
    before = exported.metric_points()
    assert _one(before, "azurebank.notices.owed") == 3
    assert _one(before, "azurebank.notices.oldest_owed_age") == 3600

    settings = load_settings(
        host_environ(
            sqlite_url,
            Notices__Runner="Function",
            Notices__PickupDirectory=str(pickup),
            Notices__Contact=CONTACT,
        )
    )
    relay = Host("function", settings, clock=clock, telemetry=exported.recorder).relay
    summary = relay.tick(past_due=False)
    assert summary is not None
    assert (summary.delivered, summary.refused, summary.failed) == (1, 1, 1)
    assert (pickup / f"{delivered}.eml").exists()

    after = exported.metric_points()
    kind = {"azurebank.runner.kind": "function"}
    assert after["azurebank.notices.delivered"] == [(kind, 1)]
    assert after["azurebank.notices.refused"] == [(kind, 1)]
    assert after["azurebank.notices.failed"] == [(kind, 1)]
    assert after["azurebank.notices.sweeps"] == [({**kind, "azurebank.sweep.result": "ok"}, 1)]
    # Two stay owed (the refused row and the one with no address), the oldest now the refused.
    assert _one(after, "azurebank.notices.owed") == 2
    assert _one(after, "azurebank.notices.oldest_owed_age") == 3600 - 60
    (span,) = exported.spans.get_finished_spans()
    assert span.name == "notice sweep"
    assert span.kind is SpanKind.INTERNAL
    assert dict(span.attributes or {}) == {
        "azurebank.runner.kind": "function",
        "azurebank.notices.held": 3,
        "azurebank.notices.delivered": 1,
        "azurebank.notices.refused": 1,
        "azurebank.notices.failed": 1,
        "azurebank.notices.lease_lapsed": False,
    }
    text = exported.everything_exported()
    secrets = (str(good.email), good.user_id, nobody, str(pickup), str(delivered), str(refused))
    for secret in secrets:
        assert secret not in text, secret


def test_a_gauge_whose_read_fails_observes_nothing_and_the_export_goes_on(
    tmp_path: Path, clock: FakeClock
) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    missing = f"sqlite:///{tmp_path / 'no-such-dir' / 'db.sqlite'}"
    OpenTelemetryRecorder(
        TracerProvider(), provider, backlog=owed_backlog_reader(get_engine(missing), clock)
    ).refused("transfer", ConcurrencyConflict())
    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert "azurebank.money.concurrency_conflicts" in names
    assert "azurebank.notices.owed" not in names
    provider.shutdown()


def _bank(sqlite_url: str, clock: FakeClock, exported: Exported, **environ: str) -> TestClient:
    settings = load_settings(host_environ(sqlite_url, **environ))
    app = make_app(settings, clock=clock, db_url=sqlite_url, telemetry=exported.recorder)
    return TestClient(app, raise_server_exceptions=False)


def test_every_http_operation_is_a_server_span_and_each_alerting_refusal_is_counted(
    sqlite_url: str, clock: FakeClock, exported: Exported
) -> None:
    environ = {"Pin__MaxFailedAttempts": "3", "DailyLimit__LockTimeoutSeconds": "1"}
    with _bank(sqlite_url, clock, exported, **environ) as client:
        bank = Bank(sqlite_url, clock, client, load_settings(host_environ(sqlite_url, **environ)))
        payer, payee, guesser = bank.customer(balance=1000), bank.customer(), bank.customer()
        requests = 0

        # The journey: a mint, a transfer, the allowance, and a mint over the day's limit.
        auth = bank.authorize(payer, 100, payee)
        spent = bank.transfer(payer, 100, payee, auth, key=unique_key())
        assert spent.status_code == 201, spent.text
        bank.allowance(payer)
        over = bank.mint(payer, 4900.01, payee)
        assert over.json()["errorCode"] == "DAILY_LIMIT_EXCEEDED"
        requests += 4
        # Wrong PINs: the third (Pin__MaxFailedAttempts) locks; the fourth is refused as locked.
        codes = [bank.mint(guesser, 10, payee, pin=WRONG_PIN).status_code for _ in range(4)]
        assert codes == [401, 401, 401, 429]
        requests += 4
        # A held write lock (SQLite's application lock): 503 LOCK_TIMEOUT after a second.
        held_auth = bank.authorize(payer, 10, payee)
        with writing_unit_of_work(get_engine(sqlite_url)) as holder:
            holder.connection()
            timed_out = bank.transfer(payer, 10, payee, held_auth)
        assert timed_out.json()["errorCode"] == "LOCK_TIMEOUT", timed_out.text
        requests += 2
        assert client.get("/api/health").status_code == 200
        assert client.get("/api/no-such-route?tag=" + payee.tag).status_code == 404
        requests += 2
    # A lost race on every retry cannot be produced on demand: the recorder's own mapping.
    exported.recorder.refused("internal_transfer", ConcurrencyConflict())

    points = exported.metric_points()
    assert points["azurebank.daily_limit.refusals"] == [({"azurebank.operation": "mint"}, 1)]
    assert points["azurebank.pin.lockouts"] == [({"azurebank.operation": "mint"}, 1)]
    assert points["azurebank.money.lock_timeouts"] == [({"azurebank.operation": "transfer"}, 1)]
    assert points["azurebank.money.concurrency_conflicts"] == [
        ({"azurebank.operation": "internal_transfer"}, 1)
    ]

    spans = [s for s in exported.spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    assert len(spans) == requests
    names = {s.name for s in spans}
    assert {
        "POST /api/transactions/transfer/authorizations",
        "POST /api/transactions/transfer",
        "GET /api/transactions/allowance",
        "GET /api/health",
        "GET",  # the unrouted request: no path of the caller's making is exported
    } == names
    transfer = next(s for s in spans if s.name == "POST /api/transactions/transfer")
    assert dict(transfer.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": "/api/transactions/transfer",
        "azurebank.operation": "transfer",
        "http.response.status_code": 201,
    }
    text = exported.everything_exported()
    token = bank.headers(payer)["Authorization"].removeprefix("Bearer ")
    for who in (payer, payee, guesser):
        for secret in (who.user_id, who.tag, f"{who.tag}@example.test"):
            assert secret not in text, secret
    for secret in (PIN, WRONG_PIN, token, "4900.01"):
        assert secret not in text, secret


def test_the_host_gets_no_telemetry_without_the_connection_string_and_never_configures() -> None:
    calls: list[str] = []

    def configure() -> Any:
        calls.append("configured")
        return TracerProvider(), MeterProvider()

    for environ in ({}, {CONNECTION_STRING: " "}):
        found = host_telemetry(environ=environ, configure=configure)
        assert found is NO_TELEMETRY
    assert calls == []
    found = host_telemetry(
        environ={CONNECTION_STRING: "InstrumentationKey=00000000-0000-0000-0000-000000000000"},
        configure=configure,
    )
    assert isinstance(found, OpenTelemetryRecorder)
    assert calls == ["configured"]


_IMPORTS = """
import sys
import function_app
loaded = sorted(m for m in sys.modules if m.startswith(("opentelemetry.sdk", "azure.monitor")))
print("LOADED", loaded)
"""


def test_importing_function_app_without_the_connection_string_loads_no_sdk_and_no_distro(
    tmp_path: Path,
) -> None:
    out = run_python(
        "-c",
        _IMPORTS,
        settings={
            "Database__Url": f"sqlite:///{tmp_path / 'never-opened.db'}",
            "Audit__ChainKey": CHAIN_KEY,
            CONNECTION_STRING: "",
        },
        check=True,
    )
    assert "LOADED []" in out.stdout, out.stdout
