"""Calibration and uncertainty methods for recframe (see DESIGN.md). Methods arrive with their issues."""
