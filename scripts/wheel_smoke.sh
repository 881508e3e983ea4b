#!/usr/bin/env bash
# Wheel smoke test (CI, .ci/run): build the wheel from this checkout's files, install it in a
# fresh venv outside the repository, and run from there `fedrun` on digits, the Python API,
# `pip install .` (no wheel file) and the example plugin examples/fedprox_server.
#
#   scripts/wheel_smoke.sh [PYTHON]     (default: .venv/bin/python, the venv `make` sets up)
#
# The fresh venv gets the dependencies (torch, Hydra, ...) from PYTHON's environment through a
# .pth line naming its site-packages: a plain path, so that environment's own .pth files (the
# editable install of this checkout among them) are not run and fedprox_cli is importable
# only from what this script installs -- checked before installing (pip leaves PYTHON's own
# installation alone: "Not uninstalling ... outside environment"). Installing torch afresh
# would take minutes and gigabytes; the dependencies are not under test here, the wheel is.
# Builds run without isolation (offline CI: setuptools from PYTHON's environment).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-.venv/bin/python}
PY=$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")  # absolute, not resolved: a venv's python
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export OMP_NUM_THREADS=1 PYTHONPATH=
say() { echo "wheel_smoke: $*"; }

# This checkout's files (tracked and new, not ignored), so no stale build/ leaks into the wheel.
mkdir "$TMP/src"
git ls-files -co --exclude-standard -z | xargs -0 cp --parents -t "$TMP/src"
cd "$TMP"  # from here on outside the repository: conf/ must come from what is installed
"$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$TMP/dist" "$TMP/src"
WHEEL=$(ls "$TMP"/dist/fedprox_cli-*.whl)
say "built $(basename "$WHEEL")"

venv() {  # venv DIR: a fresh venv seeing PYTHON's site-packages but not its fedprox_cli
  "$PY" -m venv --without-pip "$1"
  "$PY" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" \
    > "$("$1/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")/deps.pth"
  if "$1/bin/python" -c "import fedprox_cli" 2>/dev/null; then
    echo "wheel_smoke: fedprox_cli is importable in a fresh venv before installing" >&2; exit 1
  fi
}

venv "$TMP/venv"
"$TMP/venv/bin/python" -m pip install -q --no-deps "$WHEEL"
mkdir "$TMP/work" && cd "$TMP/work"

"$TMP/venv/bin/fedrun" dataset=digits T=2 hydra.run.dir=cli
grep -q '"status": "finished"' cli/summary.json
say "fedrun dataset=digits T=2: finished"

"$TMP/venv/bin/python" - <<'EOF'
import sys
import fedprox_cli
assert fedprox_cli.__file__.startswith(sys.prefix), fedprox_cli.__file__
run = fedprox_cli.run({"dataset": "digits", "T": 2}, folder="api")
assert run.status == "finished" and len(run.metrics) == 2, run
runs = fedprox_cli.load_runs(".")
assert sorted(runs["folder"].str.split("/").str[-1]) == ["api", "cli"], runs["folder"]
print(f"wheel_smoke: Python API: {run.status}, load_runs: {len(runs)} runs")
EOF

"$TMP/venv/bin/python" -m pip install -q --no-deps --no-build-isolation "$TMP/src/examples/fedprox_server"
"$TMP/venv/bin/fedrun" algorithm=fedprox_server dataset=digits T=2 hydra.run.dir=plugin
grep -q '"status": "finished"' plugin/summary.json
say "example plugin: fedrun algorithm=fedprox_server: finished"
"$TMP/venv/bin/fedrun" algorithm=fedprox regularizer=none dataset=digits T=2 hydra.run.dir=tutorial  # no YAML
grep -q '"status": "finished"' tutorial/summary.json
"$TMP/venv/bin/fedrun-check-algorithm" fedprox
say "tutorial plugin: fedrun algorithm=fedprox (no YAML): finished; fedrun-check-algorithm fedprox: all contracts hold"

venv "$TMP/venv2"  # `pip install .` of the source tree (no wheel file): a dry run composes conf/
"$TMP/venv2/bin/python" -m pip install -q --no-deps --no-build-isolation "$TMP/src"
"$TMP/venv2/bin/fedrun" dataset=digits T=2 dry_run=true hydra.run.dir=dry >/dev/null
say "pip install . : fedrun dry run valid"
