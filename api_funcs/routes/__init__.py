"""FastAPI routers, one module per feature (api_funcs/app.py includes them)."""
