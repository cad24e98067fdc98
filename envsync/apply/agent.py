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
    if not re.match(r"^[0-9A-Za-z._-]+$", ident):
        raise Failure("bad-input", "bad backup id %r" % ident)
    return os.path.join(BACKUPS, ident)


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def op_backup(op):
    where = backup_dir(op["id"])
    os.makedirs(where, mode=0o700)
    with open(os.path.join(os.path.dirname(where), "prefix"), "w") as f:
        f.write(os.path.realpath(sys.prefix) + "\n")
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
        saved += [p for p in paths if os.path.isfile(p)]
    absent = []
    for path in op.get("files", []):
        if os.path.isfile(path):
            saved.append(path)
        else:
            absent.append(path)
    if os.path.isfile(SERVICE):
        saved.append(SERVICE)
    with tarfile.open(os.path.join(where, "files.tar"), "w") as tar:
        for path in sorted(set(saved)):
            tar.add(path, arcname=path.lstrip("/"), recursive=False)
    manifest = {
        "id": os.path.basename(where),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "dists": dists,
        "files": sorted(set(op.get("files", []))),
        "absent": absent,
        "service": os.path.isfile(SERVICE),
        "python": sys.executable,
        "state": "applying",
    }
    write_json(os.path.join(where, "manifest.json"), manifest)
    open(os.path.join(where, "journal.jsonl"), "a").close()
    return {"backup": where, "saved": len(set(saved))}


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


def op_restore(op):
    # The last crash is an observation, not something a plan changed: it stays as it is.
    crash = read_service().get("crash")
    where = backup_dir(op.get("id", "latest"))
    with open(os.path.join(where, "manifest.json")) as f:
        manifest = json.load(f)
    for dist in manifest["dists"]:
        # Whatever version is there now goes: the backed-up one comes back below.
        while remove_installed(dist["name"]):
            pass
    for path in manifest["absent"]:
        if os.path.isfile(path):
            os.unlink(path)
    if not manifest["service"] and os.path.isfile(SERVICE):
        os.unlink(SERVICE)
    with tarfile.open(os.path.join(where, "files.tar")) as tar:
        for member in tar.getmembers():
            target = "/" + member.name
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(member)
            if source is None:
                continue
            tmp = target + ".envsync-tmp"
            with open(tmp, "wb") as f:
                shutil.copyfileobj(source, f)
            os.chmod(tmp, member.mode & 0o7777)
            os.utime(tmp, (member.mtime, member.mtime))
            os.replace(tmp, target)
    if crash is not None or os.path.isfile(SERVICE):
        op_set_service({"crash": crash})
    manifest["state"] = "rolled-back"
    write_json(os.path.join(where, "manifest.json"), manifest)
    with open(os.path.join(where, "journal.jsonl"), "a") as f:
        f.write(json.dumps({"at": time.time(), "event": "rolled back"}) + "\n")
    return {"backup": where, "dists": [d["name"] for d in manifest["dists"]]}


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def op_pack(op):
    if "paths" in op:
        for full in op["paths"].values():
            if os.path.islink(full) or not os.path.isfile(full):
                raise Failure("not-installed", "%s is not a file here" % full)
        return pack(op["paths"])
    root = op["root"]
    files = op.get("files")
    if files is None:
        found = installed(op["dist"])
        if found is None:
            raise Failure("not-installed", "%s is not installed here" % op["dist"])
        location, entry, record = found
        root = location
        files = [os.path.relpath(p, location) for p in dist_paths(location, entry, record)]
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


def write_member(tar, member, target):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    tmp = target + ".envsync-tmp"
    source = tar.extractfile(member)
    if source is None:
        return None
    with open(tmp, "wb") as f:
        shutil.copyfileobj(source, f)
    os.chmod(tmp, member.mode & 0o7777)
    os.replace(tmp, target)
    return sha256(target)


def unpack(payload, place, remove):
    """Write each archived file where `place(name)` says, delete `remove` (absolute
    paths), then check every written file's sha256 against the sender's manifest."""
    written = {}
    with tarfile.open(fileobj=io.BytesIO(payload)) as tar:
        members = tar.getmembers()
        expected = {}
        for member in members:
            source = tar.extractfile(member)
            if member.name == MANIFEST_MEMBER and source is not None:
                expected = json.loads(source.read().decode())
        for member in members:
            if member.name == MANIFEST_MEMBER:
                continue
            target = place(member) if member.isfile() else None
            if target is None:
                raise Failure("unsafe-path", "refusing %r: not a file of the plan" % member.name)
            digest = write_member(tar, member, target)
            if digest is not None:
                written[member.name] = digest
    for path in remove:
        if os.path.isfile(path):
            os.unlink(path)
    bad = sorted(rel for rel, digest in expected.items() if written.get(rel) != digest)
    if bad:
        raise Failure("hash-mismatch", "written files differ from the reference: " + ", ".join(bad))
    return {"written": sorted(written)}


def read_service():
    """What envsync keeps for the service in this environment ({} when nothing)."""
    try:
        with open(SERVICE) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return {}
    return state if isinstance(state, dict) else {}


def op_unpack(op, payload):
    """Files under `root` (by their relative names), or each key at its own path."""
    if "paths" in op:
        paths = op["paths"]
        result = unpack(payload, lambda m: paths.get(m.name), op.get("remove", []))
        missing = sorted(set(paths) - set(result["written"]))
        if missing:
            raise Failure("hash-mismatch", "the archive lacks " + ", ".join(missing))
        return result
    root = op["root"]
    if root == "purelib":
        import sysconfig

        root = sysconfig.get_path("purelib")

    def place(member):
        if os.path.isabs(member.name) or not inside(root, member.name):
            return None
        return os.path.join(root, member.name)

    remove = [os.path.join(root, r) for r in op.get("remove", []) if inside(root, r)]
    return unpack(payload, place, remove)


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
    directory = os.path.dirname(op["path"])
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = op["path"] + ".tmp"
    with open(tmp, "w") as f:
        f.write(op["text"])
    os.replace(tmp, op["path"])
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
    op_write({"path": path, "text": op["text"]})
    return {"backup": saved}


def main(argv):
    try:
        return run(json.loads(argv[1]))
    except Failure as e:
        sys.stderr.write(ERROR_MARKER + json.dumps({"kind": e.kind, "message": e.message}) + "\n")
        return 2


def run(op):
    name = op.pop("op")
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
        }
        result = handlers[name](op)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
