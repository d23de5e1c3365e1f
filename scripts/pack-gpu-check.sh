#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh needs on the GPU machine (which has no Rust and no
# internet): the CUDA binary, stripped and gzipped, as dist/transformer.gz (gitignored), and
# the Multi30k files in data/multi30k. Everything else it reads is tracked in the repository.
#
#   eval "$(scripts/setup-cuda.sh --env)"
#   CARGO_TARGET_DIR=~/.cache/transformer/target-cuda cargo build --release --features cuda
#   scripts/pack-gpu-check.sh ~/.cache/transformer/target-cuda/release/transformer
#   # then, on the GPU machine, with dist/ and data/multi30k copied along:
#   scripts/gpu-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN="${1:?usage: scripts/pack-gpu-check.sh PATH-TO-CUDA-BINARY}"
mkdir -p dist
strip -o dist/transformer "$BIN"
gzip -9 -f dist/transformer
[ -d data/multi30k ] || scripts/get-multi30k.sh
echo "pack-gpu-check: dist/transformer.gz $(du -h dist/transformer.gz | cut -f1), data/multi30k $(du -sh data/multi30k | cut -f1)" >&2
