"""The money helpers under the name the contract tests, which stay as written, import them by;
they live in tests/support/money.py and tests/support/users.py."""

from tests.support.money import DEPOSIT, INTERNAL, MINT, TRANSFER, WITHDRAWAL, Bank, open_bank
from tests.support.users import PIN, WRONG_PIN

__all__ = [
    "DEPOSIT",
    "INTERNAL",
    "MINT",
    "PIN",
    "TRANSFER",
    "WITHDRAWAL",
    "WRONG_PIN",
    "Bank",
    "open_bank",
]
