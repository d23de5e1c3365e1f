#!/usr/bin/env python3
"""Makes a German-English corpus of millions of pairs from the Tatoeba pairs at hand.

    python3 scripts/make-large-corpus.py --pairs 5000000 --out data/large/de-en.5m.tsv
    python3 scripts/make-large-corpus.py --pairs 20000 --out slice.tsv.gz   # a test-sized slice

Each line joins two Tatoeba pairs drawn at random (seeded), German and English in the same
order, so that every line is a true translation and the lines vary as a real corpus
does (about 145 bytes a pair, as WMT de-en). It is a benchmark corpus for the data pipeline,
not one to learn German from: its sentences repeat in new company. The output is
`German<TAB>English`, gzipped when --out ends in .gz. Reads the mirror's deu-eng.tsv.gz
(../shared/data/tatoeba-deu-eng, or --from DIR; scripts/get-tatoeba.py says where the
public original is). Standard library only.
"""

import argparse
import gzip
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = os.path.join(ROOT, "..", "shared", "data", "tatoeba-deu-eng")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, required=True, help="how many pairs to write")
    parser.add_argument("--out", required=True, help="the TSV to write (.gz: gzipped)")
    parser.add_argument("--from", dest="source", default=MIRROR,
                        help="the directory holding deu-eng.tsv.gz")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.pairs < 1:
        sys.exit("error: --pairs must be at least 1")
    path = os.path.join(args.source, "deu-eng.tsv.gz")
    try:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            # The mirror is English<TAB>German.
            pairs = [tuple(line.rstrip("\n").split("\t")[:2]) for line in f if "\t" in line]
    except OSError as e:
        sys.exit(f"error: cannot read {path}: {e}; pass --from DIR holding deu-eng.tsv.gz "
                 "(scripts/get-tatoeba.py downloads it)")
    rng = random.Random(args.seed)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    partial = args.out + ".partial"
    opener = gzip.open if args.out.endswith(".gz") else open
    with opener(partial, "wt", encoding="utf-8", newline="\n") as out:
        lines = []
        for _ in range(args.pairs):
            drawn = [pairs[rng.randrange(len(pairs))] for _ in range(2)]
            german = " ".join(p[1] for p in drawn)
            english = " ".join(p[0] for p in drawn)
            lines.append(f"{german}\t{english}\n")
            if len(lines) == 100_000:
                out.writelines(lines)
                lines.clear()
        out.writelines(lines)
    os.replace(partial, args.out)
    print(f"wrote {args.pairs} pairs to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
