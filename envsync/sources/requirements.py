"""A pinned requirements file (parsed with pip-api) as a partial reference snapshot.

A requirements file may include others (`-r FILE`, `-c FILE`): only files inside its own
folder, checked before anything is parsed, so that no line of a file from elsewhere
(`-r /etc/shadow`) is read, let alone echoed in an error.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NoReturn

from envsync.errors import RequirementsError
from envsync.model.environment import Distribution, Snapshot, Unavailable

_NOT_RECORDED = Unavailable(reason="not recorded in a requirements file")


def _raise_instead_of_exiting() -> None:
    """pip-api reads option lines (`-e`, `-i` …) with one module-level argparse parser,
    which prints its usage or help and exits the process on `-h` or on `-e` without a
    value: make that parser raise PipError instead, quietly."""
    from pip_api import _parse_requirements
    from pip_api.exceptions import PipError

    parser = getattr(_parse_requirements, "parser", None)
    if parser is None:
        return

    def error(message: str) -> NoReturn:
        raise PipError(message)

    def leave(status: int = 0, message: str | None = None) -> NoReturn:
        raise PipError((message or "").strip() or "an option line asks for help (-h)")

    parser.error = error
    parser.exit = leave
    parser.print_help = lambda file=None: None


# What a requirement line starts with (a name, then a specifier, extras, a marker or a URL):
# a line of anything else is never quoted back (it may be a line of a file that is not a
# requirements file at all).
_REQUIREMENT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\s*(?:$|[\[(=<>!~@;,])")
_INCLUDE = re.compile(r"^\s*(?:-[rc]\s*|--(?:requirement|constraint)(?:\s*=\s*|\s+))(?P<path>\S+)")


def _check_includes(path: Path, folder: Path, seen: set[Path]) -> None:
    """Every file `path` includes lies in `folder` (the top file's), transitively;
    RequirementsError naming the line otherwise, before any of its content is read."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError as e:
        from envsync.documents import not_found

        raise RequirementsError(not_found(path, "requirements file")) from e
    except OSError as e:
        raise RequirementsError(f"{path}: cannot read requirements file: {e.strerror}") from e
    for number, raw in enumerate(text.replace("\\\n", "").splitlines(), 1):
        line = re.sub(r"(^|\s)#.*", "", raw).strip()
        if not line:
            continue
        match = _INCLUDE.match(line)
        if match is None:
            if not line.startswith("-") and not _REQUIREMENT.match(line):
                raise RequirementsError(
                    f"{path}: line {number} is not a requirement (not shown: the file may "
                    "not be a requirements file at all)"
                )
            continue
        named = match.group("path")
        target = (path.parent / named).resolve()
        if "://" in named or not target.is_relative_to(folder):
            raise RequirementsError(
                f"{path}: line {number}: includes {named}, which is outside {folder}: "
                "refused (nothing of it was read)",
                tip="a requirements file may include only files in its own folder",
            )
        if target not in seen:
            seen.add(target)
            if target.is_file():
                _check_includes(target, folder, seen)


def read_requirements(path: Path) -> Snapshot:
    """Each `NAME==VERSION` line becomes a distribution; anything unpinned is an error."""
    import pip_api  # slow to import (it asks pip for its version): only when needed
    from packaging.utils import canonicalize_name
    from pip_api.exceptions import PipError

    _raise_instead_of_exiting()
    folder = path.resolve().parent
    _check_includes(path.resolve(), folder, {path.resolve()})
    try:
        parsed = pip_api.parse_requirements(path)
    except SystemExit as e:  # pip-api's parser, if it could not be told to raise
        raise RequirementsError(f"{path}: invalid requirements file: an option line") from e
    except (OSError, UnicodeDecodeError) as e:
        raise RequirementsError(f"{path}: cannot read requirements file: {e}") from e
    except (PipError, ValueError) as e:  # ValueError: pip-api's (vendored) InvalidRequirement
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise RequirementsError(f"{path}: invalid requirements file: {first}") from e
    distributions = []
    for name, req in sorted(parsed.items()):
        specifiers = list(getattr(req, "specifier", []))
        if len(specifiers) != 1 or specifiers[0].operator not in ("==", "==="):
            shown = getattr(req, "line", None) or str(req)
            raise RequirementsError(
                f"{path}: {shown!s} is not pinned; a reference environment needs NAME==VERSION",
                tip="use `pip freeze` output, or a lock from `envsync lock`",
            )
        version = specifiers[0].version
        if version.endswith(".*"):
            raise RequirementsError(f"{path}: {req} is a wildcard, not a pin")
        distributions.append(
            Distribution(name=canonicalize_name(name), display_name=req.name, version=version)
        )
    if not distributions:
        raise RequirementsError(f"{path}: no requirements in the file")
    return Snapshot(
        host=str(path),
        source="requirements",
        partial=True,
        interpreter=_NOT_RECORDED,
        distributions=tuple(distributions),
        gpu=_NOT_RECORDED,
        system=_NOT_RECORDED,
        torch=_NOT_RECORDED,
    )
