"""FastAPI routers, one module per feature; each operation's Function name is its route's name."""
