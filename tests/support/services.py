"""The services a suite needs: a missing one is a skip locally and a failure under CI=true, but
SQL Server, opt-in, stays a skip."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Opt-in (docs/database.md): a SQLAlchemy URL of a SQL Server on which this suite may create
# databases.
SQLSERVER_URL = os.environ.get("AZUREBANK_TEST_SQLSERVER", "")
SQLSERVER_SKIP = "AZUREBANK_TEST_SQLSERVER is not set (opt-in: a SQL Server URL)"


def service_missing(what: str) -> None:
    """Skip locally; fail under CI, where every service must be there."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{what} is not available, and CI=true requires every suite to run")
    pytest.skip(f"{what} is not available")


def sqlserver_param(reason: str | None = None) -> Any:
    """The `sqlserver` parameter of a database fixture: marked, and skipped (never failed, even
    under CI=true) while AZUREBANK_TEST_SQLSERVER is unset, or always, for `reason`, by a test that
    cannot run there."""
    marks = [pytest.mark.sqlserver]
    if reason is not None:
        marks.append(pytest.mark.skip(reason=reason))
    else:
        marks.append(pytest.mark.skipif(not SQLSERVER_URL, reason=SQLSERVER_SKIP))
    return pytest.param("sqlserver", marks=marks)
