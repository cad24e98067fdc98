"""Secrets kept out of everything envsync shows or saves: the host side's rules, for envsync.

The rules live once, in envsync/hostside/shared.py, which runs alone on hosts too: the
probe redacts what a host sends, and envsync what it prints and writes itself: the
service's command (its --api-key ...), the service's log, error lines.
"""

from __future__ import annotations

from collections.abc import Sequence

from envsync.hostside import shared as _rules

REDACTED = _rules.REDACTED


def text(value: str) -> str:
    """URL credentials, token shapes and `key=value` settings of secrets hidden."""
    return _rules.redact_text(value)


def command(argv: Sequence[str]) -> tuple[str, ...]:
    """A command line as envsync shows and saves it: secret-bearing option values hidden."""
    return tuple(_rules.redact_argv(list(argv)))
