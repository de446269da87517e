#!/usr/bin/env bash
# An install that is not editable works from any folder: build the wheel,
# install it into a fresh virtual environment (which sees the Paddle and numpy
# of the interpreter running this script, but not this checkout), and from an
# empty folder let it compile the op library from the sources it carries,
# check the registration, run the simulator and its console script, and let
# a stand-in FastDeploy load its plugin through the wheel's entry point.
#
# The interpreter is $PYTHON, else python3 on the PATH: that of an activated
# virtual environment too, whose packages the fresh one then sees.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# setuptools' own staging folders: a module deleted since the last wheel must
# not travel in this one.
rm -rf build/lib build/bdist.*
"$PYTHON" -m pip wheel -q --no-deps --disable-pip-version-check -w "$work/dist" .
"$PYTHON" -m venv --system-site-packages "$work/venv"
py="$work/venv/bin/python"
# A venv made from inside another one is based on the interpreter beneath
# both, so --system-site-packages alone shows it that interpreter's packages,
# not the outer venv's (where `pip install -e ".[cpu]"` put Paddle). A .pth
# file adds the running interpreter's site folders after the venv's own, so
# the wheel installed into the venv still comes first.
site="$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$PYTHON" -c 'import os, sys
print("\n".join(d for d in sys.path
                if os.path.isdir(d) and os.path.basename(d) in ("site-packages", "dist-packages")))
' > "$site/outer-site-packages.pth"
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
# One version number: the wheel's metadata is the package's __version__.
from importlib import metadata

assert metadata.version("fastdeploy_mtp") == fastdeploy_mtp.__version__, metadata.version("fastdeploy_mtp")
dist = metadata.distribution("fastdeploy_mtp")
assert dist.metadata["License-Expression"] == "Apache-2.0", dist.metadata["License-Expression"]
files = {str(f) for f in dist.files}
assert "fastdeploy_mtp/py.typed" in files, "py.typed is not in the wheel"
assert any(f.endswith(".dist-info/licenses/LICENSE") for f in files), "LICENSE is not in the wheel"
print(f"fastdeploy_mtp {fastdeploy_mtp.__version__}: metadata, py.typed and LICENSE as built")
PY
# Every form's registration, from the library the wheel's carried sources build.
"$py" -m fastdeploy_mtp check
out="$("$py" -m fastdeploy_mtp simulate --steps 5 --quiet)"
echo "$out"
[ "$(echo "$out" | tail -1)" = "OK: the mask offsets stayed right" ]
# The console script is the same program.
version="$("$work/venv/bin/fastdeploy-mtp" --version)"
[ "$version" = "$("$py" -m fastdeploy_mtp --version)" ] && echo "fastdeploy-mtp --version: $version"
ls "$FASTDEPLOY_MTP_CACHE"/*/fastdeploy_mtp_ops* >/dev/null  # built here, from the wheel
# FD_PLUGINS=fastdeploy_mtp through the wheel's own entry point (its
# metadata, not the checkout's), for each FastDeploy version a shipped form
# stands for (tests/standin_fastdeploy, the commits of tests/test_plugin.py's
# COMMIT_OF): the stand-in loads the plugin as FastDeploy does; at the
# proposer's first calls the plugin loads our library (and, for a 22-tensor
# op, a probe of the stand-in's own mask op tells pr5738 from pr6403), and the
# proposer's calls then compute what that version's ops compute: the form that
# corrects it (the default mode), or its own (FASTDEPLOY_MTP_MODE=exact). The
# stand-in's proposer is not FastDeploy's code, so no patch applies to it.
for mode in corrected exact; do
for pair in pr5245:ba915e03e pr5738:9018ccf74 pr6403:2178f2829 shadow:7a6c28781; do
  form="${pair%%:*}"
  use="$(FORM="$form" MODE="$mode" "$py" -c '
import os
from fastdeploy_mtp.plugin import CORRECTED_OF
print(CORRECTED_OF[os.environ["FORM"]] if os.environ["MODE"] == "corrected" else os.environ["FORM"])')"
  out="$(FD_PLUGINS=fastdeploy_mtp FASTDEPLOY_MTP_MODE="$([ "$mode" = exact ] && echo exact)" \
    STANDIN_FASTDEPLOY_COMMIT="${pair#*:}" \
    PYTHONPATH="$repo/tests/standin_fastdeploy${PYTHONPATH:+:$PYTHONPATH}" \
    "$py" "$repo/tests/standin_fastdeploy/drive.py" \
    "{\"proposer_first\": true, \"run\": \"$use\"}")"
  echo "$out" | grep '^RESULT ' | FORM="$use" COMMIT="${pair#*:}" "$py" -c '
import json, os, sys
from fastdeploy_mtp.signature import preprocess_form
form, commit = os.environ["FORM"], os.environ["COMMIT"]
r = json.loads(sys.stdin.read()[len("RESULT "):])
assert r["mismatch"] is None and r["fastdeploy_left"] == [] and r["calls"] == [], r
assert r["loads_at_register"] == [], r
pre, mask = "draft_model_preprocess", "update_attn_mask_offsets"
want = {pre: preprocess_form(form), "static_op_" + pre: preprocess_form(form),
        mask: form, "static_op_" + mask: form}
assert r["held"] == want, (r["held"], want)
ours = [(level, line) for level, line in r["log"] if "patch " not in line]
assert all(level == "INFO" for level, _ in ours), r["log"]
assert all(line.startswith("fastdeploy_mtp: ") for _, line in r["log"]), r["log"]
print("FD_PLUGINS=fastdeploy_mtp, through the wheel, stand-in FastDeploy", commit + ":",
      ours[-1][1])'
done
done

echo "the wheel works from an empty folder"
