"""The bodies of api_funcs/routes/accounts.py."""

from __future__ import annotations

import uuid
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from api_funcs.decimal_json import MoneyOut, cents


class AccountView(BaseModel):
    # Read off a shared.accounts AccountSummary, its balance to the cent.
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    balance: Annotated[MoneyOut, AfterValidator(cents)]
    currency: str
    closed: bool
