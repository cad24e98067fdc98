"""A pinned requirements file (parsed with pip-api) as a partial reference snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from envsync.errors import RequirementsError
from envsync.model import Distribution, Snapshot, Unavailable

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


def read_requirements(path: Path) -> Snapshot:
    """Each `NAME==VERSION` line becomes a distribution; anything unpinned is an error."""
    import pip_api  # slow to import (it asks pip for its version): only when needed
    from packaging.utils import canonicalize_name
    from pip_api.exceptions import PipError

    _raise_instead_of_exiting()
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
