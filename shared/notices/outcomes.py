"""What a NoticeDeliveryRun returns: values, never the address, a notice file's path or a
recipient (docs/decisions.md#adr-0048-d4)."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from shared.notices.evidence import EvidenceFinding


class DeliveryStatus(enum.StrEnum):
    """How one attempt on one owed row ended."""

    DELIVERED = "delivered"  # handed to the transport and marked; `receipt` is set
    REFUSED = "refused"  # the name already exists at the target; the row stays owed
    UNUSABLE_ADDRESS = "unusable-address"  # no usable Email on the user's row; row stays owed
    UNRENDERABLE_KIND = "unrenderable-kind"  # a Kind this renderer has no message for
    TRANSPORT_FAILED = "transport-failed"  # the transport raised; only its type is kept
    TAKEN = "taken"  # the mark found the row already delivered by another runner


# The statuses that leave the row owed and held by this runner (counted against its batch).
FAILURES = frozenset(
    {
        DeliveryStatus.UNUSABLE_ADDRESS,
        DeliveryStatus.UNRENDERABLE_KIND,
        DeliveryStatus.TRANSPORT_FAILED,
    }
)


@dataclass(frozen=True)
class DeliveryOutcome:
    """One attempt's result. `detail` is safe to print: an AddressProblem value or the
    transport's exception type name, never its message."""

    notice_id: uuid.UUID
    kind: str
    status: DeliveryStatus
    receipt: str | None = None
    detail: str | None = None
    finding: EvidenceFinding | None = None

    @property
    def owed(self) -> bool:
        """Whether the row is still owed after this attempt."""
        return self.status not in (DeliveryStatus.DELIVERED, DeliveryStatus.TAKEN)
