#!/usr/bin/env bash
# Scores a checkpoint on the Multi30k test sets, greedy and with beam search, as sacreBLEU
# would (mixed case, 13a), plus the lowercased BLEU that tutorials report.
#
#   scripts/eval-multi30k.sh [CHECKPOINT_OR_RUN_DIR] [BEAM] [LENGTH_PENALTY]
#
# Defaults: runs/multi30k-cpu (its best/ checkpoint), beam 5, length penalty 1.0 (choose it on
# the validation set: `transformer eval --src data/multi30k/val.de.gz ...`). Translations are kept in
# <checkpoint>/eval/. Needs data/multi30k (scripts/get-multi30k.sh) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
run="${1:-runs/multi30k-cpu}"
beam="${2:-5}"
alpha="${3:-1.0}"
bin="${TRANSFORMER_BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
out="$run/eval"
mkdir -p "$out"
for set in test2016 test2017_flickr test2017_mscoco; do
  for b in 1 "$beam"; do
    hyp="$out/$set.beam$b.en"
    start=$(date +%s%N)
    "$bin" eval --device cpu --checkpoint "$run" --beam "$b" --length-penalty "$alpha" \
      --src "data/multi30k/$set.de.gz" --ref "data/multi30k/$set.en.gz" --out "$hyp" 2>/dev/null \
      | sed "s/^/$set beam $b: /"
    millis=$(( ($(date +%s%N) - start) / 1000000 ))
    "$bin" eval --lowercase --hyp "$hyp" --ref "data/multi30k/$set.en.gz" | head -1 \
      | sed "s/^/$set beam $b lowercased: /"
    echo "$set beam $b: translated and scored in ${millis} ms"
  done
done
