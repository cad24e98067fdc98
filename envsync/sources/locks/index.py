"""The package indexes a host installs from, and the exact files they serve for it.

The host says which indexes it uses (its own pip configuration, read through its runner)
and which wheel tags its interpreter accepts; the indexes' simple API (PEP 691 JSON or
PEP 503 HTML, whichever the index serves) says which files exist. Choosing a file is pure.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from packaging.tags import Tag, parse_tag
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

from envsync.errors import CollectError
from envsync.hostside import protocol
from envsync.hostside.shared import strip_credentials
from envsync.model.inventory import HostSpec
from envsync.runner import Runner
from envsync.runner.bundle import host_argv, host_input

JSON_TYPE = "application/vnd.pypi.simple.v1+json"
ACCEPT = f"{JSON_TYPE}, text/html;q=0.1"
TIMEOUT = 30.0


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexConfig:
    """Where a host's pip looks for packages, and the wheel tags its interpreter accepts."""

    indexes: tuple[str, ...]  # index-url first, then extra-index-url, as pip orders them
    tags: tuple[str, ...]  # most preferred first
    cert: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class IndexFile:
    """One file of a project as an index serves it."""

    filename: str
    url: str
    index: str
    hashes: Mapping[str, str] = field(default_factory=dict)
    size: int | None = None
    upload_time: str | None = None
    requires_python: str | None = None


def _precedence(key: str) -> tuple[int, int]:
    """`pip config list` keys: PIP_* variables beat files; [install] beats [global]."""
    origin, _, _ = key.partition(".")
    return (1 if origin == ":env:" else 0, 1 if origin == "install" else 0)


def parse_config(lines: Sequence[str], default: str | None) -> tuple[tuple[str, ...], str | None]:
    """The indexes and the CA bundle a host's `pip config list` output names (pure)."""
    values: dict[str, tuple[tuple[int, int], str]] = {}
    for line in lines:
        key, sep, raw = line.partition("=")
        if not sep:
            continue
        value = raw.strip().strip("'\"")
        option = key.rpartition(".")[2]
        rank = _precedence(key)
        if option not in values or rank >= values[option][0]:
            values[option] = (rank, value)
    chosen = {k: v for k, (_, v) in values.items()}
    if chosen.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        return (), chosen.get("cert")
    main = chosen.get("index-url") or default
    indexes = [main] if main else []
    indexes += chosen.get("extra-index-url", "").split()
    return tuple(dict.fromkeys(indexes)), chosen.get("cert")


def read_config(spec: HostSpec, runner: Runner) -> IndexConfig:
    """The host's index configuration, read with its own interpreter and pip."""
    argv = host_argv(spec.python, protocol.PIP_CONFIG)  # envsync/hostside/pipconfig.py
    result = runner.run(argv, input=host_input(), timeout=TIMEOUT)
    try:
        data = json.loads(result.stdout.decode("utf-8", "replace"))
    except ValueError:
        data = {"error": result.stderr_tail() or f"exit {result.returncode}"}
    if data.get("error") or not data.get("tags"):
        raise CollectError(
            f"{spec.name}: cannot read the host's pip configuration: {data.get('error')}",
            tip="install pip in the host's environment; its index configuration decides "
            "which files the lock names",
        )
    indexes, cert = parse_config(data["config"], data["default"])
    return IndexConfig(indexes=indexes, tags=tuple(data["tags"]), cert=cert)


def redact(url: str) -> str:
    """The URL without `user:password@`: credentials never go into a lock."""
    return strip_credentials(url)


# ---------------------------------------------------------------------------------------
# The simple API: a project's page, as JSON (PEP 691) or HTML (PEP 503)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            found = dict(attrs)
            if found.get("href"):
                self.links.append((str(found["href"]), found))


def _hashes(fragment: str) -> dict[str, str]:
    algo, sep, digest = fragment.partition("=")
    return {algo: digest} if sep and algo in ("sha256", "sha384", "sha512") else {}


def parse_page(body: bytes, content_type: str, page_url: str, index: str) -> list[IndexFile]:
    """The files on one project page of an index (pure)."""
    files = []
    if content_type.split(";")[0].strip() == JSON_TYPE:
        doc = json.loads(body)
        for item in doc.get("files", []):
            if item.get("yanked"):
                continue
            files.append(
                IndexFile(
                    filename=item["filename"],
                    url=urllib.parse.urljoin(page_url, item["url"]),
                    index=index,
                    hashes=dict(sorted((item.get("hashes") or {}).items())),
                    size=item.get("size"),
                    upload_time=item.get("upload-time"),
                    requires_python=item.get("requires-python"),
                )
            )
        return files
    parser = _Links()
    parser.feed(body.decode("utf-8", "replace"))
    for href, attrs in parser.links:
        if "data-yanked" in attrs:
            continue
        url, _, fragment = urllib.parse.urljoin(page_url, href).partition("#")
        files.append(
            IndexFile(
                filename=urllib.parse.unquote(url.rsplit("/", 1)[-1]),
                url=url,
                index=index,
                hashes=_hashes(fragment),
                requires_python=attrs.get("data-requires-python"),
            )
        )
    return files


Fetch = Callable[[str, Mapping[str, str]], tuple[bytes, str]]  # url, headers -> body, type


def _auth_headers(url: str) -> dict[str, str]:
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return {}
    token = f"{urllib.parse.unquote(parts.username)}:{urllib.parse.unquote(parts.password or '')}"
    return {"Authorization": "Basic " + base64.b64encode(token.encode()).decode()}


class Index:
    """The files a host's indexes serve, fetched once per project (side effect: HTTP)."""

    def __init__(self, config: IndexConfig) -> None:
        self.config = config
        cafile = config.cert if config.cert and Path(config.cert).is_file() else None
        self._ssl = ssl.create_default_context(cafile=cafile)
        self._pages: dict[str, list[IndexFile]] = {}

    def _open(self, url: str, method: str = "GET") -> tuple[bytes, str, Mapping[str, str]]:
        headers = {"Accept": ACCEPT, **_auth_headers(url)}
        request = urllib.request.Request(redact(url), headers=headers, method=method)
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=self._ssl) as response:
            return response.read(), response.headers.get("Content-Type", ""), response.headers

    def files(self, name: str) -> list[IndexFile]:
        """Every file of project `name` on every index of the host, in the host's order."""
        key = canonicalize_name(name)
        if key not in self._pages:
            found: list[IndexFile] = []
            for index in self.config.indexes:
                if index.startswith("file:"):
                    continue  # a folder of the host: a path of the machine, no source for others
                page = index.rstrip("/") + f"/{key}/"
                try:
                    body, content_type, _ = self._open(page)
                    found += parse_page(body, content_type, redact(page), redact(index))
                except (OSError, ValueError, urllib.error.URLError):
                    continue  # this index does not serve the project
            self._pages[key] = found
        return self._pages[key]

    def size(self, url: str) -> int | None:
        """A file's size when the page did not say (HTML pages never do): a HEAD request."""
        try:
            _, _, headers = self._open(url, method="HEAD")
            length = headers.get("Content-Length")
            return int(length) if length else None
        except (OSError, ValueError, urllib.error.URLError):
            return None


def _tag_ranks(tags: Sequence[str]) -> dict[Tag, int]:
    ranks: dict[Tag, int] = {}
    for i, text in enumerate(tags):
        for tag in parse_tag(text):
            ranks.setdefault(tag, i)
    return ranks


def choose(
    files: Sequence[IndexFile],
    name: str,
    version: str,
    tags: Sequence[str],
    sha256: str | None = None,
) -> IndexFile | None:
    """The file the host installs `name==version` from (pure): the file with the recorded
    hash when one is known, else the wheel of the host's most preferred tag, else the sdist."""
    if sha256:
        return next((f for f in files if f.hashes.get("sha256") == sha256), None)
    try:
        wanted = Version(version)
    except InvalidVersion:
        return None
    ranks = _tag_ranks(tags)
    best: tuple[int, IndexFile] | None = None
    sdist = None
    for f in files:
        if not f.hashes:
            continue  # a lock needs a hash of every file
        try:
            if f.filename.endswith(".whl"):
                wname, wversion, _, wtags = parse_wheel_filename(f.filename)
                rank = min((ranks[t] for t in wtags if t in ranks), default=None)
                fits = wname == canonicalize_name(name) and wversion == wanted
                if fits and rank is not None and (best is None or rank < best[0]):
                    best = (rank, f)
            else:
                sname, sversion = parse_sdist_filename(f.filename)
                if sname == canonicalize_name(name) and sversion == wanted and sdist is None:
                    sdist = f
        except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
            continue
    return best[1] if best else sdist
