#!/usr/bin/env bash
# M2M100 and NLLB-200 support against transformers and CTranslate2 themselves (PyPI, in the
# venv under ~/.cache that scripts/test-checkpoint-torch.sh shares), for each family's
# fixture (tests/fixtures/{m2m100,nllb}-tiny, scripts/make_m2m100_fixture.py):
#  1. the family's tokenizer (M2M100Tokenizer, NllbTokenizer) gives every line of Multi30k
#     val and test2016 (German as sources, English as targets) `transformer tokenize`'s ids;
#  2. the fixture fine-tuned here (training.init_from, German to English) on a slice of
#     Multi30k lowers its validation loss;
#  3. the fine-tuned run, exported with `transformer export --to hf`, loads strictly into
#     M2M100ForConditionalGeneration, whose log-probabilities of our translations are ours
#     within 1e-4, and whose generate() (greedy, and beam search with the directory's
#     settings, the target language forced) gives our ids;
#  4. CTranslate2's own converter converts the NLLB export, and CTranslate2 translates as we
#     do (CTranslate2 4.8's converter cannot convert any M2M100 directory that transformers 5
#     wrote, the fixture itself included: it reads the vocabulary through get_vocab(), which
#     lacks M2M100's language tokens there);
#  5. the M2M100 fixture with its table cut to pieces + languages (no made-up words' rows),
#     saved by transformers, decodes to generate()'s ids.
# Needs Multi30k in data/multi30k (scripts/get-multi30k.sh).
#
#   BIN=target/release/transformer scripts/test-multilingual.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${TORCH_VENV:-$HOME/.cache/transformer/venv-torch}"
if ! "$VENV/bin/python" -c "import torch, transformers, sentencepiece, ctranslate2, safetensors" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r scripts/requirements.txt
fi
export PATH="$VENV/bin:$PATH"
export PYTHONWARNINGS=ignore TRANSFORMERS_VERBOSITY=error
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() {
  "$VENV/bin/python" scripts/check_multilingual.py "$@" --bin "$BIN" 2>&1 | grep -v "^Loading weights"
}

gzip -dc data/multi30k/val.de.gz data/multi30k/test2016.de.gz > "$work/sources"
gzip -dc data/multi30k/val.en.gz data/multi30k/test2016.en.gz > "$work/targets"
gzip -dc data/multi30k/train.de.gz | sed -n '1,3000p' > "$work/train.de"
gzip -dc data/multi30k/train.en.gz | sed -n '1,3000p' > "$work/train.en"
gzip -dc data/multi30k/val.de.gz | sed -n '1,300p' > "$work/val.de"
gzip -dc data/multi30k/val.en.gz | sed -n '1,300p' > "$work/val.en"
head -n 60 "$work/val.de" > "$work/sources60"

for family in "m2m100 de en" "nllb deu_Latn eng_Latn"; do
  read -r name source target <<< "$family"
  fixture="tests/fixtures/$name-tiny"
  check tokenizer "$fixture" "$source" "$work/sources" "$target" "$work/targets"
  cat > "$work/$name.toml" <<TOML
# No [model] or [decode]: both are the pretrained directory's.
[data]
train = { src = "$work/train.de", tgt = "$work/train.en" }
valid = { src = "$work/val.de", tgt = "$work/val.en" }
source_lang = "$source"
target_lang = "$target"

[training]
init_from = "$fixture"
seed = 1
epochs = 3
max_tokens = 1024
lr_factor = 0.5
warmup = 50
TOML
  "$BIN" train --device cpu --config "$work/$name.toml" --out "$work/$name-tuned" 2> "$work/$name.log" > /dev/null
  before=$(sed -n 's/^before training: valid loss \([0-9.]*\).*/\1/p' "$work/$name.log")
  after=$(grep '"kind":"epoch"' "$work/$name-tuned/metrics.jsonl" | tail -n 1 | sed -n 's/.*"valid_loss":\([0-9.]*\).*/\1/p')
  echo "fine-tuning $fixture ($source -> $target): valid loss $before -> $after"
  if ! awk -v b="$before" -v a="$after" 'BEGIN { exit !(b != "" && a != "" && a < b) }'; then
    echo "fine-tuning $fixture did not lower the validation loss" >&2
    exit 1
  fi
  "$BIN" export --to hf "$work/$name-tuned" --out "$work/$name-exported" 2> /dev/null
  check export --run "$work/$name-tuned" --exported "$work/$name-exported" "$work/sources60"
  if [ "$name" = nllb ]; then
    check ct2 --run "$work/$name-tuned" --exported "$work/$name-exported" "$work/sources60"
  fi
done
# An M2M100 model without rows for the tokenizer's made-up words, as transformers makes it.
check cut-table tests/fixtures/m2m100-tiny "$work/sources60"
