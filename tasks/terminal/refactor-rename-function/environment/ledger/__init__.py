"""A tiny double-entry-ish ledger."""
