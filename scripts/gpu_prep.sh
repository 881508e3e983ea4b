#!/usr/bin/env bash
# Prepare, on this machine, what scripts/gpu_check.sh needs on the device machine (which has
# torch, numpy, pandas, matplotlib, scikit-learn, tqdm, PyYAML and joblib, but no network):
#   .whl/       wheels of the Python packages it lacks (x86-64, CPython 3.12), as the device
#               README says (pip download; antlr4 4.9.3 exists only as a source archive, so its
#               pure-Python wheel is built here);
#   .gpu_data/  Fashion-MNIST's four .gz files (from the Debian package or data.root).
# Both folders are ignored by git (.gitignore); name them in the device call's `carry`.
# Usage: bash scripts/gpu_prep.sh          (PY=python to use another interpreter for pip)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
# The versions installed here, where the tests pass (one of each: two stop the install there).
mapfile -t WHEELS < <("$PY" -c 'from importlib.metadata import version as v
for p in ("hydra-core", "omegaconf", "hydra-joblib-launcher", "mlxtend"): print(f"{p}=={v(p)}")')
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
           --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
mkdir -p .whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  "${PLATFORMS[@]}" -d .whl "${WHEELS[@]}"
ls .whl/antlr4_python3_runtime-4.9.3-*.whl >/dev/null 2>&1 || \
  "$PY" -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
mkdir -p .gpu_data/FashionMNIST/raw
src="${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -e ".gpu_data/FashionMNIST/raw/$f.gz" ] || cp "$src/$f.gz" .gpu_data/FashionMNIST/raw/ \
    || echo "gpu_prep: no $src/$f.gz (apt-get install dataset-fashion-mnist, or FMNIST_DIR=...)" >&2
done
du -sh .whl .gpu_data
ls .whl
