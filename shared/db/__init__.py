"""Persistence: the schema, its column types, engines for the three dialects, the unit of work."""
