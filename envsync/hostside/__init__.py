"""The code that runs on a host, under the host's own interpreter (stdlib only, Python 3.8+)."""
