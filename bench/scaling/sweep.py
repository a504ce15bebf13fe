#!/usr/bin/env python3
"""The seeds' scaling experiments on an emulated cluster (docs/scaling.md).

Every configuration is a real TrainingJob run by `psflow run --emulate_network=RATE`: each ps and
worker process in its own network namespace behind a tc-shaped link (root needed), the workers
replaying a fixed compute time per step (`--compute=replay:MS`, per layer) while moving the real
model's real gradients and parameters through the real ps over real gRPC. Results go to a CSV,
one row per run; bench/scaling/plot.py draws docs/scaling/*.png from it.

Two settings per configuration, side by side:
  tf1    TensorFlow 1.x's choices: round-robin placement, float32 on the wire, pull-compute-push
         in series, gradients pushed after the whole backward pass;
  psflow balanced placement, bfloat16 on the wire, the exchange overlapped with the next step
         (async) or each layer's gradients pushed as backward produces them (sync).
Both send an embedding's touched rows only (TensorFlow 1.x also sent IndexedSlices).

Usage (as root, from the repository root, after scripts/build.sh):
  bench/scaling/sweep.py --experiment=seed004 --out=docs/scaling/seed004.csv
  bench/scaling/sweep.py --experiment=smoke --out=/tmp/smoke.csv   # two runs, a minute
Only the Python standard library is used.
"""

import argparse
import csv
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
import time

# Per-step compute replayed by the workers, in milliseconds, and where each figure comes from.
# cifar10_cnn's per-example times: "cpu" is this machine's (2-core EPYC, 1 thread, measured by
# calibrate() at the start of a sweep), "h100" docs/benchmarks.md's compute-only rate (30,268
# examples/s). PTB small: seed 000's single M40 at 11,000 words/s (400 words a step: 36 ms).
# MNIST CNN: seed 002's single GPU at 200 batches/s of 128 (5 ms).
SEED_STEP_MS = {
    ("ptb_lstm:small", "seed_m40"): 36.0,
    ("mnist_cnn", "seed_gpu"): 5.0,
}
H100_MS_PER_EXAMPLE = {"cifar10_cnn": 1000.0 / 30268, "mnist_cnn": 1000.0 / 92879}

PROFILES = {
    "tf1": ["--placement=round_robin", "--wire_dtype=float32", "--overlap=false",
            "--stream_gradients=false"],
    "psflow": ["--placement=balanced", "--wire_dtype=bfloat16", "--overlap=true",
               "--stream_gradients=true"],
    # psflow less one of its choices (the ablation experiment): which one buys what.
    "psflow-no-stream": ["--placement=balanced", "--wire_dtype=bfloat16", "--overlap=true",
                         "--stream_gradients=false"],
    "psflow-fp32": ["--placement=balanced", "--wire_dtype=float32", "--overlap=true",
                    "--stream_gradients=true"],
    "psflow-round-robin": ["--placement=round_robin", "--wire_dtype=bfloat16", "--overlap=true",
                           "--stream_gradients=true"],
}


@dataclasses.dataclass
class Config:
    experiment: str
    model: str  # the worker's --model (ptb_lstm:small -> --model=ptb_lstm --model_config=small)
    batch: int
    workers: int
    ps: int
    network: str  # --emulate_network's value
    mode: str  # sync or async
    profile: str  # tf1 or psflow
    replay_ms: float
    replay_source: str
    steps: int


def model_flags(model):
    name, _, size = model.partition(":")
    flags = [f"--model={name}"]
    if size:
        flags.append(f"--model_config={size}")
    return flags


def manifest(cfg):
    args = model_flags(cfg.model) + [
        f"--batch_size={cfg.batch}", "--data_source=synthetic", f"--train_steps={cfg.steps}",
        f"--compute=replay:{cfg.replay_ms:.3f}", "--compute_threads=1", "--log_every_steps=0",
    ] + PROFILES[cfg.profile]
    if cfg.mode == "sync":
        args.append("--sync_replicas")
    arg_list = ", ".join(args)
    name = re.sub(r"[^a-z0-9-]", "-", f"{cfg.experiment}-{cfg.workers}w{cfg.ps}ps".lower())
    ps = "" if cfg.ps == 0 else f"""
    PS:
      replicas: {cfg.ps}
      template: {{spec: {{containers: [{{name: psflow, command: [psflow-ps]}}]}}}}"""
    return f"""apiVersion: psflow.io/v1alpha1
kind: TrainingJob
metadata: {{name: {name}}}
spec:
  replicaSpecs:{ps}
    Worker:
      replicas: {cfg.workers}
      template: {{spec: {{containers: [{{name: psflow, command: [psflow-worker], args: [{arg_list}]}}]}}}}
"""


DONE = re.compile(r"worker \d+ done: (.*)")


def parse_done(line):
    m = DONE.search(line)
    if not m:
        return None
    fields = {}
    for kv in m.group(1).split():
        k, _, v = kv.partition("=")
        try:
            fields[k] = float(v)
        except ValueError:
            pass
    return fields


def run(cfg, bin_dir, keep_dir=None):
    """Runs one configuration; returns the CSV row (a dict)."""
    row = dataclasses.asdict(cfg)
    with tempfile.TemporaryDirectory(prefix="psflow-scaling-") as tmp:
        job = os.path.join(tmp, "job.yaml")
        with open(job, "w") as f:
            f.write(manifest(cfg))
        run_dir = keep_dir or os.path.join(tmp, "run")
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        start = time.monotonic()
        p = subprocess.run(
            [os.path.join(bin_dir, "psflow"), "run", f"--emulate_network={cfg.network}",
             f"--run_dir={run_dir}", "--progress=never", job],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=900)
        row["wall_s"] = round(time.monotonic() - start, 1)
        row["exit"] = p.returncode
        done = []
        for i in range(cfg.workers):
            path = os.path.join(run_dir, f"worker-{i}.log")
            if not os.path.exists(path):
                continue
            with open(path) as f:
                for line in f:
                    d = parse_done(line)
                    if d:
                        done.append(d)
        if p.returncode != 0 or len(done) != cfg.workers:
            row["error"] = (p.stdout.strip().splitlines() or ["no output"])[-1][:200]
            return row
    eps = sum(d.get("examples_per_sec", 0) for d in done)
    row["examples_per_sec"] = round(eps, 1)
    if "words_per_sec" in done[0]:
        row["words_per_sec"] = round(sum(d["words_per_sec"] for d in done), 1)
    for key in ("pull_ms", "compute_ms", "push_ms", "exchange_ms"):
        row[key] = round(sum(d.get(key, 0) for d in done) / len(done), 3)
    row["step_ms"] = round(1000 * sum(d["seconds"] / d["steps"] for d in done) / len(done), 3)
    row["dropped_pushes"] = int(sum(d.get("dropped_pushes", 0) for d in done))
    return row


# float32 bytes a worker pulls per step (pushes are no bigger), for sizing runs only.
PULL_BYTES = {"cifar10_cnn": 4.27e6, "mnist_cnn": 13.1e6, "ptb_lstm:small": 18.6e6}


def steps_for(model, replay_ms, workers=1, ps=1, network="1gbit", seconds=5.0, lo=15, hi=300):
    """Steps for about `seconds` of training: the step estimated as the replayed compute plus a
    float32 pull and push over the worker's link, or the ps link's share of every worker's pull,
    whichever is longer."""
    rate = float(network.rstrip("gbit")) * 1e9 / 8
    pull = PULL_BYTES.get(model, 0)
    step_ms = replay_ms + 1e3 * max(2 * pull / rate, workers * pull / (ps * rate))
    return int(max(lo, min(hi, seconds * 1000.0 / max(step_ms, 0.1))))


def calibrate(model, batch, bin_dir):
    """This machine's CPU step time for `model` at `batch` (ms), from a standalone worker that
    computes for real: its done line's compute_ms."""
    p = subprocess.run(
        [os.path.join(bin_dir, "psflow-worker")] + model_flags(model) +
        [f"--batch_size={batch}", "--data_source=synthetic", "--train_steps=12",
         "--compute_threads=1", "--log_every_steps=0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    for line in p.stdout.splitlines():
        d = parse_done(line)
        if d:
            return d["compute_ms"]
    sys.exit(f"calibration of {model} failed: {p.stdout.strip().splitlines()[-1:]}")


def configs(experiment, bin_dir, quick):
    out = []
    if experiment == "smoke":
        for profile in ("tf1", "psflow"):
            out.append(Config("smoke", "cifar10_cnn", 100, 2, 1, "1gbit", "sync", profile, 20.0,
                              "fixed", 20))
        return out
    if experiment == "seed004":
        batches = [100] if quick else [100, 200, 400]
        workers = [1, 2, 4] if quick else [1, 2, 4, 8]
        per_example = calibrate("cifar10_cnn", 100, bin_dir) / 100
        print(f"cifar10_cnn on this CPU: {per_example:.3f} ms per example", flush=True)
        for batch in batches:
            ms = per_example * batch
            for network in ("1gbit", "10gbit"):
                for mode in ("sync", "async"):
                    for ps in (1, 2):
                        for w in workers:
                            for profile in ("tf1", "psflow"):
                                # Beyond batch 100: the setting where batch size decides
                                # (sync, 2 ps, 1 Gbit: the seed's saturating network).
                                if batch != 100 and (mode == "async" or ps == 1
                                                     or network != "1gbit"):
                                    continue
                                out.append(Config("seed004", "cifar10_cnn", batch, w, ps, network,
                                                  mode, profile, ms, "cpu",
                                                  steps_for("cifar10_cnn", ms, w, ps, network)))
        return out
    seeds = {"seed000": ("ptb_lstm:small", 20, "seed_m40"), "seed002": ("mnist_cnn", 128, "seed_gpu")}
    if experiment in seeds:
        # A standalone worker (no ps: the seeds' single-GPU baseline, network unused), then 1 and
        # 2 workers through 1 ps.
        model, batch, source = seeds[experiment]
        ms = SEED_STEP_MS[(model, source)]
        out.append(Config(experiment, model, batch, 1, 0, "1gbit", "async", "psflow", ms, source,
                          int(max(15, min(300, 5000 / ms)))))
        for network in ("1gbit", "10gbit"):
            for profile in ("tf1", "psflow"):
                for w in (1, 2):
                    out.append(Config(experiment, model, batch, w, 1, network, "async", profile,
                                      ms, source, steps_for(model, ms, w, 1, network)))
        return out
    if experiment == "ablation":
        # Seed 004's hardest setting for tf1 (sync, 1 Gbit, 2 ps, batch 100): psflow with each of
        # its choices taken away in turn.
        ms = calibrate("cifar10_cnn", 100, bin_dir)
        for w in (8,):
            for profile in ("psflow", "psflow-no-stream", "psflow-fp32", "psflow-round-robin",
                            "tf1"):
                out.append(Config("ablation", "cifar10_cnn", 100, w, 2, "1gbit", "sync", profile,
                                  ms, "cpu", steps_for("cifar10_cnn", ms, w, 2, "1gbit")))
        return out
    if experiment == "forecast":
        # Each model at a GPU's step time, psflow's settings, 1 and 2 ps, workers doubling: where
        # the aggregate rate stops growing, the link saturates (measured).
        cases = [("cifar10_cnn", 100, H100_MS_PER_EXAMPLE["cifar10_cnn"] * 100, "h100"),
                 ("mnist_cnn", 128, SEED_STEP_MS[("mnist_cnn", "seed_gpu")], "seed_gpu"),
                 ("ptb_lstm:small", 20, SEED_STEP_MS[("ptb_lstm:small", "seed_m40")],
                  "seed_m40")]
        for model, batch, ms, source in cases:
            for network in ("1gbit",) if quick else ("1gbit", "10gbit"):
                for ps in (1, 2):
                    for w in (1, 2, 4, 8):
                        out.append(Config("forecast", model, batch, w, ps, network, "async",
                                          "psflow", ms, source,
                                          steps_for(model, ms, w, ps, network)))
        return out
    sys.exit(f"unknown experiment {experiment!r} "
             "(seed004, seed000, seed002, ablation, forecast, smoke)")


FIELDS = ["experiment", "model", "batch", "workers", "ps", "network", "mode", "profile",
          "replay_ms", "replay_source", "steps", "examples_per_sec", "words_per_sec", "step_ms",
          "pull_ms", "compute_ms", "push_ms", "exchange_ms", "dropped_pushes", "wall_s", "exit",
          "error"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", required=True)
    ap.add_argument("--out", required=True, help="CSV to write (replaced)")
    ap.add_argument("--bin", default="build/bin", help="folder of psflow, psflow-ps, psflow-worker")
    ap.add_argument("--quick", action="store_true", help="a smaller grid")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("sweep.py: network namespaces need root (CAP_NET_ADMIN)")
    bin_dir = os.path.abspath(args.bin)
    for tool in ("psflow", "psflow-ps", "psflow-worker"):
        if not os.access(os.path.join(bin_dir, tool), os.X_OK):
            sys.exit(f"sweep.py: {tool} not found in {bin_dir} (run scripts/build.sh)")
    todo = configs(args.experiment, bin_dir, args.quick)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    partial = args.out + ".partial"
    failures = 0
    with open(partial, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        w.writeheader()
        for i, cfg in enumerate(todo):
            row = run(cfg, bin_dir)
            w.writerow(row)
            f.flush()
            failures += "error" in row
            print(f"[{i + 1}/{len(todo)}] {cfg.model} b{cfg.batch} {cfg.workers}w {cfg.ps}ps "
                  f"{cfg.network} {cfg.mode} {cfg.profile}: "
                  f"{row.get('examples_per_sec', 'FAILED ' + row.get('error', ''))} examples/s "
                  f"({row['wall_s']} s)", flush=True)
    os.replace(partial, args.out)
    print(f"wrote {args.out}: {len(todo)} runs, {failures} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
