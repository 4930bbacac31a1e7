"""The money path (ADR-0050, docs/money.md): the daily outflow limit under a per-user application
lock, the mint and the transfer, the neighbouring rails, and idempotent replays (ADR-0009)."""
