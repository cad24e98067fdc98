"""envsync: find, explain and repair environment drift between GPU inference hosts."""

__version__ = "0.1.0"
