"""The Azurite ring the test command starts: the blob endpoint answers the SDK this
project pins, and `overwrite=False` refuses an existing name without touching it — the
behaviour the blob pickup's exclusive create stands on (docs/operations.md)."""

from __future__ import annotations

import uuid

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient


@pytest.mark.azurite
def test_a_second_upload_of_the_same_name_is_refused_and_leaves_the_first(
    azurite_connection_string: str,
) -> None:
    service = BlobServiceClient.from_connection_string(azurite_connection_string)
    container = service.create_container(f"infra-{uuid.uuid4().hex[:12]}")
    try:
        container.upload_blob("n.eml", b"first", overwrite=False)
        with pytest.raises(ResourceExistsError) as refused:
            container.upload_blob("n.eml", b"second", overwrite=False)
        assert refused.value.error_code == "BlobAlreadyExists"
        assert container.download_blob("n.eml").readall() == b"first"
    finally:
        container.delete_container()
