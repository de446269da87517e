"""pytest set-up: the repo on sys.path, the op library built once."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def _library():
    """Build (or load) the op library once, up front."""
    from fastdeploy_mtp import ops

    ops.load_library()
