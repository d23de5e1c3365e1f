"""The peers' side of the speed benchmark's MarianMT workloads (scripts/bench.sh runs it next
to `transformer bench marian-*`): the benchmark's OPUS-MT-shaped directory
(scripts/make_marian_fixture.py --bench) translating the first sentences of Multi30k's
test2016, at most 64 tokens each, in CTranslate2 float32 (converted by its own
ct2-transformers-converter) or in transformers' generate():

    python scripts/bench_marian.py ct2 greedy1 --model DIR --ct2-model CT2DIR --steps 8
    python scripts/bench_marian.py hf beam4 --model DIR --threads 2
    python scripts/bench_marian.py ct2 greedy32 --model DIR --ct2-model CT2DIR --vmap CT2DIR/vmap.txt

Prints one JSON measurement (tokens generated per timed second), as `transformer bench` does.
Each engine runs in its own process (a PyTorch thread pool slows CTranslate2 down).
"""

import argparse
import gzip
import json
import os
import time

MAX_TOKENS = 64
NAMES = {"greedy1": "marian-greedy-1", "greedy32": "marian-greedy-32", "beam4": "marian-beam4-32"}


def sources(count):
    with gzip.open("data/multi30k/test2016.de.gz", "rt", encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(count)]


def measure(workload, seconds, tokens):
    print(json.dumps({"workload": NAMES[workload], "seconds": seconds, "work": float(tokens),
                      "unit": "tokens", "flops": 0.0}))


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
    measure(args.workload, time.perf_counter() - started, tokens)


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
    parser.add_argument("engine", choices=["ct2", "hf"])
    parser.add_argument("workload", choices=sorted(NAMES))
    parser.add_argument("--model", required=True)
    parser.add_argument("--ct2-model")
    parser.add_argument("--steps", type=int, default=8, help="sentences for greedy1")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--compute-type", default="float32", choices=["float32", "int8"],
                        help="CTranslate2's compute type (ct2 only)")
    parser.add_argument("--vmap", help="decode over this vocabulary map (ct2 only; it must be "
                                       "the vmap.txt in --ct2-model)")
    args = parser.parse_args()
    texts = sources(args.steps if args.workload == "greedy1" else 32)
    {"ct2": ct2, "hf": hf}[args.engine](args, texts)


if __name__ == "__main__":
    main()
