"""The money path (ADR-0050, docs/money.md): daily limit, mint, transfer, rails, idempotency."""
