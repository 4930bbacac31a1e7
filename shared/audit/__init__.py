"""The HMAC-chained audit log (ADR-0052 D4/D5): `AuditChain` appends and verifies; writers
need of it only `appender.AuditAppender`."""
