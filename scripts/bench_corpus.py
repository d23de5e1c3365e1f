#!/usr/bin/env python3
"""Times how long `transformer train` takes to reach its first training step, and its peak
memory then and later in the epoch: the data pipeline's benchmark (scripts/bench-corpus.sh).

    python3 scripts/bench_corpus.py BIN CONFIG OUT_DIR [--steps N] [--resume] [--label TEXT]

Runs `BIN train --config CONFIG --out OUT_DIR --overwrite --stop-at-step N` (or `BIN train
--resume OUT_DIR`, which needs a run stopped earlier), reads its plain progress lines
(stderr is a pipe, so one line per logged step) and samples /proc/PID/status at every logged
step: VmHWM when `step 1/` appears (the peak before training, plus one step) and at the end,
RssAnon (heap) and RssFile (mapped files). Prints one JSON line. Standard library only.
"""

import argparse
import json
import re
import subprocess
import sys
import time


def memory_mb(pid):
    """VmHWM (peak resident), RssAnon (heap: what would grow) and RssFile (mapped files,
    the corpus cache among them: page cache the kernel can drop), in MB."""
    found = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key = line.split(":")[0]
                if key in ("VmHWM", "RssAnon", "RssFile"):
                    found[key] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("bin")
    parser.add_argument("config")
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    if args.resume:
        command = [args.bin, "train", "--resume", args.out, "--stop-at-step", str(args.steps)]
    else:
        command = [args.bin, "train", "--config", args.config, "--out", args.out,
                   "--overwrite", "--stop-at-step", str(args.steps)]
    started = time.monotonic()
    job = subprocess.Popen(command, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    first_step = first = None
    step_times = {}
    log = []
    anon_max = 0
    for line in job.stderr:
        log.append(line)
        match = re.match(r"step (\d+)/", line)
        if match:
            step = int(match.group(1))
            now = time.monotonic() - started
            step_times[step] = now
            last = memory_mb(job.pid)
            if first_step is None:
                first_step, first = now, last
            anon_max = max(anon_max, last.get("RssAnon", 0))
    job.wait()
    if first_step is None:
        sys.stderr.write("".join(log[-20:]))
        sys.exit(f"error: {' '.join(command)} never reached a training step")
    steps = sorted(step_times)
    result = {
        "label": args.label,
        "first_step_s": round(first_step, 2),
        "peak_mb_at_first_step": round(first.get("VmHWM", 0)),
        "anon_mb_at_first_step": round(first.get("RssAnon", 0)),
        "file_mb_at_first_step": round(first.get("RssFile", 0)),
        "peak_mb_at_end": round(last.get("VmHWM", 0)),
        "anon_mb_max_after": round(anon_max),
        "file_mb_at_end": round(last.get("RssFile", 0)),
        "steps": len(steps),
        "exit": job.returncode,
    }
    if len(steps) > 20:
        # Steps per second after the first ten (warm), for the speed comparison.
        a, b = steps[10], steps[-1]
        result["steps_per_s"] = round((b - a) / (step_times[b] - step_times[a]), 2)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
