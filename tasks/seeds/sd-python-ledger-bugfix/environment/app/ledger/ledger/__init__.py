"""A tiny CSV ledger: parse transactions and report account balances."""
