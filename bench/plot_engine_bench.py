#!/usr/bin/python3
"""Plots engine_bench JSON: transactions/s and p99 latency per workload for
each buffer-pool configuration, and bytes written per transaction to the PM
tier (redo log + double-write copies) and to the page files."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    with open(src) as f:
        data = json.load(f)
    runs = data["runs"]
    configs = [c["name"] for c in data["configs"]]
    workloads = []
    for r in runs:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
    by = {(r["config"], r["workload"]): r for r in runs}
    x = list(range(len(workloads)))
    colors = {configs[0]: "tab:blue", configs[-1]: "tab:orange"}

    fig, axes = plt.subplots(3, 1, figsize=(11, 12))
    tps_ax, lat_ax, bytes_ax = axes
    width = 0.8 / len(configs)
    for i, cfg in enumerate(configs):
        off = [p - 0.4 + width * (i + 0.5) for p in x]
        tps = [by[(cfg, w)]["tps"] if (cfg, w) in by else 0 for w in workloads]
        p99 = [by[(cfg, w)]["p99_us"] if (cfg, w) in by else 0 for w in workloads]
        p50 = [by[(cfg, w)]["p50_us"] if (cfg, w) in by else 0 for w in workloads]
        bars = tps_ax.bar(off, tps, width, label=cfg, color=colors.get(cfg))
        tps_ax.bar_label(bars, labels=[f"{v:,.0f}" for v in tps], fontsize=7)
        lat_ax.bar(off, p99, width, label=f"{cfg} p99", color=colors.get(cfg))
        lat_ax.scatter(off, p50, marker="_", s=200, color="black",
                       label="p50" if i == 0 else None, zorder=3)
    tps_ax.set_ylabel("transactions/s")
    tps_ax.set_title("Throughput per workload")
    lat_ax.set_ylabel("µs")
    lat_ax.set_yscale("log")
    lat_ax.set_title("Transaction latency: p99 (bars), p50 (ticks)")

    # Bytes per transaction: for each config, PM (log + double-write stacked)
    # and page files side by side.
    bw = 0.8 / (2 * len(configs))
    for i, cfg in enumerate(configs):
        log_b = [by[(cfg, w)]["log_bytes_per_txn"] if (cfg, w) in by else 0 for w in workloads]
        dw_b = [by[(cfg, w)]["double_write_bytes_per_txn"] if (cfg, w) in by else 0
                for w in workloads]
        file_b = [by[(cfg, w)]["page_file_bytes_written_per_txn"] if (cfg, w) in by else 0
                  for w in workloads]
        pm_off = [p - 0.4 + bw * (2 * i + 0.5) for p in x]
        file_off = [p - 0.4 + bw * (2 * i + 1.5) for p in x]
        c = colors.get(cfg)
        bytes_ax.bar(pm_off, log_b, bw, color=c, label=f"{cfg}: PM, redo log")
        bytes_ax.bar(pm_off, dw_b, bw, bottom=log_b, color=c, alpha=0.45, hatch="//",
                     label=f"{cfg}: PM, double-write")
        bytes_ax.bar(file_off, file_b, bw, color="white", edgecolor=c, hatch="..",
                     label=f"{cfg}: page files")
    bytes_ax.set_ylabel("bytes written per transaction")
    bytes_ax.set_yscale("symlog", linthresh=100)
    bytes_ax.set_title("Bytes written per transaction: PM tier vs page files "
                       "(page files: background cleaners, whole interval)")

    for ax in axes:
        ax.set_xticks(x)
        ax.set_xticklabels(workloads)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    s = data["settings"]
    pools = ", ".join(f"{c['name']} = {c['pool_bytes'] / 2**20:.1f} MiB"
                      for c in data["configs"])
    fig.suptitle(f"Subito engine, sysbench-shaped: {s['tables']} tables x {s['rows']:,} rows, "
                 f"{s['threads']} threads, {s['seconds_per_workload']:g} s per workload, "
                 f"log {s['log_mode']}\nbuffer pool: {pools}; data "
                 f"{data['prepare']['data_bytes'] / 2**20:.1f} MiB; PM tier: {data['tier']} "
                 f"({data['machine']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot written to {dst}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_engine_bench.py RESULT.json OUT.png")
    main(sys.argv[1], sys.argv[2])
