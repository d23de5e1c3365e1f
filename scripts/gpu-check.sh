#!/usr/bin/env bash
# The GPU check: given the CUDA build of `transformer` (built elsewhere: the GPU machine has no
# Rust), run on the GPU and write a Markdown report. It also runs end to end with
# DEVICE=cpu, so that it can be tested on a machine without a GPU.
#
#   scripts/gpu-check.sh                                   # DEVICE=cuda, BIN=dist/transformer(.gz)
#   DEVICE=cpu BIN=target/release/transformer OUT=/tmp/check scripts/gpu-check.sh
#
# Environment (defaults): DEVICE (cuda), BIN (dist/transformer or dist/transformer.gz),
# OUT (gpu-check), PYTHON (python3, with torch and safetensors), REPS (3: benchmark repetitions),
# M30K_SECONDS (120: the Multi30k training run's budget), BENCH (the benchmark workloads),
# SKIP (sections to leave out, e.g. "bench multi30k"), PAIRS (the benchmark's settings: f32
# bf16 cuda-fused tf32 on a GPU, f32 on the CPU).
#
# Sections: 1 parity (translate --json on the parity fixture within 1e-3 of PyTorch's),
# 2 base (train configs/base.toml, then translate "ich mochte ein bier"), 2c kernels (the fused
# CUDA kernels against the composed path: `bench check-kernels`), 3 bench (the speed
# benchmark's workloads next to PyTorch on the same device), 4 multi30k (training for
# M30K_SECONDS, stopped by SIGINT, tokens/s), 5 nccl (one rank under mpirun, for a binary built
# with --features nccl). Exit status: the number of failed sections. A section whose binary,
# data or tool is missing fails, naming what is missing; only SKIP leaves a section out.
set -uo pipefail
cd "$(dirname "$0")/.."

DEVICE="${DEVICE:-cuda}"
OUT="${OUT:-gpu-check}"
PYTHON="${PYTHON:-python3}"
REPS="${REPS:-3}"
M30K_SECONDS="${M30K_SECONDS:-120}"
BENCH="${BENCH:-matmul:200 toy-train:10 copy:10 multi30k:8 greedy1:5 greedy32:1 beam5:1}"
SKIP="${SKIP:-}"
mkdir -p "$OUT"
REPORT="$OUT/report.md"
LOG="$OUT/log.txt"
: > "$LOG"

BIN="${BIN:-}"
if [ -z "$BIN" ]; then
  if [ -f dist/transformer.gz ]; then BIN=dist/transformer.gz; else BIN=dist/transformer; fi
fi
if [[ "$BIN" == *.gz ]]; then
  gunzip -c "$BIN" > "$OUT/transformer" && chmod +x "$OUT/transformer" && BIN="$OUT/transformer"
fi
[ -x "$BIN" ] || { echo "gpu-check: error: no executable at $BIN; set BIN=PATH" >&2; exit 1; }

# The CUDA build links cuBLAS, cuRAND and the runtime (13.x): take them from the toolkit, or
# from the CUDA wheels PyTorch brought, when the loader does not find them by itself.
if ldd "$BIN" 2>/dev/null | grep -q "not found"; then
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
      $("$PYTHON" -c 'import nvidia, pathlib; [print(p) for p in pathlib.Path(nvidia.__path__[0]).glob("*/lib")]' 2>/dev/null); do
    [ -d "$dir" ] && LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
  export LD_LIBRARY_PATH
  if ldd "$BIN" | grep -q "not found"; then
    echo "gpu-check: error: $BIN cannot find: $(ldd "$BIN" | awk '/not found/ {print $1}' | tr '\n' ' ')" >&2
    exit 1
  fi
fi

failed=0
say() { echo "$*" >> "$REPORT"; }
section() { echo "gpu-check: $1" >&2; say ""; say "## $1"; say ""; }
skipped() { [[ " $SKIP " == *" $1 "* ]]; }
# fail WHAT: counts a failed section and says so in the report.
fail() { say "**FAILED**: $*"; failed=$((failed + 1)); }

: > "$REPORT"
say "# GPU check: $(date -u +%Y-%m-%dT%H:%MZ), device $DEVICE"
say ""
say "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
say "- binary: \`$("$BIN" --version 2>&1 | head -n1)\`"
say "- CPU: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -n1), $(nproc) cores"
if command -v nvidia-smi > /dev/null; then
  say "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -n1)"
fi
say "- PyTorch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda, "available:", torch.cuda.is_available())' 2>&1 | tail -n1)"

# 1. Parity: the fixture's greedy decodes through the binary on DEVICE, against the ids and
# log-probs PyTorch wrote (tests/fixtures/parity/expected.json).
if ! skipped parity; then
  section "1. Parity with the PyTorch reference (translate --json, tolerance 1e-3)"
  if "$PYTHON" - "$BIN" "$DEVICE" >> "$REPORT" 2>> "$LOG" <<'PY'
import json, subprocess, sys
binary, device = sys.argv[1:3]
fixture = "tests/fixtures/parity"
expected = json.load(open(f"{fixture}/expected.json"))
worst, bad = 0.0, []
for case in expected["greedy"]:
    out = subprocess.run([binary, "translate", "--checkpoint", fixture, "--json", "--device",
                          device, "--max-len", str(case["max_steps"]), case["source"]],
                         capture_output=True, text=True)
    if out.returncode != 0:
        bad.append(f"{case['source']!r}: exit {out.returncode}: {out.stderr.strip()}")
        continue
    got = json.loads(out.stdout)
    flat = lambda rows: [x for row in rows for x in (row if isinstance(row, list) else [row])]
    if got["ids"] != case["ids"]:
        bad.append(f"{case['source']!r}: ids {got['ids']} != {case['ids']}")
        continue
    diff = max((abs(a - b) for a, b in zip(flat(got["log_probs"]), flat(case["log_probs"]))),
               default=0.0)
    worst = max(worst, diff)
    if diff > 1e-3:
        bad.append(f"{case['source']!r}: log-probs differ by {diff:.2e}")
print(f"{len(expected['greedy'])} greedy decodes; largest log-prob difference {worst:.2e}.")
for line in bad:
    print(f"- {line}")
sys.exit(1 if bad else 0)
PY
  then say "PASS"; else fail "parity"; fi
fi

# 2. The built-in base config trained on DEVICE, then the README's translation.
if ! skipped base; then
  section "2. Train configs/base.toml, then translate"
  started=$(date +%s%N)
  if "$BIN" train --config configs/base.toml --device "$DEVICE" --out "$OUT/runs/base" \
      --overwrite >> "$LOG" 2>&1; then
    elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
    steps=$("$PYTHON" -c "import json,sys; print(max(json.loads(l)['step'] for l in open(sys.argv[1])))" \
      "$OUT/runs/base/metrics.jsonl" 2>> "$LOG" || echo 0)
    translation=$("$BIN" translate --checkpoint "$OUT/runs/base" --device "$DEVICE" \
      "ich mochte ein bier" 2>> "$LOG")
    say "- \`train\`: $steps steps in $(( elapsed_ms / 1000 )) s wall, $(( elapsed_ms / (steps > 0 ? steps : 1) )) ms per step (start-up, validation and checkpoints included)"
    say "- \`translate \"ich mochte ein bier\"\`: \`$translation\`"
    if [ "$translation" = "i want a beer ." ]; then say "PASS"; else fail "expected \`i want a beer .\`"; fi
  else
    fail "training exited non-zero (see log.txt)"
  fi
fi

# 2b. The same training in low precision (bf16; f16 on the CPU, which has no bf16 products):
# time per step and final loss next to f32's.
if ! skipped lowp; then
  low="${LOW_DTYPE:-$([ "$DEVICE" = cpu ] && echo f16 || echo bf16)}"
  section "2b. configs/base.toml with training.dtype = \"$low\" against f32"
  sed "s/^\[training\]\$/[training]\ndtype = \"$low\"/" configs/base.toml > "$OUT/base-$low.toml"
  final_loss() {
    "$PYTHON" -c "import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; e=[x for x in r if x['kind']=='epoch']; print(f\"{e[-1]['train_loss']:.4f}\" if e else 'n/a')" "$1/metrics.jsonl" 2>> "$LOG"
  }
  started=$(date +%s%N)
  if "$BIN" train --config "$OUT/base-$low.toml" --device "$DEVICE" --out "$OUT/runs/base-$low" \
      --overwrite >> "$LOG" 2>&1; then
    elapsed_ms=$(( ($(date +%s%N) - started) / 1000000 ))
    translation=$("$BIN" translate --checkpoint "$OUT/runs/base-$low" --device "$DEVICE" \
      "ich mochte ein bier" 2>> "$LOG")
    f32_loss=$([ -f "$OUT/runs/base/metrics.jsonl" ] && final_loss "$OUT/runs/base" || echo n/a)
    low_loss=$(final_loss "$OUT/runs/base-$low")
    say "| dtype | wall for the run | final epoch's training loss | translation |"
    say "|---|---:|---:|---|"
    say "| f32 | see section 2 | $f32_loss | |"
    say "| $low | $(( elapsed_ms / 1000 )) s | $low_loss | \`$translation\` |"
    say ""
    # Low precision passes when it learns what f32 learns: the same translation, and a final
    # loss within 0.1 + 20% of f32's.
    if [ "$translation" != "i want a beer ." ]; then
      fail "$low translates \`$translation\`, expected \`i want a beer .\`"
    elif [ "$f32_loss" = n/a ] || [ "$low_loss" = n/a ]; then
      fail "no final loss to compare (section 2 skipped or failed?)"
    elif "$PYTHON" -c "import sys; f, l = map(float, sys.argv[1:]); sys.exit(0 if abs(l - f) <= 0.1 + 0.2 * f else 1)" \
        "$f32_loss" "$low_loss"; then
      say "PASS: $low's final loss is within 0.1 + 20% of f32's"
    else
      fail "$low's final loss $low_loss is not within 0.1 + 20% of f32's $f32_loss"
    fi
  else
    fail "training in $low exited non-zero (see log.txt)"
  fi
fi

# 2c. The fused CUDA kernels (TRANSFORMER_KERNELS=cuda-fused: LayerNorm forward and backward,
# Adam) against candle's composed ops on DEVICE. They stay opt-in until this passes on a GPU.
if ! skipped kernels; then
  section "2c. Fused kernels against the composed path (bench check-kernels)"
  if TRANSFORMER_KERNELS=cuda-fused "$BIN" bench check-kernels --device "$DEVICE" >> "$REPORT" 2>> "$LOG" \
      || { [ "$DEVICE" = cpu ] && "$BIN" bench check-kernels --device cpu >> "$REPORT" 2>> "$LOG"; }; then
    say ""; say "PASS"
  else
    fail "a fused kernel differs from the composed path (see above and log.txt)"
  fi
fi

# 3. The speed benchmark on DEVICE, ours against PyTorch's, interleaved, in pairs of settings:
#   f32:        ours f32 against PyTorch eager f32 (TF32 off on both: PyTorch's default);
#   bf16:       ours with training.dtype bf16 against PyTorch autocast bf16 + SDPA + fused AdamW
#               (the training workloads and the product);
#   cuda-fused: ours f32 with TRANSFORMER_KERNELS=cuda-fused against PyTorch eager f32;
#   tf32:       ours with TRANSFORMER_TF32=on against PyTorch with allow_tf32 (both less exact).
# PAIRS picks them (default: all four on a GPU, f32 alone on the CPU).
if ! skipped bench; then
  batches="$OUT/multi30k.safetensors"
  bench_ok=true
  if [[ "$BENCH" == *multi30k* ]] && ! "$BIN" bench export-multi30k --device cpu --steps 10 \
      --batches "$batches" >> "$LOG" 2>&1; then
    say "- multi30k could not run: its batches could not be exported (data/multi30k missing? \
run scripts/get-multi30k.sh, or set BENCH without it)"
    BENCH="${BENCH//multi30k:8/}"
    bench_ok=false
  fi
  # Both sides get the same CPU threads, as in scripts/bench.sh.
  export RAYON_NUM_THREADS="${RAYON_NUM_THREADS:-$(nproc)}"
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
  PAIRS="${PAIRS:-$([ "$DEVICE" = cpu ] && echo f32 || echo "f32 bf16 cuda-fused tf32")}"
  # The workloads of $BENCH named in $1: the other pairs time what their setting changes.
  only() { for e in $BENCH; do [[ " $1 " == *" ${e%%:*} "* ]] && echo "$e"; done; }
  for pair in $PAIRS; do
    ours_env=(); ours_flags=(); peer_flags=(); workloads="$BENCH"
    case "$pair" in
      f32) ;;
      bf16) ours_flags=(--dtype bf16); peer_flags=(--dtype bf16 --fast)
            workloads=$(only "matmul toy-train multi30k") ;;
      cuda-fused) ours_env=(TRANSFORMER_KERNELS=cuda-fused)
            workloads=$(only "toy-train multi30k") ;;
      tf32) ours_env=(TRANSFORMER_TF32=on); peer_flags=(--tf32)
            workloads=$(only "matmul multi30k") ;;
      *) fail "unknown PAIRS entry $pair (f32, bf16, cuda-fused or tf32)"; continue ;;
    esac
    section "3 ($pair). Speed on $DEVICE: ours ${ours_env[*]} ${ours_flags[*]} against PyTorch ${peer_flags[*]:-eager f32} ($REPS interleaved runs each)"
    results="$OUT/bench-$pair.jsonl"
    : > "$results"
    for entry in $workloads; do
      workload="${entry%%:*}"
      steps="${entry##*:}"
      for _ in $(seq "$REPS"); do
        for impl in candle pytorch; do
          if [ "$impl" = candle ]; then
            cmd=(env "${ours_env[@]}" "$BIN" bench "$workload" --device "$DEVICE" --steps "$steps"
                 --batches "$batches" "${ours_flags[@]}")
          else
            cmd=("$PYTHON" scripts/bench_torch.py "$workload" --device "$DEVICE" --steps "$steps"
                 --threads "$(nproc)" --batches "$batches" "${peer_flags[@]}")
          fi
          echo 0 > "$OUT/rss.txt"
          if [ -x /usr/bin/time ]; then timer=(/usr/bin/time -f "%M" -o "$OUT/rss.txt"); else timer=(); fi
          if line=$("${timer[@]}" "${cmd[@]}" 2>> "$LOG" | tail -n1); then
            "$PYTHON" -c "import json,sys; r=json.loads(sys.argv[1]); r.update(impl=sys.argv[2], rss_kib=int(open(sys.argv[3]).read().split()[-1])); print(json.dumps(r))" \
              "$line" "$impl" "$OUT/rss.txt" >> "$results"
          else
            say "- $impl $workload failed (see log.txt)"
            bench_ok=false
          fi
        done
      done
    done
    "$PYTHON" scripts/bench_table.py "$results" --threads "$(nproc)" >> "$REPORT" 2>> "$LOG" \
      || bench_ok=false
  done
  if $bench_ok; then say ""; say "PASS"; else fail "benchmark"; fi
fi

# 4. Multi30k training on DEVICE for M30K_SECONDS, stopped as a user would (SIGINT).
if ! skipped multi30k; then
  section "4. Multi30k training for ${M30K_SECONDS} s"
  if [ ! -d data/multi30k ]; then
    fail "data/multi30k is missing (scripts/get-multi30k.sh)"
  else
    timeout --preserve-status -s INT "$M30K_SECONDS" "$BIN" train --config configs/multi30k-cpu.toml \
      --device "$DEVICE" --out "$OUT/runs/multi30k" --overwrite >> "$LOG" 2>&1
    status=$?
    if [ "$status" = 0 ] || [ "$status" = 130 ]; then
      if "$PYTHON" - "$OUT/runs/multi30k" >> "$REPORT" 2>> "$LOG" <<'PY'
import json, sys
run = sys.argv[1]
# The checkpoint written at the stop holds the run's position: steps, tokens, seconds.
state = json.load(open(f"{run}/last/training_state.json"))["position"]
print(f"- {state['step']} steps, {state['tokens_seen']} target tokens in {state['elapsed_s']:.0f} s "
      f"of training: {state['tokens_seen'] / max(state['elapsed_s'], 1e-9):.0f} tokens/s; mean loss "
      f"{state['log_loss_sum'] / max(state['log_steps'], 1):.3f} since the last log line")
time = None
for line in open(f"{run}/metrics.jsonl"):
    record = json.loads(line)
    if record["kind"] == "epoch" and "valid_loss" in record:
        print(f"- epoch {record['epoch']}: valid loss {record['valid_loss']:.3f}, "
              f"BLEU {record.get('valid_bleu') or float('nan'):.2f}")
    if record["kind"] == "run":
        time = record["time"]
# Where the run's wall time went (the run's last record): the steps against the rest.
if time:
    wall = max(time["wall_s"], 1e-9)
    print("\n| part | seconds | share |\n|---|---:|---:|")
    for part in ["steps_s", "batching_s", "validation_loss_s", "validation_decoding_s",
                 "checkpoints_s", "averaging_s", "start_s"]:
        print(f"| {part[:-2].replace('_', ' ')} | {time[part]:.2f} | {100 * time[part] / wall:.1f}% |")
    print(f"| **outside the steps** | {wall - time['steps_s']:.2f} | "
          f"**{100 * (wall - time['steps_s']) / wall:.1f}%** (target: at most 10%) |")
    print(f"- tokens/s over the steps alone: {state['tokens_seen'] / max(time['steps_s'], 1e-9):.0f}")
else:
    print("- no time record in metrics.jsonl")
PY
      then say "PASS"; else fail "the run left no readable training state (see log.txt)"; fi
    else
      fail "training exited with status $status (see log.txt)"
    fi
  fi
fi

# 5. Data parallelism, one rank: the gradient sum through NCCL (MPI's on the CPU), timed on a
# buffer the size of configs/multi30k-cpu.toml's gradients (one rank: NCCL's id broadcast,
# communicator and all-reduce, without a second GPU). Needs a binary built with
# --features nccl and mpirun on this machine.
if ! skipped nccl; then
  section "5. One-rank gradient sum under mpirun (NCCL on $DEVICE)"
  if ! command -v mpirun > /dev/null; then
    fail "no mpirun on this machine (install OpenMPI, or SKIP=nccl)"
  elif ! grep -aq "nccl-all-reduce" "$BIN"; then
    fail "$BIN was built without --features nccl (build it with them, or SKIP=nccl)"
  elif line=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe \
    -np 1 "$BIN" bench allreduce --device "$DEVICE" --steps 50 2>> "$LOG" | tail -n1); then
    "$PYTHON" -c "import json,sys; r=json.loads(sys.argv[1]); print(f\"- {r['work']/50/1e6:.1f} MB summed 50 times: {r['seconds']/50*1e3:.2f} ms each ({r['work']/r['seconds']/1e9:.1f} GB/s)\")" \
      "$line" >> "$REPORT" 2>> "$LOG"
    say "PASS"
  else
    fail "the one-rank sum (see log.txt)"
  fi
fi

say ""
say "Failed sections: $failed"
echo "gpu-check: report in $REPORT ($failed failed)" >&2
exit "$failed"
