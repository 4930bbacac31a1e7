"""Conditional writes: an UPDATE or DELETE whose WHERE is the guard (a concurrency token, a state,
a limit), judged by how many rows it matched."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import CursorResult, Delete, Update
from sqlalchemy.orm import Session


def rows_matched(
    session: Session, statement: Update | Delete, params: Mapping[str, Any] | None = None
) -> int:
    """Execute `statement` in the session's transaction, with `params` for its named bind
    parameters; how many rows its WHERE matched."""
    return int(cast(CursorResult[Any], session.execute(statement, params)).rowcount)
