#!/usr/bin/env python3
"""The arithmetic beside docs/scaling.md's measured forecast: for each seed model, the bytes one
worker moves per step, and how many workers saturate one ps task's 1 / 10 / 25 Gbit link.

  bench/scaling/forecast.py                # a markdown table
  bench/scaling/forecast.py --whole_pulls  # pulls of every embedding row (before issue 27)

Per step a worker pushes its gradients and pulls the parameters, an embedding in both only in the
rows its batch reads (sparse pulls, the workers' default since issue 27; --sparse_pulls=false
pulls every row: `--whole_pulls` here). With balanced placement over n ps tasks each task's link carries 1/n of every worker's
bytes, in each direction (links are full duplex: pushes come in, pulls go out). So W workers
stepping every T seconds need W * pull_bytes / (n * T) <= link rate on the busiest direction:
  workers at saturation  W* = n * rate * T / pull_bytes
  ps tasks for W workers n  = ceil(W * pull_bytes / (rate * T)).
A worker's own link carries its whole push and pull: once pull_bytes / rate > T even one worker
is link-bound, and overlap can hide at most T of it (the last column: above 1, more ps tasks cannot
help; only fewer bytes, a faster link, or a bigger batch per step). The step times are measured: the H100's
compute-only rates (docs/benchmarks.md, GPU section) and the seeds' own GPUs.
"""

import argparse
import math

# Parameters per model (the worker's --model; shapes in core/placement_test.cc), the elements of
# an embedding's rows touched per step (batch x steps rows of the embedding width, at most), and
# step times in ms with their source.
MODELS = [
    # name, parameters, embedding parameters, touched embedding elements, batch, steps (ms)
    ("mnist_mlp", 79_510, 0, 0, 100, {"H100": 100 / 144_263 * 1e3}),
    ("mnist_cnn", 3_274_634, 0, 0, 128, {"H100": 128 / 92_879 * 1e3, "seed 002 GPU": 5.0}),
    ("cifar10_cnn", 1_068_298, 0, 0, 100, {"H100": 100 / 30_268 * 1e3}),
    ("ptb small", 4_651_600, 2_000_000, 400 * 200, 20,
     {"H100": 400 / 203_282 * 1e3, "seed 000 M40": 36.0}),
    ("ptb medium", 19_775_200, 6_500_000, 700 * 650, 20, {"H100": 700 / 120_267 * 1e3}),
    ("ptb large", 66_022_000, 15_000_000, 700 * 1500, 20, {"H100": 700 / 47_299 * 1e3}),
]
LINKS_GBIT = [1, 10, 25]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--whole_pulls", action="store_true",
                   help="pulls bring every embedding row (--sparse_pulls=false)")
    args = p.parse_args()
    print("| model | wire | push MB | pull MB | step | " +
          " | ".join(f"W* {g} Gbit (1 ps)" for g in LINKS_GBIT) +
          " | ps for 8 w at 10 Gbit | pull at 10 Gbit / step |")
    print("|" + " --- |" * (7 + len(LINKS_GBIT)))
    for name, params, emb, touched, _, steps in MODELS:
        for wire, nbytes in (("fp32", 4), ("bf16", 2)):
            push = (params - emb + touched) * nbytes
            pull = params * nbytes if args.whole_pulls else push
            for source, ms in steps.items():
                t = ms / 1e3
                cells = []
                for g in LINKS_GBIT:
                    rate = g * 1e9 / 8
                    cells.append(f"{rate * t / pull:.2f}")
                need = math.ceil(8 * pull / (10e9 / 8 * t))
                own = pull / (10e9 / 8) / t
                print(f"| {name} | {wire} | {push / 1e6:.2f} | {pull / 1e6:.2f} | "
                      f"{ms:.2f} ms ({source}) | " + " | ".join(cells) +
                      f" | {need} | {own:.2f} |")


if __name__ == "__main__":
    main()
