"""The blob container as the pickup (docs/settings.md, docs/operations.md), against Azurite:
delivered once, a second attempt refused (`BlobAlreadyExists`, the same refusal as an existing
file), nothing overwritten."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.storage.blob import BlobServiceClient, ContainerClient
from sqlalchemy import Engine

from shared.bootstrap import notice_transport
from shared.notices.transports import (
    BlobContainerTransport,
    NoticeRefused,
)
from shared.settings import load_settings
from tests.conftest import AZURITE_ACCOUNT_KEY, AZURITE_BLOB_ENDPOINT
from tests.support.clock import FakeClock
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


def test_a_blob_transport_reached_by_its_account_uri_and_a_key_delivers_and_refuses_alike(
    azurite_connection_string: str, container: ContainerClient
) -> None:
    key = AzureNamedKeyCredential("devstoreaccount1", AZURITE_ACCOUNT_KEY)
    transport = BlobContainerTransport(
        container.container_name, blob_service_uri=AZURITE_BLOB_ENDPOINT, credential=key
    )
    notice_id = uuid.uuid4()
    assert transport.deliver(notice_id, b"by uri\r\n") == (
        f"blob:{container.container_name}/{notice_id}.eml"
    )
    with pytest.raises(NoticeRefused):
        transport.deliver(notice_id, b"again\r\n")
    assert container.get_blob_client(f"{notice_id}.eml").download_blob().readall() == (
        b"by uri\r\n"
    )


def test_a_blob_transport_given_no_credential_signs_in_as_the_hosts_identity_never_anonymously(
    azurite_connection_string: str, container: ContainerClient
) -> None:
    # The host's identity is a token credential, which the storage client refuses over plain
    # http before any request: nothing is written without it (and no token is asked for).
    transport = BlobContainerTransport(
        container.container_name, blob_service_uri=AZURITE_BLOB_ENDPOINT
    )
    with pytest.raises(ValueError, match="Token credential is only supported with HTTPS"):
        transport.deliver(uuid.uuid4(), b"anonymous?\r\n")
    assert list(container.list_blobs()) == []


def test_a_blob_transport_needs_a_connection_string_or_an_account_uri() -> None:
    with pytest.raises(ValueError) as refused:
        BlobContainerTransport("notices")
    assert str(refused.value) == "a blob container transport needs a connection string or a URI"
