#!/usr/bin/env bash
# The memory benchmark: peak resident memory (GNU time's maxrss) of loading an
# NLLB-200-distilled-600M-shaped model (scripts/make_nllb_shape.py: its sizes, random weights,
# 2.46 GB of float32 safetensors) and of translating with it, in float32 and in int8, beside
# transformers loading and translating with the same directory (scripts/memory_transformers.py,
# the PyTorch side). Each row is the median of REPS
# runs, each its own process. Prints a Markdown table with the CPU and its vector extensions.
#
#   scripts/bench-memory.sh          # REPS=3
#   PTH=1 scripts/bench-memory.sh    # also as pytorch_model.bin (its tied table under four
#                                    # names over one storage, as the Hub's NLLB-200 ships it)
#
# Needs the torch venv (scripts/test-checkpoint-torch.sh makes it) and 2.5 GB of disk under
# ~/.cache/transformer/bench for the model, made once.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${TORCH_VENV:-$HOME/.cache/transformer/venv-torch}"
REPS="${REPS:-3}"
MODEL="${MODEL:-$HOME/.cache/transformer/bench/nllb-600m}"
if ! "$VENV/bin/python" -c "import torch, transformers, safetensors" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r scripts/requirements.txt
fi
if ! [ -x /usr/bin/time ]; then
  sudo_or_not=$([ "$(id -u)" = 0 ] && echo "" || echo sudo)
  $sudo_or_not apt-get install -y -qq time > /dev/null
fi
[ -f "$MODEL/model.safetensors" ] || "$VENV/bin/python" scripts/make_nllb_shape.py "$MODEL"
if [ "${PTH:-0}" = 1 ] && ! [ -f "$MODEL-bin/pytorch_model.bin" ]; then
  mkdir -p "$MODEL-bin"
  cp "$MODEL"/*.json "$MODEL/sentencepiece.bpe.model" "$MODEL-bin/"
  "$VENV/bin/python" -c "import sys, torch, transformers
model = transformers.AutoModelForSeq2SeqLM.from_pretrained(sys.argv[1])
torch.save(model.state_dict(), sys.argv[2])" "$MODEL" "$MODEL-bin/pytorch_model.bin"
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf 'Ein Mann schläft.\nZwei Hunde spielen im Schnee.\nEine Frau liest ein Buch.\n' > "$work/sources"

# peak KB of one run of "$@"
peak() {
  /usr/bin/time -f "%M" -o "$work/rss" "$@" > /dev/null 2> "$work/err" || {
    cat "$work/err" >&2
    exit 1
  }
  cat "$work/rss"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
translate=("$BIN" translate --device cpu --checkpoint "$MODEL" --source-lang deu_Latn
  --target-lang eng_Latn --no-sentence-split)
rows=(
  "ours: load, float32"
  "ours: load, int8"
  "ours: translate 3 sentences, float32, beam 4"
  "ours: translate 3 sentences, int8, beam 4"
  "transformers: load, float32"
  "transformers: translate 3 sentences, float32, beam 4"
)
if [ -f "$MODEL-bin/pytorch_model.bin" ]; then
  rows+=("ours: load pytorch_model.bin, float32" "ours: load pytorch_model.bin, int8")
fi
# One run of row $1: an empty stdin loads the model and translates nothing.
run() {
  case "$1" in
    "ours: load, float32") peak "${translate[@]}" - < /dev/null ;;
    "ours: load, int8") peak "${translate[@]}" --compute-type int8 - < /dev/null ;;
    "ours: translate 3 sentences, float32, beam 4")
      peak "${translate[@]}" --beam 4 --max-len 20 - < "$work/sources" ;;
    "ours: translate 3 sentences, int8, beam 4")
      peak "${translate[@]}" --compute-type int8 --beam 4 --max-len 20 - < "$work/sources" ;;
    "ours: load pytorch_model.bin, float32")
      peak "${translate[@]/$MODEL/$MODEL-bin}" - < /dev/null ;;
    "ours: load pytorch_model.bin, int8")
      peak "${translate[@]/$MODEL/$MODEL-bin}" --compute-type int8 - < /dev/null ;;
    "transformers: load, float32")
      peak "$VENV/bin/python" scripts/memory_transformers.py "$MODEL" < /dev/null ;;
    "transformers: translate 3 sentences, float32, beam 4")
      peak "$VENV/bin/python" scripts/memory_transformers.py "$MODEL" < "$work/sources" ;;
  esac
}
declare -A results
for rep in $(seq "$REPS"); do
  for row in "${rows[@]}"; do
    results[$row]+="$(run "$row") "
  done
done
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')
flags=$(grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx2|fma|avx512f|avx512_vnni|avx512_bf16|amx_bf16|amx_int8)$' | tr '\n' ' ')
echo "CPU: $cpu ($(nproc) cores; $flags); model: $MODEL (NLLB-200-distilled-600M's shape, 2.46 GB float32); median of $REPS"
echo
echo "| what | peak memory (GiB) |"
echo "| --- | ---: |"
for row in "${rows[@]}"; do
  kb=$(tr ' ' '\n' <<< "${results[$row]}" | grep . | median)
  printf '| %s | %.2f |\n' "$row" "$(awk -v k="$kb" 'BEGIN { print k / 1048576 }')"
done
