"""What every report format shares: the view it is asked for, and the protocol it meets.

A format is a module of this package with `render(reports, view)`, and, where it has a
fleet view, `render_fleet(fleet, view)` (report/__init__.py keeps the registry).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from envsync.model.vocab import FAIL_ON_DEFAULT, Severity

if TYPE_CHECKING:
    from envsync.model.findings import Report
    from envsync.report.fleet import Fleet

# The table's width when no terminal says one (a pipe, a file, a library caller): stable,
# and one that a docs page, a review tool and an 80-column-plus-margin terminal show whole.
DEFAULT_WIDTH = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class View:
    """How a report is asked for: the table's colour and width, JUnit's and Prometheus'
    failing severity. Each format reads what it needs of it."""

    color: bool = False
    width: int = DEFAULT_WIDTH
    fail_on: Severity = FAIL_ON_DEFAULT


class Renderer(Protocol):
    """A report format: reports in, its text out."""

    def render(self, reports: Sequence[Report], view: View) -> str: ...


class FleetRenderer(Renderer, Protocol):
    """A format with a fleet view: several targets folded into classes."""

    def render_fleet(self, fleet: Fleet, view: View) -> str: ...
