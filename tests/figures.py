"""Figures the test suite measures for the README's Reliability section.

Tests add to them as they run; the terminal summary prints them (tests/conftest.py), so
the README's numbers are reproduced by every full run rather than committed as a file.
"""

from __future__ import annotations

from collections import defaultdict

FIGURES: defaultdict[str, dict[str, float]] = defaultdict(dict)


def add(section: str, name: str, n: float = 1) -> None:
    """Count `n` more of `name` (a fault survived, inputs tried, a secret searched)."""
    FIGURES[section][name] = FIGURES[section].get(name, 0) + n


def put(section: str, name: str, value: float) -> None:
    FIGURES[section][name] = value


def lines() -> list[str]:
    out = []
    for section in sorted(FIGURES):
        values = FIGURES[section]
        out.append(f"{section}: {sum(values.values()) if section != 'fleet' else ''}".rstrip())
        for name in sorted(values):
            value = values[name]
            shown = (
                f"{value:.1f}"
                if isinstance(value, float) and not value.is_integer()
                else f"{value:g}"
            )
            out.append(f"  {name}: {shown}")
    return out
