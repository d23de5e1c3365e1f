"""Turns scripts/bench.sh's results.jsonl into the Markdown table in docs/speed.md.

Throughput is work / seconds of the timed part; the ratio is ours / PyTorch's (above 1: we
are faster). Peak FLOP/s of the CPU = cores used x clock x FLOPs per cycle per core, where a
core with AVX-512 and two FMA units does 2 units x 16 f32 lanes x 2 (multiply + add) = 64,
and one with AVX2 + FMA 2 x 8 x 2 = 32. The clock is the nominal one /proc/cpuinfo reports.
"""

import argparse
import sys
import os
import json
import platform
import statistics
import subprocess
from collections import defaultdict

NAMES = {
    "matmul": "0. one matmul, 800x512x2048 (ceiling)",
    "toy-train": "1. toy base training",
    "copy": "2. copy task training",
    "multi30k": "3. Multi30k-size training",
    "greedy-1": "4. greedy, batch 1",
    "greedy-32": "5a. greedy, 32 sentences",
    "beam5-32": "5b. beam 5, 32 sentences",
}


# The levels of TRANSFORMER_MAX_ISA (kernels::isa), smallest first.
LEVELS = ["baseline", "avx2", "avx2-vnni", "avx512", "avx512-vnni", "avx512-bf16", "amx"]


def cpu_peak(threads, isa):
    info = open("/proc/cpuinfo").read()
    flags = next(l for l in info.splitlines() if l.startswith("flags")).split()
    mhz = float(next(l for l in info.splitlines() if l.startswith("cpu MHz")).split(":")[1])
    model = next(l for l in info.splitlines() if l.startswith("model name")).split(":")[1].strip()
    capped = lambda level: isa and LEVELS.index(isa) < LEVELS.index(level)
    per_cycle = (64 if "avx512f" in flags and not capped("avx512")
                 else 32 if "fma" in flags and not capped("avx2") else 8)
    vectors = [name for name in ("avx512f", "avx512_vnni", "avx512_bf16", "avx_vnni", "amx_bf16", "amx_int8", "avx2", "fma") if name in flags] or ["no AVX2"]
    return threads * mhz * 1e6 * per_cycle, model, mhz, per_cycle, vectors


def rate(records):
    """Median throughput: work per second of the timed part."""
    return statistics.median(r["work"] / r["seconds"] for r in records)


def rss_gb(records):
    """Median peak resident memory, in GB."""
    return statistics.median(r["rss_kib"] for r in records) / 1024 / 1024


def bf16_peak(engine, threads):
    """The bf16 engine's peak at the nominal clock, and FLOP per cycle and core: a tdpbf16ps
    (16x16x32 products) per 16 cycles; a 512-bit vdpbf16ps (16 lanes x 2 products) a cycle,
    two on Zen 5 (full-width pipes: AMD with VP2INTERSECT); emulation at f32's FMA peak."""
    info = open("/proc/cpuinfo").read()
    flags = next(l for l in info.splitlines() if l.startswith("flags")).split()
    mhz = float(next(l for l in info.splitlines() if l.startswith("cpu MHz")).split(":")[1])
    if "amx-bf16" in engine:
        per_cycle = 1024
    elif "avx512-bf16" in engine:
        zen5 = "AuthenticAMD" in info and "avx512_vp2intersect" in flags
        per_cycle = 128 if zen5 else 64
    else:
        per_cycle = 64 if "avx512f" in flags else 32 if "fma" in flags else 8
    return threads * mhz * 1e6 * per_cycle, per_cycle


def bf16_engine(runs, rows):
    """The engine our bf16 rows ran on, as their JSON says."""
    for workload, _ in rows:
        for record in runs[(workload, "candle-bf16")]:
            if record.get("precision"):
                return record["precision"]
    return "bf16"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("results")
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--isa", default="", help="the cap every row ran under (bench.sh ISA=)")
    parser.add_argument("--peer-isa", help="what the peers' own logs said they ran")
    args = parser.parse_args()
    runs = defaultdict(list)
    for line in open(args.results):
        record = json.loads(line)
        runs[(record["workload"], record["impl"])].append(record)
        # Our side says which instructions its kernels and gemm ran: none above the cap.
        for key in ("isa", "gemm_isa"):
            ran = record.get(key)
            if args.isa and ran and LEVELS.index(ran) > LEVELS.index(args.isa):
                sys.exit(f"bench_table: {record['impl']} {record['workload']} ran {key} {ran} "
                         f"above the cap {args.isa}")
    peak, model, mhz, per_cycle, vectors = cpu_peak(args.threads, args.isa)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    reps = max(len(v) for v in runs.values())
    print(f"Commit {commit}, {model} ({' + '.join(vectors)}), {args.threads} threads, "
          f"{platform.machine()}; median of "
          f"{reps} interleaved runs. Peak: {args.threads} cores x {mhz:.0f} MHz x "
          f"{per_cycle} FLOP/cycle = {peak / 1e9:.0f} GFLOP/s.\n")
    if args.isa:
        ours = sorted({f"kernels {r['isa']}, gemm {r['gemm_isa']}" for rs in runs.values()
                       for r in rs if r.get("isa")})
        print(f"**Capped at {args.isa}** on both sides. Ours ran: {'; '.join(ours)}.")
        if args.peer_isa and os.path.getsize(args.peer_isa):
            print("Peers, from their own logs: " + " ".join(open(args.peer_isa).read().splitlines()))
        print()
    print("| workload | unit | ours | PyTorch | ours / PyTorch | peak RSS ours | peak RSS PyTorch "
          "| GFLOP/s ours (of peak) | GFLOP/s PyTorch (of peak) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload, name in NAMES.items():
        ours, theirs = runs.get((workload, "candle")), runs.get((workload, "pytorch"))
        if not ours or not theirs:
            continue

        def flops(records):
            value = statistics.median(r["flops"] / r["seconds"] for r in records)
            return f"{value / 1e9:.1f} ({value / peak:.0%})" if value else "-"

        unit = ours[0]["unit"] + "/s"
        print(f"| {name} | {unit} | {rate(ours):.4g} | {rate(theirs):.4g} | "
              f"**{rate(ours) / rate(theirs):.2f}x** | {rss_gb(ours):.2f} GB | {rss_gb(theirs):.2f} GB | "
              f"{flops(ours)} | {flops(theirs)} |")

    bf16 = [(w, n) for w, n in NAMES.items() if runs.get((w, "candle-bf16"))]
    if bf16:
        print("\nbf16 mixed precision (ours: training.dtype = \"bf16\", "
              f"{bf16_engine(runs, bf16)}; PyTorch: torch.autocast(\"cpu\", torch.bfloat16)), "
              "against both PyTorch rows:\n")
        engine = bf16_engine(runs, bf16)
        bf16_max, bf16_per_cycle = bf16_peak(engine, args.threads)
        print(f"Engine peak: {bf16_per_cycle} FLOP/cycle/core at the nominal clock = "
              f"{bf16_max / 1e9:.0f} GFLOP/s (turbo clocks can pass it).\n")
        print("| workload | unit | ours bf16 | PyTorch bf16 | PyTorch f32 | ours bf16 / PyTorch bf16 "
              "| ours bf16 / PyTorch f32 | ours bf16 / ours f32 | peak RSS ours bf16 | "
              "peak RSS PyTorch bf16 | GFLOP/s ours bf16 (of peak) |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for workload, name in bf16:
            ours = runs[(workload, "candle-bf16")]
            theirs = runs.get((workload, "pytorch-bf16"))
            f32_theirs, f32_ours = runs.get((workload, "pytorch")), runs.get((workload, "candle"))
            ratio = lambda a, b: f"**{rate(a) / rate(b):.2f}x**" if a and b else "-"
            value = lambda r: f"{rate(r):.4g}" if r else "-"
            gflops = statistics.median(r["flops"] / r["seconds"] for r in ours) / 1e9
            print(f"| {name} | {ours[0]['unit']}/s | {value(ours)} | {value(theirs)} | "
                  f"{value(f32_theirs)} | {ratio(ours, theirs)} | {ratio(ours, f32_theirs)} | "
                  f"{ratio(ours, f32_ours)} | {rss_gb(ours):.2f} GB | "
                  f"{rss_gb(theirs) if theirs else 0:.2f} GB | {gflops:.1f} "
                  f"({gflops * 1e9 / bf16_max:.0%}) |")
        avx512 = [(w, n) for w, n in bf16 if runs.get((w, "candle-bf16-avx512"))]
        if avx512:
            print("\nThe same bf16 rows on AVX512-BF16 instead of AMX "
                  "(TRANSFORMER_BF16_ENGINE=avx512-bf16):\n")
            print("| workload | unit | AMX | AVX512-BF16 | AMX / AVX512-BF16 |")
            print("|---|---|---:|---:|---:|")
            for workload, name in avx512:
                amx, vec = runs[(workload, "candle-bf16")], runs[(workload, "candle-bf16-avx512")]
                print(f"| {name} | {amx[0]['unit']}/s | {rate(amx):.4g} | {rate(vec):.4g} | "
                      f"**{rate(amx) / rate(vec):.2f}x** |")

    baseline = [(w, n) for w, n in NAMES.items() if runs.get((w, "baseline"))]
    if baseline:
        print("\nThis build against the baseline build (BASELINE, another build of this tool), "
              "interleaved:\n")
        print("| workload | unit | this build | baseline | this / baseline | peak RSS this | "
              "peak RSS baseline |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for workload, name in baseline:
            ours, base = runs.get((workload, "candle")), runs[(workload, "baseline")]
            if not ours:
                continue
            print(f"| {name} | {ours[0]['unit']}/s | {rate(ours):.4g} | {rate(base):.4g} | "
                  f"**{rate(ours) / rate(base):.2f}x** | {rss_gb(ours):.2f} GB | {rss_gb(base):.2f} GB |")

    decoding = [(w, n) for w, n in NAMES.items() if runs.get((w, "ctranslate2"))]
    if decoding:
        print("\nDecoding against CTranslate2 (float32, the same model shape, sources and steps):\n")
        print("| workload | ours | CTranslate2 | ours / CTranslate2 | peak RSS ours | peak RSS CTranslate2 |")
        print("|---|---:|---:|---:|---:|---:|")
        for workload, name in decoding:
            ours, ct2 = runs.get((workload, "candle")), runs[(workload, "ctranslate2")]
            if not ours:
                continue
            print(f"| {name} | {rate(ours):.4g} sentences/s | {rate(ct2):.4g} sentences/s | "
                  f"**{rate(ours) / rate(ct2):.2f}x** | {rss_gb(ours):.2f} GB | {rss_gb(ct2):.2f} GB |")
        quantized = [(w, n) for w, n in decoding
                     if runs.get((w, "candle-int8")) and runs.get((w, "ctranslate2-int8"))]
        if quantized:
            print("\nThe same in int8 (both quantizing the float model as it loads) and in our "
                  "bfloat16 (where the CPU has bf16 products; CTranslate2 has none on the CPU):\n")
            print("| workload | ours int8 | CTranslate2 int8 | ours / CTranslate2 int8 | "
                  "ours bfloat16 | ours bfloat16 / ours float32 | peak RSS int8 ours / CTranslate2 |")
            print("|---|---:|---:|---:|---:|---:|---:|")
            for workload, name in quantized:
                ours, ct2 = runs[(workload, "candle-int8")], runs[(workload, "ctranslate2-int8")]
                bf16, f32 = runs.get((workload, "candle-bf16")), runs.get((workload, "candle"))
                bf16_cells = (f"{rate(bf16):.4g} sentences/s | **{rate(bf16) / rate(f32):.2f}x**"
                              if bf16 and f32 else "- | -")
                print(f"| {name} | {rate(ours):.4g} sentences/s | {rate(ct2):.4g} sentences/s | "
                      f"**{rate(ours) / rate(ct2):.2f}x** | {bf16_cells} | "
                      f"{rss_gb(ours):.2f} / {rss_gb(ct2):.2f} GB |")
    marian_table(runs)


MARIAN = {
    "marian-greedy-1": "greedy, batch 1",
    "marian-greedy-32": "greedy, 32 sentences",
    "marian-beam4-32": "beam 4, 32 sentences",
}


def marian_table(runs):
    rows = [(w, n) for w, n in MARIAN.items() if runs.get((w, "candle"))]
    if not rows:
        return
    print("\nMarianMT of OPUS-MT's shape (6 + 6 layers, d_model 512, 58,101 tokens), test2016 "
          "sources, at most 64 tokens each; CTranslate2 float32 converted by its own converter, "
          "transformers' generate():\n")
    print("| workload | ours | CTranslate2 | transformers | ours / CTranslate2 | "
          "ours / transformers | peak RSS ours | peak RSS CTranslate2 | peak RSS transformers |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for workload, name in rows:
        ours = runs[(workload, "candle")]
        ct2, hf = runs.get((workload, "ctranslate2")), runs.get((workload, "transformers"))
        cell = lambda r, f: f(r) if r else "-"  # noqa: E731
        print(f"| {name} | {rate(ours):.4g} tokens/s | {cell(ct2, lambda r: f'{rate(r):.4g}')} | "
              f"{cell(hf, lambda r: f'{rate(r):.4g}')} | "
              f"{cell(ct2, lambda r: f'**{rate(ours) / rate(r):.2f}x**')} | "
              f"{cell(hf, lambda r: f'{rate(ours) / rate(r):.2f}x')} | {rss_gb(ours):.2f} GB | "
              f"{cell(ct2, lambda r: f'{rss_gb(r):.2f} GB')} | {cell(hf, lambda r: f'{rss_gb(r):.2f} GB')} |")
    int8 = [(w, n) for w, n in rows if runs.get((w, "candle-int8"))]
    if not int8:
        return
    print("\nThe same in int8 (`--compute-type int8`; CTranslate2's `compute_type=\"int8\"`), each "
          "from its own int8 model on disk (`transformer quantize`; `ct2-transformers-converter "
          "--quantization int8`):\n")
    print("| workload | ours int8 | CTranslate2 int8 | ours / CTranslate2 | ours int8 / ours float32 "
          "| peak RSS ours | peak RSS CTranslate2 |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for workload, name in int8:
        ours, float_ours = runs[(workload, "candle-int8")], runs[(workload, "candle")]
        ct2 = runs.get((workload, "ctranslate2-int8"))
        cell = lambda r, f: f(r) if r else "-"  # noqa: E731
        print(f"| {name} | {rate(ours):.4g} tokens/s | {cell(ct2, lambda r: f'{rate(r):.4g}')} | "
              f"{cell(ct2, lambda r: f'**{rate(ours) / rate(r):.2f}x**')} | "
              f"{rate(ours) / rate(float_ours):.2f}x | {rss_gb(ours):.2f} GB | "
              f"{cell(ct2, lambda r: f'{rss_gb(r):.2f} GB')} |")
    vmap_table(runs, rows)
    bf16 = [(w, n) for w, n in rows if runs.get((w, "candle-bf16"))]
    if not bf16:
        return
    engine = (runs[(bf16[0][0], "candle-bf16")][0].get("precision") or "").removeprefix("bfloat16 on ") or "bf16"
    print(f"\nThe same in bfloat16 (`--compute-type bfloat16`: bf16 weights packed at load, "
          f"products on {engine}, f32 sums; CTranslate2 has no bfloat16 on the CPU, so its "
          f"float32 is the peer):\n")
    print("| workload | ours bfloat16 | CTranslate2 float32 | ours / CTranslate2 | "
          "ours bfloat16 / ours float32 | peak RSS ours |")
    print("|---|---:|---:|---:|---:|---:|")
    for workload, name in bf16:
        ours, float_ours = runs[(workload, "candle-bf16")], runs[(workload, "candle")]
        ct2 = runs.get((workload, "ctranslate2"))
        cell = lambda r, f: f(r) if r else "-"  # noqa: E731
        print(f"| {name} | {rate(ours):.4g} tokens/s | {cell(ct2, lambda r: f'{rate(r):.4g}')} | "
              f"{cell(ct2, lambda r: f'{rate(ours) / rate(r):.2f}x')} | "
              f"**{rate(ours) / rate(float_ours):.2f}x** | {rss_gb(ours):.2f} GB |")


def vmap_table(runs, rows):
    """float32 over one vocabulary map on both sides (`--vocab-map`; CTranslate2's `use_vmap`)."""
    vmap = [(w, n) for w, n in rows if runs.get((w, "candle-vmap"))]
    if not vmap:
        return
    print("\nThe same in float32 over a vocabulary map (scripts/make_bench_vmap.py: 2,000 tokens "
          "always, 30 more a source token), ours `--vocab-map`, CTranslate2 `use_vmap=True`:\n")
    print("| workload | ours | CTranslate2 | ours / CTranslate2 | ours with / without the map "
          "| CTranslate2 with / without | peak RSS ours | peak RSS CTranslate2 |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for workload, name in vmap:
        ours, whole = runs[(workload, "candle-vmap")], runs[(workload, "candle")]
        ct2, ct2_whole = runs.get((workload, "ctranslate2-vmap")), runs.get((workload, "ctranslate2"))
        cell = lambda r, f: f(r) if r else "-"  # noqa: E731
        print(f"| {name} | {rate(ours):.4g} tokens/s | {cell(ct2, lambda r: f'{rate(r):.4g}')} | "
              f"{cell(ct2, lambda r: f'**{rate(ours) / rate(r):.2f}x**')} | "
              f"{rate(ours) / rate(whole):.2f}x | "
              f"{cell(ct2, lambda r: f'{rate(r) / rate(ct2_whole):.2f}x' if ct2_whole else '-')} | "
              f"{rss_gb(ours):.2f} GB | {cell(ct2, lambda r: f'{rss_gb(r):.2f} GB')} |")


if __name__ == "__main__":
    main()
