"""Ansible: its inventories read through ansible-core's own `ansible-inventory --list`, and
Ansible as the engine that collects hosts (`--engine ansible`).

`inventory.py` maps an Ansible inventory (INI, YAML, a dynamic script, a folder) to
envsync's hosts and groups; `engine.py` runs the probe on many hosts through
`ansible-playbook` (its forks, connection plugins and become) with envsync's own module
(`library/envsync_run.py`) and streams each host's result back through envsync's callback
(`plugins/envsync_stream.py`) as it arrives. ansible-core is the optional extra `ansible`.
"""

from envsync.ansible.inventory import is_ansible_inventory, read_inventory

__all__ = ["is_ansible_inventory", "read_inventory"]
