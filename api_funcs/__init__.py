"""HTTP: the FastAPI app and one named HTTP-triggered Function per operation."""
