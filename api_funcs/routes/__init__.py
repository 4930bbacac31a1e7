"""FastAPI routers, one module per feature. An operation's Function name, route name and
operationId are one name: its handler's, unless the route is given one (`operation_id`)."""

from fastapi.routing import APIRoute


def operation_id(route: APIRoute) -> str:
    return route.name
