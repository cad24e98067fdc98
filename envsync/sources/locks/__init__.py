"""Lock files: envsync's own TOML and the standard pylock.toml, with the package indexes that
say which exact files they pin.
"""
