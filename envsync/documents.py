"""Reading the documents a user names (inventory, rule packs, locks, snapshots, plans).

Each failure is one line naming the file, raised as the calling stage's own error.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from envsync.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOMLDecodeError = tomllib.TOMLDecodeError


def read_text(path: Path, error: type[InputError], what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read {what}: {e}") from e


def loads_toml(text: str, origin: str, error: type[InputError], invalid: str) -> dict[str, Any]:
    """`invalid` begins the message: "invalid TOML", "corrupt lock file", ..."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{origin}: {invalid}: {e}") from e


def read_toml(path: Path, error: type[InputError], what: str, invalid: str) -> dict[str, Any]:
    return loads_toml(read_text(path, error, what), str(path), error, invalid)


def read_json_object(path: Path, error: type[InputError], what: str) -> dict[str, Any]:
    """A JSON document that must be an object (a snapshot, a plan)."""
    text = read_text(path, error, what)
    try:
        data = json.loads(text)
    except ValueError as e:
        raise error(f"{path}: not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise error(f"{path}: not an envsync {what} (not a JSON object)")
    return data
