"""Compare a target with its reference: the diff stage's classified findings, hosts folded
into classes, the gate of a multi-node server, and verdicts kept by their inputs.
"""
