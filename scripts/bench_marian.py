"""The Python side of the speed benchmark's MarianMT workloads (scripts/bench.sh and
scripts/bench-python.sh run it next to `transformer bench marian-*`): the benchmark's
OPUS-MT-shaped directory (scripts/make_marian_fixture.py --bench) translating the first
sentences of Multi30k's test2016, at most 64 tokens each, in CTranslate2 float32 (converted
by its own ct2-transformers-converter), in transformers' generate(), or in this project's
Python package (`import transformer`, python/):

    python scripts/bench_marian.py ct2 greedy1 --model DIR --ct2-model CT2DIR --steps 8
    python scripts/bench_marian.py hf beam4 --model DIR --threads 2
    python scripts/bench_marian.py ct2 greedy32 --model DIR --ct2-model CT2DIR --vmap CT2DIR/vmap.txt
    python scripts/bench_marian.py py greedy32 --model DIR --threads 2
    python scripts/bench_marian.py py call --model DIR --steps 2000   # an empty call's cost

Prints one JSON measurement (tokens generated per timed second), as `transformer bench` does.
Each engine runs in its own process (a PyTorch thread pool slows CTranslate2 down).
"""

import argparse
import gzip
import json
import os
import time

MAX_TOKENS = 64
NAMES = {"greedy1": "marian-greedy-1", "greedy32": "marian-greedy-32", "beam4": "marian-beam4-32",
         "call": "python-empty-call"}


def sources(count):
    with gzip.open("data/multi30k/test2016.de.gz", "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(count)]


def measure(workload, seconds, tokens, unit="tokens", sentences=None):
    print(json.dumps({"workload": NAMES[workload], "seconds": seconds, "work": float(tokens),
                      "unit": unit, "flops": 0.0, "sentences": sentences}))


def ct2(args, texts):
    import ctranslate2
    from transformers import MarianTokenizer
    tokenizer = MarianTokenizer.from_pretrained(args.model)
    translator = ctranslate2.Translator(args.ct2_model, device="cpu",
                                        compute_type=args.compute_type,
                                        intra_threads=args.threads)
    # With --vmap, the map is read from vmap.txt beside model.bin (CTranslate2's only place).
    use_vmap = args.vmap is not None
    if use_vmap and not os.path.samefile(args.vmap, os.path.join(args.ct2_model, "vmap.txt")):
        raise SystemExit(f"--vmap {args.vmap} must be {args.ct2_model}/vmap.txt for CTranslate2")
    batches = [[t] for t in texts] if args.workload == "greedy1" else [texts]
    beam = 4 if args.workload == "beam4" else 1

    def run(batch):
        tokens = [tokenizer.convert_ids_to_tokens(tokenizer(t).input_ids) for t in batch]
        results = translator.translate_batch(tokens, beam_size=beam,
                                             max_decoding_length=MAX_TOKENS, use_vmap=use_vmap)
        outputs = [tokenizer.convert_tokens_to_ids(r.hypotheses[0]) for r in results]
        [tokenizer.decode(o, skip_special_tokens=True) for o in outputs]
        # CTranslate2 leaves </s> out of its hypotheses: count it as the others do.
        return sum(min(len(o) + 1, MAX_TOKENS) for o in outputs)

    run(texts[:1])
    started = time.perf_counter()
    tokens = sum(run(batch) for batch in batches)
    measure(args.workload, time.perf_counter() - started, tokens, sentences=len(texts))


def py(args, texts):
    # The package decodes on rayon's pool, which takes its size from here when it starts.
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    import transformer
    translator = transformer.Translator(args.model, device="cpu",
                                        compute_type=args.compute_type,
                                        vocab_map=args.vmap)
    if args.workload == "call":
        # What crossing the boundary costs with no sentence: arguments read, settings
        # settled, the GIL released and taken back, an empty list built.
        translator.translate([])
        started = time.perf_counter()
        for _ in range(args.steps):
            translator.translate([])
        measure(args.workload, time.perf_counter() - started, args.steps, unit="calls")
        return
    batches = [[t] for t in texts] if args.workload == "greedy1" else [texts]
    beam = 4 if args.workload == "beam4" else 1

    def run(batch):
        # As `transformer bench marian-*` decodes: each text one sentence, a neutral length
        # penalty, at most 64 tokens.
        results = translator.translate(batch, beam=beam, max_len=MAX_TOKENS, length_penalty=1.0,
                                       sentence_split=False)
        [r.translation for r in results]
        return sum(len(r.ids) for r in results)

    run(texts[:1])
    started = time.perf_counter()
    tokens = sum(run(batch) for batch in batches)
    measure(args.workload, time.perf_counter() - started, tokens, sentences=len(texts))


def hf(args, texts):
    import torch
    from transformers import MarianMTModel, MarianTokenizer
    torch.set_num_threads(args.threads)
    tokenizer = MarianTokenizer.from_pretrained(args.model)
    model = MarianMTModel.from_pretrained(args.model).eval()
    pad = model.config.pad_token_id
    batches = [[t] for t in texts] if args.workload == "greedy1" else [texts]
    beam = 4 if args.workload == "beam4" else 1

    def run(batch):
        inputs = tokenizer(batch, return_tensors="pt", padding=True)
        with torch.inference_mode():
            out = model.generate(**inputs, num_beams=beam, max_length=MAX_TOKENS + 1)
        [tokenizer.decode(o, skip_special_tokens=True) for o in out]
        return int(((out[:, 1:] != pad)).sum())

    run(texts[:1])
    started = time.perf_counter()
    tokens = sum(run(batch) for batch in batches)
    measure(args.workload, time.perf_counter() - started, tokens)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("engine", choices=["ct2", "hf", "py"])
    parser.add_argument("workload", choices=sorted(NAMES))
    parser.add_argument("--model", required=True)
    parser.add_argument("--ct2-model")
    parser.add_argument("--steps", type=int, default=8, help="sentences for greedy1")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--compute-type", default="float32", choices=["float32", "int8"],
                        help="the compute type (ct2 and py)")
    parser.add_argument("--vmap", help="decode over this vocabulary map (ct2: it must be the "
                                       "vmap.txt in --ct2-model; py)")
    args = parser.parse_args()
    if args.workload == "call" and args.engine != "py":
        raise SystemExit("the call workload measures the Python package (py) only")
    texts = sources(args.steps if args.workload == "greedy1" else 32)
    {"ct2": ct2, "hf": hf, "py": py}[args.engine](args, texts)


if __name__ == "__main__":
    main()
