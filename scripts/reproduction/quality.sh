#!/usr/bin/env bash
# The README's quality measurement in one command per corpus: Table 2's RAND, SB-BR, SSB-BR, ATS-BR
# and SSB-DBS-BR at the CPU-sized setting, SSB-DBS-BR again with each learning-rate rule for DBS
# (lr_batch_scaling sqrt and linear), then the tables and Fig. 4 for both validation losses.
# Built on scripts/reproduction/table2.sh, so it is restartable, and several copies (one per core) share it.
set -euo pipefail

usage() {
    cat <<EOF
usage: scripts/reproduction/quality.sh demo|espeak [options]

  --epochs N      epochs per run (default: demo 48, espeak 12, the README's)
  --seeds LIST    comma-separated seeds (default 0,1,2)
  --only LIST     comma-separated experiments of the first sweep (default
                  $FIVE); SSB-DBS-BR's two learning-rate
                  rule runs follow it in any case
  --out DIR       run directories go to DIR/CORPUS, DIR/CORPUS-lr-sqrt, DIR/CORPUS-lr-linear
                  (default runs/quality)
  --tables DIR    tables and figures go to DIR/CORPUS-valid and DIR/CORPUS-padded
                  (default docs/quality)
  --hparams K=V,... more train.py hparams for new runs, after the corpus's own
  -h, --help      this message

demo: the generated demo corpus at the paper's constant learning rate (learning_rate=0.001,
warmup_steps=0); espeak: 200 LJSpeech sentences spoken by eSpeak NG (corpora/espeak-200).
EOF
}

FIVE=RAND,SB-BR,SSB-BR,ATS-BR,SSB-DBS-BR
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    ""|-*) usage >&2; exit 2 ;;
esac
corpus=$1; shift
case "$corpus" in
    demo) epochs=48 hparams=learning_rate=0.001,warmup_steps=0,progress=false ;;
    espeak) epochs=12 hparams=n_utterances=200,espeak_dir=corpora/espeak-200,progress=false ;;
    *) echo "error: unknown corpus '$corpus' (demo or espeak)" >&2; usage >&2; exit 2 ;;
esac
seeds=0,1,2 out=runs/quality tables=docs/quality only=$FIVE
while [[ $# -gt 0 ]]; do
    case "$1" in
        --epochs) epochs=${2:?--epochs needs a value}; shift 2 ;;
        --seeds) seeds=${2:?--seeds needs a value}; shift 2 ;;
        --only) only=${2:?--only needs a value}; shift 2 ;;
        --out) out=${2:?--out needs a value}; shift 2 ;;
        --tables) tables=${2:?--tables needs a value}; shift 2 ;;
        --hparams) hparams="$hparams,${2:?--hparams needs a value}"; shift 2 ;;
        -h|--help) usage; exit 0 ;;
        *) echo "error: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
export PYTHON

sweep=(scripts/reproduction/table2.sh --dataset "$corpus" --epochs "$epochs" --seeds "$seeds")
"${sweep[@]}" --only "$only" --out "$out/$corpus" --hparams "$hparams"
for rule in sqrt linear; do
    "${sweep[@]}" --only SSB-DBS-BR --out "$out/$corpus-lr-$rule" --hparams "$hparams,lr_batch_scaling=$rule"
done
for loss in valid padded; do
    "$PYTHON" -m scripts.reproduction.make_tables "$out/$corpus" --val-loss "$loss" --seeds "$seeds" \
        --variant "lr sqrt=$out/$corpus-lr-sqrt" --variant "lr linear=$out/$corpus-lr-linear" \
        --out "$tables/$corpus-$loss" > /dev/null
    echo "== $tables/$corpus-$loss: tables.md, tables.json, fig4_val_loss.png"
done
