#!/usr/bin/env python3
"""Puts the Tatoeba German-English pairs into data/tatoeba/ as train/valid/test TSV files.

    python3 scripts/get-tatoeba.py [--from DIR] [--dest DIR]

Source: the manythings.org "Anki" deu-eng release of 2018-05-13 (Tatoeba, CC BY 2.0;
attribution "www.manythings.org/anki and tatoeba.org"). With --from DIR (or when
../shared/data/tatoeba-deu-eng exists) it reads that mirror's deu-eng.tsv.gz; otherwise it
downloads the unmodified zip from a pinned public re-host. Both are checked by SHA-256.

The file is English<TAB>German with no splits. This writes German<TAB>English (the direction
`transformer` trains) and splits by English sentence, so that no English sentence is in two
splits: an English sentence whose MD5 ends in byte 0 goes to valid, byte 1 to test, the rest
to train (about 1/256 each). Standard library only.
"""

import argparse
import gzip
import hashlib
import io
import os
import sys
import urllib.request
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIRROR = os.path.join(ROOT, "..", "shared", "data", "tatoeba-deu-eng")
ZIP_URL = ("https://raw.githubusercontent.com/rioyshky/translation/"
           "de48b7027f7318d77010a6e08ed928c10748c23d/deu-eng.zip")
ZIP_SHA256 = "b7688f84f99fa33c17397c14d8bd9cef1fdeb2ee0bf50074767023aee8926e28"
TEXT_SHA256 = "a79c90b3cd3102decffa49cc00fb6f20023974f2ae5c4782515bebe133fcc07b"


def read_pairs(mirror):
    if mirror:
        with gzip.open(os.path.join(mirror, "deu-eng.tsv.gz"), "rb") as f:
            data = f.read()
    else:
        with urllib.request.urlopen(ZIP_URL) as response:
            archive = response.read()
        if hashlib.sha256(archive).hexdigest() != ZIP_SHA256:
            sys.exit("error: deu-eng.zip does not have the expected SHA-256")
        with zipfile.ZipFile(io.BytesIO(archive)) as z:
            data = z.read("deu.txt")
    if hashlib.sha256(data).hexdigest() != TEXT_SHA256:
        sys.exit("error: deu.txt does not have the expected SHA-256; the source is damaged or changed")
    return [line.split("\t") for line in data.decode("utf-8").splitlines() if line]


def split_of(english):
    last = hashlib.md5(english.encode("utf-8")).digest()[-1]
    return {0: "valid", 1: "test"}.get(last, "train")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="mirror", default=MIRROR if os.path.isdir(MIRROR) else None)
    parser.add_argument("--dest", default=os.path.join(ROOT, "data", "tatoeba"))
    args = parser.parse_args()
    pairs = read_pairs(args.mirror)
    os.makedirs(args.dest, exist_ok=True)
    splits = {"train": [], "valid": [], "test": []}
    for english, german in pairs:
        splits[split_of(english)].append(f"{german}\t{english}\n")
    for name, lines in splits.items():
        path = os.path.join(args.dest, f"{name}.tsv")
        with open(path + ".part", "w", encoding="utf-8") as f:
            f.writelines(lines)
        os.replace(path + ".part", path)
    counts = ", ".join(f"{name} {len(lines)}" for name, lines in splits.items())
    print(f"Tatoeba de-en is in {args.dest} ({counts} pairs)")


if __name__ == "__main__":
    main()
