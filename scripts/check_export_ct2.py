"""Checks scripts/export_ct2.py: each checkpoint given is exported to CTranslate2, whose greedy
translations must be this tool's (`transformer translate --json`) token for token, and whose
log-probability of each of our output tokens (CTranslate2's `score_batch`) must be ours
within 1e-4; and that over a vocabulary map (ours `--vocab-map`, CTranslate2's `use_vmap`)
both say the same tokens. Prints one line per sentence and a closing
`export-ct2: N passed, M failed`; exits non-zero on any failure.

    python scripts/check_export_ct2.py --bin target/release/transformer CHECKPOINT:SENTENCES...

where SENTENCES is a file with one source sentence per line.
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile

import ctranslate2

sys.path.insert(0, os.path.dirname(__file__))
import export_ct2  # noqa: E402


def ours(binary, checkpoint, sentences, flags=()):
    out = subprocess.run(
        [binary, "translate", "--device", "cpu", "--json", "--checkpoint", checkpoint, *flags],
        input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


SPECIALS = {"<pad>", "<s>", "</s>", "<unk>"}


def write_vmap(path, src_tokens, tgt_tokens):
    """A vocabulary map over the checkpoint's vocabularies, seeded: every third target token
    always allowed, and three more for each source token."""
    rng = random.Random(0)
    targets = [t for t in tgt_tokens if t not in SPECIALS]
    lines = ["\t" + " ".join(targets[::3])]
    lines += [f"{t}\t{' '.join(rng.sample(targets, 3))}" for t in src_tokens if t not in SPECIALS]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def restricted_agree(binary, checkpoint, model_dir, sentences, sources):
    """Ours with `--vocab-map` and CTranslate2 with `use_vmap=True` over the same map, one
    sentence a batch on both sides (a batch's candidates are the union of its sentences'):
    the same greedy tokens. (Log-probabilities differ a little by design: CTranslate2 pads its
    candidates to a multiple of 16 with copies of id 0, which count in its softmax.)"""
    vmap = os.path.join(model_dir, "vmap.txt")
    write_vmap(vmap, *export_ct2.vocabularies(export_ct2.checkpoint_dir(checkpoint)))
    mine = ours(binary, checkpoint, sentences,
                ["--vocab-map", vmap, "--batch-size", "1", "--max-len", "64"])
    translator = ctranslate2.Translator(model_dir, device="cpu", intra_threads=2)
    passed = failed = 0
    for sentence, m, tokens in zip(sentences, mine, sources):
        result = translator.translate_batch([["<s>"] + tokens + ["</s>"]], beam_size=1,
                                            max_decoding_length=64, use_vmap=True)
        theirs = result[0].hypotheses[0]
        want = [t for t in m["tokens"] if t != "</s>"]
        ok = theirs == want
        print(f"{'ok' if ok else 'FAILED'}: vmap {sentence!r}: ours {want}, CTranslate2 {theirs}")
        passed, failed = passed + ok, failed + (not ok)
    return passed, failed


def theirs(model_dir, token_lists, hypotheses):
    """CTranslate2's greedy translations of the sources, and its log-probabilities of each token
    of `hypotheses` (ours, `</s>` included) given the same sources."""
    translator = ctranslate2.Translator(model_dir, device="cpu", intra_threads=2)
    sources = [["<s>"] + tokens + ["</s>"] for tokens in token_lists]
    results = translator.translate_batch(sources, beam_size=1, max_decoding_length=64)
    scored = translator.score_batch(sources, [[t for t in h if t != "</s>"] for h in hypotheses])
    return [(r.hypotheses[0], s.log_probs) for r, s in zip(results, scored)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True)
    parser.add_argument("cases", nargs="+", help="CHECKPOINT:SENTENCES_FILE")
    args = parser.parse_args()
    passed = failed = 0
    for case in args.cases:
        checkpoint, sentences_file = case.rsplit(":", 1)
        sentences = open(sentences_file, encoding="utf-8").read().splitlines()
        with tempfile.TemporaryDirectory() as model_dir:
            subprocess.run([sys.executable, export_ct2.__file__, checkpoint, model_dir], check=True,
                           stdout=subprocess.DEVNULL)
            mine = ours(args.bin, checkpoint, sentences)
            # The source tokens exactly as this tool split them (BPE pieces included).
            sources = [source_tokens(checkpoint, s) for s in sentences]
            hypotheses = [m["tokens"] for m in mine]
            for sentence, m, (tokens, log_probs) in zip(sentences, mine, theirs(model_dir, sources, hypotheses)):
                want = [t for t in m["tokens"] if t != "</s>"]
                gap = max(abs(a - b) for a, b in zip(m["log_probs"], log_probs))
                ok = tokens == want and len(log_probs) == len(m["log_probs"]) and gap <= 1e-4
                print(f"{'ok' if ok else 'FAILED'}: {sentence!r}: ours {want}, CTranslate2 {tokens}, "
                      f"log-probs within {gap:.1e}")
                passed, failed = passed + ok, failed + (not ok)
            more, less = restricted_agree(args.bin, checkpoint, model_dir, sentences, sources)
            passed, failed = passed + more, failed + less
    print(f"export-ct2: {passed} passed, {failed} failed")
    sys.exit(1 if failed or not passed else 0)


def source_tokens(checkpoint, sentence):
    """The source tokens this tool feeds the encoder for `sentence` (without <s> and </s>):
    the words for a word vocabulary, the checkpoint's own BPE pieces for tokenizer.json."""
    ckpt = export_ct2.checkpoint_dir(checkpoint)
    tokenizer = os.path.join(ckpt, "tokenizer.json")
    if not os.path.isfile(tokenizer):
        tokenizer = os.path.join(ckpt, "tokenizer.src.json")
    if os.path.isfile(tokenizer):
        from tokenizers import Tokenizer

        return Tokenizer.from_file(tokenizer).encode(sentence, add_special_tokens=False).tokens
    return sentence.split()


if __name__ == "__main__":
    main()
