"""Loading one group's plugins as FastDeploy does (fastdeploy/plugins/utils.py,
c29e86fc9 lines 23-58): the group's entry points from importlib.metadata;
none with FD_PLUGINS unset; those whose entry-point name is listed in it;
one whose target fails to import is logged and skipped."""

import logging
from importlib.metadata import entry_points

from fastdeploy import envs

logger = logging.getLogger("fastdeploy")


def _group(group):
    try:
        return entry_points(group=group)
    except TypeError:  # Python 3.9's takes no group (FastDeploy uses importlib_metadata there)
        return entry_points().get(group, ())


def load_plugins_by_group(group):
    allowed = envs.FD_PLUGINS
    found = _group(group)
    if len(found) == 0 or allowed is None:
        return {}
    plugins = {}
    for plugin in found:
        if plugin.name in allowed:
            try:
                plugins[plugin.name] = plugin.load()
            except Exception as e:
                logger.exception(f"plugin {plugin.name} did not load: {e}")
    return plugins
