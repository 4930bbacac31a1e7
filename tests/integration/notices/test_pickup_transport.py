"""The pickup directory (ADR-0045 D4, ADR-0048 D3, docs/operations.md) on a real file system, and
the transport `Notices` names."""

from __future__ import annotations

import stat
import uuid
from pathlib import Path

import pytest

from shared.bootstrap import bootstrap, notice_transport
from shared.notices.transports import (
    BlobContainerTransport,
    NoticeRefused,
    PickupDirectoryTransport,
)
from shared.settings import SettingsError, load_settings
from tests.support.clock import FakeClock


def test_a_notice_file_appears_whole_under_its_id_readable_by_its_owner_only(pickup: Path) -> None:
    notice_id = uuid.uuid4()
    receipt = PickupDirectoryTransport(pickup).deliver(
        notice_id, b"To: a@example.com\r\n\r\nhi\r\n"
    )
    final = pickup / f"{notice_id}.eml"
    assert receipt == f"pickup:{notice_id}.eml"
    assert final.read_bytes() == b"To: a@example.com\r\n\r\nhi\r\n"
    assert stat.S_IMODE(final.stat().st_mode) == 0o600  # an address at rest
    assert [p.name for p in pickup.iterdir()] == [final.name]  # the temporary is gone


@pytest.mark.adr("0045", "D4")
@pytest.mark.adr("0048", "D3")
def test_an_existing_name_is_refused_never_overwritten_and_leaves_no_temporary(
    pickup: Path,
) -> None:
    notice_id = uuid.uuid4()
    transport = PickupDirectoryTransport(pickup)
    transport.deliver(notice_id, b"first")
    with pytest.raises(NoticeRefused) as refused:
        transport.deliver(notice_id, b"second")
    assert (pickup / f"{notice_id}.eml").read_bytes() == b"first"
    assert [p.name for p in pickup.iterdir()] == [f"{notice_id}.eml"]
    # The refusal names the file, never the directory (ADR-0048 D4).
    assert str(pickup) not in str(refused.value) and refused.value.__cause__ is None


def test_the_pickup_target_is_described_without_its_path(pickup: Path) -> None:
    description = PickupDirectoryTransport(pickup).describe()
    assert description == "pickup directory (Notices__PickupDirectory)"
    assert str(pickup) not in description


def test_notices_names_the_transport_exactly_one_of_directory_or_container(pickup: Path) -> None:
    directory = notice_transport(load_settings({"Notices__PickupDirectory": str(pickup)}))
    assert isinstance(directory, PickupDirectoryTransport)
    container = notice_transport(
        load_settings(
            {
                "Notices__PickupContainer": "notices",
                "NoticesStorage__blobServiceUri": "https://account.blob.core.windows.net",
            }
        )
    )
    assert isinstance(container, BlobContainerTransport)
    with pytest.raises(SettingsError, match="Notices__PickupDirectory: exactly one of"):
        notice_transport(load_settings({}))
    with pytest.raises(SettingsError, match="NoticesStorage: Notices__PickupContainer is set"):
        notice_transport(load_settings({"Notices__PickupContainer": "notices"}))


def test_a_runners_sweep_refuses_to_exist_without_the_contact(
    pickup: Path, sqlite_url: str
) -> None:
    from shared.db.engine import build_engine

    engine = build_engine(sqlite_url)
    try:
        settings = load_settings({"Notices__PickupDirectory": str(pickup)})
        with pytest.raises(SettingsError, match="Notices__Contact: missing"):
            bootstrap(settings, engine, FakeClock(), runner="api/h/1/00000000")
        settings = load_settings(
            {
                "Notices__PickupDirectory": str(pickup),
                "Notices__Contact": "desk",
                "Notices__LeaseSeconds": "90",
                "Notices__BatchSize": "7",
            }
        )
        sweep = bootstrap(settings, engine, FakeClock(), runner="api/h/1/00000000").sweep
        assert sweep is not None
        assert (sweep.claim.lease.total_seconds(), sweep.claim.batch_size) == (90, 7)
        assert sweep.run().held == 0
    finally:
        engine.dispose()
