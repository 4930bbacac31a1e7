"""The HMAC-chained audit log (DESIGN §7, ADR-0052 D4/D5): `AuditChain` appends and verifies."""
