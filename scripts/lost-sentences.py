#!/usr/bin/env python3
"""Counts the sentences each door of the tool loses on paragraphs, and which losses it marks.

Usage:
    python3 scripts/lost-sentences.py BIN CHECKPOINT [--example EXAMPLE] [--paragraphs N]

Paragraphs are N (30) runs of three consecutive test2016 sentences (data/multi30k, from
scripts/get-multi30k.sh) joined with one space, as people paste them. The reference is each
sentence translated alone (`translate --json --no-sentence-split`). A paragraph's translation
has lost a sentence when it holds fewer than 80% of the reference's tokens, or when two of its
sentences were read as one (the door reads the paragraph whole, or its splitter found fewer
than three: `BIN sentences --lang de`) and it holds fewer than three English sentences (`BIN
sentences --lang en`). For each door the script counts paragraphs that lost a sentence and, of
those, how many the door marked:

- `translate` (it cuts sentences): marked by `short` or `stopped_at_limit` in --json;
- `translate --no-sentence-split` (each line read as one sentence): marked the same way;
- the library's front door, `Translator::translate`, through EXAMPLE (examples/translate.rs,
  built by `cargo build --release --example translate`): marked by its warning;
- `eval --src` without `--split-sentences`: every line of several sentences is named in its
  warning, so a loss there is marked when the warning counts the line.

Prints one table row a door. Exit status 1 when a door loses a sentence it does not mark.
Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(args, input=stdin, capture_output=True, text=True, check=True)


def translations(binary: str, checkpoint: str, lines: list[str], *flags: str) -> list[dict]:
    out = run(binary, "translate", "--json", "--checkpoint", checkpoint, *flags, "-",
              stdin="\n".join(lines) + "\n").stdout
    return [json.loads(line) for line in out.splitlines()]


def sentence_counts(binary: str, lang: str, texts: list[str]) -> list[int]:
    out = run(binary, "sentences", "--lang", lang, "--json",
              stdin="\n".join(t.replace("\n", " ") for t in texts) + "\n").stdout
    return [len(json.loads(line)) for line in out.splitlines()]


def lost(binary: str, outputs: list[str], token_counts: list[int], reference: list[int],
         pieces: list[int]) -> list[bool]:
    english = sentence_counts(binary, "en", outputs)
    return [tokens < 0.8 * want or (read < 3 and n < 3)
            for n, tokens, want, read in zip(english, token_counts, reference, pieces,
                                             strict=True)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bin")
    parser.add_argument("checkpoint")
    parser.add_argument("--example", help="examples/translate.rs built")
    parser.add_argument("--paragraphs", type=int, default=30)
    args = parser.parse_args()
    with gzip.open(REPO / "data/multi30k/test2016.de.gz", "rt", encoding="utf-8") as f:
        sentences = [line.strip() for line in f][: 3 * args.paragraphs]
    paragraphs = [" ".join(sentences[i:i + 3]) for i in range(0, len(sentences), 3)]
    alone = translations(args.bin, args.checkpoint, sentences, "--no-sentence-split")
    reference = [sum(len(t["ids"]) for t in alone[i:i + 3]) for i in range(0, len(alone), 3)]
    cut = sentence_counts(args.bin, "de", paragraphs)
    whole = [1] * len(paragraphs)
    rows = []
    for name, flags, pieces in [("translate", (), cut),
                                ("translate --no-sentence-split", ("--no-sentence-split",), whole)]:
        got = translations(args.bin, args.checkpoint, paragraphs, *flags)
        losses = lost(args.bin, [t["translation"] for t in got], [len(t["ids"]) for t in got],
                      reference, pieces)
        marked = [t.get("short", False) or "stopped_at_limit" in t for t in got]
        rows.append((name, losses, marked))
    if args.example:
        outputs, counts, marked = [], [], []
        for paragraph in paragraphs:
            done = run(args.example, args.checkpoint, paragraph)
            outputs.append(done.stdout.strip())
            # The example prints text; its tokens are counted as the binary counts a text's.
            counts.append(len(translations(args.bin, args.checkpoint, [paragraph])[0]["ids"]))
            marked.append("warning" in done.stderr)
        rows.append(("library Translator::translate",
                     lost(args.bin, outputs, counts, reference, cut), marked))
    with tempfile.TemporaryDirectory() as work:
        src, ref = Path(work, "src"), Path(work, "ref")
        src.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
        ref.write_text("\n".join(paragraphs) + "\n", encoding="utf-8")
        hyp = Path(work, "hyp")
        done = run(args.bin, "eval", "--checkpoint", args.checkpoint, "--src", str(src),
                   "--ref", str(ref), "--out", str(hyp))
        outputs = hyp.read_text(encoding="utf-8").splitlines()
        got = translations(args.bin, args.checkpoint, paragraphs, "--no-sentence-split")
        counted = f"{len(paragraphs)} of {len(paragraphs)} source lines hold more than one sentence"
        warned = counted in done.stderr
        losses = lost(args.bin, outputs, [len(t["ids"]) for t in got], reference, whole)
        rows.append(("eval (no --split-sentences)", losses, [warned] * len(losses)))
    print(f"{len(paragraphs)} three-sentence paragraphs of test2016, {args.checkpoint}")
    print(f"(the splitter read {sum(1 for n in cut if n < 3)} of them as fewer than three "
          f"sentences)")
    print(f"{'door':<34} {'lost a sentence':>16} {'of them marked':>15}")
    failed = False
    for name, losses, marked in rows:
        lost_count = sum(losses)
        marked_count = sum(1 for l, m in zip(losses, marked) if l and m)
        failed |= marked_count < lost_count
        print(f"{name:<34} {lost_count:>16} {marked_count:>15}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
