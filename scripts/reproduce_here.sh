#!/usr/bin/env bash
# The reproduction runs of results/REPRODUCTION.md, as run on a 2-core CPU machine without a GPU:
# two single-threaded jobs at a time (joblib launcher). Usage: bash scripts/reproduce_here.sh [STEP...]
# Steps: fedcanon_fig2 fednmap fednmap_long fednmap_fig5 fedcef table5 bench fedcanon_fig3
# fedcanon_fig3_T10 quick_times prox (default: all).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
FEDRUN="${FEDRUN:-.venv/bin/fedrun}"  # may be a command with arguments
PY="${PY:-.venv/bin/python}"
PAR=(hydra/launcher=joblib hydra.launcher.n_jobs=2)
mkdir -p results/reproduction
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(fedcanon_fig2 fednmap fednmap_long fednmap_fig5 fedcef table5 bench fedcanon_fig3 fedcanon_fig3_T10 quick_times prox)
for step in "${steps[@]}"; do
  case "$step" in
    fedcanon_fig2) $FEDRUN -m experiment=fedcanon_fig2 "${PAR[@]}" ;;
    fednmap) for f in fednmap_fig2_quick fednmap_fig3_quick fednmap_fig4_quick; do
               $FEDRUN -m experiment=$f "${PAR[@]}"; done ;;
    fednmap_long)  # Figs. 3-4 with the paper's T = 200 on mnist5k (Fig. 3: 2 seeds, Fig. 4: 1)
      $FEDRUN -m experiment=fednmap_fig3 dataset=mnist5k seed=0,1 "${PAR[@]}"
      $FEDRUN -m experiment=fednmap_fig4 dataset=mnist5k seed=0 "${PAR[@]}" ;;
    fednmap_fig5)  # Fig. 5's rules (b) and (c) at T = 200 on mnist5k, one seed; rule (a), eta_a = 1/K,
                   # is the run of Fig. 4 (the same config), so it is not repeated here
      $FEDRUN -m experiment=fednmap_fig5 dataset=mnist5k seed=0 \
        algorithm=fednmap_fig5/eta_inv_sqrt_K,fednmap_fig5/eta_0.05 "${PAR[@]}" ;;
    fedcef) $FEDRUN -m experiment=fedcef_fig3_4_quick "${PAR[@]}" ;;
    table5) # per-round training time of Table V's methods; n = 2 clients (the per-round ratios do
            # not depend on n but for the server's one prox), so that all K fit in minutes here
            for K in 10 20 40 80; do
              "$PY" scripts/bench_engine.py --model cnn --shape fmnist --n 2 --B 64 --K $K \
                --algorithm fedcanon,fedmid,fedda,za1 --regularizer scad --set regularizer.a=1000 --set regularizer.lam=1e-4 --engines auto \
                --threads 1 --rounds 1 --repeats 1 --no-eval
            done | tee results/reproduction/table5_per_round.txt ;;
    bench) "$PY" scripts/bench_engine.py --threads 1 --workloads 3 --repeats 2 --rounds 1 --no-eval \
             | tee results/reproduction/bench_workload3.txt ;;
    fedcanon_fig3) $FEDRUN -m experiment=fedcanon_fig3_quick "${PAR[@]}" ;;
    fedcanon_fig3_T10)  # Fig. 3 with the paper's settings but T = 10 rounds, test accuracy every
                        # round, training metrics on a 3,000-sample subset (the exact pass is ~40 s)
      $FEDRUN -m experiment=fedcanon_fig3 T=10 eval_every=1 metrics.train_samples=3000 "${PAR[@]}" ;;
    quick_times)  # wall time of the slowest quick variants, one sweep at a time (QUICK: which)
      for f in ${QUICK:-fedcanon_fig3_quick fedcanon_table5_quick fedcanon_table6_femnist_quick fedcanon_table6_tinyimagenet_quick}; do
        start=$(date +%s); $FEDRUN -m experiment=$f "${PAR[@]}" >/dev/null
        echo "$f: $(( $(date +%s) - start )) s wall ($(date -u +%F))"
      done | tee -a results/reproduction/quick_times.txt ;;
    prox)  # Table I (ResNets, batch 32), then Table V's CNN at its batch size 64
      { "$PY" scripts/bench_prox.py --device cpu --reps 3 --batch 32
        "$PY" scripts/bench_prox.py --device cpu --reps 20 --batch 64 --models cnn
      } | tee results/reproduction/prox_bench.txt ;;
    *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
