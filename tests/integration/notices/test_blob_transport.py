"""The blob container as the pickup (docs/settings.md, docs/operations.md), against Azurite:
delivered once, a second attempt refused (`BlobAlreadyExists`, the same refusal as an existing
file), nothing overwritten."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient
from sqlalchemy import Engine

from shared.bootstrap import notice_transport
from shared.clock import FakeClock
from shared.notices.transports import (
    BlobContainerTransport,
    NoticeRefused,
)
from shared.settings import load_settings
from tests.support.hosts import CONTACT
from tests.support.notices import make_sweep, notice_row, owed_notices

pytestmark = pytest.mark.azurite


@pytest.fixture
def container(azurite_connection_string: str) -> Iterator[ContainerClient]:
    service = BlobServiceClient.from_connection_string(azurite_connection_string)
    client = service.create_container(f"notices-{uuid.uuid4().hex[:12]}")
    yield client
    client.delete_container()


@pytest.mark.adr("0045", "D4")
def test_a_blob_notice_is_delivered_once_and_a_second_attempt_is_refused_not_overwritten(
    azurite_connection_string: str, container: ContainerClient
) -> None:
    transport = BlobContainerTransport(
        container.container_name, connection_string=azurite_connection_string
    )
    notice_id = uuid.uuid4()
    receipt = transport.deliver(notice_id, b"first\r\n")
    assert receipt == f"blob:{container.container_name}/{notice_id}.eml"
    with pytest.raises(NoticeRefused) as refused:
        transport.deliver(notice_id, b"second\r\n")
    assert str(refused.value) == f"{notice_id}.eml already exists; refused, not overwritten"
    blob = container.get_blob_client(f"{notice_id}.eml")
    assert blob.download_blob().readall() == b"first\r\n"
    assert blob.get_blob_properties().content_settings.content_type == "message/rfc822"
    assert [b.name for b in container.list_blobs()] == [f"{notice_id}.eml"]
    assert transport.describe() == f"blob container {container.container_name}"


def test_a_sweep_into_a_blob_container_delivers_and_refuses_an_existing_blob(
    engine: Engine, azurite_connection_string: str, container: ContainerClient
) -> None:
    first, second = owed_notices(engine, 2)
    container.upload_blob(f"{second.id}.eml", b"already here\r\n")
    settings = load_settings(
        {
            "Notices__PickupContainer": container.container_name,
            "NoticesStorage": azurite_connection_string,
            "Notices__Contact": CONTACT,
        }
    )
    transport = notice_transport(settings)
    assert isinstance(transport, BlobContainerTransport)
    summary = make_sweep(engine, FakeClock(), transport).run()
    assert (summary.delivered, summary.refused) == (1, 1)
    body = container.get_blob_client(f"{first.id}.eml").download_blob().readall()
    assert f"Reference: {first.id}".encode() in body
    assert container.get_blob_client(f"{second.id}.eml").download_blob().readall() == (
        b"already here\r\n"
    )
    assert notice_row(engine, first.id).DeliveryReceipt == (
        f"blob:{container.container_name}/{first.id}.eml"
    )
    assert notice_row(engine, second.id).DeliveredAt is None


def test_a_blob_transport_builds_its_client_lazily_and_connects_to_nothing_until_it_delivers() -> (
    None
):
    # An identity-based transport to an address nobody listens on: construction must not fail.
    transport = BlobContainerTransport(
        "notices", blob_service_uri="https://nobody.invalid.example", credential=object()
    )
    assert transport.describe() == "blob container notices"
