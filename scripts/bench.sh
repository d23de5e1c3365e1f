#!/usr/bin/env bash
# The speed benchmark: every workload in this tool (`transformer bench`) and in the PyTorch
# reference (scripts/bench_torch.py), and the decoding workloads in CTranslate2 too
# (scripts/bench_ct2.py), on this machine, in one run, interleaved (ours, PyTorch's,
# CTranslate2's, REPS times), each repetition its own process so that peak RSS is per workload.
# Prints a Markdown table (medians; ratio = our throughput / PyTorch's) and keeps the raw
# measurements in target/bench/results.jsonl.
#
#   scripts/bench.sh                 # REPS=5 THREADS=$(nproc) by default
#   REPS=9 THREADS=2 scripts/bench.sh
#   WORKLOADS="greedy1:5 greedy32:1 beam5:1" scripts/bench.sh   # a subset (workload:steps)
#   WORKLOADS=" " MARIAN_WORKLOADS="greedy32:1" scripts/bench.sh # MarianMT only
#   MARIAN_HF=none scripts/bench.sh              # MarianMT without transformers' generate()
#   MARIAN_WORKLOADS=none BF16=0 scripts/bench.sh # without MarianMT, without the bf16 rows
#   VMAP=0 scripts/bench.sh          # MarianMT without the vocabulary-map rows
#   scripts/bench.sh --quick         # this tool's side only, one step of each, untimed:
#                                    # that every workload still runs (.ci/run uses it)
#   ISA=avx2 scripts/bench.sh        # every row capped at AVX2 + FMA on both sides (a Zen 3
#                                    # or an older Intel desktop on any machine): ours with
#                                    # TRANSFORMER_MAX_ISA and a build whose gemm stops at
#                                    # AVX2; CTranslate2 with CT2_FORCE_CPU_ISA, PyTorch with
#                                    # ATEN_CPU_CAPABILITY, both with MKL_ENABLE_INSTRUCTIONS
#                                    # and ONEDNN_MAX_CPU_ISA; each peer's own verbose log is
#                                    # checked before timing. ISA=avx2-vnni: an Intel laptop
#                                    # since Alder Lake. Levels: avx2 avx2-vnni
#                                    # avx512 avx512-vnni avx512-bf16 amx (kernels::isa)
#   BASELINE=/tmp/transformer-old PEERS=none scripts/bench.sh
#                                    # this build against another build of the tool (a
#                                    # refactor's before and after), interleaved; PEERS=none
#                                    # leaves PyTorch and CTranslate2 out
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--quick" ]; then
  BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
  OUT="${OUT:-target/bench-quick}"
  mkdir -p "$OUT"
  [ -d data/multi30k ] || scripts/get-multi30k.sh
  "$BIN" bench export-multi30k --device cpu --steps 1 --batches "$OUT/multi30k.safetensors"
  ran=0
  # The decoding workloads in int8 and bfloat16 too (bfloat16 emulated where the CPU has no
  # bf16 products, which would otherwise refuse it).
  grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo || export TRANSFORMER_BF16_ENGINE=emulated
  for workload in matmul toy-train copy multi30k greedy1 greedy32 beam5 matmul-bf16 copy-bf16 \
    greedy32-int8 beam5-bfloat16; do
    dtype=f32 compute=()
    case "$workload" in
      *-bf16) workload="${workload%-bf16}" dtype=bf16 ;;
      *-int8 | *-bfloat16) compute=(--compute-type "${workload##*-}") workload="${workload%-*}" ;;
    esac
    line=$("$BIN" bench "$workload" --device cpu --steps 1 --dtype "$dtype" "${compute[@]}" \
      --batches "$OUT/multi30k.safetensors")
    # Each workload prints one JSON measurement of positive work.
    python3 -c 'import json, sys; r = json.loads(sys.argv[1]); assert r["work"] > 0 and r["seconds"] > 0, r' "$line"
    echo "bench --quick: $workload ok: $line"
    ran=$((ran + 1))
  done
  echo "bench --quick: $ran workloads ran"
  exit 0
fi

REPS="${REPS:-5}"
THREADS="${THREADS:-$(nproc)}"
OUT="${OUT:-target/bench}"
PYTHON="${PYTHON:-.venv/bin/python}"
BASELINE="${BASELINE:-}"
PEERS="${PEERS:-all}"
mkdir -p "$OUT"

# The ISA cap (ISA=...), applied to every process of every side; checked before anything is
# installed or built. Spelled as TRANSFORMER_MAX_ISA takes it (any case, _ for -).
ISA="${ISA:-}"
ISA="$(tr 'A-Z_' 'a-z-' <<< "$ISA" | tr -d ' \t')"
[ "$ISA" = avx-vnni ] && ISA=avx2-vnni
LEVELS=(baseline avx2 avx2-vnni avx512 avx512-vnni avx512-bf16 amx)
level() {
  local i
  for i in "${!LEVELS[@]}"; do [ "${LEVELS[$i]}" = "$1" ] && { echo "$i"; return; }; done
  echo "bench: ISA=$1 is not one of: ${LEVELS[*]}" >&2
  exit 2
}
# below LEVEL: whether the cap rules LEVEL out.
below() { [ -n "$ISA" ] && [ "$(level "$ISA")" -lt "$(level "$1")" ]; }
if [ -n "$ISA" ]; then
  level "$ISA" > /dev/null
  if [ "$ISA" = baseline ]; then
    echo "bench: ISA=baseline cannot cap our side: gemm (candle's matrix products) has no kernels below AVX2 + FMA; the smallest cap is avx2" >&2
    exit 2
  fi
fi

if [ "$PEERS" != none ] && ! "$PYTHON" -c "import torch, safetensors" 2>/dev/null; then
  echo "bench: installing PyTorch into .venv (scripts/requirements.txt)" >&2
  python3 -m venv .venv
  .venv/bin/pip install --quiet -r scripts/requirements.txt
  PYTHON=.venv/bin/python
fi
cargo build --release --quiet
BIN="${CARGO_TARGET_DIR:-target}/release/transformer"

if [ -n "$ISA" ]; then
  export TRANSFORMER_MAX_ISA="$ISA"
  case "$ISA" in
    avx2) ct2=AVX2 aten=avx2 mkl=AVX2 onednn=AVX2 ;;
    avx2-vnni) ct2=AVX2 aten=avx2 mkl=AVX2_E1 onednn=AVX2_VNNI ;;
    avx512) ct2=AVX512 aten=avx512 mkl=AVX512 onednn=AVX512_CORE ;;
    avx512-vnni) ct2=AVX512 aten=avx512 mkl=AVX512_E1 onednn=AVX512_CORE_VNNI ;;
    avx512-bf16) ct2=AVX512 aten=avx512 mkl=AVX512_E3 onednn=AVX512_CORE_BF16 ;;
    amx) ct2=AVX512 aten=avx512 mkl=AVX512_E4 onednn=AVX512_CORE_AMX ;;
  esac
  export CT2_FORCE_CPU_ISA="$ct2" ATEN_CPU_CAPABILITY="$aten" MKL_ENABLE_INSTRUCTIONS="$mkl" \
    ONEDNN_MAX_CPU_ISA="$onednn"
  # gemm (candle's matrix products) picks AVX-512 by itself where the build has it: below
  # AVX-512 ours is the build without it, as a CPU without AVX-512 runs the default one.
  if below avx512; then
    cargo build --release --quiet --no-default-features
    cp "$BIN" "$OUT/transformer-gemm-avx2"
    cargo build --release --quiet
    BIN="$OUT/transformer-gemm-avx2"
  fi
fi
[ -d data/multi30k ] || scripts/get-multi30k.sh
"$BIN" bench export-multi30k --device cpu --steps 10 --batches "$OUT/multi30k.safetensors" 2>/dev/null

# Both sides get the same threads: rayon's pool (candle's matmuls) and torch's intra-op pool.
export RAYON_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

# run IMPL COMMAND...: one measurement, its JSON line extended with impl and peak RSS (KiB).
run() {
  local impl="$1"
  shift
  /usr/bin/time -f "%M" -o "$OUT/rss.txt" "$@" > "$OUT/line.json" 2> "$OUT/stderr.txt" || {
    cat "$OUT/stderr.txt" >&2
    exit 1
  }
  python3 - "$impl" "$OUT/line.json" "$OUT/rss.txt" >> "$RESULTS" <<'PY'
import json, sys
impl, line, rss = sys.argv[1:4]
record = json.loads(open(line).read().strip().splitlines()[-1])
record.update(impl=impl, rss_kib=int(open(rss).read().split()[-1]))
print(json.dumps(record))
PY
}

# CTranslate2 (PyPI) times the decoding workloads too, in its own venv and process.
CT2_PYTHON="${CT2_PYTHON:-$HOME/.cache/transformer/venv-ct2/bin/python}"
if [ "$PEERS" != none ] && ! "$CT2_PYTHON" -c "import ctranslate2, safetensors, numpy" 2>/dev/null; then
  echo "bench: installing CTranslate2 into $(dirname "$(dirname "$CT2_PYTHON")")" >&2
  python3 -m venv "$(dirname "$(dirname "$CT2_PYTHON")")"
  "$CT2_PYTHON" -m pip install --quiet ctranslate2 safetensors numpy tokenizers
fi

# Under a cap, each peer's own verbose log says which instructions it chose, before any timing:
# PyTorch's ATen capability and MKL's, CTranslate2's ISA and MKL's.
PEER_ISA="$OUT/peer-isa.txt"
: > "$PEER_ISA"
if [ -n "$ISA" ] && [ "$PEERS" != none ]; then
  mkl_line() { { grep -m1 "MKL_VERBOSE oneMKL" || true; } | sed 's/.*architecture //; s/, Lnx.*//'; }
  torch_cap=$("$PYTHON" -c 'import torch; print(torch.backends.cpu.get_cpu_capability())')
  torch_mkl=$(MKL_VERBOSE=1 "$PYTHON" -c 'import torch; torch.ones(8, 8) @ torch.ones(8, 8)' | mkl_line)
  ct2_log=$(CT2_VERBOSE=1 MKL_VERBOSE=1 "$CT2_PYTHON" scripts/bench_ct2.py greedy1 --steps 1 \
    --threads 1 2>&1)
  ct2_isa=$(grep -o "Selected ISA: [A-Z0-9]*" <<< "$ct2_log" | sed 's/.*: //')
  ct2_mkl=$(mkl_line <<< "$ct2_log")
  {
    echo "PyTorch: ATen capability $torch_cap; MKL: $torch_mkl"
    echo "CTranslate2: ISA $ct2_isa; MKL: $ct2_mkl"
  } | tee "$PEER_ISA" >&2
  # Below AVX-512 no MKL may say AVX-512; from it up, both must.
  for mkl in "$torch_mkl" "$ct2_mkl"; do
    if below avx512; then wrong=$(grep -c "AVX-512" <<< "$mkl" || true); else
      wrong=$(grep -vc "AVX-512" <<< "$mkl" || true); fi
    [ -n "$mkl" ] && [ "$wrong" = 0 ] || { echo "bench: MKL did not run capped at $ISA: $mkl" >&2; exit 1; }
  done
  [ "${torch_cap,,}" = "$aten" ] || { echo "bench: PyTorch ran at $torch_cap, not $aten" >&2; exit 1; }
  [ "$ct2_isa" = "$ct2" ] || { echo "bench: CTranslate2 ran at $ct2_isa, not $ct2" >&2; exit 1; }
fi

workloads="${WORKLOADS:-matmul:200 toy-train:10 copy:10 multi30k:8 greedy1:5 greedy32:1 beam5:1}"
# The training workloads and matmul in bf16 too (BF16=0 leaves them out): ours with
# training.dtype = "bf16" (bf16 products on the CPU's engine), PyTorch under torch.autocast.
BF16="${BF16:-1}"
# Below AVX512-BF16 both sides would emulate bf16 products: not rows worth timing.
below avx512-bf16 && BF16=0
# Where the CPU has AMX, our bf16 rows run on its tiles; the same rows on AVX512-BF16 too
# (TRANSFORMER_BF16_ENGINE), to measure which engine is faster there.
AMX=0
grep -qw amx_bf16 /proc/cpuinfo && grep -qw avx512_bf16 /proc/cpuinfo && ! below amx && AMX=1
for entry in $workloads; do
  workload="${entry%%:*}"
  steps="${entry##*:}"
  echo "bench: $workload x $REPS" >&2
  for _ in $(seq "$REPS"); do
    run candle "$BIN" bench "$workload" --device cpu --steps "$steps" \
      --batches "$OUT/multi30k.safetensors"
    case "$workload" in
      matmul | toy-train | copy | multi30k)
        if [ "$BF16" = 1 ]; then
          run candle-bf16 "$BIN" bench "$workload" --device cpu --steps "$steps" --dtype bf16 \
            --batches "$OUT/multi30k.safetensors"
          [ "$AMX" = 0 ] || TRANSFORMER_BF16_ENGINE=avx512-bf16 run candle-bf16-avx512 "$BIN" \
            bench "$workload" --device cpu --steps "$steps" --dtype bf16 \
            --batches "$OUT/multi30k.safetensors"
          [ "$PEERS" = none ] || run pytorch-bf16 "$PYTHON" scripts/bench_torch.py "$workload" \
            --steps "$steps" --threads "$THREADS" --dtype bf16 \
            --batches "$OUT/multi30k.safetensors"
        fi
        ;;
    esac
    if [ -n "$BASELINE" ]; then
      run baseline "$BASELINE" bench "$workload" --device cpu --steps "$steps" \
        --batches "$OUT/multi30k.safetensors"
    fi
    [ "$PEERS" = none ] && continue
    run pytorch "$PYTHON" scripts/bench_torch.py "$workload" --steps "$steps" \
      --threads "$THREADS" --batches "$OUT/multi30k.safetensors"
    case "$workload" in
      greedy1 | greedy32 | beam5)
        run ctranslate2 "$CT2_PYTHON" scripts/bench_ct2.py "$workload" --steps "$steps" \
          --threads "$THREADS"
        # int8 on both sides (each quantizing the float model as it loads), and our bfloat16
        # where the CPU multiplies bf16.
        run candle-int8 "$BIN" bench "$workload" --device cpu --steps "$steps" \
          --compute-type int8
        run ctranslate2-int8 "$CT2_PYTHON" scripts/bench_ct2.py "$workload" --steps "$steps" \
          --threads "$THREADS" --compute-type int8
        if [ "$BF16" = 1 ] && grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo; then
          run candle-bf16 "$BIN" bench "$workload" --device cpu --steps "$steps" \
            --compute-type bfloat16
        fi
        ;;
    esac
  done
done

# MarianMT of OPUS-MT's shape (scripts/make_marian_fixture.py --bench, made once, ~300 MB):
# ours, CTranslate2 float32 (converted by its own converter) and transformers' generate().
marian_workloads="${MARIAN_WORKLOADS:-greedy1:8 greedy32:1 beam4:1}"
# MARIAN_WORKLOADS=none leaves them out.
if [ "$PEERS" = none ] || [ "$marian_workloads" = none ]; then marian_workloads=""; fi
if [ -n "$marian_workloads" ]; then
  MARIAN_DIR="$OUT/marian-bench"
  MARIAN_CT2="$OUT/marian-bench-ct2"
  scripts/make-marian-bench.sh "$OUT" "$PYTHON"
  # The int8 models as each engine stores them: `transformer quantize`, and CTranslate2's
  # converter with --quantization int8 (remade whenever the float model is newer).
  MARIAN_INT8="$OUT/marian-bench-int8"
  MARIAN_CT2_INT8="$OUT/marian-bench-ct2-int8"
  if [ ! "$MARIAN_INT8/model.safetensors" -nt "$MARIAN_DIR/model.safetensors" ]; then
    "$BIN" quantize "$MARIAN_DIR" --out "$MARIAN_INT8" --overwrite >&2
  fi
  if [ ! "$MARIAN_CT2_INT8/model.bin" -nt "$MARIAN_DIR/model.safetensors" ]; then
    "$(dirname "$PYTHON")/ct2-transformers-converter" --model "$MARIAN_DIR" \
      --output_dir "$MARIAN_CT2_INT8" --quantization int8 --force > /dev/null 2>&1
  fi
  # Vocabulary restriction on both sides, over one map (scripts/make_bench_vmap.py): ours
  # reads it by --vocab-map, CTranslate2 from vmap.txt beside its model.bin (VMAP=0: none).
  VMAP="${VMAP:-1}"
  if [ "$VMAP" = 1 ] && [ ! "$MARIAN_CT2/vmap.txt" -nt "$MARIAN_DIR/vocab.json" ]; then
    "$PYTHON" scripts/make_bench_vmap.py "$MARIAN_DIR" "$MARIAN_CT2/vmap.txt"
  fi
  for entry in $marian_workloads; do
    workload="${entry%%:*}"
    steps="${entry##*:}"
    echo "bench: marian-$workload x $REPS" >&2
    for _ in $(seq "$REPS"); do
      run candle "$BIN" bench "marian-$workload" --device cpu --steps "$steps" \
        --checkpoint "$MARIAN_DIR"
      run ctranslate2 "$PYTHON" scripts/bench_marian.py ct2 "$workload" --model "$MARIAN_DIR" \
        --ct2-model "$MARIAN_CT2" --steps "$steps" --threads "$THREADS"
      # int8 on both sides, each from its own int8 model on disk.
      run candle-int8 "$BIN" bench "marian-$workload" --device cpu --steps "$steps" \
        --checkpoint "$MARIAN_INT8" --compute-type int8
      run ctranslate2-int8 "$PYTHON" scripts/bench_marian.py ct2 "$workload" \
        --model "$MARIAN_DIR" --ct2-model "$MARIAN_CT2_INT8" --steps "$steps" \
        --threads "$THREADS" --compute-type int8
      # bfloat16 where the CPU multiplies bf16 (AVX512-BF16 or AMX); CTranslate2 has none.
      if [ "$BF16" = 1 ] && grep -qwE "avx512_bf16|amx_bf16" /proc/cpuinfo; then
        run candle-bf16 "$BIN" bench "marian-$workload" --device cpu --steps "$steps" \
          --checkpoint "$MARIAN_DIR" --compute-type bfloat16
      fi
      if [ "$VMAP" = 1 ]; then
        run candle-vmap "$BIN" bench "marian-$workload" --device cpu --steps "$steps" \
          --checkpoint "$MARIAN_DIR" --vocab-map "$MARIAN_CT2/vmap.txt"
        run ctranslate2-vmap "$PYTHON" scripts/bench_marian.py ct2 "$workload" \
          --model "$MARIAN_DIR" --ct2-model "$MARIAN_CT2" --steps "$steps" \
          --threads "$THREADS" --vmap "$MARIAN_CT2/vmap.txt"
      fi
      [ "${MARIAN_HF:-}" = none ] && continue
      run transformers "$PYTHON" scripts/bench_marian.py hf "$workload" --model "$MARIAN_DIR" \
        --steps "$steps" --threads "$THREADS"
    done
  done
fi

python3 scripts/bench_table.py "$RESULTS" --threads "$THREADS" --isa "${ISA:-}" \
  --peer-isa "$PEER_ISA"
