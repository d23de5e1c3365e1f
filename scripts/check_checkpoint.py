"""Loads a checkpoint written by `transformer train` into the PyTorch reference and checks that
both give the same greedy translations.

    python scripts/check_checkpoint.py RUN_DIR [SENTENCE ...] [--binary PATH]

The state_dict is loaded with strict=True (every key present, no extra ones, same shapes);
then each sentence (default: the sources of the run's training data) is translated by the
reference and by `transformer translate --json`, and the ids must be equal and the
log-probabilities within 1e-4. Exit status 0 when everything matches.
"""

import argparse
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


def read_vocab(path):
    with open(path) as f:
        return f.read().splitlines()


def training_sources(config):
    with open(config["data"]["train"]) as f:
        return [line.split("\t")[0] for line in f if line.strip()]


def reference_translation(model, src_vocab, sentence, max_steps):
    index = {w: i for i, w in enumerate(src_vocab)}
    ids = [reference.BOS] + [index.get(w, reference.UNK) for w in sentence.split()] + [reference.EOS]
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

    with open(os.path.join(args.run_dir, "config.toml"), "rb") as f:
        config = tomllib.load(f)
    src_vocab = read_vocab(os.path.join(args.run_dir, "vocab.src.txt"))
    tgt_vocab = read_vocab(os.path.join(args.run_dir, "vocab.tgt.txt"))
    model = reference.make_model_from_config(config["model"], len(src_vocab), len(tgt_vocab))
    state = load_file(os.path.join(args.run_dir, "model.safetensors"))
    model.load_state_dict(state, strict=True)
    model.eval()
    print(f"loaded {len(state)} tensors into the reference with strict=True")

    sentences = args.sentences or training_sources(config)
    rust = subprocess.run(
        [args.binary, "translate", "--checkpoint", args.run_dir, "--json", "--device", "cpu",
         "--max-len", str(args.max_len)],
        input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True)
    outputs = [json.loads(line) for line in rust.stdout.splitlines()]
    failures = 0
    for sentence, ours in zip(sentences, outputs, strict=True):
        ids, log_probs = reference_translation(model, src_vocab, sentence, args.max_len)
        worst = max((abs(a - b) for a, b in zip(ours["log_probs"], log_probs)), default=0.0)
        same = ours["ids"] == ids and worst <= TOLERANCE
        failures += not same
        words = " ".join(tgt_vocab[i] for i in ids if i != reference.EOS)
        print(f"{'ok' if same else 'MISMATCH'}: {sentence!r} -> {words!r} "
              f"(max |log-prob difference| {worst:.2e})")
    if failures:
        sys.exit(f"{failures} of {len(sentences)} translations differ")
    print(f"all {len(sentences)} translations match")


if __name__ == "__main__":
    main()
