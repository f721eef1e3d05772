#!/usr/bin/env bash
# Table 1 (ZPR, ABL and batch counts of the batching strategies, DBS rows included) and
# Figs. 1-3 of the paper from utterance lengths alone: no audio and no GPU needed.
set -euo pipefail

usage() {
    cat <<EOF
usage: scripts/reproduction/table1.sh [LENGTHS_FILE] [OUT_DIR]

  LENGTHS_FILE  a filelist (wav|text|frames) or a TSV with a 'frames' column
                (default ../shared/data/ljspeech/lengths.tsv: the 13,100 LJSpeech clips;
                Table 1 uses the paper's seeded 80% training split of it)
  OUT_DIR       where the outputs go (default runs/table1):
                  table1.md / table1.json   Table 1 beside the paper's figures
                  fig1_batches.png          Fig. 1: RAND, SB, SSB (LRF 0.15) on 48 samples, B = 8
                  fig2_sweep.png / .md      Fig. 2: ZPR and ABL against LRF, bucket size, bins
                  fig3_batches_dbs.png      Fig. 3: the same 48 samples with dynamic batch sizes
Environment: PYTHON (default .venv/bin/python when present, else python3).
EOF
}

[[ "${1:-}" == "-h" || "${1:-}" == "--help" ]] && { usage; exit 0; }
[[ $# -le 2 ]] || { usage >&2; exit 2; }
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
lengths=$(realpath -m "${1:-$REPO/../shared/data/ljspeech/lengths.tsv}")
out=$(realpath -m "${2:-runs/table1}")
[[ -f "$lengths" ]] || { echo "error: lengths file $lengths not found" >&2; usage >&2; exit 2; }
cd "$REPO"
if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
mkdir -p "$out"
batching() { "$PYTHON" -m batching "$@" --lengths "$lengths"; }

{
    echo "# Table 1: ZPR and ABL of the batching strategies ($(basename "$lengths"), 80% training split, B0 = 16)"
    echo
    batching table1
} > "$out/table1.md"
batching table1 --json > "$out/table1.json"
batching sweep --out "$out" | sed "/^wrote /d" > "$out/fig2_sweep.md"
mv "$out/sweep.png" "$out/fig2_sweep.png"
# Figs. 1 and 3: the paper's toy example, 48 samples in batches of 8, SSB with LRF 0.15.
for fig in "fig1_batches:" "fig3_batches_dbs:,dbs=true"; do
    batching plot --samples 48 --hparams "batch_size=8,lrf=0.15${fig#*:}" --out "$out" > /dev/null
    mv "$out/batches.png" "$out/${fig%%:*}.png"
done
cat "$out/table1.md"
echo
echo "wrote $out/{table1.md,table1.json,fig1_batches.png,fig2_sweep.png,fig2_sweep.md,fig3_batches_dbs.png}"
