"""Causal methods for recframe (see docs/architecture.md)."""
