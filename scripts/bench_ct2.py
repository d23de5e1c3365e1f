"""The CTranslate2 side of the speed benchmark's decoding workloads (scripts/bench.sh runs it
next to `transformer bench` and scripts/bench_torch.py): the benchmark's base model (N=6,
d_model 512, d_ff 2048, h 8, vocabulary 8000, random weights) built through
scripts/export_ct2.py's converter, float32, decoding 20-token random sources for exactly 30
steps (`min_decoding_length` = `max_decoding_length`), as the other two sides do:

    python scripts/bench_ct2.py greedy1 --steps 5 --threads 2   # 5 sentences, one at a time
    python scripts/bench_ct2.py greedy32 --threads 2             # 32 sentences in one batch
    python scripts/bench_ct2.py beam5 --threads 2                # beam 5 over the same 32

Prints one JSON measurement, as the other sides do. Run it in its own process: in a process
where PyTorch has started its thread pool, CTranslate2 was measured 2-3x slower.
"""

import argparse
import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import ctranslate2

sys.path.insert(0, os.path.dirname(__file__))
import export_ct2  # noqa: E402

SRC_LEN, STEPS, VOCAB = 20, 30, 8000
LAYERS, D_MODEL, D_FF, HEADS, MAX_LEN = 6, 512, 2048, 8, 5000


def sinusoids(length, d):
    position = np.arange(length, dtype=np.float32)[:, None]
    div = np.exp(np.arange(0, d, 2, dtype=np.float32) * -(math.log(10000.0) / d))
    table = np.zeros((length, d), dtype=np.float32)
    table[:, 0::2], table[:, 1::2] = np.sin(position * div), np.cos(position * div)
    return table


def random_tensors(rng):
    """The base model's tensors under the reference's names, Xavier-uniform like make_model."""
    tensors = {}

    def linear(name, out_features, in_features):
        bound = math.sqrt(6.0 / (in_features + out_features))
        tensors[f"{name}.weight"] = rng.uniform(-bound, bound, (out_features, in_features)).astype(np.float32)
        tensors[f"{name}.bias"] = np.zeros(out_features, dtype=np.float32)

    def norm(name):
        tensors[f"{name}.a_2"] = np.ones(D_MODEL, dtype=np.float32)
        tensors[f"{name}.b_2"] = np.zeros(D_MODEL, dtype=np.float32)

    for side in ("src_embed", "tgt_embed"):
        bound = math.sqrt(6.0 / (VOCAB + D_MODEL))
        tensors[f"{side}.0.lut.weight"] = rng.uniform(-bound, bound, (VOCAB, D_MODEL)).astype(np.float32)
        tensors[f"{side}.1.pe"] = sinusoids(MAX_LEN, D_MODEL)[None]
    for stack, attentions, norms in (("encoder", ["self_attn"], 2), ("decoder", ["self_attn", "src_attn"], 3)):
        for i in range(LAYERS):
            p = f"{stack}.layers.{i}"
            for attention in attentions:
                for j in range(4):
                    linear(f"{p}.{attention}.linears.{j}", D_MODEL, D_MODEL)
            linear(f"{p}.feed_forward.w_1", D_FF, D_MODEL)
            linear(f"{p}.feed_forward.w_2", D_MODEL, D_FF)
            for j in range(norms):
                norm(f"{p}.sublayer.{j}.norm")
        norm(f"{stack}.norm")
    linear("generator.proj", VOCAB, D_MODEL)
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", choices=["greedy1", "greedy32", "beam5"])
    parser.add_argument("--steps", type=int, default=5, help="sentences for greedy1")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--compute-type", default="float32", choices=["float32", "int8"],
                        help="int8: the float model quantized as it loads, as ours is")
    args, _ = parser.parse_known_args()
    rng = np.random.default_rng(0)
    tokens = ["<pad>", "<s>", "</s>", "<unk>"] + [f"t{i}" for i in range(4, VOCAB)]
    model = {"layers": LAYERS, "heads": HEADS, "d_model": D_MODEL}
    sentences = args.steps if args.workload == "greedy1" else 32
    sources = [["<s>"] + [f"t{i}" for i in rng.integers(4, VOCAB, SRC_LEN - 2)] + ["</s>"]
               for _ in range(sentences)]
    with tempfile.TemporaryDirectory() as model_dir:
        export_ct2.export(random_tensors(rng), model, tokens, tokens, model_dir)
        translator = ctranslate2.Translator(model_dir, device="cpu", compute_type=args.compute_type,
                                            inter_threads=1, intra_threads=args.threads)
        options = dict(beam_size=5 if args.workload == "beam5" else 1,
                       min_decoding_length=STEPS, max_decoding_length=STEPS)
        translator.translate_batch(sources[:1], **options)  # warm-up
        started = time.perf_counter()
        if args.workload == "greedy1":
            for source in sources:
                translator.translate_batch([source], **options)
        else:
            translator.translate_batch(sources, max_batch_size=32, **options)
        seconds = time.perf_counter() - started
    name = {"greedy1": "greedy-1", "greedy32": "greedy-32", "beam5": "beam5-32"}[args.workload]
    record = dict(workload=name, seconds=seconds, work=float(sentences), unit="sentences", flops=0.0)
    if args.compute_type != "float32":
        record["precision"] = args.compute_type
    print(json.dumps(record))


if __name__ == "__main__":
    main()
