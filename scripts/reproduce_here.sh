#!/usr/bin/env bash
# The reproduction runs of results/REPRODUCTION.md, as run on a 2-core CPU machine without a GPU:
# two single-threaded jobs at a time (joblib launcher). Usage: bash scripts/reproduce_here.sh [STEP...]
# `bash scripts/reproduce_here.sh list` prints every step (the labels of the case statement below);
# with no STEP: the first session's steps, then figures (the default list below); the later issues'
# steps run only when named. A run step writes its sweep under results/sweeps/<preset>/<time>/ (conf/config.yaml);
# REPRODUCTION.md's figures and tables read the copies committed under results/reproduction/<name>/
# (fedcanon_fig1_quick, fedcanon_fig2, fedcanon_fig3_quick, fedcanon_fig3_T10, fedcanon_table5_quick,
# fedcef_fig3_4_quick, fednmap_fig2_quick, fednmap_fig3(_quick), fednmap_fig4(_quick), fednmap_fig5).
# results/REPRODUCTION.md itself is written by `fedrun-reproduce report` from the claims in
# fedprox_cli/claims/ (`fedrun-reproduce plan` lists the runs still to make, with commands and cost).
# Step `figures` trains nothing: it redraws every figure and table of the report from those folders
# (R=DIR reads another copy).
set -euo pipefail
cd "$(dirname "$0")/.."
export OMP_NUM_THREADS=1
FEDRUN="${FEDRUN:-.venv/bin/fedrun}"  # may be a command with arguments
PY="${PY:-.venv/bin/python}"
PAR=(hydra/launcher=joblib hydra.launcher.n_jobs=2)
mkdir -p results/reproduction
R="${R:-results/reproduction}"
PLOT=("$PY" scripts/plot.py)
TABLES=("$PY" scripts/tables.py)
into() {  # into NAME OVERRIDES...: a sweep written to $R/NAME, its wall time appended to run_times.txt
  local name=$1 start code=0; shift; start=$(date +%s)
  $FEDRUN -m "${PAR[@]}" "$@" hydra.sweep.dir="$R/$name" || code=$?  # "$@" may override PAR
  # a diverged job (exit 1) is a result; the next step still runs
  echo "$name: $(( $(date +%s) - start )) s wall, exit $code, finished $(date -u '+%F %H:%M') UTC" | tee -a "$R/run_times.txt"
  [ "$code" -le 1 ]
}
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(fedcanon_fig1 fedcanon_fig2 fednmap fednmap_long fednmap_fig5 fedcef table5 table5_quick bench fedcanon_fig3 fedcanon_fig3_T10 quick_times prox figures)
for step in "${steps[@]}"; do
  case "$step" in
    fedcanon_fig1) $FEDRUN -m experiment=fedcanon_fig1_quick "${PAR[@]}" ;;  # breast_cancer for A9A, T = 30
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
    # The papers' seeds and lengths. Each writes straight into its results/reproduction/ folder;
    # re-running a step resumes its unfinished jobs from their checkpoints and leaves finished ones.
    fedcanon_fig2_coin)  # SCAFFNEW with ProxSkip's random coin, p = 1/K, 3 seeds
      into fedcanon_fig2_scaffnew_coin experiment=fedcanon_fig2 algorithm=fedcanon_fig2/scaffnew algorithm.p=0.05 seed=0,1,2 ;;
    fedcanon_fig2_seeds) into fedcanon_fig2_seeds12 experiment=fedcanon_fig2 seed=1,2 ;;  # + the committed seed 0
    fedcef_T65)  # Figs. 3-4 at the paper's T = 65 on mnist5k, 3 seeds
      into fedcef_fig3_4_mnist5k_T65 experiment=fedcef_fig3_4 dataset=mnist5k seed=0,1,2 eval_every=5 ;;
    fedcef_T65_step)  # FedCEF (top-10%) with smaller local steps than the paper's 0.1, which diverges here
      into fedcef_fig3_4_mnist5k_T65_step_probe hydra.launcher.n_jobs=1 \
        experiment=fedcef_fig3_4 dataset=mnist5k seed=0 eval_every=5 algorithm=fedcef_fig3_4/fedcef_top10 algorithm.alpha=0.05,0.02 ;;
    fedcanon_fig3_bites)  # Fig. 3 with a SCAD that zeroes a real share of the weights: a probe of
                          # lam at a = 20 (valid for FedDA's growing prox step up to T = 22 at K = 40),
                          # then T = 10 at the lam chosen from it (nnz_frac)
      into fedcanon_fig3_probe hydra.launcher.n_jobs=1 experiment=fedcanon_fig3_quick partition=dir/0.2 \
        regularizer.lam=1e-3,1e-2 regularizer.a=20
      into fedcanon_fig3_bites_T10 hydra.launcher.n_jobs=1 experiment=fedcanon_fig3 partition=dir/0.2 T=10 \
        eval_every=1 metrics.train_samples=3000 regularizer.lam="${FIG3_LAM:-1e-2}" regularizer.a=20 ;;
    fednmap_fig2_seed2) into fednmap_fig2_quick_seed2 experiment=fednmap_fig2_quick seed=2 ;;  # + the committed 0, 1
    fednmap_fig4_seeds) into fednmap_fig4_seeds12 experiment=fednmap_fig4 dataset=mnist5k seed=1,2 ;;
    fedcef_fmnist_T65)  # Figs. 3-4 on full-size Fashion-MNIST (a second stand-in for MNIST), the paper's steps,
                        # FedCEF top-k 0.1, FedDA, FedCanon, one seed, one job at a time
      into fedcef_fig3_4_fmnist_T65 hydra.launcher.n_jobs=1 experiment=fedcef_fig3_4 dataset=fmnist seed=0 \
        eval_every=5 metrics.train_samples=3000 \
        algorithm=fedcef_fig3_4/fedcef_top10,fedcef_fig3_4/fedda,fedcef_fig3_4/fedcanon ;;
    fedcef_fmnist_seeds)  # the same, FedCEF top-k 0.1 and FedDA, seeds 1-2
      into fedcef_fig3_4_fmnist_T65_seeds12 experiment=fedcef_fig3_4 dataset=fmnist seed=1,2 eval_every=5 \
        metrics.train_samples=3000 algorithm=fedcef_fig3_4/fedcef_top10,fedcef_fig3_4/fedda ;;
    table6_fmnist)  # Table VI stand-in: FMNIST, CNN, FedCanon vs FedDR vs FedADMM, iid and Dir(0.2), T = 30
      into fedcanon_table6_fmnist_T30 hydra.launcher.n_jobs=1 experiment=fedcanon_table6 dataset=fmnist model=cnn \
        seed=0 T=30 metrics.train_samples=3000 ;;
    fednmap_fig4_K15_30) into fednmap_fig4_K15_30 experiment=fednmap_fig4 dataset=mnist5k seed=0,1,2 K=15,30 ;;  # more K points
    fednmap_fig3_seed2) into fednmap_fig3_seed2 experiment=fednmap_fig3 dataset=mnist5k seed=2 ;;
    fednmap_fig5_seeds) into fednmap_fig5_seeds12 experiment=fednmap_fig5 dataset=mnist5k seed=1,2 \
        algorithm=fednmap_fig5/eta_inv_sqrt_K,fednmap_fig5/eta_0.05 ;;
    # The per-seed runs (from a worktree fixed at a commit; each writes into results/reproduction/<name>/).
    fedcanon_fig1_seeds)  # Fig. 1's 4 x 4 (alpha, beta) grid at T = 200, seeds 0-4 batched in one process per job
      into fedcanon_fig1_T200 experiment=fedcanon_fig1_quick T=200 seeds=5 seed=0 ;;
    fedcef_h0_check)  # is FedCEF's divergence at the paper's local step 0.1 its code or the setting? Plain
                      # drift-corrected SCAFFOLD (server step 1) and FedCanon (alpha = beta K = 1) at the same
                      # step, h = 0, Fashion-MNIST, FedCEF Figs. 3-4's CNN, n, K, T, B and Dir(0.5), 3 seeds
                      # (spelled out: the preset's l1 lam cannot be combined with regularizer=none)
      into fedcef_fig3_4_fmnist_T65_h0 dataset=fmnist model=mnist_cnn partition=dir/0.5 regularizer=none \
        n=10 K=10 T=65 B=64 eval_every=5 metrics.train_samples=3000 seed=0,1,2 \
        algorithm=scaffold,fedcef_fig3_4/fedcanon algorithm.beta=0.1 ;;
    fedcef_eta1_step|fedcef_eta01)  # FedCEF top-k 0.1 on Fashion-MNIST in seed 1 (diverged at the default eta =
                      # 0.3, round 20), one job at a time per step (run the two steps side by side):
                      # fedcef_eta1_step: momentum eta = 1.0, then the local step alpha 0.2 and 0.05 around the
                      # paper's 0.1; fedcef_eta01: eta = 0.1
      FC=(experiment=fedcef_fig3_4 dataset=fmnist eval_every=5 metrics.train_samples=3000
          algorithm=fedcef_fig3_4/fedcef_top10 seed=1 hydra.launcher.n_jobs=1)
      if [ "$step" = fedcef_eta01 ]; then into fedcef_fig3_4_fmnist_T65_eta01 "${FC[@]}" algorithm.eta=0.1
      else into fedcef_fig3_4_fmnist_T65_eta1 "${FC[@]}" algorithm.eta=1.0
           into fedcef_fig3_4_fmnist_T65_step "${FC[@]}" algorithm.alpha=0.2,0.05; fi ;;
    fednmap_fig2_paper_n)  # Fig. 2 at the paper's n = 20, 50, 100 with K = 10 and 20; T = 200,
                           # mnist5k, 3 seeds (the first folder holds seed 0 at n = 20 in the numbered layout)
      into fednmap_fig2_K10_T200 experiment=fednmap_fig2 dataset=mnist5k K=10 n=20 seed=0
      into fednmap_fig2_n20_K10_T200_seeds12 experiment=fednmap_fig2 dataset=mnist5k K=10 n=20 seed=1,2
      into fednmap_fig2_n50_100_K10_T200 experiment=fednmap_fig2 dataset=mnist5k K=10 n=50,100 seed=0,1,2
      into fednmap_fig2_n20_K20_T200 experiment=fednmap_fig2 dataset=mnist5k K=20 n=20 seed=0,1,2
      into fednmap_fig2_n50_100_K20_T200 experiment=fednmap_fig2 dataset=mnist5k K=20 n=50,100 seed=0,1,2 ;;
    fedcef_fmnist_methods)  # the methods of Figs. 3-4 not yet run on Fashion-MNIST: ZA2 and FedCEF top-k 0.01 in
                            # seeds 0-2, FedCanon in seeds 1-2 (seed 0: fedcef_fmnist_T65), one job at a time
      FM=(hydra.launcher.n_jobs=1 experiment=fedcef_fig3_4 dataset=fmnist eval_every=5 metrics.train_samples=3000)
      into fedcef_fig3_4_fmnist_T65_za2_top1 "${FM[@]}" seed=0,1,2 algorithm=fedcef_fig3_4/za2,fedcef_fig3_4/fedcef_top1
      into fedcef_fig3_4_fmnist_T65_fedcanon_seeds12 "${FM[@]}" seed=1,2 algorithm=fedcef_fig3_4/fedcanon ;;
    fedcef_eta_step_seeds02)  # the momentum / local-step probe of fedcef_eta1_step and fedcef_eta01 in seeds 0 and 2
                              # (both converge at the default eta = 0.3): eta = 0.1, 1.0, then alpha = 0.2, 0.05
      FC=(experiment=fedcef_fig3_4 dataset=fmnist eval_every=5 metrics.train_samples=3000
          algorithm=fedcef_fig3_4/fedcef_top10 seed=0,2 hydra.launcher.n_jobs=1)
      into fedcef_fig3_4_fmnist_T65_eta_step_seeds02 "${FC[@]}" algorithm.eta=0.1,1.0
      into fedcef_fig3_4_fmnist_T65_eta_step_seeds02 "${FC[@]}" algorithm.alpha=0.2,0.05 ;;
    fednmap_fig3_4_seeds)  # FedNMap Figs. 3-4 in seeds 3-9 (the paper's 10 seeds with the committed 0-2), one
                           # sweep per seed into one folder, so that each seed's panel is whole before the next
                           # starts; run the step twice at once (SEEDS="9 8 7 6 5 4 3" for the second) and the
                           # run locks give each job to one of them. Fig. 4 at the paper's K only
      for s in ${SEEDS:-3 4 5 6 7 8 9}; do
        into fednmap_fig4_seeds3_9 hydra.launcher.n_jobs=1 experiment=fednmap_fig4 dataset=mnist5k K=5,10,20,40 seed=$s
      done
      for s in ${SEEDS:-3 4 5 6 7 8 9}; do
        into fednmap_fig3_seeds3_9 hydra.launcher.n_jobs=1 experiment=fednmap_fig3 dataset=mnist5k seed=$s
      done ;;
    fednmap_fig4_K15_30_seeds)  # Fig. 4's other two K in seeds 3-9, into the seeds' own folder (its folders are
                                # keyed by config: the finished K = 5, 10, 20, 40 jobs are skipped)
      into fednmap_fig4_seeds3_9 experiment=fednmap_fig4 dataset=mnist5k K=15,30 seed=3,4,5,6,7,8,9 ;;
    fednmap_fig6_digits)  # FedNMap Fig. 6 stand-in: MobileNetV3-Small with l1 on digits (CIFAR-10 is not here), the
                          # paper's panels (n, K) = (20, 10), (20, 20), (50, 10) and steps, T = 20 (T6=...), one sweep
                          # per seed into one folder; the n = 20 and n = 50 sweeps side by side (PART=20 or 50), one job each
      for s in ${SEEDS:-0 1 2}; do
        if [ "${PART:-20}" = 20 ]; then K6=10,20; else K6=10; fi
        into "fednmap_fig6_digits_T${T6:-20}" hydra.launcher.n_jobs=1 experiment=fednmap_fig6 dataset=digits \
          T="${T6:-20}" eval_every=1 n="${PART:-20}" K=$K6 seed=$s
      done ;;
    counters)  # FedCanon Table III: FedCanon II's counts (no committed run has it) from a 2-round digits run at
               # Fig. 3's n = 10, K = 40 (counts per round do not depend on the data or model); the other
               # methods' counts are read from the committed Fig. 3 runs (the claim fedcanon-table3, step figures)
      into fedcanon2_counters_digits algorithm=fedcanon2 dataset=digits model=linear regularizer=scad \
        regularizer.lam=1e-4 regularizer.a=1000 n=10 K=40 T=2 ;;
    table5) # per-round training time of Table V's methods; n = 2 clients (the per-round ratios do
            # not depend on n but for the server's one prox), so that all K fit in minutes here
            for K in 10 20 40 80; do
              "$PY" scripts/bench_engine.py --model cnn --shape fmnist --n 2 --B 64 --K $K \
                --algorithm fedcanon,fedmid,fedda,za1 --regularizer scad --set regularizer.a=1000 --set regularizer.lam=1e-4 --engines auto \
                --threads 1 --rounds 1 --repeats 2 --no-eval
            done | tee results/reproduction/table5_per_round.txt ;;
    table5_quick)  # whole rounds on the real FMNIST, n = 10, K in {1, 2, 4, 8}, T = 2, 2 seeds
      $FEDRUN -m experiment=fedcanon_table5_quick "${PAR[@]}" ;;
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
      } | tee results/reproduction/prox_bench.txt
      { echo "# uptime: $(uptime)"  # Table V's CNN at the runs' SCAD (lam 1e-4, a = 1000), then Table I's
        "$PY" scripts/bench_prox.py --device cpu --reps 20 --batch 64 --models cnn --lam 1e-4 --scad-a 1000
        "$PY" scripts/bench_prox.py --device cpu --reps 20 --batch 64 --models cnn
        echo "# uptime: $(uptime)"
      } | tee results/reproduction/prox_bench_a1000.txt ;;
    figures)  # the report: results/REPRODUCTION.md, its figures and tables (results/reproduction/figures/,
              # tables/) drawn from the claims in fedprox_cli/claims/, then the generic-command examples
              # of docs/reproducing.md (FedCanon Fig. 2, 3 seeds)
      "$PY" -m fedprox_cli.cli.reproduce report --results "$(dirname "$R")"
      F2=("$R/fedcanon_fig2" "$R/fedcanon_fig2_seeds12")  # seed 0, seeds 1-2: 3 seeds
      NAMES=(--label fedcanon=FedCanon --label fedavg=FedAvg --label scaffold=SCAFFOLD --label scaffnew=SCAFFNEW)
      "${PLOT[@]}" "${F2[@]}" --where partition=dir/0.1 --y test_acc --style paper "${NAMES[@]}" --out docs/assets/fedcanon_fig2_dir01.png
      "${TABLES[@]}" "${F2[@]}" --rows partition --precision 3 "${NAMES[@]}" --label partition=Partition --label iid=IID \
        --label "dir/0.1=Dir(0.1)" --label "dir/0.01=Dir(0.01)" --out docs/assets/fedcanon_fig2_table.tex ;;
    list)  # every step, one per line, as the labels of this case statement name them
      grep -oE '^    [A-Za-z0-9_|]+\)' "$0" | tr -d ' )' | tr '|' '\n' ;;
    *) echo "unknown step $step (bash scripts/reproduce_here.sh list names them)" >&2; exit 2 ;;
  esac
done
