"""Writes tests/fixtures/sacrebleu/: reference and hypothesis files and sacreBLEU's scores.

    python scripts/make_sacrebleu_fixture.py

The scores come from the sacreBLEU command line (`python -m sacrebleu REF -i HYP -m bleu chrf`),
the way people score systems, so the Rust metrics are checked against what users would see.
The cases cover the edge cases scoring code gets wrong: empty hypothesis lines, unicode
punctuation and spaces, numbers with separators, HTML entities, a hypothesis longer than the
reference, one with no 4-gram matches, and an all-empty system.
"""

import json
import os
import subprocess
import sys

import sacrebleu

OUT = "tests/fixtures/sacrebleu"

REFERENCES = [
    "Two young, White males are outside near many bushes.",
    "Several men in hard hats are operating a giant pulley system.",
    "A little girl climbing into a wooden playhouse.",
    "A man in a blue shirt is standing on a ladder cleaning windows.",
    "Two men are at the stove preparing food.",
    "A man in green holds a guitar while the other man observes his shirt.",
    "A man is smiling at a stuffed lion",
    "A trendy girl talking on her cellphone while gliding slowly down the street.",
    "A woman with a large purse is walking by a gate.",
    "Boys dancing on poles in the middle of the night.",
    "The 3 dogs – a poodle, a terrier & a pug – play in the snow.",
    "It costs $3.50, or 1,000 yen, for 2-3 hours at 10:30 a.m.",
    "„Look!“ she said… and pointed at the 1990s car.",
    "A man (wearing a hat) sits on a bench; his dog sleeps.",
    "Children play soccer on a field at dusk.",
    "A woman\u00a0in a red dress dances   with a man.",
    "The chef cooks rice, beans and corn in a big pot.",
    "Workers repair the road near the bridge.",
    "A boy jumps into the lake from a rock.",
    "Two women sit at a café table and drink coffee.",
    "An elderly man reads the newspaper on a park bench.",
    "Three cyclists race down a steep mountain road.",
    "A dog catches a frisbee in mid-air.",
    "People walk past a street musician playing the violin.",
    "A girl in a pink coat holds an umbrella in the rain.",
]

# Systems: name -> function(reference line index, reference) -> hypothesis line.
def good(i, ref):
    swaps = {"young": "small", "giant": "huge", "wooden": "wood", "stove": "oven", "café": "cafe"}
    words = [swaps.get(w, w) for w in ref.split(" ")]
    return " ".join(words) if i % 4 else " ".join(words[:-1])


def with_empty_lines(i, ref):
    return "" if i % 5 == 0 else good(i, ref)


def longer_than_reference(i, ref):
    return ref + " and then it was over , said the man &amp; his friend."


def no_four_gram_matches(i, ref):
    words = ref.split()
    return " x ".join(words[::2])


def all_empty(i, ref):
    return ""


def lowercase_detokenized(i, ref):
    return ref.lower().replace(",", " ,").replace(".", " .")


SYSTEMS = [good, with_empty_lines, longer_than_reference, no_four_gram_matches, all_empty,
           lowercase_detokenized]


def score_with_cli(ref_path, hyp_path, lowercase):
    result = subprocess.run(
        [sys.executable, "-m", "sacrebleu", ref_path, "-i", hyp_path, "-m", "bleu", "chrf",
         "--format", "json", "-w", "10"] + (["-lc"] if lowercase else []),
        capture_output=True, text=True, check=True)
    bleu, chrf = json.loads(result.stdout)
    return bleu, chrf


def main():
    os.makedirs(OUT, exist_ok=True)
    ref_path = os.path.join(OUT, "ref.en")
    with open(ref_path, "w", encoding="utf-8") as f:
        f.write("\n".join(REFERENCES) + "\n")
    expected = {"sacrebleu_version": sacrebleu.__version__, "reference": "ref.en", "systems": []}
    # Every system mixed-case (sacreBLEU's default), and one also lowercased (-lc).
    for system, lowercase in [(s, False) for s in SYSTEMS] + [(lowercase_detokenized, True)]:
        name = system.__name__
        hyp_path = os.path.join(OUT, f"{name}.hyp")
        with open(hyp_path, "w", encoding="utf-8") as f:
            f.write("\n".join(system(i, r) for i, r in enumerate(REFERENCES)) + "\n")
        bleu, chrf = score_with_cli(ref_path, hyp_path, lowercase)
        expected["systems"].append({
            "hypothesis": f"{name}.hyp",
            "lowercase": lowercase,
            "bleu": float(bleu["score"]),
            "bleu_signature": bleu["signature"],
            "bleu_verbose": bleu["verbose_score"],
            "chrf": float(chrf["score"]),
            "chrf_signature": chrf["signature"],
        })
        print(f"{name}: BLEU {bleu['score']} chrF {chrf['score']}")
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
