"""The replay kernel: exact decimal arithmetic, Arrow column helpers."""
