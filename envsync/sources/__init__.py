"""What a HOST argument can name, resolved once per command: a live host and the session over
the inventory, a recorded state and a host's past, a lock file or a requirements file.
"""
