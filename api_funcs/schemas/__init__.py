"""Every body the OpenAPI document publishes, in the module named for its feature's router, so a
feature's app builds only its own (docs/architecture.md); fields.py holds the shared field types."""
