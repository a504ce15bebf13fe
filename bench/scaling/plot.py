#!/usr/bin/python3
"""Plots and tables of bench/scaling/sweep.py's CSVs for docs/scaling.md.

  /usr/bin/python3 bench/scaling/plot.py docs/scaling/    # reads *.csv there, writes *.png + tables.md

Needs matplotlib (Debian: python3-matplotlib; scripts/setup.sh --bench installs it). The tables
(markdown) go to <folder>/tables.md; the figures are the same numbers.
"""

import collections
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    with open(path) as f:
        rows = [r for r in csv.DictReader(f)]
    for r in rows:
        for k in ("batch", "workers", "ps"):
            r[k] = int(r[k])
        r["rate"] = float(r["words_per_sec"] or r["examples_per_sec"] or 0) if not r.get(
            "error") else None
    return rows


def key(r, *fields):
    return tuple(r[f] for f in fields)


def with_efficiency(rows):
    """Scaling efficiency: rate(W) / (W * rate(1)) of the same setting."""
    one = {key(r, "model", "batch", "ps", "network", "mode", "profile"): r["rate"]
           for r in rows if r["workers"] == 1}
    for r in rows:
        base = one.get(key(r, "model", "batch", "ps", "network", "mode", "profile"))
        r["efficiency"] = (r["rate"] / (r["workers"] * base)
                           if r["rate"] is not None and base else None)
    return rows


def fmt(v, digits=0):
    return "failed" if v is None else f"{v:,.{digits}f}"


def workers_chart(ax, rows, field, label, title):
    """Aggregate rate against workers, one line per (setting, rows' `field`), labelled
    label.format(value): psflow solid, tf1 dashed."""
    lines = collections.defaultdict(list)
    for r in rows:
        if r["rate"] is not None:
            lines[(r["profile"], r[field])].append((r["workers"], r["rate"]))
    for (profile, value), pts in sorted(lines.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                linestyle="-" if profile == "psflow" else "--",
                label=f"{profile}, {label.format(value)}")
    ax.set_title(title)
    ax.set_xlabel("workers")
    ax.set_ylabel("images/s (all workers)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def seed004(rows, out, md):
    rows = with_efficiency(rows)
    b100 = [r for r in rows if r["batch"] == 100]
    nets = sorted({r["network"] for r in b100}, key=lambda n: float(n.rstrip("gbit")))
    modes = ["sync", "async"]
    fig, axes = plt.subplots(len(nets), len(modes), figsize=(11, 4.2 * len(nets)), squeeze=False)
    for i, net in enumerate(nets):
        for j, mode in enumerate(modes):
            workers_chart(axes[i][j], [r for r in b100 if r["network"] == net and r["mode"] == mode],
                          "ps", "{} ps", f"CIFAR-10 CNN, batch 100, {net}, {mode}")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "seed004-batch100.png"), dpi=90)
    plt.close(fig)

    md.append("### Seed 004: CIFAR-10 CNN, batch 100\n")
    md.append("images/s of all workers (scaling efficiency: rate / (workers x the 1-worker rate)).\n")
    workers = sorted({r["workers"] for r in b100})
    md.append("| network | mode | ps | setting | " + " | ".join(f"{w} w" for w in workers) + " |")
    md.append("|" + " --- |" * (4 + len(workers)))
    table = collections.defaultdict(dict)
    for r in b100:
        table[key(r, "network", "mode", "ps", "profile")][r["workers"]] = r
    for k in sorted(table, key=lambda k: (float(k[0].rstrip("gbit")), k[1] != "sync", k[2], k[3])):
        cells = []
        for w in workers:
            r = table[k].get(w)
            if r is None:
                cells.append("")
            elif r["rate"] is None:
                cells.append("failed")
            else:
                cells.append(f"{fmt(r['rate'])} ({r['efficiency']:.2f})")
        md.append(f"| {k[0]} | {k[1]} | {k[2]} | {k[3]} | " + " | ".join(cells) + " |")
    md.append("")

    # The batch-size comparison: sync, 2 ps, on the networks the sweep ran the other batches on.
    big_nets = sorted({r["network"] for r in rows if r["batch"] != 100},
                      key=lambda n: float(n.rstrip("gbit")))
    big = [r for r in rows if r["network"] in big_nets and r["mode"] == "sync" and r["ps"] == 2]
    if big_nets:
        fig, axes = plt.subplots(1, len(big_nets), figsize=(5.5 * len(big_nets), 4.2),
                                 squeeze=False)
        for j, net in enumerate(big_nets):
            workers_chart(axes[0][j], [r for r in big if r["network"] == net], "batch", "batch {}",
                          f"CIFAR-10 CNN, 2 ps, sync, {net}")
        fig.tight_layout()
        fig.savefig(os.path.join(out, "seed004-batches.png"), dpi=90)
        plt.close(fig)
        md.append("### Seed 004: batch 100 / 200 / 400 (2 ps, sync)\n")
        md.append("| network | setting | batch | " + " | ".join(f"{w} w" for w in workers) + " |")
        md.append("|" + " --- |" * (3 + len(workers)))
        t = collections.defaultdict(dict)
        for r in big:
            if r["mode"] == "sync" and r["ps"] == 2:
                t[key(r, "network", "profile", "batch")][r["workers"]] = r
        for k in sorted(t, key=lambda k: (float(k[0].rstrip("gbit")), k[1], k[2])):
            cells = [f"{fmt(t[k][w]['rate'])} ({t[k][w]['efficiency']:.2f})"
                     if w in t[k] and t[k][w]["rate"] is not None else "" for w in workers]
            md.append(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
        md.append("")


def pairs(rows, title, unit, out, name, md):
    """Seeds 000/002: a standalone worker (no ps), and 1 and 2 workers through 1 ps, per network
    and setting."""
    alone = next((r["rate"] for r in rows if r["ps"] == 0), None)
    t = collections.defaultdict(dict)
    for r in rows:
        if r["ps"] > 0:
            t[key(r, "network", "profile")][r["workers"]] = r["rate"]
    md.append(f"### {title}\n")
    md.append(f"A standalone worker (no ps, the seed's single-GPU baseline): {fmt(alone)} {unit}.\n")
    md.append(f"| network | setting | 1 worker + ps ({unit}) | 2 workers + ps ({unit}) | "
              "2 workers / standalone | 2 workers / 1 worker |")
    md.append("| --- | --- | --- | --- | --- | --- |")
    labels, speedups = [], []
    for k in sorted(t, key=lambda k: (float(k[0].rstrip("gbit")), k[1])):
        one, two = t[k].get(1), t[k].get(2)
        vs_alone = two / alone if alone and two else None
        vs_one = two / one if one and two else None
        md.append(f"| {k[0]} | {k[1]} | {fmt(one)} | {fmt(two)} | "
                  f"{'failed' if vs_alone is None else f'{vs_alone:.2f}x'} | "
                  f"{'failed' if vs_one is None else f'{vs_one:.2f}x'} |")
        labels.append(f"{k[1]}\n{k[0]}")
        speedups.append(vs_alone or 0)
    md.append("")
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.bar(labels, speedups, color=["#888" if "tf1" in l else "#2a7" for l in labels])
    ax.axhline(1.0, color="k", linestyle=":", linewidth=1)
    ax.axhline(2.0, color="k", linestyle="--", linewidth=0.8)
    ax.set_ylabel("2 workers / standalone")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(os.path.join(out, name), dpi=90)
    plt.close(fig)


def ablation(rows, md):
    """psflow with each of its choices taken away, against tf1 (sync, 1 Gbit, 2 ps)."""
    t = collections.defaultdict(dict)
    for r in rows:
        t[r["profile"]][r["workers"]] = r["rate"]
    workers = sorted({r["workers"] for r in rows})
    md.append("### Which choice buys what (CIFAR-10 CNN, batch 100, sync, 1 Gbit, 2 ps)\n")
    md.append("| setting | " + " | ".join(f"{w} workers (images/s, / psflow)" for w in workers) +
              " |")
    md.append("|" + " --- |" * (1 + len(workers)))
    order = ["psflow", "psflow-no-stream", "psflow-fp32", "psflow-round-robin", "tf1"]
    for profile in [p for p in order if p in t]:
        cells = []
        for w in workers:
            v, base = t[profile].get(w), t["psflow"].get(w)
            cells.append(f"{fmt(v)} ({v / base:.2f})" if v and base else fmt(v))
        md.append(f"| {profile} | " + " | ".join(cells) + " |")
    md.append("")


def forecast(rows, out, md):
    t = collections.defaultdict(dict)
    for r in rows:
        t[key(r, "model", "network", "ps")][r["workers"]] = r["rate"]
    workers = sorted({r["workers"] for r in rows})
    md.append("### Forecast: aggregate rate as workers double (psflow's settings, async)\n")
    md.append("| model | network | ps | " + " | ".join(f"{w} w" for w in workers) + " |")
    md.append("|" + " --- |" * (3 + len(workers)))
    models = sorted({r["model"] for r in rows})
    fig, axes = plt.subplots(1, len(models), figsize=(4.2 * len(models), 3.8), squeeze=False)
    for j, m in enumerate(models):
        ax = axes[0][j]
        for k in sorted(t):
            if k[0] != m:
                continue
            md.append(f"| {k[0]} | {k[1]} | {k[2]} | " +
                      " | ".join(fmt(t[k].get(w)) for w in workers) + " |")
            pts = sorted((w, v) for w, v in t[k].items() if v is not None)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                    label=f"{k[1]}, {k[2]} ps")
        ax.set_title(m)
        ax.set_xlabel("workers")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "forecast.png"), dpi=90)
    plt.close(fig)
    md.append("")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    folder = sys.argv[1]
    md = []
    for name, fn in (("seed004.csv", lambda r: seed004(r, folder, md)),
                     ("seed000.csv", lambda r: pairs(r, "Seed 000: PTB small, 1 ps", "words/s",
                                                     folder, "seed000.png", md)),
                     ("seed002.csv", lambda r: pairs(r, "Seed 002: MNIST CNN, 1 ps", "images/s",
                                                     folder, "seed002.png", md)),
                     ("ablation.csv", lambda r: ablation(r, md)),
                     ("forecast.csv", lambda r: forecast(r, folder, md))):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            fn(load(path))
    with open(os.path.join(folder, "tables.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print(f"wrote {folder}/tables.md and the figures")


if __name__ == "__main__":
    main()
