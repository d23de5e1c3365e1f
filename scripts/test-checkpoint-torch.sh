#!/usr/bin/env bash
# PyTorch reads the checkpoints this tool writes: scripts/check_checkpoint.py loads each one
# into the reference (scripts/reference.py) with load_state_dict(strict=True) and checks the
# reference's greedy translations against `transformer translate --json` (same ids,
# log-probabilities within 1e-4). Checkpoints: the tiny word-vocabulary model, each
# architecture variant, and a BPE model on a slice of Multi30k (scripts/get-multi30k.sh first).
# PyTorch comes from PyPI into a venv under ~/.cache, reused by later runs.
#
#   BIN=target/release/transformer scripts/test-checkpoint-torch.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${TORCH_VENV:-$HOME/.cache/transformer/venv-torch}"
if ! "$VENV/bin/python" -c "import torch, safetensors, numpy, tokenizers" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r scripts/requirements.txt
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() {
  "$VENV/bin/python" scripts/check_checkpoint.py "$1" --binary "$BIN" | tail -n 1
}
"$BIN" train --device cpu --quiet --config configs/tiny.toml --out "$work/tiny" > /dev/null
check "$work/tiny"
for variant in 'norm = "post"' 'positions = "learned"' 'attention_bias = false
ffn_bias = false' 'share_embeddings = true'; do
  sed "s/^\[model\]\$/[model]\n${variant//$'\n'/\\n}/" configs/tiny.toml > "$work/variant.toml"
  "$BIN" train --device cpu --quiet --config "$work/variant.toml" --out "$work/variant" \
    --overwrite > /dev/null
  echo "variant ${variant//$'\n'/, }:"
  check "$work/variant"
done
gzip -dc data/multi30k/train.de.gz | sed -n '1,300p' > "$work/train.de"
gzip -dc data/multi30k/train.en.gz | sed -n '1,300p' > "$work/train.en"
cat > "$work/bpe.toml" <<TOML
[model]
layers = 2
d_model = 32
d_ff = 64
heads = 4
max_len = 128
[data]
train = { src = "$work/train.de", tgt = "$work/train.en" }
tokenizer = "bpe"
vocab_size = 400
[training]
epochs = 3
max_tokens = 800
warmup = 20
TOML
"$BIN" train --device cpu --quiet --config "$work/bpe.toml" --out "$work/bpe" > /dev/null
check "$work/bpe"
echo "checkpoint torch: PyTorch's strict load and greedy translations match for 6 checkpoints"
