#!/usr/bin/env bash
# Every GPU check, in ONE device call: install the carried wheels, run the
# CUDA tests and the engine-equivalence tests on CUDA, the engine and memory benchmarks, and one
# named reproduction step; logs and CSVs land in OUTDIR ($OUT on the device machine, else
# results/gpu_check). Prepare here first with `bash scripts/gpu_prep.sh` (.whl/: the wheels of
# fedprox_cli's dependency closure that the device image lacks; .gpu_data/), then:
#
#   device run: carry [".whl", ".gpu_data"],
#               command "bash scripts/gpu_check.sh [-o OUTDIR] [-p PARTS] [STEP [OVERRIDE...]]"
#
# PARTS: comma-separated subset of tests,bench,memory,repro (default: all of them).
# STEP:  smoke (default: 3 rounds of every engine on digits) | fedcanon_fig3 | fedcanon_table5 |
#        fednmap_fig2 | fednmap_fig3 | fednmap_fig4 | prox | none. OVERRIDEs go to fedrun, e.g.
#        `fedcanon_fig3 seed=0 partition=iid` for one piece of a sweep.
# Time: each part runs under a budget (minutes: TESTS_MIN=3 BENCH_MIN=2 MEMORY_MIN=1
# REPRO_MIN=3, env) so that the call ends inside the device's 10-minute limit (the tests
# compile with torch.compile on CPU and CUDA: if 3 minutes do not suffice, PARTS=tests
# TESTS_MIN=8 in a call of its own; the bench's vmap+compile rows likewise want BENCH_MIN=8). A reproduction
# stopped by its budget gets SIGTERM, saves its checkpoint (checkpoint_every=5,
# keep_checkpoint=true) and is tarred with its run folders into OUTDIR/repro_STEP.tar.gz:
# unpack it in the next call's tree (carry results/gpu) and the same command continues it.
# BENCH_ARGS (default "--repeats 3 --rounds 2 --no-eval") go to bench_engine.py; MEMORY_MODELS
# (default "mlp cnn resnet18") are measured at n = 10 and 100. At most 8
# files land in OUTDIR (the device's limit). Without a CUDA device the script stops at once
# with exit status 3; GPU_CHECK_DEVICE=cpu runs its plumbing on the CPU instead (a dry run).
set -uo pipefail
cd "$(dirname "$0")/.."
DIR="${OUT:-results/gpu_check}"
PARTS=tests,bench,memory,repro
while getopts "o:p:" opt; do
  case "$opt" in o) DIR="$OPTARG" ;; p) PARTS="$OPTARG" ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
STEP="${1:-smoke}"; [ $# -gt 0 ] && shift
PY="${PY:-python3}"
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD"
[ -d .gpu_data ] && export FEDPROX_DATA="$PWD/.gpu_data"
DEV="${GPU_CHECK_DEVICE:-cuda}"
if [ "$DEV" = cuda ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  echo "gpu_check: no CUDA device here (torch.cuda.is_available() is false); run it on the device machine" >&2
  exit 3
fi
if [ -d .whl ] && ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "gpu_check: could not install the carried wheels (.whl/)" >&2; exit 2; }
  export PYTHONPATH="/tmp/site:$PWD"
fi
"$PY" -c "import hydra, omegaconf, fedprox_cli" || { echo "gpu_check: fedprox_cli does not import (carry .whl: bash scripts/gpu_prep.sh)" >&2; exit 2; }
has() { [[ ",$PARTS," == *",$1,"* ]]; }
budget() { local min="$1"; shift; timeout --signal=TERM --kill-after=20 "$((min * 60))" "$@"; }
{ nvidia-smi; "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0); print(p.name, p.total_memory >> 20, 'MiB,', p.multi_processor_count, 'SMs')"
  git log -1 --oneline 2>/dev/null; } > "$DIR/env.txt" 2>&1
status=0
if has tests; then  # CUDA agreement / no-sync tests, engine equivalence, eager vs compiled, compressor and prox tests
  # -n 0: one process on the one GPU (pyproject's addopts would start a pytest-xdist worker per core);
  # no -q here: addopts has one, and a second would drop the "N passed" line from the log
  budget "${TESTS_MIN:-3}" "$PY" -m pytest -n 0 -p no:cacheprovider -rs tests/test_device.py tests/test_engines.py \
    tests/test_compile.py tests/test_regularizers.py tests/test_compressors.py > "$DIR/tests.log" 2>&1 || status=1
  tail -3 "$DIR/tests.log"
fi
if has bench; then  # engines on CUDA, exact float32 and TF32 (ratios within each run)
  { for mp in highest high; do
      # shellcheck disable=SC2086
      budget "${BENCH_MIN:-2}" "$PY" scripts/bench_engine.py --device "$DEV" ${BENCH_ARGS:---repeats 3 --rounds 2 --no-eval} \
        --matmul-precision "$mp" --csv "$DIR/bench_engine_$mp.csv" || status=1
    done; } > "$DIR/bench_engine.log" 2>&1
  grep "^|" "$DIR/bench_engine.log" | head -30
fi
if has memory; then  # peak GPU memory per model at n = 10 and n = 100
  { for model in ${MEMORY_MODELS:-mlp cnn resnet18}; do for n in 10 100; do
      budget "${MEMORY_MIN:-1}" "$PY" scripts/bench_memory.py --device "$DEV" --model "$model" --n "$n" \
        --dataset fmnist --chunks auto --memory-gb 8 || true
    done; done; } > "$DIR/bench_memory.log" 2>&1
  cat "$DIR/bench_memory.log"
fi
if has repro && [ "$STEP" != none ]; then
  RUN=("device=$DEV" checkpoint_every=5 keep_checkpoint=true "hydra.sweep.dir=results/gpu/$STEP" "$@")
  case "$STEP" in
    smoke) cmd=("$PY" -m fedprox_cli -m dataset=digits model=mlp T=3 engine=loop,vmap "${RUN[@]}") ;;
    fedcanon_fig3|fedcanon_table5|fednmap_fig2|fednmap_fig3|fednmap_fig4)
      cmd=("$PY" -m fedprox_cli -m "experiment=$STEP" "${RUN[@]}") ;;
    prox) cmd=("$PY" scripts/bench_prox.py --device "$DEV" --reps 20 --batch 32) ;;
    *) echo "gpu_check: unknown step $STEP" >&2; exit 2 ;;
  esac
  echo "+ ${cmd[*]}" > "$DIR/repro_$STEP.log"
  budget "${REPRO_MIN:-3}" "${cmd[@]}" >> "$DIR/repro_$STEP.log" 2>&1 || status=1
  [ -d "results/gpu/$STEP" ] && tar -czf "$DIR/repro_$STEP.tar.gz" "results/gpu/$STEP"
  tail -5 "$DIR/repro_$STEP.log"
fi
ls -la "$DIR"
exit $status
