"""Ground truth over what was read: an exception that really importing the startup modules
raised, or that a crash the smoke test watched ended with, raises the finding of the
difference it comes from to fatal.

Whatever the exception, it is traced to a difference the same way (`blame`): first the
modules its messages name ("No module named 'x'", "cannot import name 'N' from 'x'",
"operator x::op"), then the code that raised it, each frame mapped to the distribution
whose files hold it, the raising frame first and the lazy-import hooks that only pass an
import on last; the exceptions that led to it (`__cause__`, `__context__`) are read
innermost first, where the real cause is. The import check also imports the same modules
on the reference: when they fail there too, no difference explains the failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from packaging.utils import canonicalize_name

from envsync.classify import unexplained
from envsync.classify.dependents import unmet
from envsync.classify.startup import import_names
from envsync.model.environment import Distribution, Frame, ImportOutcome, Raised, Snapshot
from envsync.model.findings import Evidence, Finding
from envsync.model.vocab import PACKAGE_KINDS

# A module a message names: the import errors' own words, and torch's operator
# registry ("operator torchvision::nms does not exist": the torchvision namespace).
_NAMED = (
    re.compile(r"No module named '([^']+)'"),
    re.compile(r"cannot import name '[^']+' from '([^']+)'"),
    re.compile(r"\boperator ([A-Za-z_]\w*)::\w+"),
    re.compile(r"\b([A-Za-z_]\w*)::\w+ (?:does not exist|is not registered)"),
    # transformers' lazy module: a submodule or a class; only a distribution's name counts
    re.compile(r"Could not import module '([^']+)'"),
)
# Frames that only pass an import on (lazy modules' hooks, a registry's import by name):
# where the error went through, not where it came from. Looked at after the others.
_PASSING = re.compile(r"\b(?:import_module|__import__|exec_module|_call_with_frames_removed)\(")
_PASSING_FUNCTIONS = frozenset(("__getattr__", "_get_module", "_load", "load_module"))


def failing_module(message: str) -> str | None:
    """The top-level module an import error is about ("No module named 'x.y'": x)."""
    names = named_modules(message, import_errors_only=True)
    return names[0] if names else None


def named_modules(message: str, *, import_errors_only: bool = False) -> list[str]:
    """The top-level modules a message names, in the order it names them."""
    out: list[str] = []
    for pattern in _NAMED[:2] if import_errors_only else _NAMED:
        for match in pattern.finditer(message):
            top = match.group(1).partition(".")[0]
            if top not in out:
                out.append(top)
    return out


def finding_for_error(
    findings: Sequence[Finding], message: str, reference: Snapshot, target: Snapshot
) -> int | None:
    """The index of the first package finding whose distribution provides the module an
    import error names, or None."""
    module = failing_module(message)
    return None if module is None else _finding_for_module(findings, module, reference, target)


def _finding_for_module(
    findings: Sequence[Finding], module: str, reference: Snapshot, target: Snapshot
) -> int | None:
    for i, finding in enumerate(findings):
        if finding.kind not in PACKAGE_KINDS:
            continue
        names = import_names(finding.subject, reference, target)
        if module in names or module == finding.subject.replace("-", "_"):
            return i
    return None


# ---------------------------------------------------------------------------------------
# Frames to distributions


@dataclass(frozen=True, slots=True, kw_only=True)
class Place:
    """A frame's file as one distribution of the host holds it."""

    dist: Distribution
    key: str  # the file as the distribution's RECORD names it: transformers/image_utils.py

    @property
    def owner(self) -> str:
        return f"{self.dist.display_name} {self.dist.version}"


def place_of(snap: Snapshot, file: str) -> Place | None:
    """The distribution whose files hold `file` on this host (its RECORD, else its
    top-level folder or module under its location, or its source tree), or None: the
    standard library, a frozen module, a file no distribution installs."""
    path = file.replace("\\", "/")
    found: Place | None = None
    for dist in snap.distributions:
        for key in _keys(dist, path):
            if dist.files is not None and key in dist.files:
                return Place(dist=dist, key=key)
            top = key.partition("/")[0]
            top = top.removesuffix(".py") if "/" not in key else top
            if found is None and top in dist.top_level:
                found = Place(dist=dist, key=key)
    return found


def _keys(dist: Distribution, path: str) -> Iterator[str]:
    if dist.location and path.startswith(dist.location.rstrip("/") + "/"):
        yield path[len(dist.location.rstrip("/")) + 1 :]
    if dist.source is not None:
        for name, where in dist.source.packages.items():
            where = where.rstrip("/")
            if path == where or path.startswith(where + "/"):
                rest = path[len(where) :].lstrip("/")
                yield f"{name}/{rest}" if rest else where.rpartition("/")[2]


def where_raised(snap: Snapshot, frames: Sequence[Frame]) -> tuple[Frame, Place] | None:
    """The innermost frame of installed code (not the standard library's)."""
    for frame in reversed(frames):
        place = place_of(snap, frame.file)
        if place is not None:
            return frame, place
    return None


def _owners(chain: Sequence[Raised], target: Snapshot) -> list[str]:
    """The distributions of a chain's frames ("name version"), innermost first."""
    out: list[str] = []
    for raised in reversed(chain):
        for frame in reversed(raised.frames):
            place = place_of(target, frame.file)
            if place is not None and place.owner not in out:
                out.append(place.owner)
    return out


def shown_at(frame: Frame, place: Place | None) -> str:
    """`transformers/image_utils.py:55 (transformers 4.57.6)`."""
    file = place.key if place else frame.file
    at = f"{file}:{frame.line}" if frame.line else file
    return f"{at} ({place.owner})" if place else at


# ---------------------------------------------------------------------------------------
# An exception to the finding of the difference it comes from


@dataclass(frozen=True, slots=True, kw_only=True)
class Blame:
    """The finding an exception is traced to, and how."""

    index: int
    how: str  # "the message names torchvision", "raised in transformers 4.54.0 (...)"
    frame: Frame | None = None  # the frame that ties them, when a frame did
    place: Place | None = None


def _passing(frame: Frame) -> bool:
    return frame.function in _PASSING_FUNCTIONS or bool(frame.code and _PASSING.search(frame.code))


def blame(
    findings: Sequence[Finding],
    chain: Sequence[Raised],
    reference: Snapshot,
    target: Snapshot,
) -> Blame | None:
    """The difference an exception (with the exceptions that led to it: `chain`, the one
    seen first, then each one's cause) comes from, or None when no finding explains it.

    In this order, the first with a finding wins: the modules the messages name; the
    raising frame of each exception, innermost first; every other frame, innermost
    first, the lazy-import hooks that only pass an import on last.
    """
    for raised in chain:
        for module in named_modules(raised.message):
            i = _finding_for_module(findings, module, reference, target)
            if i is not None:
                what = f"{raised.exception}: {raised.message}"
                return Blame(index=i, how=f"`{what}` names {module}")
    inner_first = list(reversed(chain))
    tiers: list[list[tuple[Raised, Frame, Place, bool]]] = [[], [], []]
    for raised in inner_first:
        placed = [
            (frame, place)
            for frame in reversed(raised.frames)
            if (place := place_of(target, frame.file)) is not None
        ]
        for n, (frame, place) in enumerate(placed):
            tier = 2 if _passing(frame) else (0 if n == 0 else 1)
            tiers[tier].append((raised, frame, place, n == 0))
    for raised, frame, place, innermost in (item for tier in tiers for item in tier):
        i = _finding_for_place(findings, place)
        if i is not None:
            what = f"{raised.exception}: {raised.message}"
            via = "was raised in" if innermost else "went through"
            return Blame(
                index=i, how=f"`{what}` {via} {shown_at(frame, place)}", frame=frame, place=place
            )
    # The code that raised is the same on both hosts: what it requires may not be.
    for raised, frame, place, innermost in (item for tier in tiers for item in tier):
        for i, text, have in _violated(findings, place.dist, target):
            what = f"{raised.exception}: {raised.message}"
            via = "was raised in" if innermost else "went through"
            return Blame(
                index=i,
                how=f"`{what}` {via} {shown_at(frame, place)}, and {place.owner} requires "
                f"{text}, which the target's {have} violates",
                frame=frame,
                place=place,
            )
    for raised in chain:
        for word in _WORD.findall(raised.message):
            i = _finding_for_module(findings, word, reference, target)
            if i is None:
                i = next(
                    (
                        n
                        for n, f in enumerate(findings)
                        if f.kind in PACKAGE_KINDS and f.subject == canonicalize_name(word)
                    ),
                    None,
                )
            if i is not None:
                what = f"{raised.exception}: {raised.message}"
                return Blame(index=i, how=f"`{what}` names {word}, which differs")
    return None


_WORD = re.compile(r"(?<![\w.-])([A-Za-z_][\w-]*)")


def _violated(
    findings: Sequence[Finding], dist: Distribution, target: Snapshot
) -> Iterator[tuple[int, str, str]]:
    """The package findings of what `dist` requires and the target violates: (index, the
    requirement, what the target has)."""
    for text, req, have in unmet(dist, target):
        name = canonicalize_name(req.name)
        i = next(
            (n for n, f in enumerate(findings) if f.kind in PACKAGE_KINDS and f.subject == name),
            None,
        )
        if i is not None:
            yield i, text, (f"{have.display_name} {have.version}" if have else f"lack of {name}")


def _finding_for_place(findings: Sequence[Finding], place: Place) -> int | None:
    """The finding of the distribution that holds a frame's file, or of that very file
    (a watched package's patched file)."""
    for i, finding in enumerate(findings):
        if finding.kind in PACKAGE_KINDS and finding.subject == place.dist.name:
            return i
        if finding.kind == "file" and finding.subject == place.key:
            return i
    return None


# ---------------------------------------------------------------------------------------
# The real import check


def _chain_of(outcome: ImportOutcome) -> tuple[Raised, ...]:
    top = Raised(
        exception=outcome.exception or "Exception",
        message=outcome.message or "",
        frames=outcome.frames
        or ((Frame(file=outcome.file, line=outcome.line),) if outcome.file else ()),
    )
    return (top, *outcome.chain)


def _on_reference(
    module: str, reference_outcomes: Sequence[ImportOutcome] | None
) -> tuple[str, ImportOutcome | None]:
    """clean | fails | unchecked, and the reference's failing outcome."""
    if reference_outcomes is None:
        return "unchecked", None
    for outcome in reference_outcomes:
        if outcome.module == module:
            return ("clean", None) if outcome.ok else ("fails", outcome)
    failed = next((o for o in reference_outcomes if not o.ok), None)
    return ("fails", failed) if failed is not None else ("unchecked", None)


def apply_import_check(
    findings: list[Finding],
    outcomes: Sequence[ImportOutcome],
    reference: Snapshot,
    target: Snapshot,
    notes: list[str],
    reference_outcomes: Sequence[ImportOutcome] | None = None,
) -> list[Finding]:
    """The target's failing import raises the finding it comes from to fatal, with its
    exception and frame, when the reference imports the same modules cleanly (or could
    not be imported: a lock or snapshot file). `reference_outcomes`: the same modules
    imported on the reference (None: not done)."""
    out = list(findings)
    for outcome in outcomes:
        if outcome.ok:
            continue
        chain = _chain_of(outcome)
        raised = where_raised(target, chain[0].frames)
        frame, place = raised if raised else (None, None)
        text = f"{outcome.exception}: {outcome.message}"
        at = f" at {shown_at(frame, place)}" if frame else ""
        detail = f"import {outcome.module}: {text}"
        state, theirs = _on_reference(outcome.module, reference_outcomes)
        found = blame(out, chain, reference, target)
        if state == "fails":
            assert theirs is not None
            note, out = _fails_on_both(out, outcome, theirs, found, reference, text, at, detail)
            notes.append(note)
            continue
        if found is None:
            note, out = _unexplained(out, outcome, chain, state, reference, target, text, at)
            notes.append(note)
            continue
        frame = found.frame or frame
        place = found.place if found.frame else place
        evidence = Evidence(
            source="import-check",
            detail=detail,
            file=frame.file if frame else outcome.file,
            line=frame.line if frame else outcome.line,
            statement=frame.code if frame else None,
            context=f"{found.how}"
            + ("; the same modules import cleanly on the reference" if state == "clean" else ""),
        )
        finding = out[found.index]
        if finding.severity != "fatal":
            finding = _raised_to_fatal(
                finding, outcome, found, frame, place, state, reference, text
            )
        out[found.index] = replace(finding, evidence=(evidence, *finding.evidence))
    return out


def _fails_on_both(
    findings: list[Finding],
    outcome: ImportOutcome,
    theirs: ImportOutcome,
    found: Blame | None,
    reference: Snapshot,
    text: str,
    at: str,
    detail: str,
) -> tuple[str, list[Finding]]:
    """The note on an import that fails on the reference too, and the findings with its
    error as evidence where the reference fails another way (never as the reason)."""
    same = (theirs.exception, theirs.message) == (outcome.exception, outcome.message)
    how = (
        " the same way"
        if same
        else f" ({theirs.exception}: {theirs.message}, importing {theirs.module})"
    )
    note = (
        f"import check: importing {outcome.module} fails on the target ({text}{at}) "
        f"and on the reference {reference.host} too{how}: "
        + (
            "not caused by a difference from the reference"
            if same or found is None
            else f"the reference does not start either, so envsync does not rate "
            f"{findings[found.index].subject} fatal for it"
        )
    )
    if found is None or same:
        return note, findings
    # Another error on the reference: this one is still the difference's,
    # shown as evidence, never as the reason startup fails.
    out = list(findings)
    finding = out[found.index]
    out[found.index] = replace(
        finding,
        evidence=(
            *finding.evidence,
            Evidence(source="import-check", detail=detail, context=found.how),
        ),
    )
    return note, out


def _unexplained(
    findings: list[Finding],
    outcome: ImportOutcome,
    chain: Sequence[Raised],
    state: str,
    reference: Snapshot,
    target: Snapshot,
    text: str,
    at: str,
) -> tuple[str, list[Finding]]:
    """The note on a failing import that no difference explains, and the findings with
    each difference startup imports before it marked at least unknown."""
    candidates = unexplained.before(findings, chain, target)
    note = (
        f"import check: importing {outcome.module} on the target fails: {text}{at}; "
        + (
            f"it imports cleanly on the reference {reference.host}, but "
            if state == "clean"
            else ""
        )
        + "no difference from the reference explains it ("
        + unexplained.tried(_owners(chain, target))
        + (
            "; each difference startup imports before it is at least unknown: "
            + ", ".join(findings[i].subject for i, _ in candidates)
            if candidates
            else "; startup imports no other difference before it"
        )
        + ")"
    )
    return note, unexplained.mark(findings, candidates, f"importing {outcome.module} fails: {text}")


def _raised_to_fatal(
    finding: Finding,
    outcome: ImportOutcome,
    found: Blame,
    frame: Frame | None,
    place: Place | None,
    state: str,
    reference: Snapshot,
    text: str,
) -> Finding:
    """The finding a failing import is traced to, raised to fatal by it."""
    ref_words = (
        f"on the reference {reference.host} they import cleanly"
        if state == "clean"
        else f"the reference {reference.host} was not imported (a {reference.source})"
    )
    where = f" at {shown_at(frame, place)}" if frame else ""
    return replace(
        finding,
        severity="fatal",
        decided_by="import-check",
        reason=f"{finding.subject}: importing {outcome.module} on the target fails: "
        f"{text}{where} ({found.how}); {ref_words}.",
    )


# ---------------------------------------------------------------------------------------
# A crash the smoke test watched


def raised_chain(
    exception: str, frames: Sequence[Frame] = (), chain: Sequence[Raised] = ()
) -> list[Raised]:
    """A crash as a chain of exceptions: the one it ended with ("Type: message", as the
    log printed it), then what led to it."""
    kind, _, message = exception.partition(": ")
    return [Raised(exception=kind, message=message, frames=tuple(frames)), *chain]


def apply_crash(
    findings: list[Finding], target: Snapshot, reference: Snapshot, notes: list[str]
) -> list[Finding]:
    """A crash envsync watched on the target raises the finding it comes from to fatal."""
    crash = target.crash
    if crash is None:
        return findings
    when = f" at {crash.at}" if crash.at else ""
    found = blame(
        findings, raised_chain(crash.exception, crash.frames, crash.chain), reference, target
    )
    if found is None:
        notes.append(
            f"the service crashed on {target.host}{when} with {crash.exception}; "
            "no difference from the reference explains it"
        )
        return findings
    finding = findings[found.index]
    evidence = Evidence(
        source="crash",
        detail=f"the service crashed on {target.host}{when}: {crash.exception}",
        file=found.frame.file if found.frame else None,
        line=found.frame.line if found.frame else None,
        statement=crash.line,
        context=f"watched by envsync's smoke test; kept until the service is next ready; "
        f"{found.how}",
    )
    out = list(findings)
    out[found.index] = replace(
        finding,
        severity="fatal",
        decided_by="crash",
        reason=f"the service crashed on {target.host}{when} with {crash.exception}; "
        + finding.reason,
        evidence=(evidence, *finding.evidence),
    )
    return out
