#!/usr/bin/env bash
# Scores a checkpoint on the Multi30k test sets, greedy and with beam search, as sacreBLEU
# would (mixed case, 13a), plus the lowercased BLEU that tutorials report.
#
#   scripts/eval-multi30k.sh [CHECKPOINT_OR_RUN_DIR] [BEAM] [LENGTH_PENALTY]
#
# Defaults: runs/multi30k-cpu (its best/ checkpoint), and the beam and length penalty of the
# checkpoint's [decode] table (what `translate` uses without flags); each set is also decoded
# greedily. Choose other settings on the validation set (`transformer eval --src
# data/multi30k/val.de.gz ...`), never on these. Translations are kept in <checkpoint>/eval/.
# Needs data/multi30k (scripts/get-multi30k.sh) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
run="${1:-runs/multi30k-cpu}"
beam="${2:-}"
alpha="${3:-}"
bin="${TRANSFORMER_BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
out="$run/eval"
mkdir -p "$out"
# Empty: the checkpoint's own [decode] setting.
decode_flags=()
[[ -n "$alpha" ]] && decode_flags+=(--length-penalty "$alpha")
for set in test2016 test2017_flickr test2017_mscoco; do
  for b in 1 "${beam:-decode}"; do
    flags=("${decode_flags[@]}")
    [[ "$b" != decode ]] && flags+=(--beam "$b")
    hyp="$out/$set.beam$b.en"
    start=$(date +%s%N)
    "$bin" eval --device cpu --checkpoint "$run" "${flags[@]}" \
      --src "data/multi30k/$set.de.gz" --ref "data/multi30k/$set.en.gz" --out "$hyp" 2>/dev/null \
      | sed "s/^/$set beam $b: /"
    millis=$(( ($(date +%s%N) - start) / 1000000 ))
    "$bin" eval --lowercase --hyp "$hyp" --ref "data/multi30k/$set.en.gz" | head -1 \
      | sed "s/^/$set beam $b lowercased: /"
    echo "$set beam $b: translated and scored in ${millis} ms"
  done
done
