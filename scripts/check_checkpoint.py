"""Loads a checkpoint written by `transformer train` into the PyTorch reference and checks that
both give the same greedy translations.

    python scripts/check_checkpoint.py DIR [SENTENCE ...] [--binary PATH] [--max-len N]

DIR is a checkpoint directory or a run directory (its best/, else last/). The state_dict is
loaded with strict=True (every key present, no extra ones, same shapes); then each sentence
(default: the first sources of the training data) is translated by the reference and by
`transformer translate --json`, and the ids must be equal and the log-probabilities within
1e-4. Word vocabularies and BPE `tokenizer.json` files (read with Hugging Face `tokenizers`)
both work. Exit status 0 when everything matches.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tomllib

import torch
from safetensors.torch import load_file

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402

TOLERANCE = 1e-4


SAMPLE_SENTENCES = 20


def resolve(path):
    for candidate in (path, os.path.join(path, "best"), os.path.join(path, "last")):
        if os.path.isfile(os.path.join(candidate, "model.safetensors")):
            return candidate
    sys.exit(f"{path} holds no model.safetensors (nor best/ or last/ with one)")


class Side:
    """One side's tokenizer: a word vocabulary or a Hugging Face tokenizer.json."""

    def __init__(self, directory, side):
        joint = os.path.join(directory, "tokenizer.json")
        separate = os.path.join(directory, f"tokenizer.{side}.json")
        path = joint if os.path.isfile(joint) else separate
        if os.path.isfile(path):
            from tokenizers import Tokenizer
            self.bpe = Tokenizer.from_file(path)
            self.size = self.bpe.get_vocab_size()
            self.tokens = None
        else:
            with open(os.path.join(directory, f"vocab.{side}.txt")) as f:
                self.tokens = f.read().splitlines()
            self.size = len(self.tokens)

    def encode(self, text):
        if self.tokens is None:
            return self.bpe.encode(text, add_special_tokens=False).ids
        index = {w: i for i, w in enumerate(self.tokens)}
        return [index.get(w, reference.UNK) for w in text.split()]

    def decode(self, ids):
        ids = [i for i in ids if i != reference.EOS]
        if self.tokens is None:
            return self.bpe.decode(ids)
        return " ".join(self.tokens[i] for i in ids)


def read_lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def training_sources(config):
    train = config["data"]["train"]
    if isinstance(train, dict) and "builtin" in train:
        # The built-in toy pairs are data/toy.tsv's.
        train = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "toy.tsv")
    if isinstance(train, dict):
        lines = read_lines(train["src"])
    else:
        lines = [line.split("\t")[0] for line in read_lines(train)]
    return [" ".join(line.split()) for line in lines if line.strip()][:SAMPLE_SENTENCES]


def reference_translation(model, src_side, sentence, max_steps):
    ids = [reference.BOS] + src_side.encode(sentence) + [reference.EOS]
    src = torch.tensor([ids])
    with torch.no_grad():
        return reference.greedy_decode(model, src, torch.ones(1, 1, len(ids), dtype=torch.bool), max_steps)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("sentences", nargs="*")
    parser.add_argument("--binary", default=os.environ.get("TRANSFORMER_BIN", "target/release/transformer"))
    parser.add_argument("--max-len", type=int, default=20)
    args = parser.parse_args()

    directory = resolve(args.run_dir)
    with open(os.path.join(directory, "config.toml"), "rb") as f:
        config = tomllib.load(f)
    src_side, tgt_side = Side(directory, "src"), Side(directory, "tgt")
    model = reference.make_model_from_config(config["model"], src_side.size, tgt_side.size)
    state = load_file(os.path.join(directory, "model.safetensors"))
    model.load_state_dict(state, strict=True)
    model.eval()
    print(f"loaded {len(state)} tensors into the reference with strict=True")

    sentences = args.sentences or training_sources(config)
    rust = subprocess.run(
        [args.binary, "translate", "--checkpoint", directory, "--json", "--device", "cpu",
         "--max-len", str(args.max_len)],
        input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    outputs = [json.loads(line) for line in rust.stdout.splitlines()]
    failures = 0
    for sentence, ours in zip(sentences, outputs, strict=True):
        ids, log_probs = reference_translation(model, src_side, sentence, args.max_len)
        worst = max((abs(a - b) for a, b in zip(ours["log_probs"], log_probs)), default=0.0)
        same = ours["ids"] == ids and worst <= TOLERANCE
        failures += not same
        words = tgt_side.decode(ids)
        print(f"{'ok' if same else 'MISMATCH'}: {sentence!r} -> {words!r} "
              f"(max |log-prob difference| {worst:.2e})")
    if failures:
        sys.exit(f"{failures} of {len(sentences)} translations differ")
    print(f"all {len(sentences)} translations match")


if __name__ == "__main__":
    main()
