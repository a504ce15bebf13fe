#!/usr/bin/env python3
"""Writes a small tabular classification dataset as CSV: train.csv and test.csv in OUT_DIR.

Three classes of points in 8 numeric features: each class is a Gaussian cloud around its own
centre, with two features that only carry noise. Deterministic for a seed, standard library only,
so the tabular example (deploy/models/tabular) and its test need nothing installed.

usage: make_tabular_csv.py OUT_DIR [--train N] [--test N] [--seed S]
"""
import argparse
import os
import random
import sys

FEATURES = ["f%d" % i for i in range(8)]
CLASSES = 3


def make_rows(n, rng, centres):
    rows = []
    for _ in range(n):
        label = rng.randrange(CLASSES)
        values = [rng.gauss(c, 1.0) for c in centres[label]]
        rows.append(values + [label])
    return rows


def write(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(",".join(FEATURES + ["label"]) + "\n")
        for r in rows:
            f.write(",".join("%.6f" % v for v in r[:-1]) + ",%d\n" % r[-1])
    os.replace(tmp, path)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out_dir")
    p.add_argument("--train", type=int, default=6000)
    p.add_argument("--test", type=int, default=1000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.train < 1 or a.test < 1:
        sys.exit("make_tabular_csv.py: --train and --test must be >= 1")
    rng = random.Random(a.seed)
    # Centres 2.5 apart in six informative features; the last two are noise for every class.
    centres = [[rng.choice((-1.25, 1.25)) for _ in range(6)] + [0.0, 0.0] for _ in range(CLASSES)]
    os.makedirs(a.out_dir, exist_ok=True)
    write(os.path.join(a.out_dir, "train.csv"), make_rows(a.train, rng, centres))
    write(os.path.join(a.out_dir, "test.csv"), make_rows(a.test, rng, centres))
    print("wrote %d training and %d test rows to %s" % (a.train, a.test, a.out_dir))


if __name__ == "__main__":
    main()
