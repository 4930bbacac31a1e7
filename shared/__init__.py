"""The shared package: domain, persistence and protocols. No Azure Functions types in here."""
