"""`bleu` and `chrf` equal sacreBLEU's corpus scores on what sacreBLEU takes: one or several
reference streams, streams with gaps (None), lowercase, empty lines and hypotheses."""

import gzip
import random

import pytest
import sacrebleu

import transformer
from conftest import FIXTURES, REPO


def corpus(count=300, seed=7):
    path = REPO / "data" / "multi30k" / "val.en.gz"
    if path.exists():
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            references = [line.rstrip("\n") for line in lines][:count]
    else:
        references = (FIXTURES / "sacrebleu" / "ref.en").read_text().splitlines()
    rng = random.Random(seed)

    def damaged(line):
        words = line.split()
        rng.shuffle(words[: rng.randrange(len(words) + 1)])
        words = [w.upper() if rng.random() < 0.1 else w for w in words if rng.random() > 0.15]
        return " ".join(words)

    hypotheses = [damaged(r) for r in references]
    second = [damaged(r) for r in references]
    third = [None if rng.random() < 0.3 else damaged(r) for r in references]
    return hypotheses, references, second, third


def assert_bleu_equal(ours, theirs):
    assert ours.score == theirs.score  # to the last bit
    assert ours.counts == theirs.counts and ours.totals == theirs.totals
    assert (ours.sys_len, ours.ref_len) == (theirs.sys_len, theirs.ref_len)
    assert ours.bp == pytest.approx(theirs.bp, abs=1e-12)
    assert ours.precisions == pytest.approx(theirs.precisions, abs=1e-12)


def test_bleu_equals_sacrebleu():
    hypotheses, references, second, third = corpus()
    for streams in ([references], [references, second], [references, second, third]):
        for lowercase in (False, True):
            ours = transformer.bleu(hypotheses, streams, lowercase=lowercase)
            theirs = sacrebleu.corpus_bleu(hypotheses, streams, lowercase=lowercase)
            assert_bleu_equal(ours, theirs)
            assert str(ours) == theirs.format()
    signature = transformer.bleu(hypotheses, [references, second, third]).signature
    assert signature.startswith("nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:")


def test_chrf_equals_sacrebleu():
    hypotheses, references, second, third = corpus()
    for streams in ([references], [references, second], [references, second, third]):
        ours = transformer.chrf(hypotheses, streams)
        theirs = sacrebleu.corpus_chrf(hypotheses, streams)
        assert ours.score == theirs.score  # to the last bit
        assert str(ours) == theirs.format()


def test_the_sacrebleu_fixture_files():
    references = (FIXTURES / "sacrebleu" / "ref.en").read_text().split("\n")[:-1]
    for name in ["good", "all_empty", "longer_than_reference", "lowercase_detokenized",
                 "no_four_gram_matches", "with_empty_lines"]:
        hypotheses = (FIXTURES / "sacrebleu" / f"{name}.hyp").read_text().split("\n")[:-1]
        assert_bleu_equal(transformer.bleu(hypotheses, [references]),
                          sacrebleu.corpus_bleu(hypotheses, [references]))
        assert transformer.chrf(hypotheses, [references]).score == \
            sacrebleu.corpus_chrf(hypotheses, [references]).score


def test_what_sacrebleu_would_misread_is_refused():
    with pytest.raises(TypeError, match=r"pass \[references\]"):
        transformer.bleu(["a cat"], ["a cat"])
    with pytest.raises(TypeError, match="hypotheses must be a list of str"):
        transformer.chrf("a cat", [["a cat"]])
    with pytest.raises(ValueError, match=r"references\[1\] has 1 segments and hypotheses has 2"):
        transformer.bleu(["a", "b"], [["a", "b"], ["a"]])
    with pytest.raises(ValueError, match="segment 0 has no reference"):
        transformer.bleu(["a"], [[None]])


def test_small_random_corpora_score_as_sacrebleu_to_the_last_bit():
    rng = random.Random(11)
    words = "the a cat dog sat ran on mat fast big Straße über naïve 猫 ?".split()

    def line():
        return " ".join(rng.choice(words) for _ in range(rng.randrange(0, 12)))

    for _ in range(200):
        count = rng.randrange(1, 4)
        hypotheses = [line() for _ in range(count)]
        streams = [[line() for _ in range(count)] for _ in range(rng.randrange(1, 3))]
        assert transformer.chrf(hypotheses, streams).score == \
            sacrebleu.corpus_chrf(hypotheses, streams).score
        assert transformer.bleu(hypotheses, streams).score == \
            sacrebleu.corpus_bleu(hypotheses, streams).score


def test_text_that_is_not_unicode_is_refused_by_name():
    with pytest.raises(ValueError, match=r"hypotheses\[1\] is not valid Unicode"):
        transformer.bleu(["a", "\ud800"], [["a", "b"]])
    with pytest.raises(ValueError, match=r"references\[0\]\[0\] is not valid Unicode"):
        transformer.chrf(["a"], [["\udfff"]])
