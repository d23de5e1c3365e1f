#!/usr/bin/env bash
# The benchmark's OPUS-MT-shaped MarianMT directory (scripts/make_marian_fixture.py --bench,
# ~300 MB, random weights) in OUT/marian-bench, and CTranslate2's float32 conversion of it (by
# its own converter) in OUT/marian-bench-ct2; each made once and kept. PYTHON has
# transformers and ctranslate2 (the benchmark's venv). Used by scripts/bench.sh and
# scripts/bench-python.sh.
#
#   scripts/make-marian-bench.sh OUT PYTHON
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="$1"
PYTHON="$2"
MARIAN_DIR="$OUT/marian-bench"
MARIAN_CT2="$OUT/marian-bench-ct2"
if [ ! -f "$MARIAN_DIR/model.safetensors" ]; then
  echo "bench: making the OPUS-MT-shaped model in $MARIAN_DIR" >&2
  "$PYTHON" scripts/make_marian_fixture.py --bench "$MARIAN_DIR" >&2
  rm -rf "$MARIAN_CT2"
fi
if [ ! -f "$MARIAN_CT2/model.bin" ]; then
  "$(dirname "$PYTHON")/ct2-transformers-converter" --model "$MARIAN_DIR" \
    --output_dir "$MARIAN_CT2" --force > /dev/null 2>&1
fi
