"""Where a rendered notice lands, as `{noticeId}.eml`, never overwritten (nothing here sends; no
message or receipt holds a path or a recipient), and the pickup directory's guard (ADR-0048 D6)."""

from __future__ import annotations

import contextlib
import os
import re
import stat
import subprocess
import tempfile
import threading
import uuid
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from azure.storage.blob import ContainerClient


class NoticeRefused(Exception):
    """The target already holds this notice's name; nothing was written over it."""

    def __init__(self, notice_id: uuid.UUID) -> None:
        super().__init__(f"{notice_file_name(notice_id)} already exists; refused, not overwritten")


class NoticeTransport(Protocol):
    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str: ...

    def describe(self) -> str: ...  # a one-line target, safe to log: no path, no address


@runtime_checkable
class LeavesTemporaryFiles(Protocol):
    """A transport whose delivery writes a temporary file a crash can leave behind
    (docs/operations.md#crash-leftovers-and-what-removes-them)."""

    def remove_leftovers(self, *, now: datetime, older_than: timedelta) -> tuple[int, int, str]:
        """(removed, could not remove, the first failure's type: an OS error's text holds a path)"""


def notice_file_name(notice_id: uuid.UUID) -> str:
    return f"{notice_id}.eml"


# A temporary is `.{noticeId}.{8 characters}.tmp`, as `tempfile.mkstemp` names it with that
# prefix and suffix: hidden from a pickup agent that reads `*.eml`.
_TEMPORARY_NAME = re.compile(
    r"\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.[a-z0-9_]{8}\.tmp"
)


def is_temporary_file_name(name: str) -> bool:
    return _TEMPORARY_NAME.fullmatch(name) is not None


class PickupDirectoryTransport:
    """A pickup directory on a local disk: the file appears whole or not at all."""

    def __init__(self, directory: Path | str) -> None:
        self.directory = Path(directory)

    def describe(self) -> str:
        # The path may name a user's home; the key tells an operator where to look.
        return "pickup directory (Notices__PickupDirectory)"

    def deliver(self, notice_id: uuid.UUID, message: bytes) -> str:
        name = notice_file_name(notice_id)
        # In the same directory (the link stays on one file system); created new (never through
        # a symlink or over a name) and 0600 from the start: an address at rest.
        fd, temporary = tempfile.mkstemp(prefix=f".{notice_id}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(message)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                # link(2) refuses an existing name: the exclusive create.
                os.link(temporary, self.directory / name)
            except FileExistsError:
                # `from None`: the OS error's text holds both paths.
                raise NoticeRefused(notice_id) from None
            # The name must be durable before the row is marked delivered, or a crash between
            # the mark and the directory's write-back loses a notice the row calls delivered.
            directory = os.open(self.directory, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        return f"pickup:{name}"

    def probe(self) -> None:
        """Readiness (shared/readiness.py): the directory takes a write, under a name no notice
        has and no leftover removal matches; raises otherwise."""
        fd, name = tempfile.mkstemp(prefix=".ready-", dir=self.directory)
        os.close(fd)
        os.unlink(name)

    def remove_leftovers(self, *, now: datetime, older_than: timedelta) -> tuple[int, int, str]:
        """Remove dead runners' temporaries: regular files named exactly as `deliver` names them,
        last modified more than `older_than` (longer than any runner's lease) before `now`."""
        cutoff = (now - older_than).timestamp()
        removed, kept, failure = 0, 0, ""
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if not is_temporary_file_name(entry.name):
                    continue
                try:
                    status = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(status.st_mode) and status.st_mtime < cutoff:
                        os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    pass  # its writer linked and removed it, or another runner did
                except OSError as exc:
                    # One that cannot go (another user's, in a sticky directory) keeps no other.
                    kept, failure = kept + 1, failure or type(exc).__name__
        return removed, kept, failure


@dataclass(eq=False, repr=False)  # no repr: a connection string holds the account key
class BlobContainerTransport:
    """A blob container as the pickup, for a Function with no durable disk; an upload appears whole
    or not at all. The client is built on first use (docs/settings.md says from what)."""

    container: str
    _: KW_ONLY
    connection_string: str | None = None
    blob_service_uri: str | None = None
    credential: Any = None
    _client: ContainerClient | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        if not self.connection_string and not self.blob_service_uri:
            raise ValueError("a blob container transport needs a connection string or a URI")

    def describe(self) -> str:
        return f"blob container {self.container}"

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
        return f"blob:{self.container}/{name}"

    def probe(self) -> None:
        """Readiness (shared/readiness.py): the container answers and exists; raises otherwise."""
        if not self._container_client().exists():
            raise LookupError("the pickup container does not exist")

    def _container_client(self) -> ContainerClient:
        from azure.storage.blob import BlobServiceClient

        with self._lock:
            if self._client is not None:
                return self._client
            if self.connection_string:
                service = BlobServiceClient.from_connection_string(self.connection_string)
            else:
                credential = self.credential
                if credential is None:
                    from azure.identity import DefaultAzureCredential

                    credential = DefaultAzureCredential()
                service = BlobServiceClient(
                    account_url=str(self.blob_service_uri), credential=credential
                )
            self._client = service.get_container_client(self.container)
            return self._client


def pickup_directory_problem(directory: Path) -> str | None:
    """A spool of addresses at rest must exist and sit outside any git tree; the message never
    echoes the path (it may name a user's home)."""
    if not directory.is_dir():
        return (
            "Notices__PickupDirectory: the directory does not exist. Fix: create it, or "
            "set Notices__PickupDirectory to an existing directory outside any git tree."
        )
    if _inside_git_tree(directory):
        return (
            "Notices__PickupDirectory: the directory sits inside a git tree, where notices "
            "(addresses at rest) could be committed. Fix: set Notices__PickupDirectory to a "
            "directory outside any git tree."
        )
    return None


# How long the guard waits for git's answer: a hung git (a stalled network home, a lock) reads
# as no git tree rather than holding the host's start.
GIT_ANSWERS_WITHIN = 10.0  # seconds


def _inside_git_tree(directory: Path) -> bool:
    # Walk up looking for .git ourselves, and ask git too when it is installed (worktrees,
    # GIT_DIR layouts); either saying yes is enough to refuse.
    resolved = directory.resolve()
    if any((parent / ".git").exists() for parent in (resolved, *resolved.parents)):
        return True
    try:
        result = subprocess.run(
            ["git", "-C", str(resolved), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            timeout=GIT_ANSWERS_WITHIN,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and result.stdout.strip() == b"true"
