"""FastAPI dependencies shared by the routers: the host's services, the caller, the audit chain."""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy import select

from shared.bootstrap import Services
from shared.db.exact import exact_equals
from shared.db.schema import AspNetUser
from shared.db.uow import unit_of_work
from shared.errors import Unauthenticated
from shared.identity.tokens import InvalidToken
from shared.settings import SettingsError

log = logging.getLogger("azurebank.api")


def get_services(request: Request) -> Services:
    return request.app.state.ctx.compose()


HostServices = Annotated[Services, Depends(get_services)]


# A security scheme, so the document says which operations need the caller (docs/security.md);
# auto_error=False keeps the refusal ours: 401 UNAUTHENTICATED problem+json, WWW-Authenticate.
BEARER = HTTPBearer(
    scheme_name="bearer",
    bearerFormat="JWT",
    description="A JWT whose `sub` is the caller's AspNetUsers.Id.",
    auto_error=False,
)


def _refused() -> Unauthenticated:
    # RFC 6750 §3's challenge, and no word of why: a prober learns nothing from the refusal.
    return Unauthenticated(headers={"WWW-Authenticate": "Bearer"})


def current_user_id(
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)],
    services: HostServices,
) -> str:
    """The caller from a verified bearer token, else a 401 that says not why. Sync: JWKS blocks."""
    if credentials is None:
        raise _refused()
    try:
        # The verifier refuses any `sub` no database can store and compare (claims.user_id).
        claimed = services.tokens.verify(credentials.credentials)
    except InvalidToken:
        raise _refused() from None
    with unit_of_work(services.engine) as session:
        # Exact on SQL Server too, whose collation would match another case (docs/database.md).
        stored = session.scalar(select(AspNetUser.Id).where(exact_equals(AspNetUser.Id, claimed)))
    if stored is None:
        raise _refused()
    return stored


CurrentUser = Annotated[str, Depends(current_user_id)]


def require_audit_chain(_: CurrentUser, services: HostServices) -> None:
    """503 AUDIT_CHAIN_UNAVAILABLE while Audit__ChainKey is unset (the log line names the key and
    the fix, never a value); after the caller's check, so no token is still 401."""
    try:
        services.require_audit_chain()
    except SettingsError as exc:
        # Imported here: health and accounts, which read no chain, never load it.
        from shared.audit.chain import AuditChainUnavailable

        log.error("%s", exc)
        raise AuditChainUnavailable from None


AUDITED = Depends(require_audit_chain)
