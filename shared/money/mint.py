"""The mint (ADR-0042, ADR-0050 D4.1): checks the PIN and issues a transfer's authorization.

Rungs, in the order of ADR-0050's table: the caller's account (404 / 403) → the payee (404 / 422)
→ the day (422 DAILY_LIMIT_EXCEEDED) → the PIN (422 PIN_REQUIRED, 401 INVALID_PIN, 429 PIN_LOCKED).
The daily check sits before the PIN because a 422 that reveals only the caller's own state belongs
on that rung (ADR-0049 D4): an over-limit mint with a wrong PIN answers 422 and spends no attempt.
No mint checks funds, and a mint reserves nothing (A3.1).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from shared.clock import Clock
from shared.db.schema import AuthorizationStatus, TransferAuthorization
from shared.db.uow import unit_of_work, writing_unit_of_work
from shared.money.accounts import own_open_account
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.payees import resolve_payee
from shared.money.ports import PinCheck


@dataclass(frozen=True)
class MintRequest:
    account_id: uuid.UUID
    recipient_azure_tag: str
    amount: Decimal
    pin: str | None


@dataclass(frozen=True)
class TransferAuthorizationGrant:
    authorization_id: uuid.UUID
    expires_at: datetime
    account_id: uuid.UUID
    recipient_azure_tag: str
    amount: Decimal


class TransferMint:
    """Issues transfer authorizations bound to user, account, payee and amount."""

    def __init__(
        self,
        engine: Engine,
        clock: Clock,
        limit: DailyOutflowLimit,
        pin_check: PinCheck,
        *,
        authorization_seconds: int,
    ) -> None:
        self._engine = engine
        self._clock = clock
        self._limit = limit
        self._pin_check = pin_check
        self._lifetime = timedelta(seconds=authorization_seconds)

    def mint(self, user_id: str, request: MintRequest) -> TransferAuthorizationGrant:
        # The rungs before the PIN read only; the PIN check commits its own count, so nothing of
        # ours may hold a write transaction (on SQLite, the database) while it runs.
        with unit_of_work(self._engine) as session:
            own_open_account(session, user_id, request.account_id)
            resolve_payee(session, user_id, request.recipient_azure_tag)
            # D4.1: before the PIN, so a doomed transfer costs no PIN entry.
            self._limit.check(session, user_id, request.amount, self._clock.now())
        self._pin_check(user_id, request.pin)
        now = self._clock.now()
        grant = TransferAuthorizationGrant(
            authorization_id=uuid.uuid4(),
            expires_at=now + self._lifetime,
            account_id=request.account_id,
            recipient_azure_tag=request.recipient_azure_tag,
            amount=request.amount,
        )
        with writing_unit_of_work(self._engine) as session:
            session.add(
                TransferAuthorization(
                    Id=grant.authorization_id,
                    UserId=user_id,
                    AccountId=grant.account_id,
                    RecipientAzureTag=grant.recipient_azure_tag,
                    Amount=grant.amount,
                    Status=AuthorizationStatus.PENDING.value,
                    CreatedAt=now,
                    ExpiresAt=grant.expires_at,
                )
            )
            session.commit()
        return grant
