#!/usr/bin/env bash
# The serving benchmark (scripts/bench_serve.py): `serve` under 1, 8 and 32 concurrent
# clients on loopback against offline `translate --batch-size 32`, interleaved. Run it with
# nothing else running.
#
#   CHECKPOINT=runs/multi30k-cpu/averaged scripts/bench-serve.sh      # test2016's sentences
#   COMPUTE_TYPE=int8 scripts/bench-serve.sh                          # serve --compute-type int8
#   CHECKPOINT=target/bench/marian-bench MAX_LEN=64 scripts/bench-serve.sh  # OPUS-MT's shape
#   scripts/bench-serve.sh --quick                                    # tiny model, one pass
set -euo pipefail
cd "$(dirname "$0")/.."
target="${CARGO_TARGET_DIR:-target}"
BIN="${BIN:-$target/release/transformer}"
cargo build --release --quiet --example serve_load
LOAD="$target/release/examples/serve_load"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = "--quick" ]; then
  "$BIN" train --device cpu --quiet --config configs/tiny.toml --out "$work/tiny"
  for _ in $(seq 16); do printf '%s\n' "ich mochte ein bier" "ich mochte ein cola"; done \
    > "$work/de.txt"
  python3 scripts/bench_serve.py --bin "$BIN" --load "$LOAD" --checkpoint "$work/tiny" \
    --sentences "$work/de.txt" --count 32 --reps 1
  exit 0
fi
CHECKPOINT="${CHECKPOINT:-runs/multi30k-cpu/averaged}"
SOURCE="${SOURCE:-data/multi30k/test2016.de.gz}"
zcat -f "$SOURCE" > "$work/de.txt"
python3 scripts/bench_serve.py --bin "$BIN" --load "$LOAD" --checkpoint "$CHECKPOINT" \
  --sentences "$work/de.txt" --count "${COUNT:-256}" --reps "${REPS:-3}" --beam "${BEAM:-1}" \
  --compute-type "${COMPUTE_TYPE:-float32}" ${MAX_LEN:+--max-len "$MAX_LEN"}
