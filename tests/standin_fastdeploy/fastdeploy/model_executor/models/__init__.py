"""Importing the models package loads the model-register plugins
(fastdeploy/model_executor/models/__init__.py, c29e86fc9 lines 24 and 68)."""

from fastdeploy.plugins.model_register import load_model_register_plugins

load_model_register_plugins()
