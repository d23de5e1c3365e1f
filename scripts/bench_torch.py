"""The PyTorch side of the speed benchmark: the same workloads as `transformer bench`, run the
way The Annotated Transformer runs them (its LabelSmoothing with KLDivLoss, Adam with the Noam
LambdaLR, its greedy_decode that re-decodes the whole prefix at every step).

Prints one JSON line: {"workload", "seconds", "work", "unit", "flops"}; FLOPs are counted by
the same formula as src/bench.rs so that both sides report the same work.

    python scripts/bench_torch.py WORKLOAD [--steps N] [--batches FILE] [--threads T]
                                           [--device cpu|cuda]

On CUDA every tensor is made on the GPU (torch.set_default_device) and the clock is read after
torch.cuda.synchronize().
"""

import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402
from reference import (  # noqa: E402
    BOS, PAD, LabelSmoothing, make_model, rate, subsequent_mask, target_mask,
)

WARMUP_STEPS = 2
DECODE_SRC_LEN, DECODE_STEPS, DECODE_VOCAB = 20, 30, 8000


# torch.autocast's device and whether it is on (--dtype bf16), set once by main().
AUTOCAST_DEVICE, AUTOCAST_ON = "cpu", False


def autocast():
    """bf16 autocast when --dtype bf16 asks for it; otherwise a scope that changes nothing."""
    return torch.autocast(AUTOCAST_DEVICE, dtype=torch.bfloat16, enabled=AUTOCAST_ON)


def synchronize():
    if torch.get_default_device().type == "cuda":
        torch.cuda.synchronize()


def forward_flops(n, d, ff, batch, src, tgt, vocab):
    """src/bench.rs forward_flops: matrix-product FLOPs of one forward pass."""
    b, s, t = float(batch), float(src), float(tgt)

    def linear(rows, inner, out):
        return 2.0 * rows * inner * out

    def attend(q, k):
        return 2.0 * 2.0 * b * q * k * d

    encoder = 4 * linear(b * s, d, d) + attend(s, s) + 2 * linear(b * s, d, ff)
    decoder = (4 * linear(b * t, d, d) + attend(t, t) + 2 * linear(b * t, d, d)
               + 2 * linear(b * s, d, d) + attend(t, s) + 2 * linear(b * t, d, ff))
    return n * (encoder + decoder) + linear(b * t, d, vocab)


# --fast: what people who train on a GPU run, set once by main(): SDPA attention in place of
# the reference's and AdamW's fused kernel (weight decay 0: Adam's update).
FAST = False


def sdpa_attention(query, key, value, mask=None, dropout=None):
    """The reference's attention through torch's fused scaled_dot_product_attention."""
    p = dropout.p if dropout is not None and dropout.training else 0.0
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=None if mask is None else mask != 0, dropout_p=p)
    return out, None


def train(name, model, vocab, smoothing, factor, warmup, dims, batches, steps, unit):
    """Times `steps` steps of the reference's training loop on `batches(i)`."""
    n, d, ff = dims
    criterion = LabelSmoothing(vocab, PAD, smoothing)
    if FAST:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9,
                                      weight_decay=0.0, fused=True)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lr_lambda=lambda step: rate(step, d, factor, warmup))
    model.train()

    def step(src, tgt_in, tgt_out):
        src_mask = (src != PAD).unsqueeze(-2)
        tgt_mask = target_mask(tgt_in, PAD)
        # --dtype bf16: PyTorch's mixed precision as its documentation recommends it, the
        # forward pass and the loss under autocast, the backward pass outside it.
        with autocast():
            out = model.forward(src, tgt_in, src_mask, tgt_mask)
            x = model.generator(out)
            ntokens = (tgt_out != PAD).sum()
            loss = criterion(x.contiguous().view(-1, x.size(-1)),
                             tgt_out.contiguous().view(-1)) / ntokens
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return int(ntokens)

    for i in range(WARMUP_STEPS):
        step(*batches(i))
    seconds, tokens, flops = 0.0, 0, 0.0
    for i in range(steps):
        src, tgt_in, tgt_out = batches(WARMUP_STEPS + i)
        synchronize()
        started = time.perf_counter()
        tokens += step(src, tgt_in, tgt_out)
        synchronize()
        seconds += time.perf_counter() - started
        flops += 3 * forward_flops(n, d, ff, src.size(0), src.size(1), tgt_in.size(1), vocab)
    work = float(steps) if unit == "steps" else float(tokens)
    return dict(workload=name, seconds=seconds, work=work, unit=unit, flops=flops)


def toy_training(steps):
    pairs = [line.rstrip("\n").split("\t") for line in open("data/toy.tsv", encoding="utf-8")
             if line.strip()]
    src_words = sorted({w for s, _ in pairs for w in s.split()})
    tgt_words = sorted({w for _, t in pairs for w in t.split()})
    src_ids = {w: 4 + i for i, w in enumerate(src_words)}
    tgt_ids = {w: 4 + i for i, w in enumerate(tgt_words)}

    def padded(rows):
        width = max(len(r) for r in rows)
        return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])

    src = padded([[BOS] + [src_ids[w] for w in s.split()] + [2] for s, _ in pairs])
    tgt = padded([[BOS] + [tgt_ids[w] for w in t.split()] + [2] for _, t in pairs])
    v_src, v_tgt = 4 + len(src_words), 4 + len(tgt_words)
    model = make_model(v_src, v_tgt)
    return train("toy-train", model, v_tgt, 0.1, 0.25, 20, (6, 512, 2048),
                 lambda i: (src, tgt[:, :-1], tgt[:, 1:]), steps, "steps")


def copy_task(steps):
    vocab = 11
    generator = torch.Generator().manual_seed(0)

    def batch(_):
        # The reference's data_gen: random symbols 1..10, column 0 is 1.
        data = torch.randint(1, vocab, size=(80, 10), generator=generator, device="cpu")
        data = data.to(torch.get_default_device())
        data[:, 0] = 1
        return data, data[:, :-1], data[:, 1:]

    model = make_model(vocab, vocab, N=2)
    return train("copy", model, vocab, 0.0, 1.0, 400, (2, 512, 2048), batch, steps, "tokens")


def multi30k_training(path, steps):
    from safetensors import safe_open

    with safe_open(path, framework="pt") as f:
        vocab = int(f.metadata()["vocab"])
        device = torch.get_default_device()
        batches = [tuple(f.get_tensor(f"b{i}.{part}").to(device)
                         for part in ("src", "tgt_in", "tgt_out"))
                   for i in range(WARMUP_STEPS + steps)]
    model = make_model(vocab, vocab, N=3, d_model=256, d_ff=1024, h=4)
    return train("multi30k", model, vocab, 0.1, 1.0, 800, (3, 256, 1024),
                 lambda i: batches[i], steps, "tokens")


def reference_greedy(model, src, src_mask, steps):
    """The reference's greedy_decode loop (no end symbol: always `steps` steps)."""
    memory = model.encode(src, src_mask)
    ys = torch.zeros(1, 1).fill_(BOS).type_as(src.data)
    for _ in range(steps):
        out = model.decode(memory, src_mask, ys, subsequent_mask(ys.size(1)).type_as(src.data))
        prob = model.generator(out[:, -1])
        _, next_word = torch.max(prob, dim=1)
        next_word = next_word.data[0]
        ys = torch.cat([ys, torch.zeros(1, 1).type_as(src.data).fill_(next_word)], dim=1)
    return ys


def matmul_ceiling(reps):
    """src/bench.rs matmul_ceiling: x W^T + b, 800x512 by 512x2048, through nn.Linear."""
    rows, inner, out = 800, 512, 2048
    layer = torch.nn.Linear(inner, out)
    x = torch.randn(rows, inner)
    with torch.no_grad(), autocast():
        for _ in range(3):
            layer(x)
        synchronize()
        started = time.perf_counter()
        for _ in range(reps):
            layer(x)
        synchronize()
        seconds = time.perf_counter() - started
    return dict(workload="matmul", seconds=seconds, work=float(reps), unit="products",
                flops=reps * 2.0 * rows * inner * out)


def decoding(name, sentences):
    torch.manual_seed(0)
    model = make_model(DECODE_VOCAB, DECODE_VOCAB)
    model.eval()
    generator = torch.Generator().manual_seed(1)
    src = torch.randint(4, DECODE_VOCAB, (sentences, DECODE_SRC_LEN), generator=generator,
                        device="cpu").to(torch.get_default_device())
    mask = torch.ones(1, 1, DECODE_SRC_LEN, dtype=torch.bool)
    with torch.inference_mode():
        reference_greedy(model, src[:1], mask, DECODE_STEPS)
        synchronize()
        started = time.perf_counter()
        for row in range(sentences):
            reference_greedy(model, src[row:row + 1], mask, DECODE_STEPS)
        synchronize()
        seconds = time.perf_counter() - started
    return dict(workload=name, seconds=seconds, work=float(sentences), unit="sentences", flops=0.0)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workload", choices=["matmul", "toy-train", "copy", "multi30k", "greedy1",
                                             "greedy32", "beam5"])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--batches", default="target/bench-multi30k.safetensors")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"],
                        help="bf16: the training workloads and matmul under torch.autocast")
    parser.add_argument("--fast", action="store_true",
                        help="SDPA attention and fused AdamW (the training workloads)")
    parser.add_argument("--tf32", action="store_true",
                        help="let float32 products use TF32 (PyTorch's default is off)")
    args = parser.parse_args()
    global AUTOCAST_DEVICE, AUTOCAST_ON, FAST
    AUTOCAST_DEVICE, AUTOCAST_ON, FAST = args.device, args.dtype == "bf16", args.fast
    if FAST:
        reference.attention = sdpa_attention
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    torch.set_num_threads(args.threads)
    torch.set_default_device(args.device)
    torch.manual_seed(0)
    if args.workload == "matmul":
        result = matmul_ceiling(args.steps)
    elif args.workload == "toy-train":
        result = toy_training(args.steps)
    elif args.workload == "copy":
        result = copy_task(args.steps)
    elif args.workload == "multi30k":
        result = multi30k_training(args.batches, args.steps)
    elif args.workload == "greedy1":
        result = decoding("greedy-1", args.steps)
    else:
        # The reference has no batched or beam decoding: a tutorial user decodes the 32
        # sentences one by one with greedy_decode, and that is the baseline for both.
        result = decoding("greedy-32" if args.workload == "greedy32" else "beam5-32", 32)
    result["precision"] = ("autocast bf16" if AUTOCAST_ON else "f32") + (
        " + SDPA + fused AdamW" if FAST else "") + (" (TF32)" if args.tf32 else "")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
