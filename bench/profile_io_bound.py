#!/usr/bin/python3
"""Where the time goes in the I/O-bound regime (scripts/profile-io-bound.sh):
loads bench/compare.py's regime (b) data into one engine's server, runs a
sysbench workload and, during its measured interval, samples the machine's
CPU split (/proc/stat: user, system, idle, iowait), the server's disk I/O
(/proc/PID/io) and a perf profile of the server. Writes out/profile-ENGINE.txt.
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py)
from compare import Server, log, measured_sysbench, sh, sysbench  # noqa: E402


def cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal
    return {"user": v[0] + v[1], "system": v[2] + v[5] + v[6], "idle": v[3], "iowait": v[4],
            "steal": v[7] if len(v) > 7 else 0}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engine", default="subito", choices=compare.ENGINES)
    ap.add_argument("--workload", default="oltp_write_only")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=15)
    ap.add_argument("--frequency", type=int, default=499, help="perf samples per second")
    ap.add_argument("--quick", action="store_true", help="8 x 100k rows, 16M pool")
    ap.add_argument("--in-memory", action="store_true", help="8 x 100k rows, 2G pool (issue 13's regime)")
    ap.add_argument("--work", default="/var/tmp/subito-profile")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-profile")
    ap.add_argument("--out", default=os.path.join(compare.ROOT, "out"))
    args = ap.parse_args()
    tables, rows, pool = (8, 100000, "16M") if args.quick else (8, 1000000, "128M")
    if args.in_memory:
        tables, rows, pool = 8, 100000, "2G"
    args.log_size, args.ppl_size, args.ppl_threshold = "256M", None, None
    srv = Server(args, args.engine, "profile", pool)
    srv.start()
    srv.sql("CREATE DATABASE sbtest")
    log(f"{args.engine}: loading {tables} x {rows} rows")
    sysbench(srv, args, tables, rows, "oltp_common", 0, action="prepare")
    cache = srv.caching()["text"]
    log(f"{args.engine}: {cache}; warm-up {args.warmup} s")
    sysbench(srv, args, tables, rows, args.workload, args.warmup)
    os.makedirs(args.out, exist_ok=True)
    data = os.path.join(args.out, f"perf-{args.engine}.data")
    perf = subprocess.Popen(["perf", "record", "-F", str(args.frequency), "-g", "-o", data, "-p", str(srv.pid())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    c0 = cpu_times()
    r = measured_sysbench(srv, args, tables, rows, args.workload, args.seconds)
    c1 = cpu_times()
    perf.send_signal(2)
    perf.wait()
    srv.destroy()
    total = sum(c1[k] - c0[k] for k in c0) or 1
    read, written = r["disk_read_bytes_per_txn"], r["disk_write_bytes_per_txn"]
    per_s = r["transactions"] / args.seconds / 2**20
    lines = [f"{args.engine} {args.workload}: {r['tps']:.0f} tps, p95 {r['p95_ms']} ms, "
             f"{tables} x {rows} rows, {pool} pool, {args.threads} threads, {args.seconds} s; {cache}",
             "machine CPU during the interval (both cores): " +
             ", ".join(f"{k} {100 * (c1[k] - c0[k]) / total:.0f}%" for k in c0),
             f"server disk I/O per txn: read {read / 1024:.1f} KB, written {written / 1024:.1f} KB; "
             f"per second: read {read * per_s:.1f} MB, written {written * per_s:.1f} MB", ""]
    report = sh(["perf", "report", "-i", data, "--no-children", "--sort", "dso,symbol",
                 "--stdio", "-g", "none", "--percent-limit", "0.7"], check=False).stdout
    lines += ["perf (on-CPU samples of the server, self time):"]
    lines += [x for x in report.splitlines() if x.strip() and not x.startswith("#")][:40]
    text = "\n".join(lines)
    path = os.path.join(args.out, f"profile-{args.engine}.txt")
    with open(path, "w") as f:
        f.write(text + "\n")
    print(text)
    log(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
