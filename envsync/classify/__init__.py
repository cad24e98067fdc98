"""Classify differences by their impact on the service's startup imports (pure).

engine.py holds `classify`; startup.py what the classifier reads the target's startup
with; packages.py, files.py and facts.py judge each kind of difference; truth.py applies
what really happened (the real import check, a watched crash); graph.py walks the import
graph; rules.py reads the rule packs; launched.py is what is asked of it before it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envsync.classify.launched import Startup

if TYPE_CHECKING:
    from envsync.classify.engine import classify
    from envsync.classify.truth import blame, failing_module, finding_for_error, raised_chain

__all__ = ["Startup", "blame", "classify", "failing_module", "finding_for_error", "raised_chain"]

_LAZY = {
    "classify": "envsync.classify.engine",
    "blame": "envsync.classify.truth",
    "failing_module": "envsync.classify.truth",
    "finding_for_error": "envsync.classify.truth",
    "raised_chain": "envsync.classify.truth",
}


def __getattr__(name: str) -> Any:
    """The classifier itself, imported when first used (launched.py says why)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
