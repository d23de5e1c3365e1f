#!/usr/bin/env bash
# The data pipeline's benchmark: how long `transformer train` takes to reach its first step on
# a corpus of millions of pairs, cold (no cache entry: the tokenizer learned, the corpus
# encoded and cached) and warm (a second run over the same files, and a resume), its memory
# then (peak, heap, mapped files), and whether steps are as fast as on a small corpus.
#
#   scripts/bench-corpus.sh                 # 5 million pairs (made when missing, ~50 s)
#   PAIRS=1000000 scripts/bench-corpus.sh   # another size
#   EPOCH=1 scripts/bench-corpus.sh         # also trains the whole first epoch (heap growth)
#
# The model is tiny (1 layer, d_model 64) so that the data pipeline is what is timed; BPE
# 8000, joint. Run it with nothing else running: the machine is shared and noisy. DROP_CACHES=1
# (root) empties the page cache before the cold run, so that it reads the corpus from disk.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${BIN:-target/release/transformer}"
PAIRS="${PAIRS:-5000000}"
CORPUS="${CORPUS:-data/large/de-en.$PAIRS.tsv}"
SMALL="${SMALL:-data/large/de-en.20000.tsv}"
STEPS="${STEPS:-300}"
WORK="${WORK:-target/bench-corpus}"

[ -x "$BIN" ] || cargo build --release
[ -f "$CORPUS" ] || python3 scripts/make-large-corpus.py --pairs "$PAIRS" --out "$CORPUS"
[ -f "$SMALL" ] || python3 scripts/make-large-corpus.py --pairs 20000 --out "$SMALL" --seed 2
mkdir -p "$WORK"

config() { # corpus cache-mode
  cat <<EOF
[model]
layers = 1
d_model = 64
d_ff = 128
heads = 4

[data]
train = "$1"
tokenizer = "bpe"
vocab_size = 8000
cache = "$2"
cache_dir = "$WORK/cache"

[training]
epochs = 1
max_tokens = 4096
log_every = 1
checkpoint_every = 1000000
EOF
}
config "$CORPUS" on > "$WORK/large.toml"
config "$SMALL" off > "$WORK/small.toml"

measure() { python3 scripts/bench_corpus.py "$BIN" "$@"; }

rm -rf "$WORK/cache"
if [ "${DROP_CACHES:-0}" = 1 ]; then
  sync
  echo 3 > /proc/sys/vm/drop_caches
fi
results="$WORK/results.jsonl"
: > "$results"
measure "$WORK/large.toml" "$WORK/cold" --label "cold: learn the tokenizer, encode, cache" >> "$results"
measure "$WORK/large.toml" "$WORK/warm" --label "second run over the same files" >> "$results"
measure "$WORK/large.toml" "$WORK/warm" --resume --steps "$STEPS" --label "resume, then $STEPS steps" >> "$results"
measure "$WORK/small.toml" "$WORK/small" --steps "$STEPS" --label "20,000 pairs (no cache), $STEPS steps" >> "$results"
if [ "${EPOCH:-0}" = 1 ]; then
  measure "$WORK/large.toml" "$WORK/warm" --resume --steps 100000000 --label "resume to the end of epoch 1" >> "$results"
fi

python3 - "$results" "$CORPUS" <<'EOF'
import json, os, subprocess, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
corpus = sys.argv[2]
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
flags = next((l.split(":", 1)[1].split() for l in open("/proc/cpuinfo") if l.startswith("flags")), [])
wanted = ["avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "sha_ni"]
print(f"CPU: {cpu}, {os.cpu_count()} cores; {' '.join(f for f in wanted if f in flags)}")
print(f"corpus: {corpus} ({os.path.getsize(corpus) / 1e6:.0f} MB)")
print()
print("| run | first step | peak MB at first step (heap / mapped) | heap MB, most after | steps/s |")
print("|---|---|---|---|---|")
for r in rows:
    print(f"| {r['label']} | {r['first_step_s']:.1f} s | {r['peak_mb_at_first_step']} "
          f"({r['anon_mb_at_first_step']} / {r['file_mb_at_first_step']}) | "
          f"{r['anon_mb_max_after']} | {r.get('steps_per_s', '')} |")
EOF
