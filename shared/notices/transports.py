"""Where a rendered notice lands, behind one interface (DESIGN §6). Nothing here sends.

Both transports name the notice `{noticeId}.eml` and never overwrite: an existing name is
NoticeRefused (ADR-0045 D4, ADR-0048 D3), the row stays owed beside what is already there, and the
operator's runbook decides (the row is the truth; move the file and run again, or mark the row).

Exception messages and receipts carry the notice's file name at most, never a directory path or a
recipient: a runner logs a failure by its type only (ADR-0048 D4), and a receipt is logged.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from shared.settings import NO_STORAGE_NAMED, Settings, SettingsError, fix_for

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient


class NoticeRefused(Exception):
    """The target already holds this notice's name; nothing was written over it."""

    def __init__(self, notice_id: uuid.UUID) -> None:
        self.notice_id = notice_id
        super().__init__(f"{notice_file_name(notice_id)} already exists; refused, not overwritten")


class NoticeTransport(Protocol):
    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        """Land `message` under the notice's name and return a receipt; raise NoticeRefused
        when the name already exists."""
        ...

    def describe(self) -> str:
        """A one-line target, safe to log: no path, no address."""
        ...


def notice_file_name(notice_id: uuid.UUID) -> str:
    return f"{notice_id}.eml"


class PickupDirectoryTransport:
    """A pickup directory on a local disk: the file appears whole or not at all."""

    def __init__(self, directory: Path | str) -> None:
        self._directory = Path(directory)

    def describe(self) -> str:
        # The path is not shown: it may name a user's home, and the git-tree guard's message
        # does not echo it either. The key tells an operator where to look.
        return "pickup directory (Notices__PickupDirectory)"

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        name = notice_file_name(notice_id)
        # A temporary file in the same directory (so the link stays on one file system), 0600
        # because a notice is an address at rest.
        fd, temporary = tempfile.mkstemp(
            dir=self._directory, prefix=f".{notice_id}.", suffix=".tmp"
        )
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(message)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                # link(2) refuses an existing name: the exclusive create of ADR-0045 D4.
                os.link(temporary, self._directory / name)
            except FileExistsError:
                # `from None`: the OS error's text holds both paths.
                raise NoticeRefused(notice_id) from None
            # The name must be durable before the row is marked delivered, or a crash between
            # the mark and the directory's write-back loses a notice the row calls delivered.
            self._fsync_directory()
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        return f"pickup:{name}"

    def _fsync_directory(self) -> None:
        fd = os.open(self._directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


class BlobContainerTransport:
    """Beyond the ADR: a blob container as the pickup, for a Function with no durable disk.

    The client is built on first delivery (nothing connects at import or construction), from a
    connection string, or from the account's blob URI and an Entra credential (DESIGN §4)."""

    def __init__(
        self,
        container: str,
        *,
        connection_string: str | None = None,
        blob_service_uri: str | None = None,
        credential: Any = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        if not connection_string and not blob_service_uri:
            raise ValueError("a blob container transport needs a connection string or a URI")
        self._container = container
        self._connection_string = connection_string
        self._blob_service_uri = blob_service_uri
        self._credential = credential
        self._client_options = client_options or {}
        self._client: ContainerClient | None = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        return f"blob container {self._container}"

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        from azure.core.exceptions import ResourceExistsError
        from azure.storage.blob import ContentSettings

        name = notice_file_name(notice_id)
        try:
            self._container_client().upload_blob(
                name,
                message,
                overwrite=False,
                content_settings=ContentSettings(content_type="message/rfc822"),
            )
        except ResourceExistsError as exc:
            if getattr(exc, "error_code", None) == "BlobAlreadyExists":
                raise NoticeRefused(notice_id) from None
            raise
        return f"blob:{self._container}/{name}"

    def probe(self) -> None:
        """Readiness (shared/readiness.py): the container answers and exists; raises otherwise."""
        if not self._container_client().exists():
            raise LookupError("the pickup container does not exist")

    def _container_client(self) -> ContainerClient:
        with self._lock:
            if self._client is None:
                self._client = self._build_client()
            return self._client

    def _build_client(self) -> ContainerClient:
        from azure.storage.blob import BlobServiceClient

        if self._connection_string:
            service = BlobServiceClient.from_connection_string(
                self._connection_string, **self._client_options
            )
        else:
            credential = self._credential
            if credential is None:
                from azure.identity import DefaultAzureCredential

                credential = DefaultAzureCredential()
            service = BlobServiceClient(
                account_url=str(self._blob_service_uri),
                credential=credential,
                **self._client_options,
            )
        return service.get_container_client(self._container)


def transport_from_settings(settings: Settings) -> NoticeTransport:
    """The transport `Notices` names: the pickup directory or the blob container (exactly one).

    Call after `require_host`, which checks the directory exists outside any git tree."""
    notices = settings.Notices
    if notices.PickupDirectory and not notices.PickupContainer:
        return PickupDirectoryTransport(Path(notices.PickupDirectory))
    if notices.PickupContainer and not notices.PickupDirectory:
        storage = settings.NoticesStorage
        if storage.ConnectionString or storage.blobServiceUri:
            return BlobContainerTransport(
                notices.PickupContainer,
                connection_string=storage.ConnectionString,
                blob_service_uri=storage.blobServiceUri,
            )
        raise SettingsError([NO_STORAGE_NAMED])
    raise SettingsError(
        [
            "Notices__PickupDirectory: exactly one of Notices__PickupDirectory and "
            f"Notices__PickupContainer must be set. Fix: {fix_for('Notices__PickupDirectory')}."
        ]
    )
