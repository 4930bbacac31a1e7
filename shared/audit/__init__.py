"""The HMAC-chained audit log (docs/architecture.md#the-audit-chain)."""
