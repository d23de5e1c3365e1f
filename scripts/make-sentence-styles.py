#!/usr/bin/env python3
"""Derive the styled sentence-boundary sets `tests/fixtures/sentences/styles/` from the gold
German sets beside them (`de-corpus.jsonl`, `de-hand.jsonl`), as corpora write text:

* `de-*-lower.jsonl`: every sentence lowercased (as many corpora and the seeds' toy data are);
* `de-*-pretok.jsonl`: lowercased and pre-tokenized as Moses-style tokenizers leave it: a
  space before each comma and before the terminator that ends a sentence (`. ! ?`, with any
  closing quote or bracket after it), abbreviations and ordinals inside left attached.

The paragraph text is still the sentences joined with one space, so the gold boundaries are
the same positions in the styled text. Deterministic; standard library only.

    python3 scripts/make-sentence-styles.py
"""

import json
import re
from pathlib import Path

SETS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "sentences"
ENDING = re.compile(r"([.!?]+)([\"'“”»«)\]]*)$")


def pre_tokenized(sentence: str) -> str:
    sentence = re.sub(r",(?=\s)", " ,", sentence.lower())
    found = ENDING.search(sentence)
    if not found:
        return sentence
    closers = " " + found.group(2) if found.group(2) else ""
    return sentence[: found.start()].rstrip() + " " + found.group(1) + closers


def main() -> None:
    out_dir = SETS / "styles"
    out_dir.mkdir(exist_ok=True)
    for name in ["de-corpus", "de-hand"]:
        paragraphs = [json.loads(line) for line in (SETS / f"{name}.jsonl").open(encoding="utf-8")]
        for style, change in [("lower", str.lower), ("pretok", pre_tokenized)]:
            with (out_dir / f"{name}-{style}.jsonl").open("w", encoding="utf-8") as out:
                for sentences in paragraphs:
                    out.write(json.dumps([change(s) for s in sentences], ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
