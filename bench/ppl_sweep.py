#!/usr/bin/python3
"""NV-PPL sweeps (scripts/bench-ppl-sweep.sh): Subito's per-page log region
size (0 = off, then percentages of the data) and threshold against tps and
bytes per transaction, on the I/O-bound sysbench data of bench/compare.py's
regime (b), with InnoDB measured in the same run as the reference.

Both engines: O_DIRECT data files, the same buffer pool size, durable
commits, doublewrite on, redo on the PM tier (/dev/shm). Subito's data is
loaded once; each point is a clean restart with the point's settings (a
region that holds nothing takes the new size and threshold), a warm-up, then
the measured interval. Writes JSON and a PNG.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py)
from compare import Server, log, measured_sysbench, sh, sysbench  # noqa: E402

PPL_STATUS = ["pages_logged", "bytes", "full", "pages_delogged", "reclaimed"]


def data_bytes(srv):
    """Bytes of Subito's page files (the sbtest tables': what the percentages
    are of), in its data home (<datadir>/#subito)."""
    d = os.path.join(srv.dir, "data", "#subito")
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(d) for f in fs
               if f.endswith(".sbt"))


def measure(srv, args):
    """One point: per workload tps, p95 and bytes per transaction."""
    out = {}
    for w in args.workloads:
        if args.warmup:
            sysbench(srv, args, args.tables, args.rows, w, args.warmup)
        s0 = srv.status()
        r = measured_sysbench(srv, args, args.tables, args.rows, w, args.seconds)
        s1 = srv.status()
        n = max(r["transactions"], 1)
        if srv.engine == "subito":
            for k in PPL_STATUS:
                key = f"Subito_ppl_{k}"
                r[f"ppl_{k}_per_txn"] = round((int(s1[key]) - int(s0[key])) / n, 3)
            blocks = int(s1["Subito_ppl_blocks"])
            r["ppl_blocks"] = blocks
            r["ppl_region_use"] = round(int(s1["Subito_ppl_blocks_used"]) / blocks, 3) if blocks else 0
        out[w] = r
        extra = ""
        if srv.engine == "subito":
            extra = (f"; PPL per txn: {r['ppl_bytes_per_txn']:.0f} B, pages logged "
                     f"{r['ppl_pages_logged_per_txn']:.2f}, written back "
                     f"{r['ppl_pages_delogged_per_txn']:.2f}, region {100 * r['ppl_region_use']:.0f}% used")
        log(f"  {srv.engine} {w}: {r['tps']:.0f} tps, p95 {r['p95_ms']} ms, "
            f"{r['data_bytes_per_txn']} B to page files + {r['pm_bytes_per_txn']} B to PM per txn, "
            f"disk read {r['disk_read_bytes_per_txn']} B{extra}")
    return out


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    w = res["settings"]["workloads"][0]
    base = res["innodb"][w]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8))
    for col, (key, xlabel) in enumerate((("sizes", "PPL region, % of the data (0 = off)"),
                                         ("thresholds", "PPL threshold, bytes"))):
        pts = res[key]
        if not pts:
            continue
        xs = [p["x"] for p in pts]
        labels = [str(x) for x in xs]
        pos = list(range(len(xs)))
        ax = axes[0][col]
        ax.plot(pos, [p[w]["tps"] for p in pts], "o-", label="Subito")
        ax.axhline(base["tps"], color="tab:red", linestyle="--", label="InnoDB")
        ax.set_xticks(pos, labels)
        ax.set_ylabel(f"{w} tps")
        ax.set_xlabel(xlabel)
        ax.legend()
        ax.grid(alpha=0.3)
        ax = axes[1][col]
        ax.plot(pos, [p[w]["data_bytes_per_txn"] / 1024 for p in pts], "o-", label="Subito page files")
        ax.plot(pos, [p[w]["ppl_bytes_per_txn"] / 1024 for p in pts], "s-", label="Subito PPL (PM)")
        ax.axhline(base["data_bytes_per_txn"] / 1024, color="tab:red", linestyle="--",
                   label="InnoDB data files")
        ax.set_xticks(pos, labels)
        ax.set_ylabel("KB written per transaction")
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        ax.legend()
        ax.grid(alpha=0.3)
    s = res["settings"]
    axes[0][0].set_title(f"region size (threshold {s['size_sweep_threshold']} B)")
    axes[0][1].set_title(f"threshold (region {s['threshold_sweep_pct']}% of the data)")
    fig.suptitle(f"NV-PPL sweeps: {s['tables']} x {s['rows']} rows, {s['pool']} pools, "
                 f"{s['threads']} threads, {s['seconds']} s per point")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small data, short points (minutes)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=30, help="measured seconds per point")
    ap.add_argument("--warmup", type=int, default=15, help="unmeasured seconds after each restart")
    ap.add_argument("--sizes", default="0,1,5,10,25", help="region sizes, %% of the data")
    ap.add_argument("--thresholds", default="64,128,256,512,1024,2048,4096")
    ap.add_argument("--size-threshold", type=int, default=1024,
                    help="threshold of the size sweep (the server's default)")
    ap.add_argument("--threshold-pct", type=float, default=10, help="region size of the threshold sweep")
    ap.add_argument("--workloads", default="oltp_write_only")
    ap.add_argument("--work", default="/var/tmp/subito-sweep")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-sweep")
    ap.add_argument("--out", default=os.path.join(compare.ROOT, "out"))
    args = ap.parse_args()
    args.workloads = args.workloads.split(",")
    if args.quick:
        args.tables, args.rows, pool = 8, 100000, "16M"
        args.seconds, args.warmup = min(args.seconds, 10), min(args.warmup, 3)
    else:
        args.tables, args.rows, pool = 8, 1000000, "128M"
    args.log_size = "256M"
    args.ppl_size, args.ppl_threshold = "0", args.size_threshold
    settings = {"tables": args.tables, "rows": args.rows, "pool": pool, "threads": args.threads,
                "seconds": args.seconds, "warmup": args.warmup, "workloads": args.workloads,
                "size_sweep_threshold": args.size_threshold, "threshold_sweep_pct": args.threshold_pct,
                "log_file_size": args.log_size, "pm_dir": args.pm_dir, "data_dir": args.work,
                "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip()}
    res = {"settings": settings, "sizes": [], "thresholds": []}
    os.makedirs(args.out, exist_ok=True)

    for engine in ("innodb", "subito"):
        srv = Server(args, engine, "sweep", pool)
        srv.start()
        srv.sql("CREATE DATABASE sbtest")
        log(f"{engine}: loading {args.tables} x {args.rows} rows")
        sysbench(srv, args, args.tables, args.rows, "oltp_common", 0, action="prepare")
        cache = srv.caching()
        if engine == "innodb":
            res.setdefault("caching", {})[engine] = cache
        log(f"{engine}: {cache['text']}, pool {cache['pool'] >> 20} MiB")
        if not cache["direct_io"]:
            log(f"WARNING: {engine}'s data files are cached by the OS: not an equal comparison")
        if engine == "innodb":
            res["innodb"] = measure(srv, args)
            srv.destroy()
            continue
        data = data_bytes(srv)
        settings["data_bytes"] = data
        log(f"subito: {data >> 20} MiB of table files")
        points = [("sizes", p, float(p), args.size_threshold) for p in args.sizes.split(",")]
        points += [("thresholds", int(t), args.threshold_pct, int(t)) for t in args.thresholds.split(",")]
        for sweep, x, pct, threshold in points:
            size = int(data * pct / 100) >> 20 << 20
            if pct > 0:
                size = max(size, 1 << 20)
            srv.stop()
            srv.ppl_size, srv.ppl_threshold = str(size), threshold
            srv.start()
            log(f"{sweep}: region {pct:g}% = {size >> 20} MiB, threshold {threshold} B")
            # What the server runs with (a region that held entries would
            # have kept its geometry: the point would not be what it says).
            blocks = int(srv.status()["Subito_ppl_blocks"])
            block = max(128, (64 + threshold + 63) // 64 * 64)
            want = (size - 4096) // block if size else 0
            if blocks != want:
                sys.exit(f"{sweep} point {x}: the server has {blocks} PPL blocks, expected {want}")
            if "subito" not in res["caching"]:
                c = srv.caching()
                c["text"] = c["text"].split("; per-page")[0] + "; per-page logs: each point's"
                res["caching"]["subito"] = c
            point = {"x": x, "region_bytes": size, "threshold": threshold, "blocks": blocks}
            point.update(measure(srv, args))
            res[sweep].append(point)
        srv.destroy()

    with open(os.path.join(args.out, "ppl_sweep.json"), "w") as f:
        json.dump(res, f, indent=2)
    plot(res, os.path.join(args.out, "ppl_sweep.png"))
    log(f"wrote {args.out}/ppl_sweep.json and {args.out}/ppl_sweep.png")


if __name__ == "__main__":
    sys.exit(main())
