"""The model-register plugins (fastdeploy/plugins/model_register/__init__.py,
c29e86fc9 lines 19-34): loaded once per process, each called with no
arguments, its exceptions not caught."""

from fastdeploy.plugins.utils import load_plugins_by_group

PLUGINS_GROUP = "fastdeploy.model_register_plugins"
plugins_loaded = False


def load_model_register_plugins():
    global plugins_loaded
    if plugins_loaded:
        return
    plugins_loaded = True
    for func in load_plugins_by_group(group=PLUGINS_GROUP).values():
        func()
