"""What the code's own names and comments do not say: one sentence per key, code or word.

Each table here is checked against the code it describes when the docs are built: a key
the code has and this lacks, or one this has and the code lost, fails the build.
"""

from __future__ import annotations

EXIT_CODES = {
    "OK": "success, nothing to report",
    "DRIFT": "drift found, or a plan is pending",
    "USAGE": "usage error or bad input: inventory, lock, snapshot, requirements file (or one "
    "it includes from outside its folder), unknown host, a `HOST@...` state that is not "
    "recorded or cannot be read, unwritable `-o` or stdout; a saved plan or a reference "
    "snapshot that would hand an installer anything but a validated `NAME==VERSION` (an "
    "option, a path, a URL, an installer program): refused before anything runs",
    "COLLECT": "a host could not be collected: unreachable (SSH, a jump host, or an exec "
    "prefix that is missing, denied, hanging or whose container is not running), its python "
    "is missing or is not Python, the probe crashed, timed out, printed no JSON, or the host "
    "has malformed distribution metadata",
    "APPLY": "an apply failed and was rolled back (or its backup failed: nothing changed); "
    "`rollback` failed or was refused, its line saying which: nothing was restored (no backup, "
    "a damaged one, paths changed since the apply: `--force`, a full disk, an immutable "
    "file), or partially restored (rerun `rollback`: it finishes); or a plan was refused "
    "before anything ran (no way to install on the target)",
    "SMOKE": "deploy, smoke or stop failed: the service crashed, stalled, or could not be "
    "started or stopped (e.g. its program does not exist)",
    "LOCKED": "the environment is locked by another envsync that is changing it (`repair "
    "--apply`, `rollback`, `deploy`, `stop`), whoever runs it: another user, another HOME, "
    "a container's view of the same venv; `--wait SECONDS` queues instead",
}

SEVERITIES = {
    "fatal": "startup will fail with the configured command: a module on the startup import "
    "path is missing, or lacks a name imported from it (`from xgrammar import StructuralTag`); "
    "torch's arch list lacks the GPU's compute capability; torch's CUDA build needs a newer "
    "driver; torch/torchvision/torchaudio `+cuXXX` labels disagree; a shared object startup "
    "loads will not load (a library no search path provides, an undefined symbol, a symbol "
    "version the host lacks), or needs a CUDA runtime newer than the driver's",
    "risky": "on the startup path and different, not shown to break (a patched file, another "
    "version); or imported under an `if` envsync cannot evaluate; a shared object a reached "
    "package ships that would not load, or a load envsync cannot prove either way; CUDA "
    "12 and 13 libraries mixed",
    "unknown": "different, and envsync could not read the service's startup (no entrypoint, a "
    "launch command it cannot read, an entrypoint that does not resolve on the target, a lock "
    "or snapshot file as the target): never reported as `benign`; `repair` addresses it by "
    "default, like `risky`; `check --fail-on unknown` gates on it",
    "degraded": "broken only off the startup path: inside a `try` whose handler swallows the "
    "error, in an `except` fallback whose `try` works, in a module a registry imports inside "
    "`try/except` (an SGLang model architecture), or inside a function startup does not call; "
    "a feature fails later",
    "benign": "different, and shown not to be used by anything the service imports at startup",
}

KINDS = {
    "python": "the interpreter: version, implementation, ABI or platform tags",
    "torch": "torch's build: version, CUDA, git version, HIP; with `--deep` its arch list, "
    "cuDNN and NCCL",
    "gpu": "the GPUs and driver `nvidia-smi` reports: name, compute capability, driver, the "
    "highest CUDA the driver supports",
    "native": "a shared object the startup loads (an extension module, torch's preloads, a "
    "library they need) that the target's dynamic loader refuses and the reference's does "
    "not: a missing library, an undefined symbol, a symbol version the provider lacks; and "
    "the CUDA libraries against the driver, each other and torch's CUDA build",
    "missing": "a distribution the reference has and the target lacks",
    "version": "a distribution at another version on the target",
    "extra": "a distribution only the target has",
    "commit": "two source checkouts of a watched package at different commits",
    "file": "a file of a watched package that is patched, added or missing on one side",
    "system": "OS, kernel, machine, glibc, recorded environment variables",
}

FIXES = {
    "pin": "`python -m pip install --no-deps --constraint FILE NAME==VERSION` (or `uv pip "
    "install --python`) with every other package held at its version; never offered for a "
    "local `+label` or a VCS/directory build",
    "sync-dist": "copy the reference's installed files of a distribution (its `RECORD`); "
    "offered only when interpreter and platform tags match: needs no index",
    "sync-file": "copy patched, added or missing files of a watched package from the "
    "reference (or remove them), backed up first; the package's whole patch set moves",
    "flag": "a launch-flag workaround from a rule pack (`--grammar-backend none`), offered "
    "only when it avoids every failing import of the finding; says what it gives up",
}

EVIDENCE = {
    "import-graph": "the static import graph of the startup modules, read with `ast` on the "
    "host: which modules startup reaches, and in which context",
    "name-check": "a `from X import Y` checked against the names module X binds on the target",
    "rule-pack": "a rule pack says startup imports the module (a lazy import chosen by a "
    "launch flag, a registry)",
    "native": "the ELF files startup loads, read (never loaded) and resolved as the host's "
    "`ld.so` would: needed libraries, RPATH/RUNPATH, `LD_LIBRARY_PATH`, the ld.so cache, "
    "symbols and symbol versions",
    "import-check": "the real-import check: the startup modules really imported in the target's "
    "interpreter, the exact exception attached",
    "requirements": "a `Requires-Dist` the reference satisfies and the target does not",
    "version-check": "a version comparison that a module startup runs makes at import and "
    "raises on (`if numpy_version > (2, 2): raise ImportError`), read from its source and "
    "evaluated as the code compares, on each host's installed version",
    "facts": "torch, GPU, interpreter and system facts compared",
    "crash": "a crash envsync's smoke test watched, matched back to the finding: ground truth "
    "until the service next comes up ready",
}

CONTEXTS = {
    "module": "runs when the module is imported",
    "if": "under an `if` envsync cannot always evaluate",
    "try": "inside a `try` whose handler swallows ImportError: a failure is survived",
    "fallback": "in an `except` body: runs only when its `try` failed, judged with that `try`",
    "function": "inside a function: runs only when something calls it",
    "typing": "under `if TYPE_CHECKING`: never runs",
}

# The inventory, key by key ([defaults], [service] and a host's service table, [hosts.NAME],
# [groups.NAME]).
INVENTORY = {
    "defaults.reference": "the known-good host: `envsync lock` with no HOST, and the "
    "reference of `diff` and `repair`",
    "defaults.target": "the host `diff`, `check` and `repair` look at when none is named",
    "defaults.watch": "distributions whose every file is hashed and checked against `RECORD` "
    "(local patches)",
    "defaults.env": "environment variables to record, as fnmatch patterns (default: "
    "`CUDA_*`, `NCCL_*`, `GLOO_*`, `SGLANG_*`, `TORCH_*`, `HF_*`, `PYTHONPATH`, "
    "`LD_LIBRARY_PATH`, `PIP_*`, `VIRTUAL_ENV`); secret values are redacted on the host",
    "defaults.rules": "your own rule packs (paths relative to the inventory), read after the "
    "built-in ones",
    "defaults.trust": "the trust of every host that names none (see `hosts.trust`)",
    "service.command": "the launch command, as a list: `{python}`, `{port}` and "
    "`{inventory_dir}` are substituted",
    "service.port": "the port the service listens on",
    "service.health": "the health endpoint's path (default `/health`)",
    "service.unit": "a systemd unit: deploy writes a drop-in for it; without it the service "
    "is a plain process",
    "service.entrypoint": "the module whose startup is read (default: read from the command)",
    "service.env": "environment variables the service runs with (merged key by key)",
    "service.workdir": "the folder the service runs in on the host (default: home); a "
    "relative script path in the command is relative to it",
    "service.health_url": "where health answers when it is not the host's name and port (a "
    "container's published port, a Kubernetes service)",
    "hosts.python": "the interpreter of the environment (required); on this machine, a "
    "relative path is relative to the inventory",
    "hosts.ssh": "`user@host[:port]` or an alias of `~/.ssh/config`; absent: this machine",
    "hosts.jump": "jump host(s), `user@bastion[:port]` or a chain `a,b` like ProxyJump; "
    '`"none"` turns off a ProxyJump of `~/.ssh/config`',
    "hosts.exec": "a command prefix that runs a program inside a container, pod or Slurm "
    "node (on the `ssh` host when set)",
    "hosts.identity": "an SSH key to offer (relative to the inventory)",
    "hosts.known_hosts": "the known-hosts file to verify host keys against (relative to the "
    "inventory)",
    "hosts.host_key_policy": '`"strict"` (default) or `"accept-new"`: record unknown keys; '
    "a changed key is always refused",
    "hosts.watch": "overrides `defaults.watch` for this host",
    "hosts.env": "overrides `defaults.env` for this host",
    "hosts.service": "overrides of `[service]` for this host, key by key",
    "hosts.pip_options": "added to `pip install` on this host (`--index-url`, "
    "`--find-links`, `--no-index`)",
    "hosts.installer": '`"pip"` or `"uv"`: overrides the installer a pin uses (default: the '
    "target's pip, else uv)",
    "hosts.trust": "a name: hosts of the same trust are given the facts the others parsed, "
    "so a new host's first diff parses only what differs; the trade-off: a host whose "
    "interpreter lies in what it sends can then change the verdicts of the others of its "
    "trust. Without one (the default) a host's facts decide its own verdicts only",
    "groups.hosts": 'the group\'s hosts: names or node sets (`"gpu[001-128,130]"`, or a list '
    "of them); a HOST argument may name the group",
    "groups.server": "the hosts are the nodes of one multi-node server: `check` fails any "
    "difference among them in torch, NCCL, its net plugin, the driver, Python, the engine or "
    "`NCCL_*`/`GLOO_*`/`CUDA_*` variables",
}

# Fields of the schemas whose code carries no comment (Class.field).
FIELDS = {
    "Snapshot.schema_version": "`1`; a snapshot of another version is refused",
    "Snapshot.host": "the host's name (inventory name, `local`, or the file it was read from)",
    "Snapshot.collected_at": "when it was collected (UTC, ISO 8601): a transport field, not "
    "kept in locks",
    "Snapshot.duration_s": "how long collecting took: a transport field",
    "Snapshot.distributions": "every installed distribution, sorted by `name`",
    "Snapshot.broken": "malformed `.dist-info` / `.egg-info` directories (`--allow-broken`)",
    "Snapshot.watch": "the watched distribution names",
    "Snapshot.env": "the recorded environment variables, secrets redacted",
    "Snapshot.interpreter": "the environment's interpreter",
    "Snapshot.gpu": "GPUs and driver, from `nvidia-smi`",
    "Snapshot.system": "OS, kernel, machine, C library",
    "Interpreter.executable": "the interpreter's path",
    "Interpreter.version": "`3.11.7`",
    "Interpreter.implementation": "`cpython`, `pypy`",
    "Interpreter.prefix": "`sys.prefix`",
    "Interpreter.base_prefix": "`sys.base_prefix`",
    "Interpreter.in_venv": "whether prefix and base prefix differ",
    "Interpreter.sys_path": "`sys.path`, in order",
    "Distribution.display_name": "the name as its metadata spells it",
    "Distribution.installer": "the `INSTALLER` file: `pip`, `uv`",
    "BrokenDistribution.path": "the metadata directory",
    "BrokenDistribution.reason": "why it cannot be read",
    "Torch.version": "from `torch/version.py`, never imported",
    "Torch.location": "where torch is installed",
    "Torch.cuda": "the CUDA version torch was built with",
    "Torch.git_version": "the commit torch was built from",
    "Torch.hip": "the HIP version of a ROCm build",
    "Torch.cudnn": "with `--deep`",
    "Torch.nccl": "with `--deep`",
    "GpuInfo.gpus": "from `nvidia-smi`",
    "GpuInfo.driver_version": "the driver's version",
    "Gpu.index": "as `nvidia-smi` numbers it",
    "Gpu.name": "e.g. `NVIDIA RTX PRO 6000 Blackwell`",
    "Gpu.memory_mib": "total memory",
    "Gpu.driver_version": "the driver this GPU runs under",
    "System.os": "the OS name and release",
    "System.kernel": "`uname -r`",
    "System.machine": "`x86_64`, `aarch64`",
    "System.glibc": "the C library's version",
    "System.hostname": "the host's name (a machine fact: left out of portable locks)",
    "GitState.commit": "HEAD's commit",
    "GitState.deleted": "in HEAD, not in the work tree",
    "GitState.untracked": "in the package's folders, not in the index",
    "SourceTree.git": "the checkout's git state, when it is in a git repository",
    "StartupGraph.roots": "the modules startup runs: the entrypoint and the rule packs' roots",
    "StartupGraph.modules": "every module read, by name",
    "ModuleFacts.imports": "its import statements",
    "ImportEdge.line": "the statement's line",
    "ImportEdge.context": "where the statement stands (see the import contexts)",
    "ImportEdge.statement": "the statement as written",
    "ModuleFacts.error": "why it could not be read",
    "ModuleFacts.file": "its source file",
    "ModuleFacts.sha256": "the source file's hash (the cache key of its facts)",
    "Installers.pip": "where the interpreter imports pip from; `null`: no pip",
    "Crash.exception": "the traceback's last exception",
    "Plan.schema_version": "`2`; a plan of another version is refused",
    "Plan.reference": "the reference host",
    "Plan.target": "the target host",
    "Plan.target_fingerprint": "what the plan depends on: every distribution and version, "
    "watched files' hashes, the kept service flags; applying to a target that changed since is "
    "refused",
    "Plan.prefer": "`--prefer` it was made with",
    "Plan.only": "`--only` it was made with",
    "Plan.steps": "the ordered steps",
    "PinStep.kind": "`pin`: install the reference's versions from the target's index",
    "PinStep.summary": "one line for people",
    "PinStep.findings": "the subjects of the findings it addresses",
    "PinStep.no_fallback": "why the reference's files cannot serve instead",
    "SyncDistStep.kind": "`sync-dist`: copy the distributions' installed files from the reference",
    "SyncDistStep.summary": "one line for people",
    "SyncDistStep.findings": "the subjects of the findings it addresses",
    "SyncDistStep.dists": "the distributions whose files it replaces",
    "SyncFileStep.kind": "`sync-file`: copy (or remove) a watched package's files",
    "SyncFileStep.summary": "one line for people",
    "SyncFileStep.findings": "the subjects of the findings it addresses",
    "FlagStep.kind": "`flag`: keep a launch flag for the service on the target",
    "FlagStep.summary": "one line for people",
    "FlagStep.findings": "the subjects of the findings it addresses",
    "FlagStep.flag": "the launch flag",
    "FlagStep.value": "its new value",
    "FlagStep.gives_up": "the capability it costs",
    "Report.schema_version": "`1`",
    "Report.reference": "the reference host",
    "Report.target": "the target host",
    "Report.entrypoint": "the module whose startup was read",
    "Report.command": "the effective launch command on the target",
    "Report.findings": "worst first",
    "Finding.subject": "a distribution, a file (`sglang/srt/server_args.py`) or a fact",
    "Finding.kind": "what differs",
    "Finding.reference": "the reference's value",
    "Finding.target": "the target's value",
    "Finding.severity": "how much it matters to startup",
    "Finding.reason": "one sentence: why this severity",
    "Finding.evidence": "what envsync read to decide",
    "Finding.fixes": "what repairs it",
    "Evidence.source": "which evidence",
    "Evidence.file": "the file the statement is in",
    "Evidence.line": "its line",
    "Evidence.statement": "the import statement",
    "PinFix.kind": "`pin`",
    "SyncDistFix.kind": "`sync-dist`",
    "SyncDistFix.summary": "what to do, in words a human can act on",
    "SyncDistFix.dist": "the distribution whose files it copies",
    "SyncFileFix.kind": "`sync-file`",
    "SyncFileFix.summary": "what to do, in words a human can act on",
    "SyncFileFix.dist": "the watched distribution the file belongs to",
    "FlagFix.kind": "`flag`",
    "FlagFix.summary": "what to do, in words a human can act on",
    "RulePack.name": "`[pack] name`",
    "RulePack.description": "`[pack] description`",
    "RulePack.entrypoints": "`[pack] entrypoints`: the services it applies to",
    "RulePack.startup": "`[[startup]]`",
    "RulePack.flags": "`[[flags]]`",
    "RulePack.scripts": "`[[scripts]]`",
    "StartupModule.reason": "why startup imports it (the source's file:line)",
    "FlagRule.flag": "the launch flag, `--grammar-backend`",
    "FlagRule.reason": "where startup runs what the flag chooses",
    "FlagRule.default": "the value when the command does not set the flag",
    "FlagRule.values": "`[flags.values.NAME]`: each value and what it runs",
    "FlagRule.workaround": "`false`: never offer a value of this flag as a workaround",
    "FlagValue.modules": "what startup imports with this value",
    "VersionDefault.value": "the flag's default in those versions",
    "ScriptRule.reason": "why, with the source's file:line",
}
