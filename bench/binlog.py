#!/usr/bin/env python3
"""The binary log's two-phase commit, Subito vs InnoDB, in one run
(scripts/run-server-bench.sh binlog).

For each engine: sysbench oltp_write_only on the same in-memory data with
the binary log off, then on (log_bin, sync_binlog=1, binlog_format=ROW:
every commit is prepared in the engine, written and synced to the binary
log, then committed in the engine). Both engines: durable commits
(innodb_flush_log_at_trx_commit=1), data files O_DIRECT with equal pools,
the redo logs on the PM tier; the binary log on the data directory's disk.
Prints tps, p95 latency and bytes per transaction (the server process's disk
writes from /proc/PID/io, and each engine's redo/PM bytes), each engine's
cost of the binary log, and Subito / InnoDB with it on and off; writes JSON.
"""
import argparse
import json
import os
import platform

from compare import ENGINES, ROOT, Server, log, measured_sysbench, sh, sysbench, sysbench_prepare


def run(args, engine, binlog):
    name = "binlog-on" if binlog else "binlog-off"
    srv = Server(args, engine, name, args.pool)
    if binlog:
        srv.extra = [f"--log-bin={srv.dir}/data/mysql-bin", "--sync-binlog=1", "--binlog-format=ROW",
                     "--server-id=1"]
    srv.start()
    try:
        log(f"{engine}, binary log {'on' if binlog else 'off'}: loading {args.tables} x {args.rows} rows")
        sysbench_prepare(srv, args.tables, args.rows, args.threads)
        sysbench(srv, args, args.tables, args.rows, "oltp_write_only", args.warmup)
        r = measured_sysbench(srv, args, args.tables, args.rows, "oltp_write_only", args.seconds)
        r["caching"] = srv.caching()["text"]
        log(f"  {r['tps']:,.0f} tps, p95 {r['p95_ms']} ms, disk writes {r['disk_write_bytes_per_txn']:,} "
            f"B/txn, redo/PM {r['pm_bytes_per_txn']:,} B/txn")
        return r
    finally:
        srv.destroy()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small data, 10 s runs")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--work", default="/var/tmp/subito-binlog-bench")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-binlog-bench")
    ap.add_argument("--out", default=os.path.join(ROOT, "out"))
    args = ap.parse_args()
    args.tables, args.rows, args.pool = (4, 20000, "1G") if args.quick else (8, 100000, "2G")
    if args.quick:
        args.seconds = min(args.seconds, 10)
    args.warmup = 5 if args.quick else 10
    args.log_size, args.ppl_size, args.ppl_threshold = "256M", None, None
    res = {"settings": {
        "tables": args.tables, "rows": args.rows, "buffer_pool": args.pool, "threads": args.threads,
        "seconds": args.seconds, "warmup_seconds": args.warmup, "pm_dir": args.pm_dir, "data_dir": args.work,
        "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores"}, "runs": {}}
    for engine in ENGINES:
        for binlog in (False, True):
            res["runs"][f"{engine}-{'on' if binlog else 'off'}"] = run(args, engine, binlog)
    r = res["runs"]
    print(f"\noltp_write_only, {args.tables} x {args.rows} rows in {args.pool} pools, {args.threads} threads, "
          f"{args.seconds} s; {res['settings']['server']}")
    for e in ENGINES:
        print(f"- {e}: {r[e + '-off']['caching']}")
    print("\n| binary log | Subito tps | InnoDB tps | Subito / InnoDB | Subito p95 ms | InnoDB p95 ms "
          "| Subito disk B/txn | InnoDB disk B/txn | Subito redo/PM B/txn | InnoDB redo B/txn |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode in ("off", "on"):
        s, i = r["subito-" + mode], r["innodb-" + mode]
        print(f"| {mode} | {s['tps']:,.0f} | {i['tps']:,.0f} | {s['tps'] / i['tps']:.2f} | {s['p95_ms']} "
              f"| {i['p95_ms']} | {s['disk_write_bytes_per_txn']:,} | {i['disk_write_bytes_per_txn']:,} "
              f"| {s['pm_bytes_per_txn']:,} | {i['pm_bytes_per_txn']:,} |")
    for e in ENGINES:
        print(f"- {e}: the binary log keeps {r[e + '-on']['tps'] / r[e + '-off']['tps']:.2f} of its tps")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "binlog.json"), "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
