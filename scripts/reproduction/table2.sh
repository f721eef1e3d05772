#!/usr/bin/env bash
# The paper's training experiments (Table 2), each in its own run directory under an output
# root, with the paper's fixed settings (B0 = 16, fp32, seed 0 + 1 per epoch, validation every
# 2 epochs with RAND batching, the padded-mean loss). Restarting skips finished experiments and
# resumes unfinished ones from their checkpoint, so a long run can be stopped at any time.
# Several copies may run at once on one --out (one per GPU or core): each run is locked while it
# trains (flock on RUN_DIR.lock, held by train.py too), so the copies share the list instead of
# repeating it. With a generated corpus (demo, espeak), generate it before starting several
# copies: python train.py --check --hparams dataset=espeak,...
set -euo pipefail

usage() {
    cat <<EOF
usage: scripts/reproduction/table2.sh [options]

  --dataset demo|ljspeech   corpus (default ljspeech; demo: the generated corpus, CPU-sized)
  --epochs N                epochs per experiment (default 220, the paper's)
  --only NAMES              comma-separated experiments, or all (default all):
                            $(names | paste -sd, -)
  --seeds LIST              comma-separated seeds, e.g. 0,1,2 (default 0, the paper's); every
                            experiment runs once per seed, all experiments of a seed first
  --out DIR                 output root, one run directory per experiment and seed,
                            DIR/NAME/seedS (default runs/table2)
  --hparams K=V,...         extra train.py hparams for new runs (e.g. device=cuda:1,num_workers=8);
                            on resume only the keys train.py lets a resumed run change are passed
  --gpus N                  train each experiment with torchrun on N GPUs (default 1: plain python)
  -h, --help                this message

Then: python -m scripts.reproduction.make_tables DIR   (Tables 2-4 and Fig. 4)
Environment: PYTHON (default .venv/bin/python when present, else python3).
EOF
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
names() { "$PYTHON" -m scripts.reproduction names; }

dataset=ljspeech epochs=220 only=all seeds=0 out=runs/table2 extra="" gpus=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dataset) dataset=${2:?--dataset needs a value}; shift 2 ;;
        --epochs) epochs=${2:?--epochs needs a value}; shift 2 ;;
        --only) only=${2:?--only needs a value}; shift 2 ;;
        --seeds) seeds=${2:?--seeds needs a value}; shift 2 ;;
        --out) out=${2:?--out needs a value}; shift 2 ;;
        --hparams) extra=${2:?--hparams needs a value}; shift 2 ;;
        --gpus) gpus=${2:?--gpus needs a value}; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [[ "$gpus" -gt 1 ]]; then
    train=("$PYTHON" -m torch.distributed.run --standalone --nproc_per_node="$gpus" train.py)
else
    train=("$PYTHON" train.py)
fi

plan() {  # plan ONLY SEEDS: NAME SEED ACTION RUN_DIR HPARAMS lines
    "$PYTHON" -m scripts.reproduction plan --root "$out" --dataset "$dataset" --epochs "$epochs" \
        --only "$1" --seeds "$2" --extra "$extra"
}

# Plan first (validates names, seeds and epochs before anything starts), then run in Table 2's
# order, seeds outermost. Each run's action is decided again once its lock is held: another copy
# of this script may have finished or started it meanwhile.
listing=$(plan "$only" "$seeds")
mkdir -p "$out"
busy=0
# fd 3, so that training never reads the plan from its stdin.
while IFS=$'\t' read -r -u 3 name seed _ run_dir _; do
    mkdir -p "$(dirname "$run_dir")"
    exec 4>"$run_dir.lock"
    if ! flock -n 4; then
        echo "== $name seed $seed: another copy of table2.sh is training it, skipped"
        busy=$((busy + 1))
        exec 4>&-
        continue
    fi
    IFS=$'\t' read -r _ _ action _ hparams <<< "$(plan "$name" "$seed")"
    case "$action" in
        done) echo "== $name seed $seed: finished ($run_dir), skipped" ;;
        resume) echo "== $name seed $seed: resuming $run_dir"
                "${train[@]}" --resume "$run_dir" --hparams "$hparams" ;;
        new) echo "== $name seed $seed: training in $run_dir"
             "${train[@]}" --hparams "$hparams" ;;
    esac
    exec 4>&-
done 3<<< "$listing"
if [[ $busy -gt 0 ]]; then
    echo "== done here; $busy run(s) were being trained by another copy of table2.sh under $out"
else
    echo "== all requested experiments are finished under $out; tables: $PYTHON -m scripts.reproduction.make_tables $out"
fi
