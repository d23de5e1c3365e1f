#!/usr/bin/env bash
# Data-parallel training against one process on this machine: configs/multi30k-cpu.toml's model
# on real Multi30k batches, one process with $THREADS threads against `mpirun -np $RANKS` with
# THREADS / RANKS threads each, interleaved, REPS times; then the gradient sum alone. Both do
# the same work: each step, the process sums the RANKS batches (--accumulate) that the ranks
# take one each. Prints one JSON line a run and the medians. Needs a build with
# --features mpi and the Multi30k data.
#
#   cargo build --release --features mpi && scripts/bench-dp.sh
#
# Environment (defaults): BIN (target/release/transformer under CARGO_TARGET_DIR), RANKS (2),
# THREADS (nproc), REPS (3), STEPS (15), OUT (target/bench-dp).
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
BIN="${BIN:-$target/release/transformer}"
RANKS="${RANKS:-2}"
THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-3}"
STEPS="${STEPS:-15}"
OUT="${OUT:-target/bench-dp}"
mkdir -p "$OUT"
batches="$OUT/multi30k.safetensors"
per_rank=$((THREADS / RANKS > 0 ? THREADS / RANKS : 1))
# OpenMPI refuses to start as root without both.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpi=(mpirun --oversubscribe -np "$RANKS" -x "RAYON_NUM_THREADS=$per_rank" "$BIN")

"$BIN" bench export-multi30k --batches "$batches" --steps $(((STEPS + 2) * RANKS)) 2> /dev/null
results="$OUT/results.jsonl"
: > "$results"
for rep in $(seq "$REPS"); do
  echo "rep $rep/$REPS" >&2
  RAYON_NUM_THREADS="$THREADS" "$BIN" bench multi30k --device cpu --steps "$STEPS" \
    --accumulate "$RANKS" --batches "$batches" 2> /dev/null | tail -n1 | tee -a "$results"
  "${mpi[@]}" bench multi30k --device cpu --steps "$STEPS" --batches "$batches" 2> /dev/null \
    | tail -n1 | tee -a "$results"
  "${mpi[@]}" bench allreduce --device cpu --steps 20 2> /dev/null | tail -n1 | tee -a "$results"
done
python3 - "$results" "$THREADS" "$per_rank" <<'PY'
import json, statistics, sys
runs = [json.loads(line) for line in open(sys.argv[1])]
threads, per_rank = sys.argv[2], sys.argv[3]
single = [r for r in runs if r["workload"] == "multi30k" and "ranks" not in r]
ranked = [r for r in runs if r["workload"] == "multi30k" and "ranks" in r]
sums = [r for r in runs if r["workload"] == "allreduce"]
rate = lambda rs: statistics.median(r["work"] / r["seconds"] for r in rs)
one, many = rate(single), rate(ranked)
ranks = ranked[0]["ranks"]
waited = statistics.median(r["collective_seconds"] / r["seconds"] for r in ranked)
summed = statistics.median(r["seconds"] / 20 for r in sums)
print(f"1 process x {threads} threads: {one:,.0f} tokens/s")
print(f"{ranks} ranks x {per_rank} threads: {many:,.0f} tokens/s ({many / one:.2f}x); "
      f"{waited:.1%} of the time in the gradient sum (waiting for the slower rank included)")
print(f"the sum alone: {sums[0]['work'] / 20 / 1e6:.1f} MB in {summed * 1e3:.1f} ms")
PY
