#!/usr/bin/env bash
# Tests scripts/export_ct2.py against CTranslate2 itself (PyPI's ctranslate2, in a venv under
# ~/.cache so that later runs reuse it): the PyTorch parity fixture and a freshly trained tiny
# model are exported, and CTranslate2's greedy translations must equal this tool's.
#
#   BIN=target/release/transformer scripts/test-export-ct2.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${CT2_VENV:-$HOME/.cache/transformer/venv-ct2}"
if ! "$VENV/bin/python" -c "import ctranslate2, safetensors, numpy, tokenizers" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet ctranslate2 safetensors numpy tokenizers
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '%s\n' "ich mochte ein bier" "du habe eine cola bier" "er mochte wasser" \
  "sie habe ein haus ein bier ein cola" > "$work/parity.txt"
printf '%s\n' "ich mochte ein bier" "ich mochte ein cola" > "$work/toy.txt"
"$BIN" train --device cpu --quiet --config configs/tiny.toml --out "$work/tiny"
"$VENV/bin/python" scripts/check_export_ct2.py --bin "$BIN" \
  "tests/fixtures/parity:$work/parity.txt" "$work/tiny:$work/toy.txt"
