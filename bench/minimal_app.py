"""The cold-start bench's minimal app on the same frameworks (bench/cold_start.py deploys it as
function_app.py): what a team would write instead, all imported at indexing. FastAPI behind
func.AsgiMiddleware, `GET /api/health`, and one authenticated route, `GET /api/accounts`: an
HS256 bearer checked with PyJWT (the app's local issuer and audience), the caller's accounts read
with a three-column SQLAlchemy ORM model of the app's table, pydantic out."""

import os
import uuid
from decimal import Decimal
from typing import Annotated

import azure.functions as func
import jwt
from fastapi import Depends, FastAPI, Header, HTTPException
from pydantic import BaseModel
from sqlalchemy import Numeric, String, Uuid, create_engine, select
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

# App settings keep their own spelling (Section__Key), as the real app reads them.
engine = create_engine(os.environ["Database__Url"])  # noqa: SIM112
api = FastAPI()


class Base(DeclarativeBase):
    pass


class Account(Base):
    __tablename__ = "Accounts"
    Id: Mapped[uuid.UUID] = mapped_column(Uuid, primary_key=True)
    UserId: Mapped[str] = mapped_column(String(450))
    Balance: Mapped[Decimal] = mapped_column(Numeric(18, 2))


class AccountOut(BaseModel):
    id: uuid.UUID
    balance: Decimal


def caller(authorization: Annotated[str, Header()] = "") -> str:
    try:
        claims = jwt.decode(
            authorization.removeprefix("Bearer "),
            os.environ["Auth__SigningKey"],  # noqa: SIM112
            algorithms=["HS256"],
            audience="azurebank",
            issuer="azurebank-local",
        )
    except jwt.InvalidTokenError:
        raise HTTPException(401) from None
    return str(claims["sub"])


@api.get("/api/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


@api.get("/api/accounts")
def accounts(user_id: Annotated[str, Depends(caller)]) -> list[AccountOut]:
    with Session(engine) as session:
        rows = session.scalars(select(Account).where(Account.UserId == user_id))
        return [AccountOut(id=a.Id, balance=a.Balance) for a in rows]


asgi = func.AsgiMiddleware(api)
app = func.FunctionApp()


@app.function_name("health")
@app.route(route="health", methods=["GET"], auth_level=func.AuthLevel.ANONYMOUS)
async def health_function(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return await asgi.handle_async(req, context)


@app.function_name("accounts")
@app.route(route="accounts", methods=["GET"], auth_level=func.AuthLevel.FUNCTION)
async def accounts_function(req: func.HttpRequest, context: func.Context) -> func.HttpResponse:
    return await asgi.handle_async(req, context)
