#!/usr/bin/python3
"""Plots kv_compare JSON: operations/s and operations per CPU-second for
each workload and thread count, one bar per engine."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"subito": "tab:blue", "rocksdb": "tab:orange", "lmdb": "tab:green"}


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    results = data["results"]
    engines, groups = [], []
    for r in results:
        if r["engine"] not in engines:
            engines.append(r["engine"])
        g = (r["workload"], r["threads"])
        if g not in groups:
            groups.append(g)
    by = {(r["engine"], r["workload"], r["threads"]): r for r in results}
    fig, axes = plt.subplots(2, 1, figsize=(11, 8))
    width = 0.8 / len(engines)
    for ax, field, label in ((axes[0], "ops_per_s", "operations/s"),
                             (axes[1], "ops_per_cpu_s", "operations per CPU-second")):
        for i, e in enumerate(engines):
            xs = [g - 0.4 + width * (i + 0.5) for g in range(len(groups))]
            ys = [by[(e, w, t)][field] if (e, w, t) in by else 0 for w, t in groups]
            bars = ax.bar(xs, ys, width, label=e, color=COLORS.get(e))
            ax.bar_label(bars, labels=[f"{v / 1000:,.0f}k" for v in ys], fontsize=7)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{w}\n{t} thread{'s' if t > 1 else ''}" for w, t in groups])
        ax.set_ylabel(label)
        ax.set_yscale("log")
        ax.legend()
    axes[0].set_title(f"embedded engines, {data['rows']:,} keys of 8 B, values of "
                      f"{data['value_bytes']} B, durable commits on the PM tier")
    fig.tight_layout()
    fig.savefig(dst, dpi=100)
    print(f"wrote {dst}")


if __name__ == "__main__":
    main(*sys.argv[1:])
