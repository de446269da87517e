"""pytest set-up: the repo on sys.path, the op library built once, and
hypothesis's profile (HYPOTHESIS_PROFILE=fixed: the same draws every run and
no example database, so a mutant's kill never depends on chance; the
mutation tool runs its suites so)."""

import os
import sys

import pytest
from hypothesis import settings

settings.register_profile("fixed", derandomize=True, database=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="session", autouse=True)
def _library():
    """Build (or load) the op library once, up front."""
    from fastdeploy_mtp import ops

    ops.load_library()
