"""The corpus as a table, for the docs' accuracy page: each real-report case, what a real
start or import did on each side, and what envsync said of the culprit.

Corpus tests record a row from what they observed (the real run's outcome, envsync's
severities), never from what the case expects; the rows travel from xdist workers to the
controller as the figures do (tests/conftest.py), and a whole run of the suite writes them
to docs/generated/corpus.json (`ENVSYNC_WRITE_CORPUS=1` forces it for a partial run), which
docsgen/figures.py renders.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from docsgen.figures import CORPUS as CORPUS_FILE
from docsgen.figures import NOT_FATAL, agrees
from envsync.model.vocab import SEVERITIES

FORCE_ENV = "ENVSYNC_WRITE_CORPUS"
_IN_PATH = re.compile(r" \(/[^()]*\)")
_PATH = re.compile(r"/(?:[^\s/:'\"()]+/)+(?=[^\s/:'\"()]+)")
__all__ = ["CORPUS_FILE", "NOT_FATAL", "agrees", "part", "record"]
FIELDS = (
    "report",
    "culprit",
    "reference",
    "target",
    "static",
    "import_check",
    "expected",
    "test",
)

ROWS: dict[str, dict[str, str | None]] = {}
# Parts of a row seen by the tests of a case that observe one thing each (a real import,
# the static diff, the import check): the row is recorded when the last part comes.
_PARTS: dict[str, dict[str, str | None]] = {}


def record(
    case: str,
    *,
    report: str,
    culprit: str,
    reference: str,
    target: str,
    static: str,
    import_check: str | None,
    expected: str,
    test: str,
) -> None:
    """One case's row: `reference` and `target` what a real start or import did on that
    side, in a few words from the run; `static` and `import_check` the culprit's severity
    without and with --import-check (None: the test did not run it); `expected` the
    severity the test holds the last of them to."""
    assert static in SEVERITIES and import_check in (*SEVERITIES, None), (static, import_check)
    assert expected in (*SEVERITIES, NOT_FATAL), expected
    ROWS[case] = {
        "report": report,
        "culprit": culprit,
        "reference": reference,
        "target": target,
        "static": static,
        "import_check": import_check,
        "expected": expected,
        "test": test,
    }


def part(case: str, **seen: str | None) -> None:
    """Some of a case's row (`record`'s keywords), from one test of several: recorded once
    every field is there (a test left out of the run leaves the case out of the table)."""
    unknown = set(seen) - set(FIELDS)
    assert not unknown, unknown
    parts = _PARTS.setdefault(case, {})
    parts.update(seen)
    if set(parts) == set(FIELDS):
        record(case, **parts)  # type: ignore[arg-type]  # the parts are record's keywords, checked against FIELDS above


def outcome(error: str | None, *, ok: str = "imports") -> str:
    """A real run's outcome in a few words: `ok`, or the exception's last line without the
    paths of this run's venvs that Python puts in it (`from 'y' (/tmp/.../y/__init__.py)`
    is left out, `/tmp/.../ops.so: undefined symbol` shortened to the file's name)."""
    return ok if error is None else _PATH.sub("", _IN_PATH.sub("", error))


def current_test() -> str:
    """The node id of the test running now, as pytest sets it."""
    return os.environ["PYTEST_CURRENT_TEST"].rpartition(" ")[0]


def export() -> list[dict[str, str | None]]:
    """This process's rows, for the controller (a worker's, under xdist)."""
    return [{"case": case, **row} for case, row in ROWS.items()]


def merge(rows: list[dict[str, str | None]]) -> None:
    """Another process's rows (`export`) taken into this one's."""
    for row in rows:
        fields = dict(row)
        case = fields.pop("case")
        assert isinstance(case, str), row
        ROWS[case] = fields


def write(path: Path, command: str) -> None:
    """The rows, sorted by case, with where and by what they were observed."""
    from tests.figures import _write_json, provenance

    rows = [{"case": case, **ROWS[case]} for case in sorted(ROWS)]
    _write_json(path, {**provenance(command), "rows": rows})
