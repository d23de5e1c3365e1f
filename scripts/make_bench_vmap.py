"""Writes the speed benchmark's vocabulary map (CTranslate2's vmap.txt format) for a MarianMT
directory: the first FIXED tokens of its vocabulary always allowed, and for every other source
token a rule allowing PER_TOKEN target tokens drawn at random (seeded: the same file every
time). The benchmark's model has random weights, so no map could be learned from it; this one
has the shape of a real map (Marian's lexical shortlists keep 50-100 common tokens plus tens
per source word: here 2,000 always and 30 a source token, about 2,500 candidates for 32
test2016 sentences) and is read by both engines, ours (`--vocab-map`) and CTranslate2
(`use_vmap=True`, the file beside model.bin).

    python scripts/make_bench_vmap.py MARIAN_DIR OUT_FILE [--fixed 2000] [--per-token 30]

The special tokens (</s>, <unk>, <pad>) get no rule: both engines always allow them, and a
rule on </s> would match CTranslate2's framed sources and not ours.
"""

import argparse
import json
import os
import random

SPECIALS = {"</s>", "<unk>", "<pad>"}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("marian_dir")
    parser.add_argument("out")
    parser.add_argument("--fixed", type=int, default=2000)
    parser.add_argument("--per-token", type=int, default=30)
    args = parser.parse_args()
    with open(os.path.join(args.marian_dir, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    tokens = [t for t, _ in sorted(vocab.items(), key=lambda item: item[1])]
    ordinary = [t for t in tokens if t not in SPECIALS and " " not in t and "\t" not in t]
    rng = random.Random(0)
    lines = ["\t" + " ".join(ordinary[: args.fixed])]
    for token in ordinary:
        lines.append(token + "\t" + " ".join(rng.sample(ordinary, args.per_token)))
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
