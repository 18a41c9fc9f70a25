#!/usr/bin/python3
"""Parallel log streams in the server (scripts/bench-streams.sh): loading and
writing with subito_log_streams = 1, 2, 4, 8, the rest equal. Issue 13 asks
to choose the default from this measurement; the Yahoo! JAPAN engine found
4 streams best on its machine.

For each stream count a fresh server (the count is fixed when the log is
created) loads sysbench's tables (prepare, timed: the load workload), then
runs oltp_write_only with the project's 4 clients and with 16. Rounds
alternate the order of the counts (1, 2, 4, 8 then 8, 4, 2, 1), so a drift of
the machine's speed during the run does not favour one end. Every figure of
every round is kept; the summary is the mean with the spread.

Writes out/streams.json and out/streams.png.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py)
from compare import Server, log, measured_sysbench, sysbench_prepare  # noqa: E402


def one(args, streams):
    srv = Server(args, "subito", f"streams{streams}", args.pool)
    srv.extra = [f"--subito-log-streams={streams}"]
    srv.start()
    try:
        got = srv.sql("SELECT @@subito_log_streams").strip()
        if got != str(streams):
            raise RuntimeError(f"the server runs {got} log streams, not {streams}")
        t0 = time.time()
        sysbench_prepare(srv, args.tables, args.rows, args.threads)
        load_s = time.time() - t0
        r = {"streams": streams, "load_seconds": round(load_s, 2),
             "load_rows_per_s": round(args.tables * args.rows / load_s),
             "caching": srv.caching()["text"]}
        log(f"{streams} stream(s): loaded {args.tables} x {args.rows:,} rows in {load_s:.1f} s")
        for threads in args.write_threads:
            a = argparse.Namespace(**vars(args))
            a.threads = threads
            w = measured_sysbench(srv, a, args.tables, args.rows, "oltp_write_only", args.seconds)
            r[f"write_{threads}"] = w
            log(f"{streams} stream(s): oltp_write_only, {threads} clients: {w['tps']:,.0f} tps, "
                f"p95 {w['p95_ms']} ms, {w['redo_bytes_per_txn']} B of redo per transaction")
        return r
    finally:
        srv.destroy()


def summarize(runs, counts, keys):
    out = {}
    for n in counts:
        mine = [r for r in runs if r["streams"] == n]
        out[n] = {}
        for key, get in keys.items():
            vals = [get(r) for r in mine]
            out[n][key] = {"mean": statistics.mean(vals), "min": min(vals), "max": max(vals),
                           "values": vals}
    return out


def plot(data, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = list(data["keys"])
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.8))
    counts = data["settings"]["streams"]
    for ax, key in zip(axes, keys):
        for r in data["runs"]:
            ax.plot(r["streams"], data["keys"][key](r), "o", color="tab:gray", alpha=0.5)
        means = [data["summary"][str(n)][key]["mean"] for n in counts]
        ax.plot(counts, means, "-o", color="tab:blue", label="mean")
        ax.set_xscale("log", base=2)
        ax.set_xticks(counts)
        ax.set_xticklabels([str(n) for n in counts])
        ax.set_xlabel("subito_log_streams")
        ax.set_title(key, fontsize=10)
        ax.set_ylim(bottom=0)
    fig.suptitle("Log streams: each round's points in grey, the mean in blue")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rows", type=int, default=250000)
    ap.add_argument("--threads", type=int, default=4, help="clients of the load")
    ap.add_argument("--write-threads", default="4,16", help="clients of oltp_write_only")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--pool", default="2G")
    ap.add_argument("--log-size", default="1G")
    ap.add_argument("--work", default="/var/tmp/subito-streams")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-streams")
    ap.add_argument("--out", default=os.path.join(compare.ROOT, "out"))
    args = ap.parse_args()
    counts = [int(x) for x in args.streams.split(",")]
    if any(n < 1 or n > 16 for n in counts):
        sys.exit("--streams: counts from 1 to 16")
    if args.rounds < 1:
        sys.exit("--rounds: at least 1")
    args.write_threads = [int(x) for x in args.write_threads.split(",")]
    args.ppl_size, args.ppl_threshold = None, None
    runs = []
    for rnd in range(args.rounds):
        order = counts if rnd % 2 == 0 else counts[::-1]
        for n in order:
            log(f"round {rnd + 1} of {args.rounds}: {n} stream(s)")
            r = one(args, n)
            r["round"] = rnd + 1
            runs.append(r)
    keys = {"load rows/s": lambda r: r["load_rows_per_s"]}
    for t in args.write_threads:
        keys[f"oltp_write_only tps, {t} clients"] = (lambda t: lambda r: r[f"write_{t}"]["tps"])(t)
    summary = summarize(runs, counts, keys)
    best = {}
    for key in keys:
        best[key] = max(counts, key=lambda n: summary[n][key]["mean"])
    machine = f"{platform.machine()}, {os.cpu_count()} cores"
    server = compare.sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip()
    data = {"date": datetime.date.today().isoformat(), "machine": machine, "server": server,
            "settings": {"streams": counts, "rounds": args.rounds, "tables": args.tables,
                         "rows": args.rows, "load_threads": args.threads,
                         "write_threads": args.write_threads, "seconds": args.seconds,
                         "pool": args.pool, "log_size": args.log_size, "pm_dir": args.pm_dir},
            "runs": runs, "summary": {str(n): v for n, v in summary.items()}, "best": best}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "streams.json"), "w") as f:
        json.dump(data, f, indent=1)
    plot({**data, "keys": keys}, os.path.join(args.out, "streams.png"))
    print()
    print("| streams | " + " | ".join(keys) + " |")
    print("|---:|" + "---:|" * len(keys))
    for n in counts:
        cells = [f"{summary[n][k]['mean']:,.0f} ({summary[n][k]['min']:,.0f}-{summary[n][k]['max']:,.0f})"
                 for k in keys]
        print(f"| {n} | " + " | ".join(cells) + " |")
    for key, n in best.items():
        print(f"highest mean, {key}: {n} stream(s)")
    log(f"wrote {args.out}/streams.json and streams.png")


if __name__ == "__main__":
    sys.exit(main())
