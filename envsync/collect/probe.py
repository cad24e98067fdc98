"""The envsync probe: a stdlib-only program run by a host's own interpreter (Python 3.8+).

It is shipped on stdin (`python -c BOOTSTRAP` reads it) and prints one JSON document on
stdout: the facts of an envsync snapshot. It installs nothing; its only writes are its own
caches of file hashes and parsed import facts (~/.cache/envsync on the host, keyed by file
stat and hash; `cache_dir: ""` turns them off). Options come as one JSON object in
argv[1]: {"watch": [...], "env": [...], "deep": false, "roots": [...], ...}.
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
    from typing import Any  # noqa: F401

SECRET_NAME = re.compile(
    r"TOKEN|SECRET|PASSW(?:OR)?D|PASSPHRASE|CREDENTIAL|PRIVATE|COOKIE|SESSION|AUTH|(?:^|_)KEY(?:$|_)|APIKEY|ACCESS_KEY",
    re.IGNORECASE,
)
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
REDACTED = "<redacted>"
NVIDIA_SMI_TIMEOUT = 20
DEEP_TIMEOUT = 180


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def redact_url(value):
    """Drop `user:password@` from every URL in a string."""
    return URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", value)


def redact_env(name, value):
    if SECRET_NAME.search(name):
        return REDACTED
    return redact_url(value)


def redact_data(value):
    if isinstance(value, str):
        return redact_url(value)
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
        "sys_path": [redact_url(p) for p in sys.path],
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


def scan_distributions(paths, watch, cache=None):
    watch = {normalize(w) for w in watch}
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
                watched_files(dist, records, cache)
            found[name] = dist
            order.append(name)
    return [found[n] for n in sorted(order)], broken


# ---------------------------------------------------------------------------------------
# torch, GPU, system, environment

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
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in TORCH_KEYS:
            try:
                literal = ast.literal_eval(value)
            except ValueError:
                continue
            if literal is None or isinstance(literal, str):
                facts[TORCH_KEYS[target.id]] = literal
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
# "if" (module level, under a condition), "try" (module level, inside a try whose handlers
# catch ImportError), "typing" (under `if TYPE_CHECKING:`, never runs) or "function"
# (inside a def: runs only when called). Modules of the "internal" packages (the
# entrypoint's own, the watched ones) are followed through their module-level edges; other
# modules are read once for the names they bind (and through `import *`), not followed.

# Where an import stands, surest to run first (envsync.vocab.CONTEXTS; a test ties them).
CONTEXTS = ("module", "if", "try", "function", "typing")
CONTEXT_RANK = dict((c, i) for i, c in enumerate(CONTEXTS))
IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
GRAPH_FACTS_VERSION = 2
STATEMENT_CHARS = 160


def deeper(current, new):
    return new if CONTEXT_RANK[new] > CONTEXT_RANK[current] else current


def catches_import_error(handler):
    import ast

    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    for t in types:
        name = t.attr if isinstance(t, ast.Attribute) else getattr(t, "id", None)
        if name in IMPORT_ERRORS:
            return True
    return False


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


def analyze_source(text, modname, is_package):
    """Import edges and bound names of one module's source."""
    import ast

    tree = ast.parse(text)
    lines = text.splitlines()
    as_main = modname == "__main__"  # a script: its `if __name__ == "__main__":` runs
    bodies = {}  # module-level function -> its imports, as if its body ran at module level
    package = modname if is_package else modname.rpartition(".")[0]
    facts = {
        "imports": [],
        "defines": set(),
        "all": None,
        "dynamic": False,
        "stars": [],
    }  # type: dict[str, Any]

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

    def visit(body, context, condition):
        for node in body:
            top = context in ("module", "if", "try")
            if isinstance(node, ast.Import):
                for alias in node.names:
                    facts["imports"].append(
                        {
                            "module": alias.name,
                            "names": [],
                            "line": node.lineno,
                            "context": context,
                            "statement": statement(node),
                            "condition": condition,
                        }
                    )
                    if top:
                        facts["defines"].add(alias.asname or alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom):
                target = absolute(node)
                names = [a.name for a in node.names]
                facts["imports"].append(
                    {
                        "module": target,
                        "names": names,
                        "line": node.lineno,
                        "context": context,
                        "statement": statement(node),
                        "condition": condition,
                    }
                )
                if top:
                    for alias in node.names:
                        if alias.name == "*":
                            facts["stars"].append(target)
                        else:
                            facts["defines"].add(alias.asname or alias.name)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if top:
                    facts["defines"].add(node.name)
                    if node.name == "__getattr__" and context != "typing":
                        facts["dynamic"] = True
                visit(node.body, "function", condition)
                if context == "module":
                    saved = dict(facts)
                    facts.update(imports=[], defines=set(), stars=[])
                    visit(node.body, "module", None)
                    bodies[node.name] = (node, facts["imports"])
                    facts.update(saved)
            elif isinstance(node, ast.ClassDef):
                if top:
                    facts["defines"].add(node.name)
                visit(node.body, context if context != "module" else "module", condition)
            elif isinstance(node, ast.If):
                if as_main and is_main_guard(node.test):
                    visit(node.body, context, condition)
                elif is_type_checking(node.test):
                    visit(node.body, deeper(context, "typing"), condition)
                    visit(node.orelse, context, condition)
                else:
                    cond = condition or statement(node)
                    visit(node.body, deeper(context, "if"), cond)
                    visit(node.orelse, deeper(context, "if"), cond)
            elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
                guarded = any(catches_import_error(h) for h in node.handlers)
                visit(node.body, deeper(context, "try") if guarded else context, condition)
                for handler in node.handlers:
                    visit(handler.body, context, condition)
                visit(node.orelse, context, condition)
                visit(node.finalbody, context, condition)
            elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
                if top and isinstance(node, (ast.For, ast.AsyncFor)):
                    bound_names(node.target, facts["defines"])
                visit(node.body, context, condition)
                visit(getattr(node, "orelse", []), context, condition)
            elif top and isinstance(node, ast.Assign):
                for target in node.targets:
                    bound_names(target, facts["defines"])
                    if isinstance(target, ast.Name) and target.id == "__all__":
                        facts["all"] = literal_strings(node.value)
            elif top and isinstance(node, ast.AnnAssign) and node.value is not None:
                bound_names(node.target, facts["defines"])
            elif top and isinstance(node, ast.AugAssign):
                target = node.target
                if isinstance(target, ast.Name) and target.id == "__all__":
                    extra = literal_strings(node.value)
                    if extra is not None and facts["all"] is not None:
                        facts["all"] = facts["all"] + extra

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
    return facts


class ModuleFinder:
    """Find modules by name without importing anything (importlib's PathFinder)."""

    def __init__(self, paths):
        import sysconfig
        from importlib.machinery import PathFinder

        self.finder = PathFinder
        self.paths = paths
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
        return os.path.join(base, "hashes-v1.json")
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
    # The probe's only writes: its caches (parsed-source facts keyed by sha256, and file
    # hashes keyed by stat), so that a second run skips ast and hashing. Best effort: a
    # read-only home just means no cache.
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = "%s.%d.tmp" % (path, os.getpid())
        with open(tmp, "w") as f:
            json.dump(data, f, separators=(",", ":"))
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


def startup_graph(options):
    roots = options.get("roots") or []
    if not roots:
        return None
    roots, resolved, main_file = launch_roots(roots, options)
    internal = tuple(options.get("internal") or [r.partition(".")[0] for r in roots])
    internal += tuple(r.partition(".")[0] for r in roots if r.partition(".")[0] not in internal)
    path = cache_path(options)
    cache = load_cache(path)
    fresh = 0
    paths = [p for p in sys.path if p]
    if main_file and not options.get("isolated"):
        paths.insert(0, os.path.dirname(main_file))
    finder = ModuleFinder(paths)
    if main_file:
        finder.cache["__main__"] = ("source", main_file, None)
    modules = {}  # type: dict[str, dict[str, Any]]
    stats = {"parsed": 0, "cached": 0}
    queue = []  # type: list[str]
    mode = {}  # type: dict[str, bool]  # name -> follow its imports (True) or only read what it binds (False)

    def is_internal(name):
        return name.partition(".")[0] in internal

    def want(name, follow):
        if not name:
            return
        before = mode.get(name)
        if before is None or (follow and not before):
            mode[name] = follow
            modules.pop(name, None)  # seen shallow, now to be followed: read it again
            queue.append(name)

    for root in roots:
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
        # Import edges matter only where startup follows them.
        info["imports"] = facts["imports"] if follow else []
        for star in facts["stars"]:
            want(star, follow and is_internal(star))
        if not follow:
            continue
        for edge in facts["imports"]:
            target = edge["module"]
            runs = edge["context"] in ("module", "if", "try")
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
    distributions, broken = scan_distributions(paths, options.get("watch") or [], hashes)
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
        "startup": startup_graph(options),
    }
    facts["service_flags"], facts["crash"] = service_state()
    facts["duration_s"] = round(time.time() - started, 4)
    return facts


def main(argv):
    options = json.loads(argv[1]) if len(argv) > 1 else {}
    sys.stdout.write(json.dumps(collect(options), sort_keys=False))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
