#!/usr/bin/env python3
"""Build the German sentence-boundary test set `tests/fixtures/sentences/de-corpus.jsonl`.

Each output line is a JSON list of German sentences (strings) that together form one
paragraph; the paragraph text is the sentences joined with a single space, and the gold
sentence boundaries are the start offsets of every sentence but the first.  The output is
deterministic (fixed seeds, no set iteration, stable sorting), so rerunning the script
reproduces the committed fixture byte for byte.

Sources (read in place; the raw data is never copied into the repository):

* Multi30k task 1, German side of the 2016 Flickr test set:
  `/work/shared/data/multi30k/test2016.de.gz` (= upstream `data/task1/raw/test_2016_flickr.de.gz`
  from https://github.com/multi30k/dataset, commit a3d2e0d26b56f3846f66a952536ffed4e401d05a;
  see `/work/shared/data/multi30k/SOURCE.md`).  Image captions, one per line.  Only lines that
  end in `.`, `!` or `?` are used (20 of the 1,000 captions have no final punctuation).
  Licence: non-commercial research and teaching only; cite Elliott et al. 2016,
  "Multi30K: Multilingual English-German Image Descriptions".
  sha256 of the .gz: 9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8

* Tatoeba English-German pairs as packaged by manythings.org (release 2018-05-13):
  `/work/shared/data/tatoeba-deu-eng/deu-eng.tsv.gz`, `English<TAB>German`, so the German
  sentence is the second column (see `/work/shared/data/tatoeba-deu-eng/SOURCE.md`).
  Licence: CC BY 2.0, attribution "www.manythings.org/anki and tatoeba.org".
  sha256 of the .gz: 0374e52a56ddc7b7e6eb7c7758d6f6915d49dbafdd32693979365022754076bd

How the paragraphs are made:

* Multi30k (seed MULTI30K_SEED): ~300 paragraphs of 2-6 captions.  There are only 980 usable
  captions and ~1,200 slots, so the shuffled pool is reused once it runs out (a caption can
  appear in two paragraphs, never twice in one).
* Tatoeba (seed TATOEBA_SEED): ~400 paragraphs of 2-6 sentences, each sentence used once.
  German entries are kept when they end in `.`, `!` or `?` (optionally followed by a closing
  quote), have 3+ words, contain no invisible/control characters (soft hyphen, zero-width
  space, ...), and do not look like two sentences in one entry (e.g. "Hallo! Ich heiße Tom.",
  which would make the gold wrong).  Sentences with "interesting" features (digits,
  abbreviations or other internal periods, quotes, brackets, ellipses) are preferred: all of
  the rare ones are taken, the common ones (digits, quotes) up to a cap, and the rest is a
  random sample of plain sentences.  No-break spaces (U+00A0, U+202F) inside sentences are
  kept on purpose ("9.15\u00a0Uhr").

Usage: python3 scripts/make-sentence-testset.py [--out PATH] [--multi30k PATH] [--tatoeba PATH]
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
import re
import sys
import unicodedata
from pathlib import Path

MULTI30K_PATH = "/work/shared/data/multi30k/test2016.de.gz"
MULTI30K_SHA256 = "9204244e408ccb38d2a55cfcd344df15005fc42a07a6e55ca6c52b6ababb8cc8"
TATOEBA_PATH = "/work/shared/data/tatoeba-deu-eng/deu-eng.tsv.gz"
TATOEBA_SHA256 = "0374e52a56ddc7b7e6eb7c7758d6f6915d49dbafdd32693979365022754076bd"

MULTI30K_SEED = 30_2016
TATOEBA_SEED = 2018_05_13
MULTI30K_PARAGRAPHS = 300
TATOEBA_PARAGRAPHS = 400
MIN_SENTENCES, MAX_SENTENCES = 2, 6
# Share of Tatoeba sentence slots filled with "interesting" sentences (at most).
TATOEBA_FEATURE_SHARE = 0.6

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "tests" / "fixtures" / "sentences" / "de-corpus.jsonl"

CLOSE_QUOTES = "\"“”‘’'»«"
OPEN_QUOTES = "\"„“‚‘'»«"
# A sentence must end in . ! ? (possibly repeated, e.g. "?!" or "..."), optionally followed
# by one closing quote.
FINAL_RE = re.compile(r"[.!?]+[" + re.escape(CLOSE_QUOTES) + r"]?$")
# Whitespace before the final punctuation ("Sagen Sie „bitte“ .") is a typo; skip those.
SPACE_BEFORE_FINAL_RE = re.compile(r"\s[.!?" + re.escape(CLOSE_QUOTES) + r"]+$")

# Internal candidate boundary: sentence punctuation, optional closing quotes/brackets,
# whitespace, optional opening quotes/brackets, then the next character.
INTERNAL_RE = re.compile(
    r"(?P<punct>[.!?…]+)(?P<close>[" + re.escape(CLOSE_QUOTES) + r")\]]*)\s+"
    r"(?P<open>[" + re.escape(OPEN_QUOTES) + r"(\[]*)(?P<next>\S)"
)
# A quoted utterance followed by a dash, even without whitespace: dialogue.
DIALOGUE_RE = re.compile(r"[.!?…][" + re.escape(CLOSE_QUOTES) + r"]+\s*[-–—―－]")
# Abbreviations that may be followed by a capitalised word without ending the sentence.
TITLE_ABBREVIATIONS = {
    "Dr", "Prof", "St", "Hr", "Hrn", "Fr", "Nr", "Mr", "Mrs", "Ms", "Jr", "Sr", "Dipl",
    "Ing", "Mag", "Abs", "Art", "Bd", "Chr", "ca", "Str", "vgl", "bzw", "Mt", "Ft",
}
# Words that may follow an ordinal number ("am 5. Mai", "im 19. Jahrhundert").
ORDINAL_FOLLOWERS = {
    "Januar", "Februar", "März", "April", "Mai", "Juni", "Juli", "August", "September",
    "Oktober", "November", "Dezember", "Jahrhundert", "Jahrtausend", "Weltkrieg", "Stock",
    "Klasse", "Platz", "Mal", "Geburtstag", "Jahrestag", "Hochzeitstag", "Tag", "Woche",
    "Kapitel", "Symphonie", "Sinfonie", "Stelle", "Runde", "Satz", "Liga", "Etage",
}
# Further abbreviations, usually followed by a lower-case word or a number.
OTHER_ABBREVIATIONS = {
    "usw", "etc", "evtl", "ggf", "inkl", "exkl", "Mio", "Mrd", "Std", "Jh", "Jhd", "phil",
    "med", "jur", "rer", "nat", "Tel", "bspw", "sog", "allg", "geb", "gest", "max", "min",
    "Min", "Sek", "Tsd", "zzgl", "abzgl", "bzgl", "usf", "Kap", "Jahrh",
}
ROMAN_RE = re.compile(r"[IVXLC]+")
ALLOWED_SPACES = {" ", "\u00a0", "\u202f"}

# Feature detectors (on a single sentence).
ABBREV_RE = re.compile(
    r"(?<!\w)(?:z\.\s?B|d\.\s?h|u\.\s?a|z\.\s?T|o\.\s?ä|s\.\s?o|u\.\s?U|v\.\s?a|v\.\s?Chr|n\.\s?Chr"
    r"|usw|bzw|ca|Dr|Prof|Nr|Str|etc|vgl|Hr|Fr|St|evtl|ggf|inkl|Mio|Mrd|Std|Jh|Jhd|Mr|Mrs|Ms"
    r"|phil|med|jur|Abs|Tel|Bd)\."
)
INTERNAL_PERIOD_RE = re.compile(r"\.(?=.*\w)")  # a period with a word character after it
ELLIPSIS_RE = re.compile(r"…|\.\.\.")
BRACKET_RE = re.compile(r"[()\[\]]")
QUOTE_RE = re.compile(r"[„“”\"»«‚‘]")
QUOTE_WITH_PUNCT_RE = re.compile(r"[.!?][" + re.escape(CLOSE_QUOTES) + r"]")
DIGIT_RE = re.compile(r"\d")


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def check_source(path: str, expected: str) -> None:
    got = sha256(path)
    if got != expected:
        print(f"warning: {path} has sha256 {got}, expected {expected}; "
              "the fixture will differ from the committed one", file=sys.stderr)


def clean_chars(s: str) -> bool:
    """True when the sentence has no control, format or odd space characters."""
    for ch in s:
        cat = unicodedata.category(ch)
        if cat[0] == "C" or cat in ("Zl", "Zp"):
            return False
        if cat == "Zs" and ch not in ALLOWED_SPACES:
            return False
    return True


def usable(s: str) -> bool:
    return (
        bool(s)
        and s == s.strip()
        and clean_chars(s)
        and "  " not in s
        and FINAL_RE.search(s) is not None
        and SPACE_BEFORE_FINAL_RE.search(s) is None
    )


def token_before(s: str, end: int) -> str:
    """The whitespace-delimited token that ends at `end`, without opening quotes/brackets."""
    words = s[:end].split()
    return words[-1].lstrip(OPEN_QUOTES + "([") if words else ""


def abbreviation_like(token: str) -> bool:
    """Could `token` + "." be an abbreviation, an ordinal number or a Roman numeral?"""
    return (
        token in TITLE_ABBREVIATIONS
        or token in OTHER_ABBREVIATIONS
        or (len(token) == 1 and token.isalpha())
        or "." in token
        or token.isdigit()
        or ROMAN_RE.fullmatch(token) is not None
    )


def looks_like_several_sentences(s: str) -> bool:
    """Heuristic: does the entry contain an internal sentence boundary?"""
    if DIALOGUE_RE.search(s):
        return True  # "„Sind Sie glücklich?“— „Ja.“" (no space before the dash)
    for m in INTERNAL_RE.finditer(s):
        nxt = m.group("next")
        if nxt.islower() and not m.group("open"):
            # "„Komm!“ sagte er", "Er zögerte... dann ging er", "usw. und": not a boundary.
            # But "Ich wusste. dass ..." (a period typed for a comma) is a typo: skip those.
            if m.group("punct") == "." and not m.group("close"):
                if not abbreviation_like(token_before(s, m.start())):
                    return True
            continue
        if not nxt.isalnum():
            # Dialogue: "„Wer ist da?“ – „Ich.“", "Ja. - Ich auch."; too unclear, skip.
            return True
        punct = m.group("punct")
        if m.group("open") and m.group("close"):
            return True  # "„Wer?“ „Ich.“": two utterances
        if punct != ".":
            # "Hallo! Wie geht's?", "Warte... Tom kommt.": a boundary (or too unclear).
            return True
        if m.group("close"):
            return True
        # A single period followed by an upper-case letter or a digit.
        token = token_before(s, m.start())
        if token in TITLE_ABBREVIATIONS:
            continue
        if len(token) == 1 and token.isalpha():  # initials, "z. B. Tom", "v. Chr."
            continue
        if "." in token:  # "z.B", "E.S.E", "U.S"
            continue
        if token.isdigit():
            next_word = s[m.start("next"):].split()[0].strip(".,;:!?")
            if next_word in ORDINAL_FOLLOWERS:
                continue
            return True
        return True
    return False


def paragraph_sizes(rng: random.Random, n: int) -> list[int]:
    return [rng.randint(MIN_SENTENCES, MAX_SENTENCES) for _ in range(n)]


def multi30k_paragraphs(path: str) -> tuple[list[list[str]], dict]:
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        lines = [line.rstrip("\n") for line in f]
    stripped = [line.strip() for line in lines]
    kept = [s for s in stripped if s and s[-1] in ".!?" and clean_chars(s) and "  " not in s]
    kept = list(dict.fromkeys(kept))  # drop exact duplicates, keep order
    rng = random.Random(MULTI30K_SEED)
    sizes = paragraph_sizes(rng, MULTI30K_PARAGRAPHS)
    pool: list[str] = []
    paragraphs = []
    for size in sizes:
        para: list[str] = []
        while len(para) < size:
            if not pool:
                pool = kept[:]
                rng.shuffle(pool)
            s = pool.pop()
            if s in para:
                pool.insert(0, s)
                continue
            para.append(s)
        paragraphs.append(para)
    stats = {
        "lines": len(lines),
        "without_final_punct": sum(1 for s in stripped if not s or s[-1] not in ".!?"),
        "kept": len(kept),
        "slots": sum(sizes),
    }
    return paragraphs, stats


def tatoeba_paragraphs(path: str) -> tuple[list[list[str]], dict]:
    german = []
    with gzip.open(path, "rt", encoding="utf-8", newline="\n") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                german.append(fields[1])
    german = list(dict.fromkeys(german))
    candidates = [
        s for s in german
        if usable(s) and len(s.split()) >= 3 and not looks_like_several_sentences(s)
    ]

    rare, common, plain = [], [], []
    for s in candidates:
        if (ABBREV_RE.search(s) or INTERNAL_PERIOD_RE.search(s) or ELLIPSIS_RE.search(s)
                or BRACKET_RE.search(s) or QUOTE_WITH_PUNCT_RE.search(s[:-1])
                or "»" in s or "«" in s):
            rare.append(s)
        elif DIGIT_RE.search(s) or QUOTE_RE.search(s):
            common.append(s)
        else:
            plain.append(s)

    rng = random.Random(TATOEBA_SEED)
    sizes = paragraph_sizes(rng, TATOEBA_PARAGRAPHS)
    slots = sum(sizes)
    feature_cap = int(slots * TATOEBA_FEATURE_SHARE)
    rng.shuffle(rare)
    rng.shuffle(common)
    chosen = rare[:feature_cap]
    chosen += common[: max(0, feature_cap - len(chosen))]
    chosen += rng.sample(plain, slots - len(chosen))
    rng.shuffle(chosen)

    paragraphs = []
    i = 0
    for size in sizes:
        paragraphs.append(chosen[i:i + size])
        i += size
    stats = {
        "distinct_german": len(german),
        "candidates": len(candidates),
        "rare_features": len(rare),
        "common_features": len(common),
        "plain": len(plain),
        "slots": slots,
        "feature_sentences": min(feature_cap, len(rare) + len(common)),
    }
    return paragraphs, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--multi30k", default=MULTI30K_PATH)
    ap.add_argument("--tatoeba", default=TATOEBA_PATH)
    args = ap.parse_args()

    check_source(args.multi30k, MULTI30K_SHA256)
    check_source(args.tatoeba, TATOEBA_SHA256)

    m_paras, m_stats = multi30k_paragraphs(args.multi30k)
    t_paras, t_stats = tatoeba_paragraphs(args.tatoeba)
    paragraphs = m_paras + t_paras

    for para in paragraphs:
        for s in para:
            assert s == s.strip() and "\n" not in s and "\t" not in s, repr(s)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8", newline="\n") as f:
        for para in paragraphs:
            f.write(json.dumps(para, ensure_ascii=False) + "\n")

    boundaries = sum(len(p) - 1 for p in paragraphs)
    print(f"multi30k: {m_stats}", file=sys.stderr)
    print(f"tatoeba:  {t_stats}", file=sys.stderr)
    print(f"wrote {args.out}: {len(paragraphs)} paragraphs "
          f"({len(m_paras)} Multi30k, {len(t_paras)} Tatoeba), {boundaries} gold boundaries, "
          f"{args.out.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
