"""Benchmarks behind ``python -m fastdeploy_mtp bench | bench-sim | bench-gpu``:
``cpu`` (each op next to the numpy reference, the batched insert, the
simulator) and ``gpu`` (the CUDA ops against their floors, a FastDeploy-shaped
baseline and empty kernels). They print figures; the tests assert behaviour."""
