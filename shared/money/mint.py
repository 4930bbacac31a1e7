"""The mint issues a transfer's authorization, refusing in the rung table's order
(docs/decisions.md#adr-0050-d41): account, payee, day, then the PIN, so an over-limit mint with a
wrong PIN answers 422 and spends no attempt. It checks no funds and reserves nothing."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from sqlalchemy import Engine

from shared.clock import Clock
from shared.db.schema import AuthorizationStatus, TransferAuthorization
from shared.db.uow import commit_unit, unit_of_work, writing_unit_of_work
from shared.money.accounts import own_open_account
from shared.money.daily_limit import DailyOutflowLimit
from shared.money.payees import resolve_payee
from shared.money.ports import PinCheck
from shared.money.refusals import MintOutcomeUnknown


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


@dataclass(frozen=True, eq=False)
class TransferMint:
    engine: Engine
    clock: Clock
    limit: DailyOutflowLimit
    pin_check: PinCheck
    authorization_seconds: int = field(kw_only=True)

    def mint(self, user_id: str, request: MintRequest) -> TransferAuthorizationGrant:
        # The rungs before the PIN read only; the PIN check commits its own count, so nothing of
        # ours may hold a write transaction (on SQLite, the database) while it runs.
        with unit_of_work(self.engine) as session:
            own_open_account(session, user_id, request.account_id)
            resolve_payee(session, user_id, request.recipient_azure_tag)
            self.limit.check(session, user_id, request.amount, self.clock.now())
        self.pin_check(user_id, request.pin)
        now = self.clock.now()
        expires = now + timedelta(seconds=self.authorization_seconds)
        grant = TransferAuthorizationGrant(
            uuid.uuid4(), expires, request.account_id, request.recipient_azure_tag, request.amount
        )
        with writing_unit_of_work(self.engine) as session:
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
            commit_unit(session, unknown=MintOutcomeUnknown)
        return grant
