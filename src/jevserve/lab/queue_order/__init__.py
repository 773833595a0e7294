"""Experiments built on the simulator."""
