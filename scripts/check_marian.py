"""Checks this tool's MarianMT support against transformers and CTranslate2 themselves.

    python scripts/check_marian.py tokenizer --bin BIN DIR SOURCES TARGETS
        MarianTokenizer's ids of every line of SOURCES (as sources) and TARGETS (as targets,
        text_target) must be `transformer tokenize`'s.

    python scripts/check_marian.py export --bin BIN --run RUN --exported DIR SOURCES
        DIR (written by `transformer export --to hf RUN`) must load strictly into
        MarianMTModel and MarianTokenizer; on every line of SOURCES, transformers' log-probability
        of each token of our greedy translation (teacher-forced) must be ours within 1e-4, and
        generate()'s greedy and beam outputs (the directory's generation settings) our ids.

    python scripts/check_marian.py ct2 --bin BIN --run RUN --exported DIR SOURCES
        CTranslate2's own converter (ct2-transformers-converter) converts DIR, and CTranslate2's
        greedy translations of SOURCES must be ours token for token.

Prints one closing line `<check>: N passed, M failed` and exits non-zero on any failure.
"""

import argparse
import json
import subprocess
import sys
import tempfile

import torch
from transformers import MarianMTModel, MarianTokenizer


def lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def run(binary, *args, stdin=""):
    out = subprocess.run([binary, *args], input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.splitlines()


def translated(binary, checkpoint, sentences, *flags):
    out = run(binary, "translate", "--device", "cpu", "--json", "--checkpoint", checkpoint, *flags,
              "-", stdin="\n".join(sentences) + "\n")
    return [json.loads(line) for line in out]


def report(name, passed, failed):
    print(f"{name}: {passed} passed, {failed} failed")
    if failed:
        sys.exit(1)


def check_tokenizer(args):
    tokenizer = MarianTokenizer.from_pretrained(args.dir)
    passed = failed = 0
    for path, target in [(args.sources, False), (args.targets, True)]:
        texts = lines(path)
        flags = ["--target"] if target else []
        ours = run(args.bin, "tokenize", "--checkpoint", args.dir, *flags, "-",
                   stdin="\n".join(texts) + "\n")
        for text, mine in zip(texts, ours, strict=True):
            theirs = (tokenizer(text_target=text) if target else tokenizer(text)).input_ids
            if [int(i) for i in mine.split()] == theirs:
                passed += 1
            else:
                failed += 1
                if failed <= 5:
                    print(f"{'target' if target else 'source'} {text!r}: ours {mine}, "
                          f"MarianTokenizer {theirs}")
    report(f"tokenizer {args.dir}", passed, failed)


def readable(tokenizer, sources, positions):
    """The sources the model reads whole: transformers fails on a longer one, which this tool
    cuts (and warns about)."""
    return [s for s in sources if len(tokenizer(s).input_ids) <= positions]


def check_export(args):
    model, info = MarianMTModel.from_pretrained(args.exported, output_loading_info=True)
    problems = {k: v for k, v in info.items() if v}
    if problems:
        sys.exit(f"{args.exported} does not load strictly: {problems}")
    model.eval()
    tokenizer = MarianTokenizer.from_pretrained(args.exported)
    max_length = model.generation_config.max_length
    sources = readable(tokenizer, lines(args.sources), model.config.max_position_embeddings)
    greedy = translated(args.bin, args.run, sources, "--beam", "1")
    beam = translated(args.bin, args.run, sources)
    start = model.config.decoder_start_token_id
    passed = failed = 0
    largest = 0.0
    for source, mine, mine_beam in zip(sources, greedy, beam):
        batch = tokenizer([source], return_tensors="pt")
        ids = mine["ids"]
        with torch.no_grad():
            logits = model(**batch, decoder_input_ids=torch.tensor([[start] + ids[:-1]])).logits
            log_probs = torch.log_softmax(logits[0], dim=-1)
            theirs = [log_probs[i, t].item() for i, t in enumerate(ids)]
            generated = model.generate(**batch, num_beams=1)[0].tolist()[1:]
            generated_beam = model.generate(**batch)[0].tolist()[1:]
        # A translation cut by the length limit ends with a forced </s>, which both score 0
        # (transformers' processed score): compare the model's own choices.
        compared = len(ids) - 1 if len(ids) == max_length - 1 else len(ids)
        difference = max((abs(a - b) for a, b in zip(theirs[:compared], mine["log_probs"])),
                         default=0.0)
        largest = max(largest, difference)
        strip = lambda row: row[:len(row) - next(  # noqa: E731
            (i for i, t in enumerate(reversed(row)) if t != model.config.pad_token_id), len(row))]
        ok = difference < 1e-4 and strip(generated) == ids and strip(generated_beam) == mine_beam["ids"]
        passed += ok
        failed += not ok
        if not ok and failed <= 5:
            print(f"{source!r}: log-prob difference {difference:.2e}; greedy ours {ids} theirs "
                  f"{strip(generated)}; beam ours {mine_beam['ids']} theirs {strip(generated_beam)}")
    print(f"largest log-probability difference: {largest:.2e}")
    report(f"export {args.exported}", passed, failed)


def check_ct2(args):
    import ctranslate2
    tokenizer = MarianTokenizer.from_pretrained(args.exported)
    model = MarianMTModel.from_pretrained(args.exported)
    positions = model.config.max_position_embeddings
    sources = readable(tokenizer, lines(args.sources), positions)
    greedy = translated(args.bin, args.run, sources, "--beam", "1")
    with tempfile.TemporaryDirectory() as converted:
        subprocess.run(["ct2-transformers-converter", "--model", args.exported, "--output_dir",
                        converted, "--force"], check=True, capture_output=True)
        translator = ctranslate2.Translator(converted, device="cpu", intra_threads=2)
        tokens = [tokenizer.convert_ids_to_tokens(tokenizer(s).input_ids) for s in sources]
        # transformers' generation limit (max_length counts the start symbol), as ours.
        limit = model.generation_config.max_length - 1
        results = translator.translate_batch(tokens, beam_size=1, max_decoding_length=limit)
    passed = failed = 0
    for source, mine, result in zip(sources, greedy, results):
        theirs = tokenizer.convert_tokens_to_ids(result.hypotheses[0])
        want = [i for i in mine["ids"] if i != tokenizer.eos_token_id]
        if len(mine["ids"]) == limit:
            # Cut by the length limit: transformers (and we) end it with a forced </s>, which
            # CTranslate2 does not do; the tokens before it must agree.
            theirs = theirs[:limit - 1]
        ok = theirs == want
        passed += ok
        failed += not ok
        if not ok and failed <= 5:
            print(f"{source!r}: ours {want}, CTranslate2 {theirs}")
    report(f"ct2 {args.exported}", passed, failed)


def main():
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="check", required=True)
    tok = sub.add_parser("tokenizer")
    tok.add_argument("--bin", required=True)
    tok.add_argument("dir")
    tok.add_argument("sources")
    tok.add_argument("targets")
    for name in ["export", "ct2"]:
        p = sub.add_parser(name)
        p.add_argument("--bin", required=True)
        p.add_argument("--run", required=True)
        p.add_argument("--exported", required=True)
        p.add_argument("sources")
    args = parser.parse_args()
    {"tokenizer": check_tokenizer, "export": check_export, "ct2": check_ct2}[args.check](args)


if __name__ == "__main__":
    main()
