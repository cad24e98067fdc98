"""Reading the documents a user names (inventory, rule packs, locks, snapshots, plans).

Each failure is one line naming the file, raised as the calling stage's own error.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from envsync.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError
# A document larger than this is refused before it is parsed: a snapshot of an environment
# with every watched file hashed is a few MB; a document nested deeper than the parser's
# recursion allows is refused as such, not with a RecursionError.
MAX_DOCUMENT_BYTES = 64 << 20


def too_large(size: int, origin: str, what: str) -> str | None:
    """The reason a document of `size` bytes is refused, or None."""
    if size <= MAX_DOCUMENT_BYTES:
        return None
    return (
        f"{origin}: {what} is larger than {MAX_DOCUMENT_BYTES >> 20} MB "
        f"({size >> 20} MB); refusing to read it"
    )


NESTED = "nested too deeply to be an envsync document"


def read_text(path: Path, error: type[InputError], what: str) -> str:
    try:
        with path.open("rb") as f:
            size = os.fstat(f.fileno()).st_size
            why = too_large(size, str(path), what)
            if why:
                raise error(why)
            return f.read(MAX_DOCUMENT_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read {what}: {e}") from e


def loads_toml(text: str, origin: str, error: type[InputError], invalid: str) -> dict[str, Any]:
    """`invalid` begins the message: "invalid TOML", "corrupt lock file", ..."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{origin}: {invalid}: {e}") from e
    except RecursionError as e:
        raise error(f"{origin}: {invalid}: {NESTED}") from e


def read_toml(path: Path, error: type[InputError], what: str, invalid: str) -> dict[str, Any]:
    return loads_toml(read_text(path, error, what), str(path), error, invalid)


def read_json_object(path: Path, error: type[InputError], what: str) -> dict[str, Any]:
    """A JSON document that must be an object (a snapshot, a plan)."""
    text = read_text(path, error, what)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise error(f"{path}: not valid JSON: {e}") from e
    except RecursionError as e:
        raise error(f"{path}: not an envsync {what}: {NESTED}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: not an envsync {what} (not a JSON object)")
    return data
