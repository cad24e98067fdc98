"""Installed distributions: metadata headers, RECORD, and the watched ones' files hashed.

Only metadata headers are read; RECORD is parsed with a CSV parser only for watched
distributions, whose every installed file is hashed and compared with it.
"""

from __future__ import annotations

import json
import os
import re
import time

from ..shared import normalize, package_file_name, redact_data
from .files import (
    file_sha256,
    hash_files,
    is_bytecode,
    not_regular,
    read_header_block,
    read_text,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection
    from typing import Any

    from ..graph.finder import ModuleFinder
    from .files import HashCache, Records


URLSAFE = bytes.maketrans(b"-_", b"+/")
IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_metadata_headers(text: str) -> dict[str, list[str]]:
    """Return {header: [values]} of an RFC 822 metadata header block (METADATA, PKG-INFO)."""
    headers: dict[str, list[str]] = {}
    last = None
    for line in text.splitlines():
        if not line.strip():
            break  # the body (long description) starts here
        if line[0] in " \t" and last is not None:
            headers[last][-1] += "\n" + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"malformed header line {line[:60]!r}")
        last = key.strip().lower()
        headers.setdefault(last, []).append(value.strip())
    return headers


def parse_record(text: str) -> Records:
    """RECORD rows as (path, sha256 hex or None) pairs."""
    import binascii

    rows: Records = []
    for line in text.splitlines():
        if not line:
            continue
        if line[0] == '"':  # a quoted path (it holds a comma): let csv unquote it
            import csv

            row = next(csv.reader([line]))
        else:
            row = line.rsplit(",", 2)
        if not row[0]:
            continue
        digest = None
        if len(row) > 1 and row[1].startswith("sha256="):
            b64 = row[1][7:].encode("ascii", "replace")
            try:
                digest = binascii.a2b_base64(b64.translate(URLSAFE) + b"=" * (-len(b64) % 4)).hex()
            except (ValueError, binascii.Error):
                digest = "invalid"
        rows.append((row[0], digest))
    return rows


def egg_requires(text: str) -> list[str]:
    """Requirements of an .egg-info requires.txt as Requires-Dist strings."""
    requires = []
    marker = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            extra, _, cond = section.partition(":")
            parts = []
            if extra:
                parts.append(f'extra == "{extra}"')
            if cond:
                parts.append(f"({cond})" if extra else cond)
            marker = " and ".join(parts) or None
            continue
        requires.append(line + ("; " + marker if marker else ""))
    return requires


def top_level_from_files(paths: list[str]) -> list[str]:
    names = set()
    for path in paths:
        first, sep, _ = path.partition("/")
        if first.startswith("..") or first.endswith((".dist-info", ".data", ".egg-info")):
            continue
        if first == "__pycache__":
            continue
        if sep:
            if IDENT.match(first):
                names.add(first)
            continue
        base = first.split(".", 1)[0]
        if first.endswith((".py", ".so", ".pyd")) and IDENT.match(base):
            names.add(base)
    return sorted(names)


def installed_at(paths: list[str]) -> str | None:
    """When a distribution was installed here (UTC, ISO 8601): the modification time of
    the first of `paths` that exists. An installer writes RECORD last (METADATA keeps the
    time of its extraction), so its time is the install's; one stat, no file read."""
    for path in paths:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            continue
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(mtime))
    return None


def read_distribution(
    location: str, entry: str, watch: Collection[str] = ()
) -> tuple[dict[str, Any], Records]:
    """Facts of one .dist-info or .egg-info directory; raise ValueError when malformed.

    RECORD is parsed in full only for watched distributions (`watch`: normalized names).
    """
    is_egg = entry.endswith(".egg-info")
    meta_file, meta_dir = _metadata_file(location, entry, is_egg)
    if not os.path.isfile(meta_file):
        raise ValueError(f"no {os.path.basename(meta_file)} file")
    headers = parse_metadata_headers(read_header_block(meta_file))
    name = (headers.get("name") or [""])[0]
    version = (headers.get("version") or [""])[0]
    if not name:
        raise ValueError("metadata has no Name")
    if not version:
        raise ValueError("metadata has no Version")
    watched = normalize(name) in watch
    dist: dict[str, Any] = {
        "name": normalize(name),
        "display_name": name,
        "version": version,
        "installer": None,
        "location": location,
        "metadata_dir": entry,
        "requires": headers.get("requires-dist", []),
        "top_level": [],
        "direct_url": None,
    }
    if meta_dir is None:
        dist["installed_at"] = installed_at([meta_file])
        return dist, []
    folder = meta_dir
    record_name = "installed-files.txt" if is_egg else "RECORD"
    dist["installed_at"] = installed_at([os.path.join(folder, record_name), meta_file])

    def meta(fname: str) -> str | None:
        path = os.path.join(folder, fname)
        return read_text(path) if os.path.isfile(path) else None

    installer = meta("INSTALLER")
    if installer is not None:
        dist["installer"] = installer.strip() or None
    direct_url = meta("direct_url.json")
    if direct_url is not None:
        try:
            dist["direct_url"] = redact_data(json.loads(direct_url))
        except ValueError as e:
            raise ValueError(f"direct_url.json is not valid JSON ({e})") from None
    if is_egg:
        requires = meta("requires.txt")
        if requires is not None:
            dist["requires"] = egg_requires(requires)
    record = meta(record_name)
    records = _records(record, entry, is_egg, watched)
    dist["top_level"] = _top_level(meta("top_level.txt"), records, record)
    return dist, records


def _metadata_file(location: str, entry: str, is_egg: bool) -> tuple[str, str | None]:
    """The metadata file of a .dist-info or .egg-info entry, and its folder (None: a
    single-file .egg-info)."""
    if is_egg and not os.path.isdir(os.path.join(location, entry)):
        return os.path.join(location, entry), None  # a single-file .egg-info
    meta_file = os.path.join(location, entry, "PKG-INFO" if is_egg else "METADATA")
    return meta_file, os.path.join(location, entry)


def _records(record: str | None, entry: str, is_egg: bool, watched: bool) -> Records:
    """The files a RECORD (or an egg's installed-files.txt) lists: an egg's always, paths
    only; a wheel's only when watched, with their hashes."""
    if record is None:
        return []
    if is_egg:
        # installed-files.txt paths are relative to the .egg-info directory.
        return [
            (os.path.relpath(os.path.normpath(os.path.join(entry, p)), "."), None)
            for p in record.splitlines()
            if p.strip()
        ]
    if watched:
        return parse_record(record)
    return []


def _top_level(listed: str | None, records: Records, record: str | None) -> list[str]:
    """The top-level names a distribution provides: top_level.txt's, else those of the
    files it lists (none where neither is there)."""
    if listed is not None:
        return sorted({n.strip() for n in listed.splitlines() if n.strip()})
    if records:
        return top_level_from_files([p for p, _ in records])
    if record is not None:
        # Only the first path component matters here: skip the CSV parser.
        return top_level_from_files(
            [line.lstrip('"').rsplit(",", 2)[0] for line in record.splitlines() if line]
        )
    return []


def file_value(path: str) -> str:
    """A watched file's value: its sha256, its link's target, or why it was not read."""
    try:
        other = not_regular(path, os.lstat(path))
        return other if other is not None else file_sha256(path)
    except OSError as e:
        return f"unreadable: {e.strerror}"


def watched_files(dist: dict[str, Any], records: Records, cache: HashCache | None = None) -> None:
    """Hash every installed file of a watched distribution and compare it with RECORD."""
    location = dist["location"]
    meta_dir = dist["metadata_dir"]
    files: dict[str, str] = {}
    patched: list[str] = []
    missing: list[str] = []
    added: list[str] = []
    listed = set()
    wanted = []
    record_path = meta_dir + "/RECORD"
    for path, digest in records:
        listed.add(os.path.normpath(path) if "/." in path or "//" in path else path)
        if path == record_path or is_bytecode(path):
            continue  # RECORD cannot list its own hash
        wanted.append((path, digest, location + "/" + path))
    hashes = hash_files([full for _, _, full in wanted], cache)
    for path, digest, full in wanted:
        actual = hashes[full]
        if isinstance(actual, FileNotFoundError):
            missing.append(path)
            continue
        if isinstance(actual, OSError):
            missing.append(path)
            files[path] = f"unreadable: {actual.strerror}"
            continue
        files[path] = actual
        if digest is not None and digest != actual:
            patched.append(path)
    # Files in the distribution's own top-level directories that RECORD does not know
    # (a leftover of envsync's own killed write is none of them).
    roots = set()
    for path, _ in records:
        first, sep, _ = path.partition("/")
        if sep and not first.startswith("..") and not first.endswith((".dist-info", ".data")):
            roots.add(first)
    prefix = len(location.rstrip("/")) + 1
    for root in sorted(roots):
        top = location + "/" + root
        if os.path.islink(top):
            continue  # a link in place of a package folder: never walked out of it
        for dirpath, dirnames, filenames in os.walk(top):
            # A link to a folder is a file of the package (the link), never entered.
            links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
            dirnames[:] = [d for d in dirnames if d != "__pycache__" and d not in links]
            base = dirpath[prefix:] + "/"
            for fname in filenames + links:
                rel = base + fname
                if rel in listed or not package_file_name(fname):
                    continue
                files[rel] = file_value(location + "/" + rel)
                added.append(rel)
    dist["files"] = dict(sorted(files.items()))
    dist["patched"] = sorted(patched)
    dist["missing"] = sorted(missing)
    dist["added"] = sorted(added)


def scan_distributions(
    paths: list[str],
    watch: Collection[str],
    cache: HashCache | None = None,
    finder: ModuleFinder | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """Every distribution on `paths` (the first of a name wins, as at import time), and
    the metadata folders that could not be read."""
    from ..graph.finder import ModuleFinder
    from .editable import source_files, source_tree

    wanted = {normalize(w) for w in watch}
    finder = finder or ModuleFinder(paths)
    found: dict[str, dict[str, Any]] = {}
    order = []
    broken = []
    for location in paths:
        if not location or not os.path.isdir(location):
            continue
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in entries:
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            try:
                dist, records = read_distribution(location, entry, wanted)
            except (OSError, ValueError, UnicodeError) as e:
                reason = getattr(e, "strerror", None) or str(e)
                broken.append({"path": os.path.join(location, entry), "reason": reason})
                continue
            name = dist["name"]
            if name in found:
                # The first sys.path entry wins at import time; remember the shadowed one.
                found[name]["shadowed"].append(os.path.join(location, entry))
                continue
            dist["shadowed"] = []
            if name in wanted:
                tree = source_tree(dist, records, finder)
                if tree is None:
                    watched_files(dist, records, cache)
                else:
                    source_files(dist, tree, cache)
            found[name] = dist
            order.append(name)
    return [found[n] for n in sorted(order)], broken
