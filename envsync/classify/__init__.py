"""Classify differences by their impact on the service's startup imports (pure).

engine.py holds `classify`; startup.py what the classifier reads the target's startup
with; packages.py, files.py and facts.py judge each kind of difference; truth.py applies
what really happened (the real import check, a watched crash); graph.py walks the import
graph; rules.py reads the rule packs.
"""

from envsync.classify.engine import classify
from envsync.classify.startup import Startup
from envsync.classify.truth import blame, failing_module, finding_for_error, raised_chain

__all__ = ["Startup", "blame", "classify", "failing_module", "finding_for_error", "raised_chain"]
