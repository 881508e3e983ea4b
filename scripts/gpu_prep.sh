#!/usr/bin/env bash
# Prepare, on this machine, what scripts/gpu_check.sh needs on the device machine (no network):
#   .whl/       wheels (x86-64, CPython 3.12) of fedprox_cli's dependency closure -- pip's own
#               resolver on `.[test,cluster]` (gpu_check's tests, and the launchers for parallel
#               jobs on the one GPU) -- minus the packages the device image has
#               (scripts/device_packages.txt, from the device tool's KINDS.md) and what only
#               they need (scripts/carried_wheels.py); so the list follows pyproject.toml.
#               antlr4 4.9.3 (omegaconf's) exists only as a source archive: its pure-Python
#               wheel is built here first, and the resolver takes it from there;
#   .gpu_data/  Fashion-MNIST's four .gz files (from the Debian package or data.root).
# Both folders are ignored by git (.gitignore); name them in the device call's `carry`.
# Usage: bash scripts/gpu_prep.sh   (env: PY=python for pip, EXTRAS=test,cluster,
#        PYVER=3.12 the device's Python, WHL=.whl the wheel folder; it is made afresh)
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PY:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
PYVER="${PYVER:-3.12}"
WHL="${WHL:-.whl}"
TARGET=(--python-version "$PYVER" --implementation cp --only-binary=:all:
        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
        --platform manylinux2014_x86_64 --platform manylinux1_x86_64)
NEW="$(mktemp -d)"
trap 'rm -rf "$NEW"' EXIT
"$PY" -m pip wheel -q --no-deps -w "$NEW" antlr4-python3-runtime==4.9.3
"$PY" -m pip install -q --dry-run --ignore-installed --report "$NEW/report.json" "${TARGET[@]}" \
  --find-links "$NEW" ".[${EXTRAS:-test,cluster}]"
mapfile -t WHEELS < <("$PY" scripts/carried_wheels.py "$NEW/report.json" scripts/device_packages.txt "$PYVER")
echo "gpu_prep: carrying ${WHEELS[*]}"
"$PY" -m pip download -q --no-deps "${TARGET[@]}" --find-links "$NEW" -d "$NEW" "${WHEELS[@]}"
rm "$NEW/report.json"
rm -rf "$WHL" && mkdir -p "$WHL" && cp "$NEW"/*.whl "$WHL"/  # one version of each: two stop the install
mkdir -p .gpu_data/FashionMNIST/raw
src="${FMNIST_DIR:-/usr/share/datasets/fashion-mnist}"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  [ -e ".gpu_data/FashionMNIST/raw/$f.gz" ] || cp "$src/$f.gz" .gpu_data/FashionMNIST/raw/ \
    || echo "gpu_prep: no $src/$f.gz (apt-get install dataset-fashion-mnist, or FMNIST_DIR=...)" >&2
done
du -sh "$WHL" .gpu_data
ls "$WHL"
