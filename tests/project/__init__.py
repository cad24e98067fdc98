"""Tests of envsync as a whole, not of one package: each other folder of tests/ mirrors a
package of envsync/ (tests/compare/ tests envsync/compare/), and what belongs to none goes
here. The docs against the code (test_docs*, the figures, the corpus table's page), the
tree's own rules (test_architecture, test_exhaustive, test_typing, test_layout), the
built-in example, the quick start and envsync as a library, the top-level modules
(documents, errors, exitcodes, seal, redact, exhaustive) where no package's tests hold
them, and the promises every command keeps across packages, end to end: no secret
written, no traceback on hostile input, a full disk, a fleet's load. One folder, so that
tests/ has no flat test file and a reader finds the whole-project checks together."""
