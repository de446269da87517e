"""FastDeploy's environment variables, read when asked (fastdeploy/envs.py,
c29e86fc9 line 114): FD_PLUGINS is None when unset, else its value split at
commas."""

import os


def __getattr__(name):
    if name == "FD_PLUGINS":
        return os.environ["FD_PLUGINS"].split(",") if "FD_PLUGINS" in os.environ else None
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
