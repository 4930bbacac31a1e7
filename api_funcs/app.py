"""The one FastAPI app: the only router, served by uvicorn (`azurebank serve`) and, on Azure, by
one named HTTP Function per operation (api_funcs.functions)."""

from __future__ import annotations

from fastapi import FastAPI

from api_funcs.context import AppContext
from api_funcs.problems import install_problem_handlers
from api_funcs.routes import health, transactions


def create_app(context: AppContext) -> FastAPI:
    app = FastAPI(
        title="AzureBank Functions",
        version="1.0.0",
        openapi_url="/api/openapi.json",
        docs_url=None,
        redoc_url=None,
    )
    app.state.ctx = context
    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(transactions.router)
    return app
