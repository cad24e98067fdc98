"""The host's facts: what is installed and how the machine stands, each read without running it.

interpreter   the interpreter: version, paths, site folders
dists         distributions: metadata, RECORD, requires.txt (pure parsers)
files         reading and hashing files, bounded, and the cache of their digests
editable      editable installs: their finders and folders
git           a checkout's state (gitindex reads its index: a pure parser)
machine       GPUs, drivers, CUDA (nvidia-smi's output: a pure parser)
torchdeep     what torch reports of itself, run alone in a child interpreter
state         the environment's state key: what changed since the last probe
"""
