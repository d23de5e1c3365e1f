#!/usr/bin/env bash
# The Python package against CTranslate2's Python API, on this machine, in one run,
# interleaved: the benchmark's OPUS-MT-shaped MarianMT model (scripts/make-marian-bench.sh;
# CTranslate2 reads its own converter's copy) translating the first 32 sentences of Multi30k's
# test2016 greedy in one batch and with beam 4, and 8 sentences one call each; then the cost of
# a call that crosses the boundary with nothing to decode, and batch-1 greedy from Python
# against the same workload inside the binary (`transformer bench marian-greedy1`), whose
# difference per sentence is what the boundary costs a real call. Prints a table of medians.
#
#   REPS=5 THREADS=2 PYTHON=~/.cache/transformer/venv-torch/bin/python scripts/bench-python.sh
#
# PYTHON has transformers and ctranslate2 (the benchmark's venv, scripts/requirements.txt);
# the package is built (maturin) and installed into PY_VENV (default: the tests' venv).
# Run it with nothing else running: the machine's noise is 2-4x.
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${REPS:-5}"
THREADS="${THREADS:-$(nproc)}"
OUT="${OUT:-target/bench}"
PYTHON="${PYTHON:-.venv/bin/python}"
PY_VENV="${PY_VENV:-$HOME/.cache/transformer/venv-python}"
mkdir -p "$OUT"
[ -d data/multi30k ] || scripts/get-multi30k.sh
if ! "$PYTHON" -c "import ctranslate2, transformers" 2>/dev/null; then
  echo "bench-python: $PYTHON lacks ctranslate2 or transformers; point PYTHON at the benchmark's venv (scripts/requirements.txt)" >&2
  exit 2
fi
if ! "$PY_VENV/bin/python" -c "import maturin" 2>/dev/null; then
  python3 -m venv "$PY_VENV"
  "$PY_VENV/bin/pip" install --quiet maturin
fi
cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-target}/release/transformer"
"$PY_VENV/bin/maturin" build --release --quiet -m python/Cargo.toml -o "$OUT/wheels" 2> /dev/null
"$PY_VENV/bin/pip" install --quiet --force-reinstall "$OUT"/wheels/transformer_rs-*.whl
scripts/make-marian-bench.sh "$OUT" "$PYTHON"
MODEL="$OUT/marian-bench"
RESULTS="$OUT/python-results.jsonl"
: > "$RESULTS"

record() {
  local side="$1"
  shift
  "$@" 2> "$OUT/stderr.txt" | tail -1 | python3 -c '
import json, sys
record = json.loads(sys.stdin.read())
record["side"] = sys.argv[1]
print(json.dumps(record))' "$side" >> "$RESULTS" || { cat "$OUT/stderr.txt" >&2; exit 1; }
}

for rep in $(seq "$REPS"); do
  echo "bench-python: round $rep of $REPS" >&2
  for entry in greedy32:32 beam4:32 greedy1:8; do
    workload="${entry%%:*}" steps="${entry##*:}"
    record python "$PY_VENV/bin/python" scripts/bench_marian.py py "$workload" --model "$MODEL" \
      --steps "$steps" --threads "$THREADS"
    record ctranslate2 "$PYTHON" scripts/bench_marian.py ct2 "$workload" --model "$MODEL" \
      --ct2-model "$OUT/marian-bench-ct2" --steps "$steps" --threads "$THREADS"
  done
  record binary env RAYON_NUM_THREADS="$THREADS" "$BIN" bench marian-greedy1 --device cpu \
    --steps 8 --checkpoint "$MODEL"
  record python "$PY_VENV/bin/python" scripts/bench_marian.py py call --model "$MODEL" \
    --steps 2000 --threads "$THREADS"
done

python3 - "$RESULTS" "$THREADS" <<'PY'
import collections, json, statistics, sys
records = [json.loads(line) for line in open(sys.argv[1])]
threads = sys.argv[2]
info = open("/proc/cpuinfo").read()
model = next(l for l in info.splitlines() if l.startswith("model name")).split(":")[1].strip()
flags = next(l for l in info.splitlines() if l.startswith("flags")).split()
isa = [f for f in ("avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "avx_vnni", "avx2", "fma")
       if f in flags]
runs = collections.defaultdict(list)
for r in records:
    runs[(r["side"], r["workload"])].append(r)
def median(side, workload, of):
    return statistics.median(of(r) for r in runs[(side, workload)])
print(f"CPU: {model} ({', '.join(isa)}); {threads} threads; {len(runs[('python', 'marian-greedy-32')])} runs each, medians")
print()
print("| workload | Python package sent/s | CTranslate2 (Python) sent/s | ratio | Python tokens/s | CTranslate2 tokens/s |")
print("|---|---|---|---|---|---|")
for workload, name in [("marian-greedy-32", "greedy, 32 sentences, one call"),
                       ("marian-beam4-32", "beam 4, 32 sentences, one call"),
                       ("marian-greedy-1", "greedy, 8 sentences, one call each")]:
    ours = median("python", workload, lambda r: r["sentences"] / r["seconds"])
    theirs = median("ctranslate2", workload, lambda r: r["sentences"] / r["seconds"])
    ours_t = median("python", workload, lambda r: r["work"] / r["seconds"])
    theirs_t = median("ctranslate2", workload, lambda r: r["work"] / r["seconds"])
    print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f}x | {ours_t:.0f} | {theirs_t:.0f} |")
call_us = median("python", "python-empty-call", lambda r: r["seconds"] / r["work"] * 1e6)
py_ms = median("python", "marian-greedy-1", lambda r: r["seconds"] / 8 * 1e3)
bin_ms = median("binary", "marian-greedy-1", lambda r: r["seconds"] / 8 * 1e3)
print()
print(f"boundary: an empty call (translate([])) {call_us:.1f} us; batch-1 greedy {py_ms:.2f} ms a "
      f"sentence from Python against {bin_ms:.2f} ms inside the binary "
      f"({(py_ms - bin_ms) * 1e3:+.0f} us, {100 * (py_ms - bin_ms) / bin_ms:+.1f}%)")
PY
