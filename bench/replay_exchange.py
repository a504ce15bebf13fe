#!/usr/bin/env python3
"""GPU steps replayed on this CPU: what one ps costs a worker whose step is a GPU's.

For each model, `psflow-worker --compute=replay:MS` (the real model's real gradients and
parameters, the arithmetic replaced by MS milliseconds a step: worker/replay_trainable.h) runs
  standalone : alone, updating its own parameters (the baseline);
  grpc       : through one psflow-ps on loopback, tensor bytes as raw gRPC calls;
  bulk       : the same over the bulk channel (the default);
  shm        : the bulk channel through shared memory (psflow-ps --bulk_socket, as `psflow run`
               gives a ps and its workers on one host);
each with the exchange overlapped with the next step (the default) and serial (--overlap=false);
then, overlapped, with half the bytes on the wire (--wire_dtype=bfloat16, the ps keeping float32)
over bulk and shm; and for PTB also with whole pulls (--sparse_pulls=false: every embedding row
every step, as before sparse pulls), in one call, --repeats times interleaved; the median rate,
its ratio to
standalone and the MB pulled and pushed per step. The step
times are the H100's of docs/scaling.md (compute only): mnist_cnn 1.38 ms, PTB small 1.97 ms,
cifar10_cnn 3.3 ms. Prints the bytes per step each way and the CPU this ran on.

Usage (after scripts/build.sh):  bench/replay_exchange.py [--steps=300] [--repeats=3]
                                     [--ps_connections=1] (the workers' --ps_connections)
Only the Python standard library is used.
"""

import argparse
import os
import platform
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

MODELS = [  # name, flags, step ms (H100), the rate's field
    ("mnist_cnn", ["--model=mnist_cnn"], 1.38, "examples_per_sec"),
    ("ptb_small", ["--model=ptb_lstm", "--model_config=small"], 1.97, "words_per_sec"),
    ("cifar10_cnn", ["--model=cifar10_cnn"], 3.3, "examples_per_sec"),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def field(line, name):
    m = re.search(rf"\b{name}=([0-9.e+-]+)", line)
    return float(m.group(1)) if m else None


def run_worker(bin_dir, flags, timeout=600):
    """The worker's 'done:' line, the bytes its placement line says the ps holds, its log."""
    out = subprocess.run([os.path.join(bin_dir, "psflow-worker")] + flags, capture_output=True,
                         text=True, timeout=timeout)
    text = out.stdout + out.stderr
    done = [l for l in text.splitlines() if " done: " in l]
    if out.returncode != 0 or len(done) != 1:
        sys.exit(f"psflow-worker {' '.join(flags)} failed ({out.returncode}):\n"
                 f"{out.stderr[-3000:]}")
    m = re.search(r"ps0 ([0-9.]+) (KiB|MiB)", text)
    model_mb = float(m.group(1)) * (1024 if m.group(2) == "KiB" else 1024 * 1024) / 1e6 if m else None
    return done[0], model_mb, text


def through_ps(bin_dir, flags, transport):
    """One psflow-ps and one psflow-worker on loopback ports; the worker's run_worker().
    transport "shm": the bulk channel, the ps also serving it through shared memory."""
    ps_port, worker_port = free_port(), free_port()
    hosts = [f"--ps_hosts=127.0.0.1:{ps_port}", f"--worker_hosts=127.0.0.1:{worker_port}"]
    ps_flags = []
    shm = transport == "shm"
    if shm:
        transport = "bulk"
        ps_flags = [f"--bulk_socket=@psflow-replay-{os.getpid()}-{ps_port}"]
    # Only this run's --bulk_socket offers shared memory (psflow run's variable is not inherited).
    env = {k: v for k, v in os.environ.items() if k != "PSFLOW_BULK_SOCKET"}
    ps = subprocess.Popen([os.path.join(bin_dir, "psflow-ps"), "--job_name=ps", "--task_index=0",
                           f"--transport={transport}"] + hosts + ps_flags, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line, mb, text = run_worker(bin_dir, ["--job_name=worker", "--task_index=0",
                                              f"--transport={transport}"] + hosts + flags)
        if shm != ("through shared memory" in text):
            sys.exit(f"psflow-worker {' '.join(flags)}: expected the bulk channel "
                     f"{'through shared memory' if shm else 'over TCP'}, its log says otherwise:"
                     f"\n{text[-3000:]}")
        return line, mb
    finally:
        ps.send_signal(signal.SIGTERM)
        try:
            ps.wait(timeout=30)
        except subprocess.TimeoutExpired:
            ps.kill()


def cpu_name():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bin", default="build/bin")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--models", default=",".join(m[0] for m in MODELS))
    p.add_argument("--ps_connections", type=int, default=1,
                   help="the workers' --ps_connections through the ps")
    args = p.parse_args()
    wanted = args.models.split(",")
    print(f"replayed GPU steps, 1 ps + 1 worker on loopback vs standalone; {os.cpu_count()} "
          f"cores, {cpu_name()}; OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '')} "
          f"(medians of {args.repeats}, {args.steps} steps each; --ps_connections="
          f"{args.ps_connections})")
    # label, transport (None: standalone), overlap, sparse pulls, wire type
    configs = [("standalone", None, True, True, "float32")] + [
        (f"{t} {'overlap' if o else 'serial'}", t, o, True, "float32")
        for t in ("grpc", "bulk", "shm") for o in (True, False)] + [
        (f"{t} overlap bf16", t, True, True, "bfloat16") for t in ("bulk", "shm")]
    whole = [(f"bulk {'overlap' if o else 'serial'} whole", "bulk", o, False, "float32")
             for o in (True, False)]
    print(f"{'model':12} {'step ms':>7} {'MB':>6}  {'config':24} {'rate':>9} {'ratio':>6} "
          f"{'pull MB':>8} {'push MB':>8}")
    for name, flags, ms, rate_field in MODELS:
        if name not in wanted:
            continue
        common = flags + [f"--compute=replay:{ms}", f"--train_steps={args.steps}",
                          "--data_source=synthetic", "--compute_threads=1", "--log_every_steps=0"]
        # Whole pulls (--sparse_pulls=false) differ only for a model with an embedding.
        runs = configs + (whole if name.startswith("ptb") else [])
        lines = {c[0]: [] for c in runs}
        model_mb = None
        for _ in range(args.repeats):
            for label, transport, overlap, sparse, wire in runs:
                f = common + [f"--overlap={'true' if overlap else 'false'}",
                              f"--sparse_pulls={'true' if sparse else 'false'}"]
                if transport is not None:
                    f.append(f"--wire_dtype={wire}")
                    if args.ps_connections != 1:  # (binaries before the flag run without it)
                        f.append(f"--ps_connections={args.ps_connections}")
                line, mb = run_worker(args.bin, f)[:2] if transport is None else through_ps(
                    args.bin, f, transport)
                model_mb = mb or model_mb
                lines[label].append(line)
        base = statistics.median(field(l, rate_field) for l in lines["standalone"])
        for label, transport, _, _, _ in runs:
            rate = statistics.median(field(l, rate_field) for l in lines[label])
            pulled = statistics.median(field(l, "pulled_mb_per_step") or 0 for l in lines[label])
            pushed = statistics.median(field(l, "pushed_mb_per_step") or 0 for l in lines[label])
            ratio = "" if transport is None else f"{rate / base:5.2f}x"
            moved = "" if transport is None else f"{pulled:8.2f} {pushed:8.2f}"
            print(f"{name:12} {ms:7.2f} {model_mb or 0:6.1f}  {label:24} {rate:9.0f} {ratio:>6} "
                  f"{moved}", flush=True)
    print(f"rates: {MODELS[0][3]} (words_per_sec for ptb_small); ratios to standalone; MB: the "
          "model's bytes on the ps; pull/push MB: per step, as the worker counted them (a dense "
          "pull moves the whole model, a sparse one the embedding's rows of the step's batch; a "
          "push all but the embedding's untouched rows; bf16: half of that); 'whole': --sparse_pulls=false")


if __name__ == "__main__":
    main()
