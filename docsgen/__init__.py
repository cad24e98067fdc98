"""Generators of envsync's documentation from its code: the CLI reference, schemas, man page."""
