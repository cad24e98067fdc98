"""The envsync probe: a stdlib-only program run by a host's own interpreter (Python 3.8+).

It is shipped on stdin (`python -c BOOTSTRAP` reads it) and prints one JSON document on
stdout: the facts of an envsync snapshot. It installs nothing; its only writes are its own
caches of file hashes, parsed import facts and whole startup graphs (~/.cache/envsync on
the host, keyed by file stat and hash; `cache_dir: ""` turns them off). Options come as
one JSON object in argv[1]: {"watch": [...], "env": [...], "deep": false, "roots": [...], ...}.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
import time

MYPY = False
if MYPY:  # typing costs milliseconds at start-up; type comments need it only for mypy
    from typing import Any, List  # noqa: F401

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE|SESSION|AUTH|(?:^|_)KEY(?:$|_)|APIKEY|ACCESS_KEY",
    re.IGNORECASE,
)
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
REDACTED = "<redacted>"
# The one copy of the redaction rules: the probe applies them on the host, and envsync
# imports them from here (the probe runs alone on hosts, stdlib only). A secret is known by
# the name it is kept under (SECRET_NAME), by its shape wherever it appears (tokens of
# Hugging Face, OpenAI, Anthropic, GitHub, GitLab, Slack, AWS keys, JWTs), inside a URL
# (user:password@), and as the value of an option or setting that takes one.
SECRET_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:hf_[A-Za-z0-9]{16,}|sk-[A-Za-z0-9_-]{16,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_-]{16,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})"
)
SECRET_WORD = r"(?:api[-_]?key|token|password|passwd|passphrase|secret|credentials?|auth|key)"
SECRET_OPTION = re.compile(r"^--?(?:[A-Za-z0-9]+[-_])*" + SECRET_WORD + r"$", re.IGNORECASE)
# `api_key='...'`, `"hf_token": "..."`, `--api-key VALUE` inside a line of text (a log)
SECRET_SETTING = re.compile(
    r"(?P<key>(?<![A-Za-z0-9])(?:--?)?(?:[A-Za-z0-9]+[-_])*" + SECRET_WORD + r"['\"]?)"
    r"(?P<sep>\s*[=:]\s*|\s+(?=['\"]?[A-Za-z0-9_./+-]{6,}))"
    r"(?P<quote>['\"]?)(?P<value>[^'\"\s,;)}\]]+)",
    re.IGNORECASE,
)
HARMLESS_VALUES = frozenset(["none", "null", "false", "true", "", REDACTED.lower()])
NVIDIA_SMI_TIMEOUT = 20
DEEP_TIMEOUT = 180


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def redact_url(value):
    """Drop `user:password@` from every URL in a string."""
    return URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", value)


def _setting(match):
    value = match.group("value")
    spaced = not match.group("sep").strip()  # `--api-key VALUE`: options only
    if value.lower() in HARMLESS_VALUES or value.isdigit():
        return match.group(0)
    if spaced and not match.group("key").startswith("-"):
        return match.group(0)
    return match.group("key") + match.group("sep") + match.group("quote") + REDACTED


def redact_text(value):
    # type: (str) -> str
    """Every secret a line of text may hold: URL credentials, token shapes, settings."""
    value = redact_url(value)
    value = SECRET_SHAPE.sub(REDACTED, value)
    return SECRET_SETTING.sub(_setting, value)


def redact_argv(argv):
    # type: (List[str]) -> List[str]
    """A command line as it may be shown: the value of every secret-bearing option hidden."""
    out = []
    hide = False
    for arg in argv:
        if hide:
            out.append(REDACTED)
            hide = False
            continue
        name, eq, _ = arg.partition("=")
        if name.startswith("-") and SECRET_OPTION.match(name):
            if eq:
                out.append(name + "=" + REDACTED)
            else:
                out.append(arg)
                hide = True
            continue
        out.append(redact_text(arg))
    return out


def redact_env(name, value):
    if SECRET_NAME.search(name):
        return REDACTED
    return redact_text(value)


def redact_data(value):
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: redact_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_data(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------
# Interpreter


def interpreter_facts():
    import sysconfig

    impl = sys.implementation.name
    short = {"cpython": "cp", "pypy": "pp"}.get(impl, impl)
    interpreter_tag = "%s%d%d" % (short, sys.version_info[0], sys.version_info[1])
    soabi = sysconfig.get_config_var("SOABI") or ""
    # SOABI is e.g. cpython-311-x86_64-linux-gnu; the wheel ABI tag is cp311 (+ "t" for
    # free-threaded builds, "d" for debug builds).
    abi_tag = interpreter_tag
    match = re.match(r"cpython-(\d+)([a-z]*)", soabi)
    if match:
        abi_tag = "cp" + match.group(1) + match.group(2)
    platform = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return {
        "executable": sys.executable,
        "version": "%d.%d.%d" % sys.version_info[:3],
        "implementation": impl,
        "interpreter_tag": interpreter_tag,
        "abi_tag": abi_tag,
        "platform": platform,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "in_venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "sys_path": [redact_text(p) for p in sys.path],
    }


# ---------------------------------------------------------------------------------------
# Distributions


def parse_metadata_headers(text):
    """Return {header: [values]} of an RFC 822 metadata header block (METADATA, PKG-INFO)."""
    headers = {}  # type: dict[str, list[str]]
    last = None
    for line in text.splitlines():
        if not line.strip():
            break  # the body (long description) starts here
        if line[0] in " \t" and last is not None:
            headers[last][-1] += "\n" + line.strip()
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ValueError("malformed header line %r" % line[:60])
        last = key.strip().lower()
        headers.setdefault(last, []).append(value.strip())
    return headers


def read_text(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", "replace")


def read_header_block(path):
    # Metadata files carry the whole long description after the headers; read only up to
    # the first blank line.
    chunks = []
    with open(path, "rb") as f:
        while True:
            chunk = f.read(16384)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\n\n" in chunk or b"\r\n\r\n" in chunk:
                break
    return b"".join(chunks).decode("utf-8", "replace")


URLSAFE = bytes.maketrans(b"-_", b"+/")


def parse_record(text):
    """RECORD rows as (path, sha256 hex or None) pairs."""
    import binascii

    rows = []
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


def egg_requires(text):
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
                parts.append('extra == "%s"' % extra)
            if cond:
                parts.append("(%s)" % cond if extra else cond)
            marker = " and ".join(parts) or None
            continue
        requires.append(line + ("; " + marker if marker else ""))
    return requires


IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def top_level_from_files(paths):
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


def read_distribution(location, entry, watch=()):
    """Facts of one .dist-info or .egg-info directory; raise ValueError when malformed.

    RECORD is parsed in full only for watched distributions (`watch`: normalized names).
    """
    meta_dir = os.path.join(location, entry)
    is_egg = entry.endswith(".egg-info")
    if is_egg and not os.path.isdir(meta_dir):
        meta_file = meta_dir  # a single-file .egg-info
        meta_dir = None
    else:
        meta_file = os.path.join(meta_dir, "PKG-INFO" if is_egg else "METADATA")
    if not os.path.isfile(meta_file):
        raise ValueError("no %s file" % os.path.basename(meta_file))
    headers = parse_metadata_headers(read_header_block(meta_file))
    name = (headers.get("name") or [""])[0]
    version = (headers.get("version") or [""])[0]
    if not name:
        raise ValueError("metadata has no Name")
    if not version:
        raise ValueError("metadata has no Version")
    watched = normalize(name) in watch
    dist = {
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
        return dist, []

    def meta(fname):
        path = os.path.join(meta_dir, fname)
        return read_text(path) if os.path.isfile(path) else None

    installer = meta("INSTALLER")
    if installer is not None:
        dist["installer"] = installer.strip() or None
    direct_url = meta("direct_url.json")
    if direct_url is not None:
        try:
            dist["direct_url"] = redact_data(json.loads(direct_url))
        except ValueError as e:
            raise ValueError("direct_url.json is not valid JSON (%s)" % e) from None
    if is_egg:
        requires = meta("requires.txt")
        if requires is not None:
            dist["requires"] = egg_requires(requires)
    records = []
    record = meta("installed-files.txt" if is_egg else "RECORD")
    if record is not None:
        if is_egg:
            # installed-files.txt paths are relative to the .egg-info directory.
            records = [
                (os.path.relpath(os.path.normpath(os.path.join(entry, p)), "."), None)
                for p in record.splitlines()
                if p.strip()
            ]
        elif watched:
            records = parse_record(record)
    top_level = meta("top_level.txt")
    if top_level is not None:
        dist["top_level"] = sorted({n.strip() for n in top_level.splitlines() if n.strip()})
    elif records:
        dist["top_level"] = top_level_from_files([p for p, _ in records])
    elif record is not None:
        # Only the first path component matters here: skip the CSV parser.
        dist["top_level"] = top_level_from_files(
            [line.lstrip('"').rsplit(",", 2)[0] for line in record.splitlines() if line]
        )
    return dist, records


def file_sha256(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        digest = hashlib.sha256()
        while True:
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                return digest.hexdigest()
            digest.update(chunk)
    finally:
        os.close(fd)


def is_bytecode(path):
    return path.endswith((".pyc", ".pyo")) or "/__pycache__/" in "/" + path


HASH_THREADS = min(4, os.cpu_count() or 1)


# A file's hash is reused from the cache only while its size, mtime, ctime and inode are
# unchanged (ctime moves on every write and cannot be set back), and only for files that
# were not modified in the last seconds before it was cached (git's "racy" rule).
RACY_SECONDS = 2


def hash_files(paths, cache=None):
    """{path: sha256 hex, or the OSError} for absolute paths, hashed on a few threads.

    hashlib releases the GIL on large buffers and file reads release it too, so threads
    overlap I/O and hashing without the cost of starting processes. `cache` maps a path
    to [size, mtime_ns, ctime_ns, inode, sha256] and is updated in place.
    """
    results = {}
    todo = paths
    if cache is not None:
        todo = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError as e:
                results[path] = e
                continue
            known = cache.get(path)
            stamp = [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]
            if known is not None and known[:4] == stamp:
                results[path] = known[4]
            else:
                todo.append(path)
                cache[path] = stamp  # completed with the hash below, if it is not racy

    def work(chunk):
        for path in chunk:
            try:
                results[path] = file_sha256(path)
            except OSError as e:
                results[path] = e

    count = min(HASH_THREADS, max(1, len(todo) // 64))
    threads = [threading.Thread(target=work, args=(todo[i::count],)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if cache is not None:
        now = time.time_ns()
        for path in todo:
            stamp = cache.get(path)
            digest = results.get(path)
            if isinstance(digest, str) and stamp and now - stamp[1] > RACY_SECONDS * 10**9:
                cache[path] = [*stamp[:4], digest]
            else:
                cache.pop(path, None)
    return results


def watched_files(dist, records, cache=None):
    """Hash every installed file of a watched distribution and compare it with RECORD."""
    location = dist["location"]
    meta_dir = dist["metadata_dir"]
    files, patched, missing, added = {}, [], [], []
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
            files[path] = "unreadable: %s" % actual.strerror
            continue
        files[path] = actual
        if digest is not None and digest != actual:
            patched.append(path)
    # Files in the distribution's own top-level directories that RECORD does not know.
    roots = set()
    for path, _ in records:
        first, sep, _ = path.partition("/")
        if sep and not first.startswith("..") and not first.endswith((".dist-info", ".data")):
            roots.add(first)
    prefix = len(location.rstrip("/")) + 1
    for root in sorted(roots):
        for dirpath, dirnames, filenames in os.walk(location + "/" + root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            base = dirpath[prefix:] + "/"
            for fname in filenames:
                rel = base + fname
                if rel in listed or fname.endswith((".pyc", ".pyo")):
                    continue
                try:
                    files[rel] = file_sha256(location + "/" + rel)
                except OSError:
                    files[rel] = "unreadable"
                added.append(rel)
    dist["files"] = dict(sorted(files.items()))
    dist["patched"] = sorted(patched)
    dist["missing"] = sorted(missing)
    dist["added"] = sorted(added)


# ---------------------------------------------------------------------------------------
# Editable and development installs: the package's files live in a source tree
#
# pip and uv install a project in editable mode through its build backend (PEP 660):
# setuptools writes either a `.pth` file naming the source folder, or a `.pth` that
# imports an `__editable___*_finder.py` whose MAPPING sends each top-level package to its
# folder (a meta path finder appended after the path finder). Older installs
# (`setup.py develop`, `.egg-link`) and hand-made `.pth` files put the source folder on
# sys.path. In every shape the package's files are not in RECORD: they are found where
# the interpreter would import them from, and keyed by their path inside the import root
# (`sglang/srt/server_args.py`), as a wheel's RECORD keys them.

# Never part of the package: bytecode, packaging metadata, version control, tool caches.
# (Only package folders are walked: a checkout's build/ and dist/ are never reached, and
# a package may ship dot-folders of its own, as SGLang ships .claude/.)
NOT_PACKAGE_DIRS = {
    "__pycache__",
    ".git",
    ".eggs",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
}
NOT_PACKAGE_FILES = {"uv_cache.json", ".DS_Store"}


def not_package_dir(name):
    return name in NOT_PACKAGE_DIRS or name.endswith(".egg-info")


def package_file(rel):
    # type: (str) -> bool
    """Whether a file (a path inside the import root) is part of the package."""
    parts = rel.split("/")
    if any(not_package_dir(part) for part in parts[:-1]):
        return False
    return package_file_name(parts[-1])


def package_file_name(name):
    # type: (str) -> bool
    return not (name in NOT_PACKAGE_FILES or name.endswith((".pyc", ".pyo", ".envsync-tmp")))


def editable_mapping(paths):
    """{top-level import name: folder or file} from setuptools' editable finders on sys.path.

    The finders are read with ast, not imported: the probe follows them as they would
    answer, without running them a second time.
    """
    import ast

    mapping = {}  # type: dict[str, str]
    for location in paths:
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        for entry in entries:
            if not (entry.startswith("__editable__") and entry.endswith("_finder.py")):
                continue
            try:
                tree = ast.parse(read_text(os.path.join(location, entry)))
            except (OSError, SyntaxError, ValueError):
                continue
            for target, value in assignments(tree):
                if target != "MAPPING":
                    continue
                try:
                    found = ast.literal_eval(value)
                except ValueError:
                    continue
                if isinstance(found, dict):
                    for key, path in found.items():
                        if isinstance(key, str) and isinstance(path, str):
                            mapping.setdefault(key, path)
    return mapping


def walk_package(name, path):
    """{key: absolute path} of the package's files under `path`, keyed `name/...`."""
    if not os.path.isdir(path):
        return {name + os.path.splitext(path)[1]: path}
    out = {}
    prefix = len(path.rstrip("/")) + 1
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not not_package_dir(d))
        rel = dirpath[prefix:]
        base = name + "/" + (rel + "/" if rel else "")
        for fname in filenames:
            if package_file_name(fname):  # folders that are no part of it are pruned above
                out[base + fname] = dirpath + "/" + fname
    return out


def install_mode(dist, via_finder):
    if via_finder:
        return "editable-finder"
    if (dist.get("direct_url") or {}).get("dir_info", {}).get("editable"):
        return "editable-pth"
    if dist["metadata_dir"].endswith(".egg-info"):
        return "develop"
    return "sys.path"


def source_tree(dist, records, finder):
    """Where the interpreter imports a distribution's packages from, when RECORD does
    not install them (an editable or development install); None otherwise."""
    listed = {p.partition("/")[0] for p, _ in records}
    names = list(dist["top_level"]) or [dist["name"].replace("-", "_")]
    packages = {}
    via_finder = False
    for name in names:
        if name in listed or name + ".py" in listed:
            return None  # installed from a wheel: RECORD knows its files
        found = finder.find(name)
        if found is None or found[0] not in ("source", "namespace", "extension"):
            continue
        _, origin, locations = found
        if locations:
            packages[name] = locations[0]
        elif origin:
            packages[name] = origin
        via_finder = via_finder or name in finder.mapped
    if not packages:
        return None
    return {"mode": install_mode(dist, via_finder), "packages": packages}


def source_files(dist, tree, cache=None):
    """Hash the source tree's files and read its git state into the distribution."""
    paths = {}
    for name, path in sorted(tree["packages"].items()):
        paths.update(walk_package(name, path))
    hashes = hash_files(sorted(paths.values()), cache)
    files = {}
    for key, full in paths.items():
        digest = hashes[full]
        files[key] = digest if isinstance(digest, str) else "unreadable: %s" % digest.strerror
    dist["files"] = dict(sorted(files.items()))
    git = git_state(tree["packages"], set(files))
    tree["git"] = git
    dist["source"] = tree
    changes = git if "commit" in git else {}
    dist["patched"] = changes.get("modified", [])
    dist["added"] = sorted(changes.get("added", []) + changes.get("untracked", []))
    dist["missing"] = changes.get("deleted", [])


# ---------------------------------------------------------------------------------------
# Git state of a source checkout, read from .git without running git: a repository's own
# configuration can make `git status` run programs (core.fsmonitor, clean filters, hooks).


def git_dir(start):
    """(work tree root, git dir, common dir) of the repository holding `start`, or None."""
    path = os.path.abspath(start)
    while True:
        dot = os.path.join(path, ".git")
        if os.path.isdir(dot):
            gitdir = dot
            break
        if os.path.isfile(dot):
            text = read_text(dot).strip()
            if not text.startswith("gitdir:"):
                return None
            gitdir = os.path.normpath(os.path.join(path, text[7:].strip()))
            break
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    common = gitdir
    if os.path.isfile(os.path.join(gitdir, "commondir")):
        common = os.path.normpath(
            os.path.join(gitdir, read_text(os.path.join(gitdir, "commondir")).strip())
        )
    return path, gitdir, common


def resolve_ref(common, gitdir, ref):
    for base in (gitdir, common):
        path = os.path.join(base, ref)
        if os.path.isfile(path):
            value = read_text(path).strip()
            if value.startswith("ref:"):
                return resolve_ref(common, gitdir, value[4:].strip())
            return value
    try:
        packed = read_text(os.path.join(common, "packed-refs"))
    except OSError:
        return None
    for line in packed.splitlines():
        if line and line[0] not in "#^":
            sha, _, name = line.partition(" ")
            if name.strip() == ref:
                return sha
    return None


def strip_credentials(url):
    """A remote URL without its user:password@ (scp-like `git@host:path` kept)."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def git_remote(common):
    try:
        text = read_text(os.path.join(common, "config"))
    except OSError:
        return None
    remotes = {}  # type: dict[str, str]
    section = None
    for line in text.splitlines():
        line = line.strip()
        match = re.match(r'^\[remote\s+"([^"]+)"\]', line)
        if match:
            section = match.group(1)
            continue
        if line.startswith("["):
            section = None
            continue
        key, sep, value = line.partition("=")
        if section and sep and key.strip().lower() == "url":
            remotes.setdefault(section, value.strip())
    url = remotes.get("origin") or (remotes[sorted(remotes)[0]] if remotes else None)
    return strip_credentials(url) if url else None


def read_index(path, prefixes=("",)):
    """The entries of a git index (versions 2 to 4) whose paths start with one of
    `prefixes`, its object id width, and its cached trees ({folder: tree id})."""
    import struct

    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"DIRC":
        raise ValueError("not a git index")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        raise ValueError("index version %d" % version)
    # SHA-256 repositories: the index ends with a 32-byte checksum instead of 20.
    width = 32 if len(data) > 44 and hashlib.sha256(data[:-32]).digest() == data[-32:] else 20
    wanted = tuple(p.encode("utf-8", "surrogateescape") for p in prefixes)
    entries = []
    pos = 12
    previous = b""
    for _ in range(count):
        start = pos
        (flags,) = struct.unpack(">H", data[pos + 40 + width : pos + 42 + width])
        pos += 42 + width
        extended = 0
        if flags & 0x4000 and version >= 3:
            (extended,) = struct.unpack(">H", data[pos : pos + 2])
            pos += 2
        if version == 4:
            strip, pos = varint(data, pos)
            end = data.index(b"\0", pos)
            name = previous[: len(previous) - strip] + data[pos:end]
            pos = end + 1
        else:
            end = data.index(b"\0", pos)
            name = data[pos:end]
            pos = start + ((end - start) // 8 + 1) * 8
        previous = name
        if not name.startswith(wanted):
            continue
        fields = struct.unpack(">10I", data[start : start + 40])
        entries.append(
            {
                "path": name.decode("utf-8", "surrogateescape"),
                "sha": data[start + 40 : start + 40 + width].hex(),
                "mode": fields[6],
                "size": fields[9],
                "mtime": (fields[2], fields[3]),
                "ino": fields[5],
                "stage": (flags >> 12) & 3,
                "assume": bool(flags & 0x8000),
                "skip": bool(extended & 0x4000),
            }
        )
    trees = {}  # type: dict[str, str]
    while pos + 8 <= len(data) - width:
        signature = data[pos : pos + 4]
        (size,) = struct.unpack(">I", data[pos + 4 : pos + 8])
        if signature == b"TREE":
            cached_trees(data[pos + 8 : pos + 8 + size], 0, "", width, trees)
        pos += 8 + size
    return entries, width, trees


def cached_trees(data, pos, prefix, width, out):
    """The index's cache-tree extension: tree ids of folders whose entries are unchanged
    since git last wrote a tree (pre-order: each node, then its subtrees)."""
    nul = data.index(b"\0", pos)
    path = prefix + data[pos:nul].decode("utf-8", "surrogateescape")
    newline = data.index(b"\n", nul)
    count, subtrees = data[nul + 1 : newline].split(b" ")
    pos = newline + 1
    if int(count) >= 0:
        out[path] = data[pos : pos + width].hex()
        pos += width
    for _ in range(int(subtrees)):
        pos = cached_trees(data, pos, path + "/" if path else "", width, out)
    return pos


def varint(data, pos):
    """git's offset varint (index v4 path compression)."""
    byte = data[pos]
    pos += 1
    value = byte & 127
    while byte & 128:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 127)
    return value, pos


def blob_id(path, mode, width):
    """The object id git gives a working-tree file: hash of `blob <len>\\0<content>`."""
    if mode & 0o170000 == 0o120000:
        data = os.readlink(path).encode("utf-8", "surrogateescape")
    else:
        with open(path, "rb") as f:
            data = f.read()
    digest = hashlib.sha256() if width == 32 else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def loose_object(common, sha):
    import zlib

    path = os.path.join(common, "objects", sha[:2], sha[2:])
    with open(path, "rb") as f:
        data = zlib.decompress(f.read())
    head, _, body = data.partition(b"\0")
    return head.split(b" ")[0], body


def tree_entries(common, oid, width):
    """(mode, name, object id) of a loose tree object."""
    kind, body = loose_object(common, oid)
    if kind != b"tree":
        raise ValueError("%s is not a tree" % oid)
    pos = 0
    while pos < len(body):
        space = body.index(b" ", pos)
        nul = body.index(b"\0", space)
        yield (
            body[pos:space],
            body[space + 1 : nul].decode("utf-8", "surrogateescape"),
            body[nul + 1 : nul + 1 + width].hex(),
        )
        pos = nul + 1 + width


def head_files(common, commit, prefixes, width, cached):
    """{path: object id} of HEAD's files under `prefixes`, read from loose objects; "same"
    when the index's cached trees of the prefixes are HEAD's (nothing staged there); None
    when an object is packed (reading packs is not worth it: the index answers the rest)."""
    import zlib

    try:
        kind, body = loose_object(common, commit)
        if kind != b"commit":
            return None
        root = body.split(b"\n", 1)[0].split(b" ")[1].decode()
        folders = [p.rstrip("/") for p in prefixes if p.endswith("/")]
        if folders and len(folders) == len(prefixes):
            same = True
            for folder in folders:
                oid = root
                for part in folder.split("/"):
                    found = [o for m, n, o in tree_entries(common, oid, width) if n == part]
                    oid = found[0] if found else None
                    if oid is None:
                        break
                same = same and oid is not None and cached.get(folder) == oid
            if same:
                return "same"
        out = {}
        todo = [("", root)]
        while todo:
            base, sha = todo.pop()
            for mode, entry, oid in tree_entries(common, sha, width):
                name = base + entry
                if mode == b"40000":
                    if any(p.startswith(name + "/") or name.startswith(p) for p in prefixes):
                        todo.append((name + "/", oid))
                elif mode != b"160000" and any(name.startswith(p) for p in prefixes):
                    out[name] = oid
        return out
    except (OSError, ValueError, IndexError, zlib.error):
        return None


def git_state(packages, present):
    """Commit, branch, remote and the package's files that differ from HEAD.

    `packages` maps import names to their folders; `present` holds the package's file
    keys as hashed. Paths come back as package keys (`sglang/srt/server_args.py`).
    """
    first = sorted(packages.values())[0]
    found = git_dir(first if os.path.isdir(first) else os.path.dirname(first))
    if found is None:
        return {"unavailable": "not in a git checkout"}
    root, gitdir, common = found
    try:
        head = read_text(os.path.join(gitdir, "HEAD")).strip()
    except OSError as e:
        return {"unavailable": "cannot read %s/HEAD: %s" % (gitdir, e.strerror)}
    branch = None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        branch = ref[len("refs/heads/") :] if ref.startswith("refs/heads/") else ref
        commit = resolve_ref(common, gitdir, ref)
    else:
        commit = head
    state = {
        "root": root,
        "commit": commit,
        "branch": branch,
        "remote": git_remote(common),
        "modified": [],
        "added": [],
        "deleted": [],
        "untracked": [],
        "against_head": False,
    }
    # Repository-relative folder of each package -> its key prefix.
    prefixes = {}
    for name, path in packages.items():
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        if rel.startswith(".."):
            continue
        prefixes[rel + ("/" if os.path.isdir(path) else "")] = name + (
            "/" if os.path.isdir(path) else os.path.splitext(path)[1]
        )

    def key_of(rel):
        for prefix, key in prefixes.items():
            if rel == prefix.rstrip("/") and not prefix.endswith("/"):
                return key
            if prefix.endswith("/") and rel.startswith(prefix):
                return key + rel[len(prefix) :]
        return None

    try:
        entries, width, cached = read_index(os.path.join(gitdir, "index"), tuple(prefixes))
        index_mtime = os.stat(os.path.join(gitdir, "index")).st_mtime_ns
    except FileNotFoundError:
        entries, width, cached, index_mtime = [], 20, {}, 0
    except (OSError, ValueError, IndexError) as e:
        state["unavailable_changes"] = "cannot read the git index: %s" % e
        return state
    indexed = {}
    for entry in entries:
        key = key_of(entry["path"])
        if key is None or entry["stage"] > 1 or entry["mode"] & 0o170000 == 0o040000:
            continue
        indexed[key] = entry
        full = os.path.join(root, entry["path"])
        try:
            st = os.lstat(full)
        except OSError:
            if not entry["skip"]:
                state["deleted"].append(key)
            continue
        if entry["assume"] or entry["skip"]:
            continue
        # Same size, times and inode as when git last hashed it: unchanged. Otherwise the
        # content decides (a stat-only change, or an entry staged without stat data).
        nsec = entry["mtime"][1]
        same_stat = (
            st.st_size == entry["size"]
            and int(st.st_mtime) == entry["mtime"][0]
            and (not nsec or st.st_mtime_ns % 10**9 == nsec)  # 0: a git built without nsec
            and (st.st_ino & 0xFFFFFFFF) == entry["ino"]
        )
        # git's "racy" rule: a file modified no earlier than the index was written may
        # have changed after git hashed it.
        if same_stat and st.st_mtime_ns < index_mtime:
            continue
        try:
            if blob_id(full, entry["mode"], width) != entry["sha"]:
                state["modified"].append(key)
        except OSError:
            state["modified"].append(key)
    state["untracked"] = sorted(k for k in present if k not in indexed)
    head = head_files(common, commit, list(prefixes), width, cached) if commit else None
    if head == "same":
        state["against_head"] = True
    elif head is not None:
        state["against_head"] = True
        in_head = {key_of(p): oid for p, oid in head.items()}
        for key, entry in indexed.items():
            if key not in in_head:
                state["added"].append(key)
            elif in_head[key] != entry["sha"] and key not in state["modified"]:
                state["modified"].append(key)  # staged
        state["deleted"] += [k for k in in_head if k and k not in indexed]
    for field in ("modified", "added", "deleted"):
        state[field] = sorted(set(state[field]))
    # A file HEAD does not have is added, whatever its working copy holds.
    state["modified"] = [k for k in state["modified"] if k not in state["added"]]
    return state


def scan_distributions(paths, watch, cache=None, finder=None):
    watch = {normalize(w) for w in watch}
    finder = finder or ModuleFinder(paths)
    found = {}  # type: dict[str, dict[str, Any]]
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
                dist, records = read_distribution(location, entry, watch)
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
            if name in watch:
                tree = source_tree(dist, records, finder)
                if tree is None:
                    watched_files(dist, records, cache)
                else:
                    source_files(dist, tree, cache)
            found[name] = dist
            order.append(name)
    return [found[n] for n in sorted(order)], broken


# ---------------------------------------------------------------------------------------
# torch, GPU, system, environment


def assignments(tree):
    """(name, value node) of each simple module-level assignment, annotated or not."""
    import ast

    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            yield target.id, value


TORCH_KEYS = {"__version__": "version", "cuda": "cuda", "git_version": "git_version", "hip": "hip"}


def torch_facts(paths, deep):
    import ast

    for location in paths:
        version_py = os.path.join(location or ".", "torch", "version.py")
        if location and os.path.isfile(version_py):
            break
    else:
        return None
    try:
        tree = ast.parse(read_text(version_py))
    except (OSError, SyntaxError) as e:
        return {"unavailable": "cannot read %s: %s" % (version_py, e)}
    facts = {"location": location}
    for target, value in assignments(tree):
        if target in TORCH_KEYS:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                continue
            if literal is None or isinstance(literal, str):
                facts[TORCH_KEYS[target]] = literal
    if "version" not in facts:
        return {"unavailable": "%s has no __version__" % version_py}
    if deep:
        facts.update(torch_deep())
    return facts


DEEP_SCRIPT = r"""
import json, torch
out = {}
def get(key, fn):
    try:
        out[key] = fn()
    except Exception as e:
        out[key] = {"unavailable": "%s: %s" % (type(e).__name__, e)}
def arch():
    flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
    if flags is None:
        return torch.cuda.get_arch_list()
    return flags.split() if isinstance(flags, str) else list(flags)
def cudnn():
    v = torch.backends.cudnn.version()
    if v is None:
        return {"unavailable": "torch has no cuDNN"}
    return "%d.%d.%d" % (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else str(v)
def nccl():
    v = torch.cuda.nccl.version()
    return ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
get("arch_list", arch)
get("cudnn", cudnn)
get("nccl", nccl)
print(json.dumps(out))
"""


def torch_deep():
    import subprocess

    try:
        proc = subprocess.run(
            [sys.executable, "-c", DEEP_SCRIPT],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=DEEP_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        why = {"unavailable": "importing torch took over %ds" % DEEP_TIMEOUT}
        return {"arch_list": why, "cudnn": why, "nccl": why}
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["?"]
        why = {"unavailable": "import torch failed: %s" % tail[0]}
        return {"arch_list": why, "cudnn": why, "nccl": why}
    return json.loads(proc.stdout.decode("utf-8", "replace").strip().splitlines()[-1])


GPU_QUERY = "index,name,compute_cap,driver_version,memory.total"
CUDA_VERSION = re.compile(r"CUDA Version:\s*([0-9.]+)")


def parse_gpu_csv(text):
    gpus = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) < 5:
            raise ValueError("unexpected nvidia-smi line %r" % line)

        def value(cell):
            return None if cell in ("", "[N/A]", "N/A", "[Not Supported]") else cell

        memory = value(cells[4])
        gpus.append(
            {
                "index": int(cells[0]),
                "name": cells[1],
                "compute_capability": value(cells[2]),
                "driver_version": value(cells[3]),
                "memory_mib": int(float(memory)) if memory else None,
            }
        )
    return gpus


def parse_cuda_version(text):
    match = CUDA_VERSION.search(text)
    return match.group(1) if match else None


def run_tool(argv):
    import subprocess

    try:
        proc = subprocess.run(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=NVIDIA_SMI_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s did not answer within %ds" % (argv[0], NVIDIA_SMI_TIMEOUT)) from None
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).decode("utf-8", "replace").strip().splitlines()
        raise RuntimeError(
            "%s exited %d: %s" % (argv[0], proc.returncode, err[0] if err else "no output")
        )
    return proc.stdout.decode("utf-8", "replace")


def which(name):
    for directory in os.environ.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(directory or ".", name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None


def gpu_facts():
    smi = which("nvidia-smi")
    if not smi:
        return {"unavailable": "nvidia-smi not found on PATH"}
    try:
        gpus = parse_gpu_csv(
            run_tool([smi, "--query-gpu=" + GPU_QUERY, "--format=csv,noheader,nounits"])
        )
        cuda = parse_cuda_version(run_tool([smi]))
    except (OSError, RuntimeError, ValueError) as e:
        return {"unavailable": str(e)}
    drivers = sorted({g["driver_version"] for g in gpus if g["driver_version"]})
    return {
        "gpus": gpus,
        "driver_version": drivers[0] if len(drivers) == 1 else (", ".join(drivers) or None),
        "cuda_driver_version": cuda,
    }


def os_release():
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        try:
            text = read_text(path)
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep:
                fields[key.strip()] = value.strip().strip("\"'")
        return fields.get("PRETTY_NAME") or fields.get("NAME") or "unknown"
    return None


def system_facts():
    uname = os.uname()
    glibc = None
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError, AttributeError):
        pass
    return {
        "os": os_release() or ("%s %s" % (uname.sysname, uname.release)),
        "kernel": uname.release,
        "machine": uname.machine,
        "glibc": glibc.split()[-1] if glibc else None,
        "hostname": uname.nodename,
    }


def installer_facts(finder):
    """Whether the interpreter can run pip, and where uv is: how envsync may install here."""
    found = finder.find("pip")
    uv = which("uv")
    if uv is None:  # `pip install uv` puts it beside the interpreter, maybe not on PATH
        beside = os.path.join(os.path.dirname(sys.executable), "uv")
        uv = beside if os.access(beside, os.X_OK) else None
    return {"pip": found[1] if found and found[1] else None, "uv": uv}


def env_facts(patterns):
    import fnmatch

    out = {}
    for name in sorted(os.environ):
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            out[name] = redact_env(name, os.environ[name])
    return out


# ---------------------------------------------------------------------------------------
# Startup import graph: what the service's entrypoint imports, read with ast, never run.
#
# Each import edge records its context: "module" (runs when the module is imported),
# "if" (module level, under a condition), "try" (module level, inside a try whose first
# ImportError-catching handler swallows it), "fallback" (inside such a handler's body or
# another except body: runs only when the try failed; `group` names the try, so that the
# two are judged together), "typing" (under `if TYPE_CHECKING:`, never runs) or "function"
# (inside a def: runs only when called). Modules of the "internal" packages (the
# entrypoint's own, the watched ones) are followed through their module-level edges; other
# modules are read once for the names they bind (and through `import *`), not followed.
#
# A lazy module (one that replaces itself in sys.modules, transformers' `_import_structure`
# and `define_import_structure`, a module `__getattr__` over a name table, lazy_loader's
# `attach`) exports names it does not bind: its facts carry the table ("lazy": name ->
# the submodule that defines it, star submodules, and whether the table is complete).

# Where an import stands, surest to run first (envsync.vocab.CONTEXTS; a test ties them).
CONTEXTS = ("module", "if", "try", "fallback", "function", "typing")
CONTEXT_RANK = dict((c, i) for i, c in enumerate(CONTEXTS))
RUNS_CONTEXTS = ("module", "if", "try", "fallback")
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
EXITS = {"exit", "_exit", "quit", "abort"}
GRAPH_FACTS_VERSION = 2
STATEMENT_CHARS = 160


def deeper(current, new):
    return new if CONTEXT_RANK[new] > CONTEXT_RANK[current] else current


def catches_import_error(handler):
    return names_import_error(handler.type)


def names_import_error(node):
    """Whether an except clause's type (None: bare) catches ImportError."""
    import ast

    if node is None:
        return True
    types = node.elts if isinstance(node, ast.Tuple) else [node]
    for t in types:
        name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
        if name in IMPORT_ERRORS:
            return True
    return False


def ends_by_raising(body):
    """Whether a handler body always ends by raising or exiting (it does not swallow)."""
    import ast

    if not body:
        return False
    last = body[-1]
    if isinstance(last, ast.Raise):
        return True
    if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call):
        func = last.value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        return name in EXITS
    if isinstance(last, ast.If):
        return ends_by_raising(last.body) and ends_by_raising(last.orelse)
    return False


def guards_import(node):
    """Whether a try statement swallows an ImportError raised in its body.

    The first handler that catches ImportError decides: one that re-raises does not guard.
    """
    for handler in node.handlers:
        if catches_import_error(handler):
            return not ends_by_raising(handler.body)
    return False


def suppresses_import_error(item):
    """`with contextlib.suppress(ImportError, ...):`"""
    import ast

    call = item.context_expr
    if not isinstance(call, ast.Call):
        return False
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    return name == "suppress" and any(names_import_error(a) for a in call.args)


def is_type_checking(test):
    import ast

    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def is_main_guard(test):
    """`if __name__ == "__main__":`"""
    import ast

    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def called_at_import(tree, functions, as_main):
    """Module-level functions the module calls while it runs (`main()`, `sys.exit(main())`,
    and under `if __name__ == "__main__":` when it runs as a script), with the context of
    the surest call; followed through the calls those functions make in turn."""
    import ast

    called = {}  # type: dict[str, str]

    def calls(node):
        return [
            c.func.id
            for c in ast.walk(node)
            if isinstance(c, ast.Call) and isinstance(c.func, ast.Name) and c.func.id in functions
        ]

    def note(name, context):
        if name not in called or CONTEXT_RANK[context] < CONTEXT_RANK[called[name]]:
            called[name] = context
            for inner in calls(functions[name]):
                note(inner, context)

    def scan(body, context):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(node, ast.If):
                if is_type_checking(node.test):
                    continue
                if is_main_guard(node.test):
                    if as_main:
                        scan(node.body, context)
                    else:
                        scan(node.orelse, context)
                    continue
                scan(node.body, deeper(context, "if"))
                scan(node.orelse, deeper(context, "if"))
                continue
            if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                guarded = any(catches_import_error(h) for h in node.handlers)
                scan(node.body, deeper(context, "try") if guarded else context)
                for part in [h.body for h in node.handlers] + [node.orelse, node.finalbody]:
                    scan(part, context)
                continue
            for name in calls(node):
                note(name, context)

    scan(tree.body, "module")
    return called


def bound_names(target, out):
    import ast

    if isinstance(target, ast.Name):
        out.add(target.id)
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            bound_names(elt, out)
    elif isinstance(target, ast.Starred):
        bound_names(target.value, out)


def literal_strings(node):
    import ast

    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [e.value for e in node.elts]  # type: ignore[attr-defined]
    return None


def literal_string(node):
    import ast

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def pairs(node):
    """(key, value) of a dict display (zip(strict=) needs Python 3.10)."""
    return [(node.keys[i], node.values[i]) for i in range(len(node.keys))]


def call_name(node):
    import ast

    if not isinstance(node, ast.Call):
        return None
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def constant_import(node):
    """The module of `importlib.import_module("x")` / `__import__("x")` with a constant name."""
    name = call_name(node)
    if name not in ("import_module", "__import__") or not node.args:
        return None
    module = literal_string(node.args[0])
    if not module or module.startswith("."):
        return None
    return module


def is_sys_modules_self(target):
    """`sys.modules[__name__]` as an assignment target."""
    import ast

    if not isinstance(target, ast.Subscript):
        return False
    value = target.value
    if not (isinstance(value, ast.Attribute) and value.attr == "modules"):
        return False
    key = target.slice
    if type(key).__name__ == "Index":  # Python 3.8
        key = key.value  # type: ignore[attr-defined]
    return isinstance(key, ast.Name) and key.id == "__name__"


class NameTables:
    """Module-level dict literals that may be a lazy module's table, and what mutates them."""

    def __init__(self, package):
        self.package = package
        self.tables = {}  # type: dict[str, dict[str, Any]]
        # {"Name": "module"} tables (a module __getattr__'s): name -> absolute module
        self.by_name = {}  # type: dict[str, dict[str, str]]
        # X = define_import_structure(path, prefix="models"); X[...].update(T): star
        # packages and the tables merged into X
        self.derived = {}  # type: dict[str, dict[str, Any]]
        self.inexact = set()  # type: set[str]

    def resolve(self, value):
        """A table value (submodule key) as an absolute module name."""
        if value.startswith("."):
            stripped = value.lstrip(".")
            base = self.package
            for _ in range(len(value) - len(stripped) - 1):
                base = base.rpartition(".")[0]
            return base + ("." + stripped if stripped else "")
        if self.package and not value.startswith(self.package.partition(".")[0] + "."):
            return self.package + "." + value if value else self.package
        return value

    def assign(self, name, value):
        import ast

        if call_name(value) == "define_import_structure":
            prefix = None
            for kw in value.keywords:
                if kw.arg == "prefix":
                    prefix = literal_string(kw.value)
            stars = [self.resolve(prefix)] if prefix else []
            self.derived[name] = {"stars": stars, "dir": not prefix, "merged": []}
            return
        if isinstance(value, ast.Dict):
            table, by_name = {}, {}
            for key, item in pairs(value):
                key_text = literal_string(key) if key is not None else None
                if key_text is None:
                    self.inexact.add(name)
                    continue
                table[key_text] = literal_strings(item)
                module = literal_string(item)
                if module is not None:
                    by_name[key_text] = self.resolve(module)
            self.tables[name] = table
            if by_name:
                self.by_name[name] = by_name

    def mutate(self, node):
        """Track `T[key] = [...]`, `T[key].append(x)`, `T[key].extend([...])`, `T.update(...)`."""
        import ast

        def subscript_of(target):
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
                key = target.slice
                if type(key).__name__ == "Index":
                    key = key.value  # type: ignore[attr-defined]
                return target.value.id, literal_string(key)
            return None, None

        if isinstance(node, ast.Assign):
            for target in node.targets:
                name, key = subscript_of(target)
                if name in self.tables:
                    if key is None:
                        self.inexact.add(name)
                    else:
                        self.tables[name][key] = literal_strings(node.value)
            return
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            return
        func = node.value.func
        if not isinstance(func, ast.Attribute):
            return
        owner = func.value
        if isinstance(owner, ast.Name) and owner.id in self.tables:
            self.inexact.add(owner.id)  # T.update(...), T.setdefault(...): not read
            return
        name, key = subscript_of(owner)
        if name in self.derived and func.attr == "update" and node.value.args:
            merged = node.value.args[0]
            if isinstance(merged, ast.Name) and merged.id in self.tables:
                self.derived[name]["merged"].append(merged.id)
            else:
                self.derived[name]["merged"].append(None)
            return
        if name not in self.tables:
            return
        if key is None or func.attr not in ("append", "extend"):
            self.inexact.add(name)
            return
        entry = self.tables[name].setdefault(key, [])
        arg = node.value.args[0] if node.value.args else None
        items = [literal_string(arg)] if func.attr == "append" else literal_strings(arg)
        if entry is None or items is None or None in items:
            self.inexact.add(name)
        else:
            entry.extend(items)

    def lazy(self, name):
        """{"names": {name: module}, "stars": [...], "exact": bool} of table `name`."""
        names = {}  # type: dict[str, str]
        stars = []  # type: list[str]
        for key, items in self.tables.get(name, {}).items():
            module = self.resolve(key)
            if items is None:
                if key in self.by_name.get(name, {}):
                    continue  # a {"Name": "module"} entry, read by by_name
                # transformers' dummy-object entries list `dir()` of the submodule.
                stars.append(module)
                continue
            for item in items:
                names.setdefault(item, module)
        return {"names": names, "stars": stars, "exact": name not in self.inexact}


def analyze_source(text, modname, is_package):
    """Import edges, bound names and any lazy-export table of one module's source."""
    import ast

    tree = ast.parse(text)
    lines = text.splitlines()
    as_main = modname == "__main__"  # a script: its `if __name__ == "__main__":` runs
    bodies = {}  # module-level function -> its imports, as if its body ran at module level
    rerun = [False]  # reading a function's body again for `bodies`
    package = modname if is_package else modname.rpartition(".")[0]
    facts = {
        "imports": [],
        "defines": set(),
        "all": None,
        "dynamic": False,
        "stars": [],
        "lazy": None,
    }  # type: dict[str, Any]
    tables = NameTables(package)
    dynamic_imports = "import_module" in text or "__import__" in text
    typing_names = {}  # type: dict[str, str]
    typing_stars = []  # type: list[str]
    lazy = {
        "replaced": False,
        "dir": False,
        "table": None,
        "extra": [],
        "getattr": [],
        "derived": None,
    }  # type: dict[str, Any]
    attached = []  # type: list[dict[str, Any]]

    def statement(node):
        first = lines[node.lineno - 1].strip() if node.lineno <= len(lines) else ""
        end = getattr(node, "end_lineno", node.lineno) or node.lineno
        if end > node.lineno:
            first += " ..."
        return first[:STATEMENT_CHARS]

    def absolute(node):
        if not node.level:
            return node.module or ""
        base = package
        for _ in range(node.level - 1):
            base = base.rpartition(".")[0]
        return base + ("." + node.module if node.module else "") if base else (node.module or "")

    def add_edge(module, names, node, context, condition, group):
        facts["imports"].append(
            {
                "module": module,
                "names": names,
                "line": node.lineno,
                "context": context,
                "statement": statement(node),
                "condition": condition,
                "group": group,
            }
        )

    def calls(node, context, condition, group):
        """Constant importlib.import_module(...) calls anywhere in a statement."""
        if not dynamic_imports:
            return
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call):
                module = constant_import(sub)
                if module:
                    add_edge(module, [], sub, context, condition, group)

    def lazy_call(value):
        """Read a `sys.modules[__name__] = Lazy(...)` or `attach(...)` call's tables."""
        for sub in ast.walk(value):
            if isinstance(sub, ast.Name) and sub.id in tables.tables:
                lazy["table"] = sub.id
            elif isinstance(sub, ast.Name) and sub.id in tables.derived:
                lazy["derived"] = sub.id
            elif call_name(sub) == "define_import_structure":
                lazy["dir"] = True
            elif (
                isinstance(sub, ast.keyword)
                and sub.arg == "extra_objects"
                and isinstance(sub.value, ast.Dict)
            ):
                lazy["extra"].extend(
                    k for k in (literal_string(k) for k in sub.value.keys if k) if k
                )

    def attach(value):
        """lazy_loader.attach(__name__, submodules=[...], submod_attrs={...})."""
        args = {"submodules": None, "submod_attrs": None}
        for i, arg in enumerate(value.args[1:3]):
            args[("submodules", "submod_attrs")[i]] = arg
        for kw in value.keywords:
            if kw.arg in args:
                args[kw.arg] = kw.value
        names = {}  # type: dict[str, str]
        exact = True
        subs = args["submodules"]
        if subs is not None and not (isinstance(subs, ast.Constant) and subs.value is None):
            listed = literal_strings(subs)
            if listed is None and isinstance(subs, ast.Set):
                listed = literal_strings(ast.List(elts=subs.elts))
            if listed is None:
                exact = False
            for item in listed or []:
                names[item] = package + "." + item
        attrs = args["submod_attrs"]
        if isinstance(attrs, ast.Dict):
            for key, item in pairs(attrs):
                key_text = literal_string(key) if key is not None else None
                items = literal_strings(item)
                if key_text is None or items is None:
                    exact = False
                    continue
                for name in items:
                    names[name] = package + "." + key_text
        elif attrs is not None and not (isinstance(attrs, ast.Constant) and attrs.value is None):
            exact = False
        attached.append({"names": names, "stars": [], "exact": exact})

    def visit(body, context, condition, group=None):
        for node in body:
            top = context in RUNS_CONTEXTS
            if isinstance(node, ast.Import):
                for alias in node.names:
                    add_edge(alias.name, [], node, context, condition, group)
                    if top:
                        facts["defines"].add(alias.asname or alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom):
                target = absolute(node)
                names = [a.name for a in node.names]
                add_edge(target, names, node, context, condition, group)
                if top:
                    for alias in node.names:
                        if alias.name == "*":
                            facts["stars"].append(target)
                        else:
                            facts["defines"].add(alias.asname or alias.name)
                elif context == "typing" and target.startswith(modname + ".") and not rerun[0]:
                    for alias in node.names:
                        if alias.name == "*":
                            typing_stars.append(target)
                        else:
                            typing_names.setdefault(alias.asname or alias.name, target)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if top:
                    facts["defines"].add(node.name)
                    if node.name == "__getattr__" and not rerun[0]:
                        facts["dynamic"] = True
                        lazy["getattr"] = sorted(
                            {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
                        )
                visit(node.body, "function", condition)
                if context == "module":
                    saved = dict(facts)
                    facts.update(imports=[], defines=set(), stars=[])
                    rerun[0] = True  # its imports only: its names are not the module's
                    visit(node.body, "module", None)
                    rerun[0] = False
                    bodies[node.name] = (node, facts["imports"])
                    facts.update(saved)
            elif isinstance(node, ast.ClassDef):
                if top:
                    facts["defines"].add(node.name)
                visit(node.body, context, condition, group)
            elif isinstance(node, ast.If):
                if as_main and is_main_guard(node.test):
                    visit(node.body, context, condition, group)
                elif is_type_checking(node.test):
                    visit(node.body, deeper(context, "typing"), condition, group)
                    visit(node.orelse, context, condition, group)
                else:
                    cond = condition or statement(node)
                    visit(node.body, deeper(context, "if"), cond, group)
                    visit(node.orelse, deeper(context, "if"), cond, group)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                here = node.lineno
                guarded = guards_import(node)
                visit(node.body, deeper(context, "try") if guarded else context, condition, here)
                for handler in node.handlers:
                    visit(handler.body, deeper(context, "fallback"), condition, here)
                visit(node.orelse, context, condition, group)
                visit(node.finalbody, context, condition, group)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    calls(item, context, condition, group)
                if any(suppresses_import_error(i) for i in node.items):
                    visit(node.body, deeper(context, "try"), condition, node.lineno)
                else:
                    visit(node.body, context, condition, group)
            elif isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
                if top and isinstance(node, (ast.For, ast.AsyncFor)):
                    bound_names(node.target, facts["defines"])
                visit(node.body, context, condition, group)
                visit(node.orelse, context, condition, group)
            elif isinstance(node, ast.Assign):
                calls(node, context, condition, group)
                if not top or rerun[0]:
                    continue
                tables.mutate(node)
                for target in node.targets:
                    bound_names(target, facts["defines"])
                    if isinstance(target, ast.Name):
                        if target.id == "__all__":
                            facts["all"] = literal_strings(node.value)
                        tables.assign(target.id, node.value)
                    if is_sys_modules_self(target):
                        lazy["replaced"] = True
                        lazy_call(node.value)
                if call_name(node.value) == "attach" and isinstance(node.value, ast.Call):
                    attach(node.value)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                calls(node, context, condition, group)
                if top:
                    bound_names(node.target, facts["defines"])
                    if isinstance(node.target, ast.Name) and not rerun[0]:
                        tables.assign(node.target.id, node.value)
            elif isinstance(node, ast.AugAssign):
                calls(node, context, condition, group)
                target = node.target
                if top and isinstance(target, ast.Name) and target.id == "__all__":
                    extra = literal_strings(node.value)
                    if extra is not None and facts["all"] is not None:
                        facts["all"] = facts["all"] + extra
            elif isinstance(node, (ast.Expr, ast.Return)):
                calls(node, context, condition, group)
                if top and not rerun[0]:
                    tables.mutate(node)

    visit(tree.body, "module", None)
    # A function the module calls while it runs imports what it imports then, as surely
    # as the call runs: `main()` at the bottom of a script is startup, not a lazy import.
    called = called_at_import(tree, dict((n, b[0]) for n, b in bodies.items()), as_main)
    for name, context in called.items():
        node, edges = bodies[name]
        end = getattr(node, "end_lineno", None) or node.lineno
        inside = set(
            (e["line"], e["module"])
            for e in edges
            if node.lineno <= e["line"] <= end and e["context"] != "function"
        )
        facts["imports"] = [
            e
            for e in facts["imports"]
            if not (e["context"] == "function" and (e["line"], e["module"]) in inside)
        ]
        for edge in edges:
            if (edge["line"], edge["module"]) in inside:
                ran = dict(edge, context=deeper(context, edge["context"]))
                ran["condition"] = ran["condition"] or "%s() runs while the module runs" % name
                facts["imports"].append(ran)
    facts["defines"] = sorted(facts["defines"])
    facts["lazy"] = lazy_table(lazy, tables, attached, typing_names, typing_stars, modname)
    return facts


def lazy_table(lazy, tables, attached, typing_names, typing_stars, modname):
    """The module's lazy-export table, or None when it binds its names itself."""
    getattr_tables = [n for n in lazy["getattr"] if n in tables.tables]
    if not (lazy["replaced"] or attached or getattr_tables):
        return None
    names, stars, exact = {}, [], True
    if lazy["table"] is not None:
        table = tables.lazy(lazy["table"])
        names.update(table["names"])
        stars.extend(table["stars"])
        exact = table["exact"]
    elif lazy["derived"] is not None:
        derived = tables.derived[lazy["derived"]]
        stars.extend(derived["stars"])
        lazy["dir"] = lazy["dir"] or derived["dir"]
        for merged in derived["merged"]:
            if merged is None:
                exact = False
                continue
            table = tables.lazy(merged)
            names.update(table["names"])
            stars.extend(s for s in table["stars"] if s not in stars)
            exact = exact and table["exact"]
    elif attached:
        names.update(attached[-1]["names"])
        exact = attached[-1]["exact"]
    elif getattr_tables:
        # A module __getattr__ may compute other names than its table's: never exact.
        exact = False
        for name in getattr_tables:
            names.update(tables.lazy(name)["names"])
            names.update(tables.by_name.get(name, {}))
    elif not lazy["dir"]:
        exact = False  # a replacement whose table envsync cannot read
    for name in lazy["extra"]:
        names[name] = modname
    for name, module in typing_names.items():
        names.setdefault(name, module)
    stars.extend(s for s in typing_stars if s not in stars)
    return {"names": names, "stars": stars, "exact": exact, "dir": lazy["dir"]}


# Every folder a ModuleFinder looked in: what a cached graph's validity depends on.
SEARCHED = set()  # type: set[str]


class ModuleFinder:
    """Find modules by name without importing anything: importlib's PathFinder, then the
    editable finders' MAPPING, in the order the interpreter asks them (setuptools appends
    its finder to sys.meta_path, after the path finder)."""

    def __init__(self, paths, editable=None):
        import sysconfig
        from importlib.machinery import PathFinder

        self.finder = PathFinder
        self.paths = paths
        self.editable = editable or {}
        self.mapped = set()  # top-level names found through an editable finder
        self.cache = {}
        stdlib = {sysconfig.get_paths().get(k) for k in ("stdlib", "platstdlib")}
        self.stdlib = tuple(p for p in stdlib if p)

    def find(self, name):
        """(kind, origin, search locations) or None when the module cannot be found."""
        if name in self.cache:
            return self.cache[name]
        result = None  # type: Any
        parent, _, _ = name.rpartition(".")
        if not parent and name in sys.builtin_module_names:
            result = ("builtin", None, None)
        else:
            search = self.paths
            if parent:
                found = self.find(parent)
                search = found[2] if found else None
            spec = None
            if search is not None:
                SEARCHED.update(search)
                try:
                    spec = self.finder.find_spec(name, list(search))
                except KeyError:
                    # A namespace package inside a regular one: importlib wants the
                    # parent imported to build its path. Find its directories instead.
                    last = name.rpartition(".")[2]
                    dirs = [os.path.join(p, last) for p in search]
                    dirs = [d for d in dirs if os.path.isdir(d)]
                    result = ("namespace", None, dirs) if dirs else None
                    self.cache[name] = result
                    return result
                except (ImportError, ValueError, OSError):
                    spec = None
            if spec is None and not parent and name in self.editable:
                result = self.find_mapped(name, self.editable[name])
            if spec is not None:
                origin = spec.origin if spec.has_location else None
                locations = spec.submodule_search_locations
                if origin is None:
                    kind = "namespace" if locations is not None else "builtin"
                elif origin.startswith(self.stdlib) and "-packages" not in origin:
                    kind = "stdlib"
                elif origin.endswith(".py"):
                    kind = "source"
                else:
                    kind = "extension"
                result = (kind, origin, list(locations) if locations is not None else None)
        self.cache[name] = result
        return result

    def find_mapped(self, name, path):
        """What an editable finder answers for a top-level name it maps to `path`."""
        init = os.path.join(path, "__init__.py")
        SEARCHED.update((path, os.path.dirname(path)))
        if os.path.isdir(path):
            self.mapped.add(name)
            if os.path.isfile(init):
                return ("source", init, [path])
            return ("namespace", None, [path])
        if os.path.isfile(path):
            self.mapped.add(name)
            return ("source" if path.endswith(".py") else "extension", path, None)
        return None


def cache_path(options, kind="imports"):
    """Where the host-side cache of `kind` lives (None: caching is off)."""
    base = options.get("cache_dir")
    if base is None:
        base = os.path.join(
            os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
            "envsync",
        )
    elif not base:
        return None
    if kind == "hashes":
        # One file per environment: a probe loads the hashes of its own files only.
        return os.path.join(base, "hashes-v1-%s.json" % env_key(sys.prefix))
    if kind == "graph":  # one file per graph key (%s), written whole, read line by line
        version = options.get("probe_id") or "v%d" % GRAPH_FACTS_VERSION
        return os.path.join(base, "graph-%s-%%s.json" % version)
    # Parsed import facts are only as good as the code that parsed them: keyed by this
    # probe's own digest, so that another envsync version on the host never reads them.
    version = options.get("probe_id") or "v%d" % GRAPH_FACTS_VERSION
    return os.path.join(base, "imports-%s-py%d%d.json" % ((version, *sys.version_info[:2])))


def load_cache(path):
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def save_cache(path, data):
    save_text(path, json.dumps(data, separators=(",", ":")))


def save_text(path, text):
    # The probe's only writes: its caches (parsed-source facts keyed by sha256, file
    # hashes and whole graphs keyed by stat), so that a second run skips ast and hashing.
    # Best effort: a read-only home just means no cache.
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        pass


def console_script(name):
    """`module:function` of a console script of this environment, from entry_points.txt."""
    for entry in [p for p in sys.path if p and os.path.isdir(p)]:
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        for meta in names:
            if not meta.endswith((".dist-info", ".egg-info")):
                continue
            SEARCHED.add(os.path.join(entry, meta, "entry_points.txt"))
            try:
                text = read_text(os.path.join(entry, meta, "entry_points.txt"))
            except OSError:
                continue
            section = None
            for line in (text or "").splitlines():
                line = line.strip()
                if line.startswith("["):
                    section = line.strip("[]").strip()
                elif section == "console_scripts" and "=" in line:
                    key, _, value = line.partition("=")
                    if key.strip() == name:
                        return value.split("[")[0].strip()
    return None


def launch_roots(roots, options):
    """Roots as envsync names them -> module names, with what each resolved to.

    "console:NAME": the module of the console script NAME of this environment;
    "script:PATH": the script, as __main__, its folder first on sys.path (as Python does).
    """
    out, resolved, main_file = [], {}, None
    for root in roots:
        if root.startswith("console:"):
            target = console_script(root[len("console:") :])
            if target:
                resolved[root] = target
                out.append(target.partition(":")[0])
        elif root.startswith("script:"):
            where = os.path.expanduser(options.get("workdir") or "~")
            main_file = os.path.normpath(os.path.join(where, root[len("script:") :]))
            if os.path.isfile(main_file):
                resolved[root] = "__main__"
                out.append("__main__")
        else:
            out.append(root)
    return out, resolved, main_file


def binding_patterns(name):
    """Text that may bind `name` in a module: (a def, class, assignment or string, as in
    `__all__`; an import of it, one line or one item of a parenthesized list, or an alias).

    A file with none of these cannot bind the name; a file with one is read with ast.
    """
    n = re.escape(name.encode())
    defines = re.compile(
        rb"(?:class|def)[ \t]+" + n + rb"\b|^[ \t]*" + n + rb"[ \t]*[:=]|['\"]" + n + rb"['\"]"
    )
    imports = re.compile(
        rb"^[ \t]*" + n + rb"[ \t]*(?:,|\)|\r?$|as\b)"
        rb"|\bimport[ \t].*\b" + n + rb"\b"
        rb"|\bas[ \t]+" + n + rb"\b"
    )
    return defines, imports


def python_files(found):
    """The .py files of a found module or package tree (None: not all source)."""
    if found is None:
        return []
    kind, origin, locations = found
    if locations is None:
        return [origin] if kind == "source" else None
    files = []  # type: list[str]
    for location in locations:
        for dirpath, dirnames, filenames in os.walk(location):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            files.extend(os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))
    return files


def package_submodules(name, locations, subpackages=False):
    """The modules (and subpackages) in a package's directories."""
    found = set()
    for location in locations:
        try:
            entries = os.listdir(location)
        except OSError:
            continue
        for entry in entries:
            stem, dot, ext = entry.partition(".")
            if dot and ext == "py" and stem != "__init__" and IDENT.match(stem):
                found.add(name + "." + stem)
            elif (
                not dot
                and subpackages
                and IDENT.match(entry)
                and os.path.isfile(os.path.join(location, entry, "__init__.py"))
            ):
                found.add(name + "." + entry)
    return sorted(found)


def startup_graph(options, finder):
    roots = options.get("roots") or []
    if not roots:
        return None
    roots, resolved, main_file = launch_roots(roots, options)
    internal = tuple(options.get("internal") or [r.partition(".")[0] for r in roots])
    internal += tuple(r.partition(".")[0] for r in roots if r.partition(".")[0] not in internal)
    path = cache_path(options)
    cache = load_cache(path)
    fresh = 0
    if main_file:
        # A script: its folder first on sys.path, as Python puts it (not with -I or -P).
        paths = list(finder.paths)
        if not options.get("isolated"):
            paths.insert(0, os.path.dirname(main_file))
        finder = ModuleFinder(paths, finder.editable)
        finder.cache["__main__"] = ("source", main_file, None)
    modules = {}  # type: dict[str, dict[str, Any]]
    stats = {"parsed": 0, "cached": 0}
    queue = []  # type: list[str]
    mode = {}  # type: dict[str, bool]  # name -> follow its imports (True) or only read what it binds (False)

    def is_internal(name):
        return name.partition(".")[0] in internal

    requested = {}  # type: dict[str, set[str]]  # module -> names imported from it

    def want(name, follow):
        if not name:
            return
        before = mode.get(name)
        if before is None or (follow and not before):
            mode[name] = follow
            modules.pop(name, None)  # seen shallow, now to be followed: read it again
            queue.append(name)

    def request(name, item):
        # A name imported from a lazy module lives in a submodule its table names: read
        # that submodule too (and, through tables of tables, the next one).
        names = requested.setdefault(name, set())
        if item in names:
            return
        names.add(item)
        lazy = (modules.get(name) or {}).get("lazy")
        if lazy is not None:
            resolve_lazy(name, lazy, item)

    def resolve_lazy(name, lazy, item):
        owner = lazy["names"].get(item)
        if owner is not None:
            if owner != name:
                want(owner, False)
                if owner != name + "." + item:
                    request(owner, item)
            return
        # Read only the star submodules whose files may bind the name (transformers' models
        # tree is thousands of files): those that define it or list it in a string (as
        # `__all__` does) first; those that only import it (a re-export) only when no
        # module defines it. A "?" candidate says some were not read: not found is then
        # "cannot tell".
        tiers = [(star, mentions(star, item)) for star in lazy["stars"]]
        strong = [star for star, tier in tiers if tier == 2]
        weak = [star for star, tier in tiers if tier == 1]
        hits = strong or weak
        lazy.setdefault("candidates", {})[item] = hits + (["?"] if strong and weak else [])
        for star in hits:
            want(star, False)
            request(star, item)

    subtree = {}  # type: dict[str, Any]
    texts = {}  # type: dict[str, bytes]  # source read for the text search, read once

    def mentions(module, item):
        """2: a file may define the name; 1: one may import it; 0: none names it."""
        if module not in subtree:
            subtree[module] = python_files(finder.find(module))
        files = subtree[module]
        if files is None:
            return 2  # an extension module or unreadable: read it, never rule it out
        needle = item.encode()
        defines, imports = binding_patterns(item)
        best = 0
        for path in files:
            data = texts.get(path)
            if data is None:
                try:
                    with open(path, "rb") as f:
                        data = texts[path] = f.read()
                except OSError:
                    return 2
            # Test only the lines that hold the name: a regex over whole files is slow.
            at = data.find(needle)
            while at >= 0:
                start = data.rfind(b"\n", 0, at) + 1
                end = data.find(b"\n", at)
                line = data[start : end if end >= 0 else len(data)]
                if defines.search(line):
                    return 2
                if best == 0 and imports.search(line):
                    best = 1
                if end < 0:
                    break
                at = data.find(needle, end)
        return best

    for root in roots:
        if root.endswith(".*"):  # every module of a package (a registry imports them all)
            package = root[:-2]
            found = finder.find(package)
            for sub in package_submodules(package, (found and found[2]) or []):
                want(sub, True)
            root = package
        want(root, True)

    while queue:
        name = queue.pop(0)
        if name in modules:
            continue
        found = finder.find(name)
        if found is None:
            modules[name] = {"kind": "missing"}
            continue
        kind, origin, locations = found
        info = {"kind": kind, "file": origin}
        modules[name] = info
        parent = name.rpartition(".")[0]
        if parent:
            want(parent, is_internal(parent))
        if kind != "source":
            continue
        try:
            with open(origin, "rb") as f:
                data = f.read()
        except OSError as e:
            info["kind"] = "error"
            info["error"] = "cannot read: %s" % e.strerror
            continue
        digest = hashlib.sha256(data).hexdigest()
        info["sha256"] = digest
        # Relative imports resolve against the module's own name: it is part of the key.
        key = "%s:%s:%d" % (digest, name, locations is not None)
        facts = cache.get(key)
        if facts is None:
            try:
                facts = analyze_source(data.decode("utf-8", "replace"), name, locations is not None)
            except (SyntaxError, ValueError, RecursionError) as e:
                info["kind"] = "error"
                info["error"] = "cannot parse: %s" % e
                continue
            cache[key] = facts
            fresh += 1
            stats["parsed"] += 1
        else:
            stats["cached"] += 1
        follow = mode[name] and is_internal(name)
        info.update({k: facts[k] for k in ("defines", "all", "dynamic", "stars")})
        lazy = facts.get("lazy")
        if lazy is not None:
            lazy = dict(lazy)
            if lazy.pop("dir") and locations:
                lazy["stars"] = lazy["stars"] + [
                    s
                    for s in package_submodules(name, locations, subpackages=True)
                    if s not in lazy["stars"]
                ]
            info["lazy"] = lazy
            for item in sorted(requested.get(name, ())):
                resolve_lazy(name, lazy, item)
        # Import edges matter only where startup follows them.
        info["imports"] = facts["imports"] if follow else []
        for star in facts["stars"]:
            want(star, follow and is_internal(star))
        if not follow:
            continue
        for edge in facts["imports"]:
            target = edge["module"]
            runs = edge["context"] in RUNS_CONTEXTS
            inner = is_internal(target)
            if inner and runs:
                want(target, True)
            elif runs or edge["context"] == "function":
                # Know whether it exists and what it binds; do not follow it.
                want(target, False)
            if edge["names"] and (runs or edge["context"] == "function"):
                for item in edge["names"]:
                    if item != "*":
                        sub = target + "." + item
                        if finder.find(sub) is not None:
                            want(sub, inner and runs)
                        else:
                            request(target, item)
    if fresh and path:
        save_cache(path, cache)
    # The standard library does not drift apart from the interpreter: keep it out.
    stdlib = {n for n, m in modules.items() if m["kind"] in ("stdlib", "builtin")}
    for name in stdlib:
        del modules[name]
    for info in modules.values():
        if "imports" in info:
            info["imports"] = [e for e in info["imports"] if e["module"] not in stdlib]
    return {
        "roots": list(roots),
        "resolved": resolved,
        "internal": list(internal),
        "modules": modules,
        "parsed": stats["parsed"],
        "cached": stats["cached"],
    }


class RawJSON(object):
    """JSON text already encoded: spliced into the output as it is (a cached graph)."""

    def __init__(self, text):
        self.text = text


def file_stamp(path):
    """What changes whenever a file or folder changes: a new entry changes its folder's
    mtime, a write its mtime and ctime, a replacement its inode (None: it does not exist)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def graph_stamps(graph, extra):
    """Stamps of every source read and every folder searched to build `graph`."""
    paths = set(SEARCHED)
    paths.update(extra)
    for info in graph["modules"].values():
        if info.get("file"):
            paths.add(info["file"])
    return [[p, file_stamp(p)] for p in sorted(paths)]


def cached_startup_graph(options, finder):
    """startup_graph, reused whole while nothing it read or searched has changed.

    A warm run then stats files instead of finding, reading and hashing every module: the
    graph is keyed by everything that shapes it (roots, sys.path, editable finders, the
    interpreter, this probe), and valid while every source it read and every folder it
    searched has its size, mtime, ctime and inode unchanged. Nothing modified in the last
    seconds is cached (git's racy rule, as for file hashes). Returns a dict, or the cached
    graph as RawJSON.
    """
    path = cache_path(options, "graph")
    if not path or not options.get("roots"):
        return startup_graph(options, finder)
    key = hashlib.sha256(
        json.dumps(
            [
                [options.get(k) for k in ("roots", "internal", "workdir", "isolated")],
                finder.paths,
                sorted(finder.editable.items()),
                sys.version,
                sys.executable,
                os.path.expanduser("~"),
            ]
        ).encode()
    ).hexdigest()[:24]
    path = path % key
    try:
        with open(path, "rb") as f:
            stamps = json.loads(f.readline().decode("utf-8"))
            if all(file_stamp(p) == known for p, known in stamps):
                return RawJSON(f.read().decode("utf-8").strip())
    except (OSError, ValueError, TypeError):
        pass
    graph = startup_graph(options, finder)
    if graph is None:
        return None
    extra = list(finder.paths)
    where = os.path.expanduser(options.get("workdir") or "~")
    for root in options.get("roots") or []:
        if root.startswith("script:"):  # found or not: creating it changes the graph
            extra.append(os.path.normpath(os.path.join(where, root[len("script:") :])))
    stamps = graph_stamps(graph, extra)
    recent = time.time_ns() - RACY_SECONDS * 10**9
    if all(s is None or s[1] < recent for _, s in stamps):
        cached = dict(graph, parsed=0, cached=graph["parsed"] + graph["cached"])
        text = json.dumps(stamps, separators=(",", ":")) + "\n" + json.dumps(cached)
        save_text(path, text)
    return graph


STATE_DIR = "~/.envsync"


def env_key(prefix):
    """Several environments may live on one host: each has its own backups and service
    flags, keyed by its interpreter prefix (probe and agent hold this alike; a test ties them)."""
    return hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:12]


def service_state():
    """What envsync keeps for the service on this host: the launch flags of `repair`, and
    the crash the smoke test last saw (until the service next comes up ready)."""
    path = os.path.join(os.path.expanduser(STATE_DIR), "service", env_key(sys.prefix) + ".json")
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    flags = data.get("flags")
    flags = {str(k): str(v) for k, v in flags.items()} if isinstance(flags, dict) else None
    crash = data.get("crash")
    if not isinstance(crash, dict) or not isinstance(crash.get("exception"), str):
        crash = None
    else:
        crash = {k: str(crash[k]) for k in ("exception", "line", "at") if crash.get(k)}
    return flags, crash


def collect(options):
    started = time.time()
    paths = [p for p in sys.path if p]
    hashes_path = cache_path(options, "hashes")
    hashes = load_cache(hashes_path) if hashes_path else None
    before = dict(hashes) if hashes is not None else None
    finder = ModuleFinder(paths, editable_mapping(paths))
    distributions, broken = scan_distributions(paths, options.get("watch") or [], hashes, finder)
    if hashes_path and hashes != before:
        save_cache(hashes_path, hashes)
    facts = {
        "schema_version": 1,
        "host": options.get("host") or "local",
        "source": "probe",
        "collected_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "interpreter": interpreter_facts(),
        "distributions": distributions,
        "broken": broken,
        "watch": sorted({normalize(w) for w in options.get("watch") or []}),
        "torch": torch_facts(paths, bool(options.get("deep"))),
        "gpu": gpu_facts(),
        "system": system_facts(),
        "env": env_facts(options.get("env") or []),
        "startup": cached_startup_graph(options, finder),
        "installers": installer_facts(finder),
    }
    facts["service_flags"], facts["crash"] = service_state()
    facts["duration_s"] = round(time.time() - started, 4)
    return facts


def dumps_facts(facts):
    """The facts as JSON; a cached graph (RawJSON) goes in as it was stored."""
    raw = facts.get("startup")
    if not isinstance(raw, RawJSON):
        return json.dumps(facts)
    rest = dict(facts, startup=None)
    del rest["startup"]
    return json.dumps(rest)[:-1] + ', "startup": ' + raw.text + "}"


def main(argv):
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    sys.stdout.write(dumps_facts(collect(options)))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
