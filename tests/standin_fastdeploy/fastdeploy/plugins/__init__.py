from .model_register import load_model_register_plugins

__all__ = ["load_model_register_plugins"]
