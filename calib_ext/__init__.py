"""Calibration and uncertainty methods for recframe (see docs/architecture.md)."""
