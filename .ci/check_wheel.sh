#!/usr/bin/env bash
# An install that is not editable works from any folder: build the wheel,
# install it into a fresh virtual environment (which sees the machine's Paddle
# and numpy but not this checkout), and from an empty folder let it compile
# the op library from the sources it carries, check the registration and run
# the simulator.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# setuptools' own staging folders: a module deleted since the last wheel must
# not travel in this one.
rm -rf build/lib build/bdist.*
python3 -m pip wheel -q --no-deps --disable-pip-version-check -w "$work/dist" .
python3 -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install -q --no-deps --disable-pip-version-check "$work"/dist/*.whl
mkdir "$work/empty"
cd "$work/empty"
# A build cache of its own: the first op call compiles the wheel's sources.
export FASTDEPLOY_MTP_CACHE="$work/cache"
"$py" - <<'PY'
import sys

import fastdeploy_mtp
from fastdeploy_mtp import _build

where = fastdeploy_mtp.__file__
assert where.startswith(sys.prefix), f"imported {where}, not the wheel's copy in {sys.prefix}"
assert not _build.in_source_checkout() and _build.sources_available(), _build.SOURCE_DIR
assert str(_build.SOURCE_DIR).startswith(sys.prefix), _build.SOURCE_DIR
print(f"the wheel's package and op sources: {_build.SOURCE_DIR}")
PY
"$py" -m fastdeploy_mtp check
out="$("$py" -m fastdeploy_mtp simulate --steps 5 --quiet)"
echo "$out"
[ "$(echo "$out" | tail -1)" = "OK: the mask offsets stayed right" ]
ls "$FASTDEPLOY_MTP_CACHE"/*/fastdeploy_mtp_ops* >/dev/null  # built here, from the wheel
echo "the wheel works from an empty folder"
