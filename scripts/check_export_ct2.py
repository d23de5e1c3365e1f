"""Checks scripts/export_ct2.py: each checkpoint given is exported to CTranslate2, whose greedy
translations must be this tool's (`transformer translate --json`) token for token, and whose
log-probability of each of our output tokens (CTranslate2's `score_batch`) must be ours
within 1e-4. Prints one line per sentence and a closing
`export-ct2: N passed, M failed`; exits non-zero on any failure.

    python scripts/check_export_ct2.py --bin target/release/transformer CHECKPOINT:SENTENCES...

where SENTENCES is a file with one source sentence per line.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import ctranslate2

sys.path.insert(0, os.path.dirname(__file__))
import export_ct2  # noqa: E402


def ours(binary, checkpoint, sentences):
    out = subprocess.run(
        [binary, "translate", "--device", "cpu", "--json", "--checkpoint", checkpoint],
        input="\n".join(sentences) + "\n", capture_output=True, text=True, check=True,
    )
    return [json.loads(line) for line in out.stdout.splitlines()]


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
