"""The e2e helpers under the name the CLI contract test, which stays as written, imports them by;
they live in tests/support/served.py and tests/support/checkout.py."""

from tests.support.checkout import REPO as ROOT
from tests.support.served import CLI, run_cli

__all__ = ["CLI", "ROOT", "run_cli"]
