#!/usr/bin/env python3
"""Measure sentence-splitting quality of `BIN sentences` against the gold fixtures.

Usage:
    python3 scripts/sentence-eval.py BIN [--lang de] [--show-errors N] [--min-f1 X]
                                         [--fixtures FILE ...]

Fixtures are `tests/fixtures/sentences/<lang>-*.jsonl`: one JSON list of gold sentences per
line; the paragraph text is the sentences joined with one space.  For each file the script
runs `BIN sentences --lang <lang> --json` once, with one paragraph per stdin line, and expects
one JSON array of sentence strings per input line on stdout (each sentence a substring of the
line with the surrounding whitespace removed, in order).

A boundary is the start offset of every sentence except the first in a paragraph.  The script
reports micro-averaged boundary precision, recall and F1 per file, for the command and for a
naive regex splitter (split after `.`, `!`, `?` or `…` followed by whitespace).  Precision is
1.0 when nothing is predicted and recall is 1.0 when there is nothing to find.

Exit status: 0 on success; 1 when `--min-f1` is given and the command's F1 on some file is
below it; 2 when the command fails, prints the wrong number of lines, prints something that
is not a JSON array of strings, or prints a sentence that is not found in order in its line.
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = REPO_ROOT / "tests" / "fixtures" / "sentences"
NAIVE_RE = re.compile(r"[.!?…]\s+")
CONTEXT = 40


class ContractError(Exception):
    """The command broke the `sentences --json` output contract."""


@dataclass
class Paragraph:
    text: str
    gold: list[int]  # boundary offsets


@dataclass
class Score:
    gold: int = 0
    predicted: int = 0
    tp: int = 0
    missed: list[tuple[int, int]] = field(default_factory=list)  # (paragraph, offset)
    spurious: list[tuple[int, int]] = field(default_factory=list)

    def add(self, index: int, gold: list[int], predicted: list[int]) -> None:
        g, p = set(gold), set(predicted)
        self.gold += len(g)
        self.predicted += len(p)
        self.tp += len(g & p)
        self.missed += [(index, o) for o in sorted(g - p)]
        self.spurious += [(index, o) for o in sorted(p - g)]

    @property
    def precision(self) -> float:
        return self.tp / self.predicted if self.predicted else 1.0

    @property
    def recall(self) -> float:
        return self.tp / self.gold if self.gold else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def load_fixture(path: Path) -> list[Paragraph]:
    paragraphs = []
    with open(path, encoding="utf-8", newline="\n") as f:
        for lineno, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip():
                continue
            sentences = json.loads(line)
            if (not isinstance(sentences, list) or not sentences
                    or not all(isinstance(s, str) and s for s in sentences)):
                raise SystemExit(f"{path}:{lineno}: expected a non-empty JSON list of strings")
            for s in sentences:
                if s != s.strip() or any(c in s for c in "\n\r\t"):
                    raise SystemExit(f"{path}:{lineno}: bad whitespace in sentence {s!r}")
            gold, offset = [], 0
            for i, s in enumerate(sentences):
                if i:
                    offset += 1  # the joining space
                    gold.append(offset)
                offset += len(s)
            paragraphs.append(Paragraph(" ".join(sentences), gold))
    return paragraphs


def offsets_of(text: str, sentences: list[str]) -> list[int]:
    """Start offsets of `sentences` in `text`, searching forward from the previous end."""
    starts, pos = [], 0
    for s in sentences:
        if not s:
            raise ContractError("empty sentence in output")
        i = text.find(s, pos)
        if i < 0:
            raise ContractError(f"sentence {s!r} not found (in order) in the input line")
        starts.append(i)
        pos = i + len(s)
    return starts


def naive_boundaries(text: str) -> list[int]:
    return [m.end() for m in NAIVE_RE.finditer(text) if m.end() < len(text)]


def run_command(binary: str, lang: str, paragraphs: list[Paragraph],
                timeout: float) -> list[list[str]]:
    cmd = [binary, "sentences", "--lang", lang, "--json"]
    stdin = "".join(p.text + "\n" for p in paragraphs)
    try:
        proc = subprocess.run(cmd, input=stdin.encode("utf-8"), capture_output=True,
                              timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ContractError(f"could not run {' '.join(cmd)}: {e}") from e
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip()
        raise ContractError(f"{' '.join(cmd)} exited with status {proc.returncode}"
                            + (f":\n{err}" if err else ""))
    try:
        out = proc.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ContractError(f"output is not UTF-8: {e}") from e
    lines = out.split("\n")  # not splitlines(): U+2028 etc. may occur inside JSON strings
    if lines and lines[-1] == "":
        lines.pop()
    lines = [line.rstrip("\r") for line in lines]
    if len(lines) != len(paragraphs):
        raise ContractError(f"expected {len(paragraphs)} output lines, got {len(lines)}")
    result = []
    for n, line in enumerate(lines, 1):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise ContractError(f"output line {n} is not JSON: {e}: {line[:80]!r}") from e
        if not isinstance(value, list) or not all(isinstance(s, str) for s in value):
            raise ContractError(f"output line {n} is not a JSON array of strings: {line[:80]!r}")
        result.append(value)
    return result


def context(text: str, offset: int) -> str:
    left = text[max(0, offset - CONTEXT):offset]
    right = text[offset:offset + CONTEXT]
    return f"{'…' if offset > CONTEXT else ''}{left}⟦|⟧{right}{'…' if offset + CONTEXT < len(text) else ''}"


def print_errors(name: str, paragraphs: list[Paragraph], score: Score, n: int) -> None:
    for kind, errors in (("missed", score.missed), ("spurious", score.spurious)):
        print(f"\n**{name}: {kind} boundaries** ({len(errors)} in all"
              + (f", first {n}" if len(errors) > n else "") + ")\n")
        if not errors:
            print("- none")
        for index, offset in errors[:n]:
            print(f"- paragraph {index + 1}: `{context(paragraphs[index].text, offset)}`")


def fmt(x: float) -> str:
    return f"{x:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(
        description="Boundary precision/recall of `BIN sentences` on the sentence fixtures.")
    ap.add_argument("bin", metavar="BIN", help="the transformer binary")
    ap.add_argument("--lang", default="de", help="language code (default: de); selects "
                    "tests/fixtures/sentences/<lang>-*.jsonl and is passed to the command")
    ap.add_argument("--fixtures", nargs="+", type=Path,
                    help="fixture files to use instead of the <lang>-*.jsonl files")
    ap.add_argument("--show-errors", type=int, default=0, metavar="N",
                    help="print up to N missed and N spurious boundaries of the command per file")
    ap.add_argument("--min-f1", type=float, metavar="X",
                    help="exit 1 when the command's F1 on any file is below X")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per command run")
    args = ap.parse_args()

    files = args.fixtures or sorted(FIXTURE_DIR.glob(f"{args.lang}-*.jsonl"))
    if not files:
        print(f"no fixtures found for --lang {args.lang} in {FIXTURE_DIR}", file=sys.stderr)
        return 2

    rows = []
    failures: list[str] = []
    below: list[str] = []
    details = []
    for path in files:
        paragraphs = load_fixture(path)
        name = path.name
        naive = Score()
        for i, p in enumerate(paragraphs):
            naive.add(i, p.gold, naive_boundaries(p.text))
        try:
            predicted = run_command(args.bin, args.lang, paragraphs, args.timeout)
            score = Score()
            for i, (p, sentences) in enumerate(zip(paragraphs, predicted)):
                try:
                    starts = offsets_of(p.text, sentences)
                except ContractError as e:
                    raise ContractError(f"paragraph {i + 1}: {e}") from e
                score.add(i, p.gold, starts[1:])
        except ContractError as e:
            failures.append(f"{name}: {e}")
            score = None
        gold_total = sum(len(p.gold) for p in paragraphs)
        if score is None:
            rows.append((name, "sentences command", len(paragraphs), gold_total,
                         "error", "error", "error"))
        else:
            rows.append((name, "sentences command", len(paragraphs), gold_total,
                         fmt(score.precision), fmt(score.recall), fmt(score.f1)))
            details.append((name, paragraphs, score))
            if args.min_f1 is not None and score.f1 < args.min_f1:
                below.append(f"{name}: F1 {score.f1:.3f} < {args.min_f1}")
        rows.append((name, "naive regex", len(paragraphs), gold_total,
                     fmt(naive.precision), fmt(naive.recall), fmt(naive.f1)))

    header = ("fixture", "splitter", "paragraphs", "gold boundaries", "precision", "recall", "F1")
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(["---", "---"] + ["---:"] * 5) + "|")
    for row in rows:
        print("| " + " | ".join(str(c) for c in row) + " |")

    if args.show_errors > 0:
        for name, paragraphs, score in details:
            print_errors(name, paragraphs, score, args.show_errors)

    for msg in failures:
        print(f"error: {msg}", file=sys.stderr)
    for msg in below:
        print(f"below --min-f1: {msg}", file=sys.stderr)
    if failures:
        return 2
    if below:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
