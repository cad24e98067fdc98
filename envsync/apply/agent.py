"""The envsync agent: the stdlib-only program that changes a host, run like the probe.

Run by the host's own interpreter as `python -c AGENT OP`: argv[1] is one JSON operation;
binary payloads (tar archives) travel on stdin and stdout. Every change it makes is under a
backup it made first. A failure it foresees ends with one line on stderr, ERROR_MARKER and
a JSON object `{"kind", "message"}`, and exit code 2, so that its caller decides what the
failure means for the user (apply: rolled back; deploy: the service did not start).
Operations:

  backup   {id, dists: [names], files: [abs paths]}  save what a plan will change
  journal  {id, event}                                append to the backup's journal
  restore  {id | "latest"}                            put everything back as backed up
  pack     {root, files: [rel]} | {root, dist}        tar of files (with their sha256)
           | {paths: {key: abs}}                      ... named by key (a source tree's files)
  unpack   {root, remove: [rel]}  + tar on stdin      write files under root, verify
           | {paths: {key: abs}, remove: [abs]}       ... each key to its own path
  remove-dist {name}                                  uninstall a distribution's files
  set-service {flags}                                 keep the service's launch flags
  write    {path, text}                               write a text file atomically
  start / stop / watch {name, ...}                    the service as a plain process
  write-dropin {path, text}                           a systemd drop-in (previous one kept)
  run      {argv}                                     run a command (pip) as a step
  hold     {token, who, wait}                         take the target's lock, keep it while the
                                                      client is alive (or say who has it)
  locked   {token}                                    has that hold taken it
  unlock   {token}                                    release it

One change at a time per environment: a command that changes it takes the lock, a file
under ~/.envsync/locks/ written under an flock guard by a `hold` process that stays alive
for as long as the command does (the lock names it: when it dies, the lock is stale).
Every operation sent with {"lock": token} checks that it still holds the lock and
registers itself as busy, so that a holder whose client is gone lets running steps finish,
restores an apply that did not finish, and only then releases.
"""

import hashlib
import io
import json
import os
import re
import shutil
import sys
import tarfile
import time

ERROR_MARKER = "@@envsync-agent-error@@"


class Failure(Exception):
    """A failure the agent foresees: a kind its caller can act on, and a message."""

    def __init__(self, kind, message):
        Exception.__init__(self, message)
        self.kind = kind
        self.message = message


def env_key(prefix):
    """Several environments may live on one host: each has its own backups and service
    flags, keyed by its interpreter prefix (probe and agent hold this alike; a test ties them)."""
    return hashlib.sha256(os.path.realpath(prefix).encode()).hexdigest()[:12]


ENV_KEY = env_key(sys.prefix)
STATE = os.path.expanduser("~/.envsync")
BACKUPS = os.path.join(STATE, "backups", ENV_KEY)
SERVICE = os.path.join(STATE, "service", ENV_KEY + ".json")
MANIFEST_MEMBER = "__envsync_sha256__.json"
LOCKS = os.path.join(STATE, "locks")
LOCK = os.path.join(LOCKS, ENV_KEY)
BUSY = LOCK + ".busy"
HEARTBEAT_SECONDS = 0.5


def normalize(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dirs():
    import site
    import sysconfig

    dirs = []
    candidates = [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    candidates.extend(getattr(site, "getsitepackages", lambda: [])())
    for d in candidates:
        if d and os.path.isdir(d) and d not in dirs:
            dirs.append(d)
    return dirs


def installed(name):
    """(location, dist-info dir name, [files relative to location]) of `name`, or None."""
    want = normalize(name)
    for location in site_dirs():
        for entry in sorted(os.listdir(location)):
            if not entry.endswith(".dist-info"):
                continue
            meta = os.path.join(location, entry, "METADATA")
            try:
                with open(meta, "rb") as f:
                    head = f.read(4096).decode("utf-8", "replace")
            except OSError:
                continue
            match = re.search(r"^Name:\s*(\S+)", head, re.MULTILINE)
            if not match or normalize(match.group(1)) != want:
                continue
            files = []
            try:
                with open(os.path.join(location, entry, "RECORD"), newline="") as f:
                    import csv

                    files = [row[0] for row in csv.reader(f) if row and row[0]]
            except OSError:
                pass
            return location, entry, files
    return None


def inside(root, rel):
    full = os.path.realpath(os.path.join(root, rel))
    return full == os.path.realpath(root) or full.startswith(os.path.realpath(root) + os.sep)


def refuse(what, why):
    raise Failure("unsafe-path", "refusing %r: %s; nothing was changed" % (what, why))


def package_roots():
    """The environment's package directories, the only places a plan's files may be: its
    site directories and the source trees of its editable installs (direct_url.json)."""
    roots = [os.path.realpath(d) for d in site_dirs()]
    for location in site_dirs():
        for entry in os.listdir(location):
            if not entry.endswith(".dist-info"):
                continue
            try:
                with open(os.path.join(location, entry, "direct_url.json")) as f:
                    url = json.load(f)
            except (OSError, ValueError):
                continue
            if not isinstance(url, dict) or not (url.get("dir_info") or {}).get("editable"):
                continue
            source = str(url.get("url") or "")
            if source.startswith("file://"):
                from urllib.parse import unquote, urlparse

                path = os.path.realpath(unquote(urlparse(source).path))
                if path != "/" and os.path.isdir(path):
                    roots.append(path)
    return roots


def package_root(root):
    """`root` if it is one of this environment's package directories; refused otherwise."""
    if root == "purelib":
        import sysconfig

        root = sysconfig.get_path("purelib")
    if not isinstance(root, str) or os.path.realpath(root) not in package_roots():
        refuse(root, "not a package directory of this environment")
    return root


def relative(root, rel):
    """A plan's or archive's relative path: no `..`, not absolute, no symlink out of root."""
    if (
        not isinstance(rel, str)
        or not rel
        or "\0" in rel
        or os.path.isabs(rel)
        or ".." in rel.replace("\\", "/").split("/")
        or not inside(root, rel)
        or os.path.realpath(os.path.join(root, rel)) == os.path.realpath(root)
    ):
        refuse(rel, "outside %s" % root)
    return os.path.join(root, rel)


def in_package(path):
    if not isinstance(path, str) or not os.path.isabs(path) or ".." in path.split("/"):
        return False
    return any(inside(root, os.path.relpath(path, root)) for root in package_roots())


def dist_paths(location, entry, files):
    """Every path (absolute) that belongs to an installed distribution under `location`."""
    out = []
    for rel in files:
        if inside(location, rel):
            out.append(os.path.normpath(os.path.join(location, rel)))
    meta = os.path.join(location, entry)
    for dirpath, _, names in os.walk(meta):
        out += [os.path.join(dirpath, n) for n in names]
    return sorted(set(out))


def backup_dir(ident):
    if ident == "latest":
        names = sorted(
            n
            for n in (os.listdir(BACKUPS) if os.path.isdir(BACKUPS) else [])
            if os.path.isfile(os.path.join(BACKUPS, n, "manifest.json"))
        )
        if not names:
            raise Failure("no-backup", "no envsync backup on this host")
        ident = names[-1]
    if not isinstance(ident, str) or not re.match(r"^[0-9A-Za-z_][0-9A-Za-z._-]*$", ident):
        raise Failure("bad-input", "bad backup id %r" % (ident,))
    return os.path.join(BACKUPS, ident)


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def put(target, source, mode, mtime=None):
    """Write a file through a fresh temporary one (never through a planted symlink)."""
    directory = os.path.dirname(target)
    if not os.path.isdir(directory):
        os.makedirs(directory)
    tmp = "%s.envsync-%d.tmp" % (target, os.getpid())
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(tmp, flags, 0o600)
    except FileExistsError:
        os.unlink(tmp)  # a leftover of a killed run (unlinking a link is harmless)
        fd = os.open(tmp, flags, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            shutil.copyfileobj(source, f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode & 0o777)
        if mtime is not None:
            os.utime(tmp, (mtime, mtime))
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def sweep(directories):
    """Remove the temporary files of writes that were killed half-way (see put)."""
    for directory in directories:
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if re.search(r"\.envsync-[0-9]+\.tmp$", name):
                try:
                    os.unlink(os.path.join(directory, name))
                except OSError:
                    pass


def no_space(e):
    import errno

    return isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT)


def op_backup(op):
    where = backup_dir(op["id"])
    for path in op.get("files", []):
        if not in_package(path):
            refuse(path, "not in a package directory of this environment")
    dists = []
    saved = []
    for name in op.get("dists", []):
        found = installed(name)
        if found is None:
            dists.append({"name": name, "present": False})
            continue
        location, entry, files = found
        paths = dist_paths(location, entry, files)
        dists.append({"name": name, "present": True, "location": location, "entry": entry})
        saved += [p for p in paths if os.path.isfile(p) and not os.path.islink(p)]
    absent = []
    for path in op.get("files", []):
        if os.path.isfile(path) and not os.path.islink(path):
            saved.append(path)
        else:
            absent.append(path)
    if os.path.isfile(SERVICE):
        saved.append(SERVICE)
    saved = sorted(set(saved))
    need = sum(os.path.getsize(p) for p in saved) + (1 << 20)
    os.makedirs(BACKUPS, mode=0o700, exist_ok=True)
    free = shutil.disk_usage(BACKUPS).free
    if free < need:
        raise Failure(
            "no-space",
            "no space for the backup in %s: it needs %d MB, %d MB are free; "
            "nothing was changed" % (BACKUPS, need >> 20, free >> 20),
        )
    try:
        return write_backup(where, dists, saved, absent, op)
    except OSError as e:
        shutil.rmtree(where, ignore_errors=True)
        if no_space(e):
            raise Failure(
                "no-space",
                "the disk filled up while backing up to %s; nothing was changed" % BACKUPS,
            ) from None
        raise


def write_backup(where, dists, saved, absent, op):
    os.makedirs(where, mode=0o700)
    with open(os.path.join(os.path.dirname(where), "prefix"), "w") as f:
        f.write(os.path.realpath(sys.prefix) + "\n")
    digests = {}
    tar_path = os.path.join(where, "files.tar")
    with tarfile.open(tar_path, "w") as tar:
        for path in saved:
            digests[path] = sha256(path)
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
    with open(tar_path, "rb") as f:
        os.fsync(f.fileno())
    manifest = {
        "id": os.path.basename(where),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dists": dists,
        "files": sorted(set(op.get("files", []))),
        "absent": absent,
        "service": os.path.isfile(SERVICE),
        "python": sys.executable,
        "state": "applying",
        "sha256": digests,
        "tar_sha256": sha256(tar_path),
    }
    write_json(os.path.join(where, "manifest.json"), manifest)
    open(os.path.join(where, "journal.jsonl"), "a").close()
    return {"backup": where, "saved": len(saved)}


def op_journal(op):
    where = backup_dir(op["id"])
    with open(os.path.join(where, "journal.jsonl"), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": op["event"]}) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if op.get("state"):
        path = os.path.join(where, "manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        manifest["state"] = op["state"]
        write_json(path, manifest)
    return {}


def remove_installed(name):
    found = installed(name)
    if found is None:
        return []
    location, entry, files = found
    removed = []
    for path in dist_paths(location, entry, files):
        try:
            os.unlink(path)
            removed.append(path)
        except FileNotFoundError:
            pass
        except IsADirectoryError:
            shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(os.path.join(location, entry), ignore_errors=True)
    return removed


def damaged(where, why):
    raise Failure("damaged-backup", "backup %s is damaged: %s; nothing was restored" % (where, why))


def checked_backup(where):
    """The manifest and archive members of a backup, verified before anything changes."""
    try:
        with open(os.path.join(where, "manifest.json")) as f:
            manifest = json.load(f)
    except FileNotFoundError:
        damaged(where, "manifest.json is missing")
    except (OSError, ValueError) as e:
        damaged(where, "manifest.json is unreadable (%s)" % e)
    if not isinstance(manifest, dict):
        damaged(where, "manifest.json is not a manifest")
    digests = manifest.get("sha256")
    if not isinstance(digests, dict) or not isinstance(manifest.get("tar_sha256"), str):
        damaged(where, "the manifest carries no hashes to check it against")
    dists = manifest.get("dists")
    absent = manifest.get("absent")
    if not isinstance(dists, list) or not isinstance(absent, list):
        damaged(where, "the manifest lists no distributions or files")
    for dist in dists:
        if not isinstance(dist, dict) or not isinstance(dist.get("name"), str):
            damaged(where, "a distribution entry of the manifest is malformed")
    service = os.path.realpath(SERVICE)
    for path in absent:
        if not in_package(path):
            refuse(path, "the backup names a file outside the package directories")
    tar_path = os.path.join(where, "files.tar")
    try:
        actual = sha256(tar_path)
    except FileNotFoundError:
        damaged(where, "files.tar is missing")
    if actual != manifest["tar_sha256"]:
        damaged(where, "files.tar differs from the manifest's sha256 (truncated or altered)")
    members = []
    with tarfile.open(tar_path) as tar:
        for member in tar.getmembers():
            target = "/" + member.name
            allowed = in_package(target) or os.path.realpath(target) == service
            if not member.isfile() or ".." in member.name.split("/") or not allowed:
                refuse(target, "the backup holds an entry outside the package directories")
            source = tar.extractfile(member)
            data = source.read() if source is not None else b""
            if hashlib.sha256(data).hexdigest() != digests.get(target):
                damaged(where, "%s differs from the manifest's sha256" % target)
            members.append((target, data, member.mode, member.mtime))
    if sorted(t for t, _, _, _ in members) != sorted(digests):
        damaged(where, "files.tar does not hold every file of the manifest")
    return manifest, members


def op_restore(op):
    # The last crash is an observation, not something a plan changed: it stays as it is.
    crash = read_service().get("crash")
    where = backup_dir(op.get("id", "latest"))
    manifest, members = checked_backup(where)
    for dist in manifest["dists"]:
        # Whatever version is there now goes: the backed-up one comes back below.
        while remove_installed(dist["name"]):
            pass
    for path in manifest["absent"]:
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
    if not manifest.get("service") and os.path.isfile(SERVICE):
        os.unlink(SERVICE)
    for target, data, mode, mtime in members:
        put(target, io.BytesIO(data), mode, mtime)
    touched = [t for t, _, _, _ in members] + manifest["absent"] + manifest.get("files", [])
    sweep(sorted({os.path.dirname(t) for t in touched if in_package(t)}))
    if crash is not None or os.path.isfile(SERVICE):
        op_set_service({"crash": crash})
    manifest["state"] = "rolled-back"
    write_json(os.path.join(where, "manifest.json"), manifest)
    with open(os.path.join(where, "journal.jsonl"), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": "rolled back"}) + "\n")
    return {"backup": where, "dists": [d["name"] for d in manifest["dists"]]}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def op_pack(op):
    if "paths" in op:
        for full in op["paths"].values():
            if not in_package(full):
                refuse(full, "not in a package directory of this environment")
            if os.path.islink(full) or not os.path.isfile(full):
                raise Failure("not-installed", "%s is not a file here" % full)
        return pack(op["paths"])
    files = op.get("files")
    if files is None:
        found = installed(op["dist"])
        if found is None:
            raise Failure("not-installed", "%s is not installed here" % op["dist"])
        location, entry, record = found
        root = location
        files = [os.path.relpath(p, location) for p in dist_paths(location, entry, record)]
    else:
        root = package_root(op["root"])
        for rel in files:
            relative(root, rel)
    entries = {}
    for rel in files:
        full = os.path.join(root, rel)
        # Scripts in bin/ carry this venv's own path: not copied.
        if inside(root, rel) and os.path.isfile(full) and not os.path.islink(full):
            entries[rel] = full
    return pack(entries)


def pack(entries):
    """A tar of files {name in the archive: path here}, with a manifest of their sha256."""
    hashes = {}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, full in sorted(entries.items()):
            hashes[name] = sha256(full)
            tar.add(full, arcname=name, recursive=False)
        data = json.dumps(hashes).encode()
        info = tarfile.TarInfo(MANIFEST_MEMBER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def unpack(payload, place, remove):
    """Write each archived file where `place(name)` says (every entry checked before the
    first is written), delete `remove` (absolute paths), then check every written file's
    sha256 against the sender's manifest."""
    written = {}
    with tarfile.open(fileobj=io.BytesIO(payload)) as tar:
        members = tar.getmembers()
        expected = {}  # type: dict[str, str]
        targets = []
        for member in members:
            if member.name == MANIFEST_MEMBER:
                if member.isfile():
                    source = tar.extractfile(member)
                    expected = json.loads(source.read().decode()) if source else {}
                continue
            if not member.isfile():
                refuse(member.name, "not a regular file")
            target = place(member)
            if target is None:
                refuse(member.name, "not a file of the plan")
            targets.append((member, target))
        for member, target in targets:
            source = tar.extractfile(member)
            if source is None:
                continue
            put(target, source, member.mode)
            written[member.name] = sha256(target)
    for path in remove:
        if os.path.isfile(path) or os.path.islink(path):
            os.unlink(path)
    bad = sorted(rel for rel, digest in expected.items() if written.get(rel) != digest)
    if bad:
        raise Failure("hash-mismatch", "written files differ from the reference: " + ", ".join(bad))
    return {"written": sorted(written)}


def op_unpack(op, payload):
    """Files under `root` (by their relative names), or each key at its own path; every
    path inside the environment's package directories (an editable's source tree too)."""
    if "paths" in op:
        paths = op["paths"]
        for full in list(paths.values()) + list(op.get("remove", [])):
            if not in_package(full):
                refuse(full, "not in a package directory of this environment")
        result = unpack(payload, lambda m: paths.get(m.name), op.get("remove", []))
        missing = sorted(set(paths) - set(result["written"]))
        if missing:
            raise Failure("hash-mismatch", "the archive lacks " + ", ".join(missing))
        return result
    root = package_root(op["root"])
    remove = [relative(root, r) for r in op.get("remove", [])]
    return unpack(payload, lambda m: relative(root, m.name), remove)


def read_service():
    """What envsync keeps for the service in this environment ({} when nothing)."""
    try:
        with open(SERVICE) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def op_set_service(op):
    """Keep the service's launch flags and/or its last crash (null: forget it)."""
    os.makedirs(os.path.dirname(SERVICE), mode=0o700, exist_ok=True)
    state = read_service()
    for key in ("flags", "crash"):
        if key in op:
            state[key] = op[key]
    state = dict((k, v) for k, v in state.items() if v is not None)
    write_json(SERVICE, state)
    return {}


def op_write(op):
    """A file of envsync's own (a backup's constraints): only under ~/.envsync/backups."""
    path = op["path"]
    if not isinstance(path, str) or not inside(BACKUPS, os.path.relpath(path, BACKUPS)):
        refuse(path, "not in this environment's backup folder")
    put(path, io.BytesIO(op["text"].encode()), 0o644)
    return {}


RUN = os.path.join(STATE, "run")


def run_files(name):
    os.makedirs(RUN, mode=0o700, exist_ok=True)
    base = os.path.join(RUN, "%s-%s" % (re.sub(r"[^A-Za-z0-9_.-]", "_", name), ENV_KEY))
    return base + ".pid", base + ".log"


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is dead
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return True


def op_stop(op):
    import signal

    pid_file, _ = run_files(op["name"])
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        return {"stopped": None}
    if alive(pid):
        for sig, wait in ((signal.SIGTERM, op.get("grace", 10.0)), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            deadline = time.time() + wait
            while alive(pid) and time.time() < deadline:
                time.sleep(0.05)
            if not alive(pid):
                break
    os.unlink(pid_file)
    return {"stopped": pid}


def port_free(port):
    """Refuse to start a service whose port another process already holds."""
    import errno
    import socket

    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # As servers do: a port whose old connections linger (TIME_WAIT) is free; one that a
    # process listens on is not.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("0.0.0.0", port))
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise Failure(
                "port-in-use", "port %d is already in use on this host (another service?)" % port
            ) from None
    finally:
        probe.close()


def op_start(op):
    """Stop the previous instance, start the service in its own session, log to a file."""
    import subprocess

    op_stop({"name": op["name"]})
    if op.get("port"):
        port_free(int(op["port"]))
    pid_file, log_file = run_files(op["name"])
    env = dict(os.environ)
    env.update(op.get("env") or {})
    with open(log_file, "wb") as log:
        try:
            proc = subprocess.Popen(
                op["argv"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=os.path.expanduser(op.get("cwd") or "~"),
                start_new_session=True,
                close_fds=True,
            )
        except OSError as e:
            raise Failure(
                "cannot-start", "cannot start %s: %s" % (op["argv"][0], e.strerror or e)
            ) from None
    with open(pid_file, "w") as f:
        f.write("%d\n" % proc.pid)
    return {"pid": proc.pid, "log": log_file, "started": time.time()}


def op_watch(op):
    """Is the service alive, and what has it logged since `offset`."""
    pid_file, log_file = run_files(op["name"])
    pid = None
    try:
        with open(pid_file) as f:
            pid = int(f.read().strip())
    except (OSError, ValueError):
        pass
    text, offset = "", op.get("offset", 0)
    try:
        with open(log_file, "rb") as f:
            f.seek(offset)
            data = f.read(1 << 20)
            offset += len(data)
            text = data.decode("utf-8", "replace")
    except OSError:
        pass
    return {"pid": pid, "alive": bool(pid) and alive(pid), "log": text, "offset": offset}


def op_write_dropin(op):
    """Write a systemd drop-in, keeping a copy of any previous one under ~/.envsync/run."""
    path = op["path"]
    if not re.match(r"^/etc/systemd/system/[A-Za-z0-9@_.:-]+\.d/envsync\.conf$", path or ""):
        refuse(path, "not an envsync drop-in of a systemd unit")
    saved = None
    if os.path.isfile(path):
        os.makedirs(RUN, mode=0o700, exist_ok=True)
        saved = os.path.join(
            RUN,
            os.path.basename(os.path.dirname(path))
            + "-"
            + os.path.basename(path)
            + ".%d.bak" % time.time(),
        )
        shutil.copy2(path, saved)
    put(path, io.BytesIO(op["text"].encode()), 0o644)
    return {"backup": saved}


def start_time(pid):
    """The process's start time (clock ticks since boot), to tell a reused pid apart."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def running(holder):
    if not holder:
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return False
    started = holder.get("started")
    return started is None or start_time(pid) in (None, started)


class guard(object):
    """An flock around reading and replacing the lock file: one taker at a time."""

    def __enter__(self):
        import fcntl

        os.makedirs(LOCKS, mode=0o700, exist_ok=True)
        self.fd = os.open(LOCK + ".guard", os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        os.close(self.fd)
        return False


def read_lock():
    try:
        with open(LOCK) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {"damaged": True}
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"damaged": True}  # a torn or foreign file: nobody alive holds it


def busy_pids(but=None):
    """Agent processes still running a step under the lock."""
    try:
        names = os.listdir(BUSY)
    except OSError:
        return []
    pids = []
    for name in names:
        try:
            with open(os.path.join(BUSY, name)) as f:
                holder = json.load(f)
        except (OSError, ValueError):
            continue
        if holder.get("pid") != but and running(holder):
            pids.append(holder["pid"])
        elif holder.get("pid") != but:
            try:
                os.unlink(os.path.join(BUSY, name))
            except OSError:
                pass
    return sorted(pids)


def held(lock):
    """Is the lock held by a live command (or one whose step still runs)?"""
    if lock is None:
        return False
    return running(lock.get("holder")) or bool(busy_pids())


def op_locked(op):
    """Has the `hold` of this token taken the lock (and whose stale lock did it take)?"""
    lock = read_lock() or {}
    ours = lock.get("token") == op["token"]
    return {"ours": ours and running(lock.get("holder")), "stale": lock.get("took_over")}


def owns(token):
    lock = read_lock()
    return bool(lock) and lock.get("token") == token


def op_hold(op):
    """Take the lock (queueing up to `wait` seconds) and keep it while the client is alive;
    when the client is gone, finish its business and release. The lock names this process
    as its holder from the moment it is taken: a holder that dies leaves a stale lock."""
    token = op["token"]
    deadline = time.time() + float(op.get("wait") or 0)
    while True:
        with guard():
            current = read_lock()
            if not held(current):
                entry = {
                    "token": token,
                    "who": op["who"],
                    "holder": {"pid": os.getpid(), "started": start_time(os.getpid())},
                    "took_over": None
                    if current is None
                    else current.get("who") or {"damaged": True},
                }
                write_json(LOCK, entry)
                break
        if time.time() >= deadline:
            return {
                "acquired": False,
                "who": current.get("who") or {},
                "busy": busy_pids(),
                "waited": float(op.get("wait") or 0),
            }
        time.sleep(0.2)
    out = sys.stdout.buffer
    beat = time.time()
    while owns(token):
        time.sleep(0.1)
        if time.time() - beat < HEARTBEAT_SECONDS:
            continue
        beat = time.time()
        try:  # the client reads these; when it is gone the write fails
            out.write(b".")
            out.flush()
        except (OSError, ValueError):
            abandon(token)
            return {"held": False}
    return {"held": True}


def abandon(token):
    """The command holding the lock is gone: let its steps end, undo its unfinished apply."""
    while busy_pids():
        time.sleep(0.2)
    op_unlock({"token": token, "why": "the envsync applying this is gone"})


def finish(lock, why):
    """Before a lock is released: restore its apply if that did not finish."""
    ident = lock.get("backup")
    if ident:
        try:
            with open(os.path.join(backup_dir(ident), "manifest.json")) as f:
                state = json.load(f).get("state")
            if state == "applying":
                op_journal({"id": ident, "event": "%s: restoring" % why})
                op_restore({"id": ident})
        except (OSError, ValueError, Failure) as e:
            try:
                op_journal({"id": ident, "event": "restoring failed: %s" % e})
            except (OSError, Failure):
                pass


def op_unlock(op):
    """Release the lock; an apply under it that neither finished nor rolled back is undone."""
    lock = read_lock()
    if not lock or lock.get("token") != op["token"]:
        return {"released": False}
    finish(lock, op.get("why") or "the apply ended unfinished")
    with guard():
        if not owns(op["token"]):
            return {"released": False}
        os.unlink(LOCK)
    return {"released": True}


def note_backup(token, where):
    """An apply under the lock: its holder restores this backup if the client vanishes."""
    with guard():
        lock = read_lock()
        if lock and lock.get("token") == token:
            lock["backup"] = os.path.basename(where)
            write_json(LOCK, lock)


class busy(object):
    """Register this process as running a step under the lock `token` (checked first)."""

    def __init__(self, token):
        self.token = token
        self.path = os.path.join(BUSY, str(os.getpid()))

    def __enter__(self):
        if not owns(self.token):
            raise Failure("lock-lost", "this command no longer holds the target's lock; refusing")
        os.makedirs(BUSY, mode=0o700, exist_ok=True)
        me = {"pid": os.getpid(), "started": start_time(os.getpid())}
        with open(self.path, "w") as f:
            json.dump(me, f)
        return self

    def __exit__(self, *exc):
        try:
            os.unlink(self.path)
        except OSError:
            pass
        return False


def op_run(op):
    """Run a command (the step's pip) here, so that the lock knows it is running."""
    import subprocess

    try:
        proc = subprocess.run(op["argv"], stdin=subprocess.DEVNULL, capture_output=True)
    except OSError as e:
        raise Failure("not-found", "cannot run %s: %s" % (op["argv"][0], e.strerror or e)) from None
    return {
        "returncode": proc.returncode,
        "stdout": proc.stdout[-65536:].decode("utf-8", "replace"),
        "stderr": proc.stderr[-65536:].decode("utf-8", "replace"),
    }


def main(argv):
    try:
        return run(json.loads(argv[1]))
    except Failure as e:
        sys.stderr.write(ERROR_MARKER + json.dumps({"kind": e.kind, "message": e.message}) + "\n")
        return 2


def run(op):
    name = op.pop("op")
    token = op.pop("lock", None)
    if token is None:
        return dispatch(name, op)
    with busy(token):
        if name == "restore":
            while busy_pids(but=os.getpid()):  # an interrupted step of this command
                time.sleep(0.2)
        code = dispatch(name, op, token)
    return code


def dispatch(name, op, token=None):
    if name == "pack":
        out = sys.stdout.buffer
        out.write(op_pack(op))
        out.flush()
        return 0
    if name == "unpack":
        result = op_unpack(op, sys.stdin.buffer.read())
    else:
        handlers = {
            "backup": op_backup,
            "journal": op_journal,
            "restore": op_restore,
            "remove-dist": lambda o: {"removed": len(remove_installed(o["name"]))},
            "set-service": op_set_service,
            "write": op_write,
            "start": op_start,
            "stop": op_stop,
            "watch": op_watch,
            "write-dropin": op_write_dropin,
            "run": op_run,
            "locked": op_locked,
            "hold": op_hold,
            "unlock": op_unlock,
        }
        result = handlers[name](op)
        if name == "backup" and token:
            note_backup(token, result["backup"])
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
