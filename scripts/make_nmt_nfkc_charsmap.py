"""Writes crates/transformer/assets/sentencepiece/nmt_nfkc.charsmap: SentencePiece's nmt_nfkc normalisation rule
as the precompiled character map a `.spm` model carries (NormalizerSpec.precompiled_charsmap),
taken from a model that SentencePiece itself trains with that rule. `transformer train` puts it
in the SentencePiece models it learns (data.tokenizer = "marian"), so that they normalise text
as OPUS-MT's do, in SentencePiece, in transformers and in this tool alike.

    python scripts/make_nmt_nfkc_charsmap.py   # sentencepiece from PyPI (scripts/requirements.txt)
"""
import os
import tempfile

import sentencepiece as spm

OUT = os.path.join(os.path.dirname(__file__), "..", "crates", "transformer", "assets", "sentencepiece", "nmt_nfkc.charsmap")


def varint(data, at):
    value, shift = 0, 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def fields(data):
    """(field number, wire type, value) of one protobuf message."""
    at = 0
    while at < len(data):
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            length, at = varint(data, at)
            value, at = data[at:at + length], at + length
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def main():
    with tempfile.TemporaryDirectory() as work:
        corpus = os.path.join(work, "corpus.txt")
        with open(corpus, "w", encoding="utf-8") as f:
            f.write("ein kleiner Satz\nnoch ein Satz\n")
        spm.SentencePieceTrainer.train(
            input=corpus, model_prefix=os.path.join(work, "m"), vocab_size=20,
            model_type="unigram", normalization_rule_name="nmt_nfkc", minloglevel=2,
            hard_vocab_limit=False,
        )
        with open(os.path.join(work, "m.model"), "rb") as f:
            model = f.read()
    spec = next(value for number, _, value in fields(model) if number == 3)
    charsmap = next(value for number, _, value in fields(spec) if number == 2)
    with open(OUT, "wb") as f:
        f.write(charsmap)
    print(f"{OUT}: {len(charsmap)} bytes (sentencepiece {spm.__version__})")


if __name__ == "__main__":
    main()
