"""The bodies of api_funcs/routes/accounts.py."""

from __future__ import annotations

import uuid

from pydantic import BaseModel

from api_funcs.decimal_json import MoneyOut


class AccountView(BaseModel):
    id: uuid.UUID
    name: str
    balance: MoneyOut
    currency: str
    closed: bool
