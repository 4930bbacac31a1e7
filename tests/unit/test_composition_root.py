"""The composition root (docs/architecture.md): outside shared/bootstrap.py no module of the app
constructs a service, a notice transport or an engine, so a new collaborator of a service is
wired in one file. Tests and benches build theirs through the root's builders or by hand."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("shared", "api_funcs", "relay_func", "azurebank_cli")
ROOT = Path("shared/bootstrap.py")

# Every class the root builds for a host, and the factories it alone calls.
SERVICES = frozenset(
    {
        "AccountRails",
        "AuditChain",
        "BlobContainerTransport",
        "DailyLimitLock",
        "DailyOutflowLimit",
        "HostedRelay",
        "JwksKeys",
        "NoticeClaim",
        "NoticeDeliveryRun",
        "NoticeRelayService",
        "NoticeSweep",
        "PickupDirectoryTransport",
        "PinChanges",
        "Readiness",
        "TokenVerifier",
        "TransferMint",
        "TransferService",
    }
)
FACTORIES = frozenset({"get_engine"})


def _sources() -> Iterator[Path]:
    yield Path("function_app.py")
    for package in PACKAGES:
        yield from sorted(p.relative_to(REPO) for p in (REPO / package).rglob("*.py"))


def _called(func: ast.expr) -> str | None:
    """The name a call reaches for: `Name(…)`, `module.Name(…)` or `Service.from_settings(…)`."""
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        if func.attr == "from_settings" and isinstance(func.value, ast.Name):
            return f"{func.value.id}.from_settings"
        return func.attr
    return None


def constructions(source: str) -> list[tuple[int, str]]:
    """(line, what) for each construction of a service or call of a factory in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _called(node.func)
        if name is None:
            continue
        service, _, factory = name.partition(".")
        if (service in SERVICES and factory in ("", "from_settings")) or name in FACTORIES:
            found.append((node.lineno, name))
    return found


def test_only_the_composition_root_constructs_services_or_calls_get_engine() -> None:
    outside = [
        f"{path}:{line}: {name}(…)"
        for path in _sources()
        if path != ROOT
        for line, name in constructions((REPO / path).read_text(encoding="utf-8"))
    ]
    assert outside == [], "construct these in shared/bootstrap.py:\n" + "\n".join(outside)


def test_the_check_sees_each_spelling_of_a_construction() -> None:
    source = (
        "NoticeSweep(engine, clock, claim, delivery)\n"
        "tokens.TokenVerifier(settings, clock, jwks=None)\n"
        "AuditChain.from_settings(settings)\n"
        "get_engine(url)\n"
        "engine_module.get_engine(url)\n"
        "NoticeSweepSummary('runner')\n"  # a value, not a service
    )
    assert [name for _, name in constructions(source)] == [
        "NoticeSweep",
        "TokenVerifier",
        "AuditChain.from_settings",
        "get_engine",
        "get_engine",
    ]


def test_the_composition_root_is_where_the_services_are_built() -> None:
    built = {name for _, name in constructions((REPO / ROOT).read_text(encoding="utf-8"))}
    assert {"NoticeSweep", "TokenVerifier", "TransferService", "get_engine"} <= built
