"""The serving benchmark: `transformer serve` under a bounded load on loopback against
offline `transformer translate --batch-size 32` on the same sentences, interleaved.

Each repetition times offline translation (N sentences, minus the time to load the model and
translate one), then starts the server (--max-batch 32) and sends single-sentence requests
from 1, 8 and 32 concurrent clients (examples/serve_load.rs), each client sending its next
sentence when the last is answered. Prints a Markdown table of medians over the
repetitions: sentences/s, p50 and p99 latency, and throughput as a share of offline.

  python3 scripts/bench_serve.py --bin BIN --load LOAD --checkpoint DIR --sentences FILE
"""

import argparse
import json
import re
import statistics
import subprocess
import tempfile
import time

CLIENTS = [1, 8, 32]


def offline_seconds(args, lines, work):
    path = f"{work}/in-{len(lines)}.txt"
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    command = [args.bin, "translate", "--device", "cpu", "--checkpoint", args.checkpoint,
               "--batch-size", "32", *args.decode]
    started = time.perf_counter()
    with open(path) as stdin:
        subprocess.run(command, stdin=stdin, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def offline_rate(args, sentences, work):
    """Sentences per second once the model is loaded: (N - 1) / (t(N) - t(1))."""
    whole = offline_seconds(args, sentences, work)
    one = offline_seconds(args, sentences[:1], work)
    # A load too small to outlast the model's loading (--quick's) has no rate to report.
    return (len(sentences) - 1) / (whole - one) if whole > one * 1.05 else float("nan")


def serve_rates(args, path):
    command = [args.bin, "serve", "--device", "cpu", "--checkpoint", args.checkpoint,
               "--port", "0", "--max-batch", "32", "--max-queue", "4096", *args.decode]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in server.stderr:
            found = re.search(r"http://127\.0\.0\.1:\d+", line)
            if found:
                url = found.group(0)
                break
        if url is None:
            raise SystemExit("bench-serve: the server did not start")
        results = {}
        for clients in CLIENTS:
            out = subprocess.run([args.load, "--url", url, "--sentences", path,
                                  "--clients", str(clients)],
                                 capture_output=True, text=True, check=True)
            result = json.loads(out.stdout)
            if result["failed"]:
                raise SystemExit(f"bench-serve: {result['failed']} requests failed")
            results[clients] = result
        return results
    finally:
        server.terminate()
        server.wait(timeout=60)


def cpu_description():
    model, flags = "unknown CPU", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "unknown CPU":
                model = line.split(":", 1)[1].strip()
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    vectors = [name for name in ("avx512f", "avx2", "fma") if name in flags]
    return f"{model} ({' + '.join(vectors) or 'no AVX'})"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bin", required=True)
    parser.add_argument("--load", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--sentences", required=True, help="one source sentence per line")
    parser.add_argument("--count", type=int, default=256)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--beam", type=int, default=1)
    parser.add_argument("--compute-type", default="float32", choices=["float32", "int8"],
                        help="what serve and translate multiply in")
    parser.add_argument("--max-len", type=int, help="most tokens per translation")
    args = parser.parse_args()
    args.decode = ["--beam", str(args.beam), "--compute-type", args.compute_type]
    if args.max_len:
        args.decode += ["--max-len", str(args.max_len)]
    with open(args.sentences) as f:
        sentences = [line.rstrip("\n") for line in f if line.strip()][: args.count]
    offline, served = [], {c: [] for c in CLIENTS}
    with tempfile.TemporaryDirectory() as work:
        path = f"{work}/load.txt"
        with open(path, "w") as f:
            f.write("\n".join(sentences) + "\n")
        for rep in range(args.reps):
            offline.append(offline_rate(args, sentences, work))
            for clients, result in serve_rates(args, path).items():
                served[clients].append(result)
            print(f"rep {rep + 1}: offline {offline[-1]:.1f} sentences/s; served "
                  + ", ".join(f"{c} clients {served[c][-1]['sentences_per_second']:.1f}"
                              for c in CLIENTS), flush=True)
    base = statistics.median(offline)
    share = (lambda rate: f"{100 * rate / base:.0f}%") if base == base else (lambda _: "n/a")
    print(f"\n{cpu_description()}, {len(sentences)} sentences, beam {args.beam}, "
          f"{args.compute_type}, "
          f"medians of {args.reps} interleaved repetitions\n")
    print("| clients | sentences/s | p50 latency | p99 latency | share of offline |")
    print("|---:|---:|---:|---:|---:|")
    offline_cell = f"{base:.1f}" if base == base else "n/a (too few sentences to time)"
    print(f"| offline `translate --batch-size 32` | {offline_cell} | | | 100% |")
    for clients in CLIENTS:
        rate = statistics.median(r["sentences_per_second"] for r in served[clients])
        p50 = statistics.median(r["p50_ms"] for r in served[clients])
        p99 = statistics.median(r["p99_ms"] for r in served[clients])
        print(f"| {clients} | {rate:.1f} | {p50:.0f} ms | {p99:.0f} ms | {share(rate)} |")


if __name__ == "__main__":
    main()
