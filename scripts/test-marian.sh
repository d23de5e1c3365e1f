#!/usr/bin/env bash
# MarianMT (OPUS-MT) support against transformers, sentencepiece and CTranslate2 themselves
# (PyPI, in the venv under ~/.cache that scripts/test-checkpoint-torch.sh shares):
#  1. MarianTokenizer's ids of every line of Multi30k val and test2016 (German as sources,
#     English as targets) are `transformer tokenize`'s, for every fixture's tokenizer;
#  2. a fixture fine-tuned here (training.init_from) on a slice of Multi30k lowers its
#     validation loss;
#  3. the fine-tuned run, exported with `transformer export --to hf`, loads strictly into
#     MarianMTModel, whose log-probabilities of our translations are ours within 1e-4, and
#     whose generate() (greedy, and beam search with the directory's settings) gives our ids;
#  4. CTranslate2's own converter converts the export, and CTranslate2 translates as we do;
#  5. models trained from scratch as Marian (model.arch = "marian") pass 1 and 3 too, and 4
#     with a joint vocabulary (CTranslate2 does not convert separate ones faithfully);
#  6. the Hugging Face cache is shared with huggingface_hub and transformers, both ways.
# Needs Multi30k in data/multi30k (scripts/get-multi30k.sh).
#
#   BIN=target/release/transformer scripts/test-marian.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/release/transformer}"
VENV="${TORCH_VENV:-$HOME/.cache/transformer/venv-torch}"
if ! "$VENV/bin/python" -c "import torch, transformers, sentencepiece, ctranslate2, safetensors" 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet -r scripts/requirements.txt
fi
export PATH="$VENV/bin:$PATH"
# transformers' advice to install sacremoses, and its length notice, are not ours to act on.
export PYTHONWARNINGS=ignore TRANSFORMERS_VERBOSITY=error
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
check() {
  "$VENV/bin/python" scripts/check_marian.py "$@" --bin "$BIN" 2>&1 | grep -v "^Loading weights"
}

gzip -dc data/multi30k/val.de.gz data/multi30k/test2016.de.gz > "$work/sources"
gzip -dc data/multi30k/val.en.gz data/multi30k/test2016.en.gz > "$work/targets"
for fixture in tests/fixtures/marian-*; do
  check tokenizer "$fixture" "$work/sources" "$work/targets"
done

gzip -dc data/multi30k/train.de.gz | sed -n '1,3000p' > "$work/train.de"
gzip -dc data/multi30k/train.en.gz | sed -n '1,3000p' > "$work/train.en"
gzip -dc data/multi30k/val.de.gz | sed -n '1,300p' > "$work/val.de"
gzip -dc data/multi30k/val.en.gz | sed -n '1,300p' > "$work/val.en"
cat > "$work/finetune.toml" <<TOML
# No [model] or [decode]: both are the pretrained directory's.
[data]
train = { src = "$work/train.de", tgt = "$work/train.en" }
valid = { src = "$work/val.de", tgt = "$work/val.en" }

[training]
init_from = "tests/fixtures/marian-shared"
seed = 1
epochs = 3
max_tokens = 1024
lr_factor = 0.5
warmup = 50
TOML
"$BIN" train --device cpu --config "$work/finetune.toml" --out "$work/tuned" 2> "$work/train.log" > /dev/null
before=$(sed -n 's/^before training: valid loss \([0-9.]*\).*/\1/p' "$work/train.log")
after=$(grep '"kind":"epoch"' "$work/tuned/metrics.jsonl" | tail -n 1 | sed -n 's/.*"valid_loss":\([0-9.]*\).*/\1/p')
echo "fine-tuning tests/fixtures/marian-shared: valid loss $before -> $after"
if ! awk -v b="$before" -v a="$after" 'BEGIN { exit !(b != "" && a != "" && a < b) }'; then
  echo "fine-tuning did not lower the validation loss" >&2
  exit 1
fi

"$BIN" export --to hf "$work/tuned" --out "$work/exported"
head -n 60 "$work/val.de" > "$work/sources60"
check export --run "$work/tuned" --exported "$work/exported" "$work/sources60"
check ct2 --run "$work/tuned" --exported "$work/exported" "$work/sources60"

# 5. A model trained here from scratch as Marian (model.arch = "marian": its SentencePiece
#    models learned from the corpus, joint and separate vocabularies) exports to a directory
#    whose tokenizer transformers' MarianTokenizer (Python SentencePiece reading our .spm
#    files) runs as we do on every val and test2016 line, and which loads and converts as
#    the fine-tuned export does.
for joint in true false; do
  cat > "$work/scratch-$joint.toml" <<TOML
[model]
arch = "marian"
layers = 2
d_model = 64
d_ff = 128
heads = 4
# Generation runs to max_len - 1 tokens where this small model has not learned to stop.
max_len = 128

[data]
train = { src = "$work/train.de", tgt = "$work/train.en" }
valid = { src = "$work/val.de", tgt = "$work/val.en" }
vocab_size = 1000
joint_vocab = $joint

[training]
seed = 1
epochs = 8
max_tokens = 2048
warmup = 200
TOML
  "$BIN" train --device cpu --config "$work/scratch-$joint.toml" --out "$work/scratch-$joint" \
    2> "$work/scratch.log" > /dev/null
  grep '"kind":"epoch"' "$work/scratch-$joint/metrics.jsonl" | tail -n 1
  "$BIN" export --to hf "$work/scratch-$joint" --out "$work/scratch-$joint-hf"
  check tokenizer "$work/scratch-$joint-hf" "$work/sources" "$work/targets"
  check export --run "$work/scratch-$joint" --exported "$work/scratch-$joint-hf" "$work/sources60"
  # CTranslate2's converter registers the source vocabulary for both sides and does not
  # reproduce transformers on separate vocabularies (transformers' own marian-separate
  # fixture: 10 of 58 sentences alike), so that check is for the joint vocabulary only.
  if [ "$joint" = true ]; then
    check ct2 --run "$work/scratch-$joint" --exported "$work/scratch-$joint-hf" "$work/sources60"
  fi
done

# 6. The Hub's cache is shared with Python's tools: against the local stand-in for the Hub
#    (scripts/hub_server.py), huggingface_hub's snapshot_download fills one cache, which this
#    tool then reads offline; this tool's download fills another, from which transformers
#    loads the model offline and generates what we translate.
python3 scripts/hub_server.py --model test/marian-gelu=tests/fixtures/marian-gelu > "$work/hub-url" &
hub_pid=$!
trap 'kill $hub_pid 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 50); do [ -s "$work/hub-url" ] && break; sleep 0.1; done
hub=$(head -n 1 "$work/hub-url")
want=$("$BIN" translate --device cpu --json --beam 1 --checkpoint tests/fixtures/marian-gelu \
  "Ein Hund läuft durch den Schnee." 2> /dev/null)
HF_ENDPOINT="$hub" HF_HUB_CACHE="$work/cache-python" "$VENV/bin/python" -c \
  "from huggingface_hub import snapshot_download; snapshot_download('test/marian-gelu')" 2> /dev/null
got=$(HF_HUB_OFFLINE=1 HF_HUB_CACHE="$work/cache-python" "$BIN" translate --device cpu --json \
  --beam 1 --checkpoint test/marian-gelu "Ein Hund läuft durch den Schnee." 2> /dev/null)
[ "$got" = "$want" ] || { echo "hub: ours from Python's cache: $got, not $want" >&2; exit 1; }
HF_ENDPOINT="$hub" HF_HUB_CACHE="$work/cache-ours" "$BIN" download --quiet test/marian-gelu > /dev/null
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$work/cache-ours" "$VENV/bin/python" - "$want" <<'PY'
import json, sys
from transformers import MarianMTModel, MarianTokenizer
want = json.loads(sys.argv[1])["ids"]
tokenizer = MarianTokenizer.from_pretrained("test/marian-gelu")
model = MarianMTModel.from_pretrained("test/marian-gelu").eval()
ids = model.generate(**tokenizer(["Ein Hund läuft durch den Schnee."], return_tensors="pt"),
                     num_beams=1, do_sample=False)[0].tolist()[1:]
ids = [i for i in ids if i != model.config.pad_token_id]
assert ids == want, f"transformers from our cache: {ids}, ours: {want}"
print(f"hub: the cache is shared both ways with huggingface_hub and transformers ({len(ids)} ids alike)")
PY
