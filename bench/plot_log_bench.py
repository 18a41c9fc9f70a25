#!/usr/bin/python3
"""Plots log_bench JSON: commits/s and p99 latency against threads, one
column per record size, a line per (mode, streams), with the tier's raw
persist rate for that size as the physical limit."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    runs = [r for r in data["runs"] if r["record_bytes"] != 256 or len(data["runs"]) < 4]
    sizes = sorted({r["record_bytes"] for r in runs if r["record_bytes"] != 256})
    raw = {r["size"]: r for r in data["raw"]}
    fig, axes = plt.subplots(2, len(sizes), figsize=(5 * len(sizes), 8), squeeze=False)
    styles = {"nf": "-", "classic": "--"}
    for col, size in enumerate(sizes):
        top, bottom = axes[0][col], axes[1][col]
        series = sorted({(r["mode"], r["streams"]) for r in runs if r["record_bytes"] == size})
        for mode, streams in series:
            pts = sorted(
                (r["threads"], r["commits_per_s"], r["p99_us"])
                for r in runs
                if r["record_bytes"] == size and r["mode"] == mode and r["streams"] == streams
            )
            label = f"{mode}, {streams} stream{'s' if streams > 1 else ''}"
            top.plot([p[0] for p in pts], [p[1] for p in pts], styles[mode], marker="o", label=label)
            bottom.plot([p[0] for p in pts], [p[2] for p in pts], styles[mode], marker="o", label=label)
        if size in raw:
            top.axhline(raw[size]["persists_per_s"], color="grey", linestyle=":",
                        label=f"raw persist of {size} B (1 thread)")
        top.set_title(f"{size} B records: commits/s")
        bottom.set_title(f"{size} B records: p99 commit latency")
        for ax in (top, bottom):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("threads")
            ax.grid(True, which="both", alpha=0.3)
        top.set_ylabel("commits/s")
        bottom.set_ylabel("µs")
        top.legend(fontsize=8)
    fig.suptitle(f"Subito redo log on {data['tier']} ({data['machine']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot written to {dst}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_log_bench.py RESULT.json OUT.png")
    main(sys.argv[1], sys.argv[2])
