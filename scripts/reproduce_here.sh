#!/usr/bin/env bash
# The reproduction runs of results/REPRODUCTION.md, as run on a 2-core CPU machine without a GPU:
# two single-threaded jobs at a time (joblib launcher). Usage: bash scripts/reproduce_here.sh [STEP...]
# Steps: fedcanon_fig2 fednmap fedcef table5 fedcanon_fig3 prox (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
FEDRUN="${FEDRUN:-.venv/bin/fedrun}"  # may be a command with arguments
PY="${PY:-.venv/bin/python}"
PAR=(hydra/launcher=joblib hydra.launcher.n_jobs=2)
mkdir -p results/reproduction
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(fedcanon_fig2 fednmap fedcef table5 fedcanon_fig3 prox)
for step in "${steps[@]}"; do
  case "$step" in
    fedcanon_fig2) $FEDRUN -m experiment=fedcanon_fig2 "${PAR[@]}" ;;
    fednmap) for f in fednmap_fig2_quick fednmap_fig3_quick fednmap_fig4_quick; do
               $FEDRUN -m experiment=$f "${PAR[@]}"; done ;;
    fedcef) $FEDRUN -m experiment=fedcef_fig3_4_quick "${PAR[@]}" ;;
    table5) for K in 10 20 40 80; do
              "$PY" scripts/bench_engine.py --model cnn --shape fmnist --n 10 --B 64 --K $K \
                --algorithm fedcanon,fedmid,fedda,za1 --regularizer scad --set regularizer.a=1000 --set regularizer.lam=1e-4 --engines auto \
                --threads 1 --rounds 1 --repeats 2 --no-eval
            done | tee results/reproduction/table5_per_round.txt ;;
    fedcanon_fig3) $FEDRUN -m experiment=fedcanon_fig3_quick "${PAR[@]}" ;;
    prox) "$PY" scripts/bench_prox.py --device cpu --reps 3 --batch 32 \
            | tee results/reproduction/prox_bench.txt ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
