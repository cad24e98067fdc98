"""The host side: every line envsync runs on a host, stdlib only, Python 3.8 and newer.

It travels as one bundle (envsync/runner/bundle.py) and runs under another package name on hosts
(boot.PACKAGE): its modules import only the standard library and, relatively, each other.
The programs: `collect` (the probe), `agent.ops` (the agent), `importcheck`, `pipconfig`,
`nativequery` (which files define some symbols), `reach` (reachability by demand),
`follow` (calls made at import, followed toward some imports); boot.py loads them,
facts/torchdeep.py runs alone in a child interpreter.

The rooms, each a package with its own list:
  graph/    the startup graph: the walk from the roots, one file's facts, the module finder
  facts/    the host's facts: interpreter, distributions, files, git, machine, state
  caches/   what is kept between runs: parsed facts, the graph, packs shared across hosts
  native/   ELF files read through their tables, ld.so's search and link map; the startup's
            loads judged (scan), NCCL's version (nccl)
  agent/    the agent: ops (dispatch), paths, failure, transfer, backup, service, lock
At the top stand the programs (collect, importcheck, pipconfig, nativequery, reach, follow) and what
everything shares: boot, protocol, shared.

envsync itself may import only these (tests/hostside/test_package.py holds it to this
list): `shared` (redaction, names, the environment key, state paths, package files,
temporary names, import contexts), `protocol` (program and operation names, markers),
`boot` (the guard, the frame, the cache folder), `native.verdicts` (the loader's failure
classes, which the snapshot decodes), and the caches' rules that envsync's own received
copies follow too: `caches.store` (a cap, least recently used) and `caches.chunks`
(content-defined chunks); tests read the rest.
"""
