#!/usr/bin/python3
"""Loading, Subito vs InnoDB in one run (scripts/bench-load.sh): sysbench's
prepare split into its two phases (multi-row INSERTs into tables without
their secondary index, then CREATE INDEX k on each table, as sysbench does),
then LOAD DATA of a CSV into a new table and CREATE INDEX on it, then the
same LOAD DATA as mysqldump's output runs it (unique_checks=0,
foreign_key_checks=0: both engines' bulk insert into an empty table).

Both engines: the settings of bench/compare.py (O_DIRECT data files, the
same buffer pool, durable commits, doublewrite on, redo on the PM tier).
Each engine gets a fresh server. Every phase is timed from the client and
reports the server process's disk bytes read and written (/proc/PID/io)
and its redo/PM bytes. Writes JSON and a PNG.
"""
import argparse
import json
import os
import random
import string
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ENGINES, ROOT, Server, log, sh  # noqa: E402

PHASES = ["insert", "create_index", "load_data", "load_create_index", "load_data_bulk"]
LABELS = {"insert": "sysbench prepare: INSERTs", "create_index": "sysbench prepare: CREATE INDEX k",
          "load_data": "LOAD DATA of the CSV", "load_create_index": "CREATE INDEX on it",
          "load_data_bulk": "LOAD DATA, unique_checks=0 foreign_key_checks=0"}


def write_csv(path, rows, seed=1):
    """sysbench's row shape: id, k, c (120 chars), pad (60 chars)."""
    rng = random.Random(seed)
    digits = string.digits
    with open(path, "w") as f:
        for i in range(1, rows + 1):
            c = "-".join("".join(rng.choices(digits, k=11)) for _ in range(10))
            pad = "-".join("".join(rng.choices(digits, k=11)) for _ in range(5))
            f.write(f"{i},{rng.randint(1, rows)},{c},{pad}\n")


def phase(srv, name, fn, result):
    """Runs and measures one phase; a phase that fails is recorded with the
    server's error (the rest goes on) and False returned."""
    rd0, wr0 = srv.disk_io()
    pm0, data0, _ = srv.written()
    t0 = time.time()
    try:
        fn()
    except subprocess.CalledProcessError as e:
        error = (e.stderr or e.stdout or str(e)).strip().splitlines()[-1]
        result[name] = {"error": error}
        log(f"{srv.engine} {LABELS[name]}: FAILED after {time.time() - t0:.1f} s: {error}")
        return False
    seconds = time.time() - t0
    rd1, wr1 = srv.disk_io()
    pm1, data1, _ = srv.written()
    result[name] = {"seconds": round(seconds, 2), "disk_read_bytes": rd1 - rd0,
                    "disk_write_bytes": wr1 - wr0, "pm_bytes": pm1 - pm0,
                    "data_file_bytes": data1 - data0}
    log(f"{srv.engine} {LABELS[name]}: {seconds:.1f} s; disk read {(rd1 - rd0) >> 20} MiB, "
        f"written {(wr1 - wr0) >> 20} MiB; redo/PM {(pm1 - pm0) >> 20} MiB")
    return True


def in_parallel(fns, threads):
    errors = []
    todo = list(fns)
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo or errors:
                    return
                fn = todo.pop(0)
            try:
                fn()
            except Exception as e:  # noqa: BLE001 (reported after the join)
                with lock:
                    errors.append(e)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def run_engine(args, engine, csv):
    srv = Server(args, engine, "load", args.pool)
    srv.extra = ["--local-infile=1"]
    srv.start()
    res = {"caching": srv.caching()}
    log(f"{engine}: {res['caching']['text']}, pool {res['caching']['pool'] >> 20} MiB")
    srv.sql("CREATE DATABASE sbtest")
    threads = min(args.threads, args.tables)

    def insert():
        sh(["sysbench", "--db-driver=mysql", f"--mysql-socket={srv.sock}", "--mysql-user=root",
            "--mysql-db=sbtest", f"--mysql-storage-engine={engine}", f"--tables={args.tables}",
            f"--table-size={args.rows}", f"--threads={threads}", "--create_secondary=off",
            "oltp_common", "prepare"])

    def create_index():
        in_parallel([lambda i=i: srv.sql(f"CREATE INDEX k_{i} ON sbtest.sbtest{i}(k)")
                     for i in range(1, args.tables + 1)], threads)

    def load_data():
        srv.sql("CREATE TABLE sbtest.loaded (id INT NOT NULL, k INT NOT NULL DEFAULT 0, "
                "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id))")
        sh(["mariadb", "--no-defaults", f"--socket={srv.sock}", "-uroot", "--local-infile=1", "-e",
            f"LOAD DATA LOCAL INFILE '{csv}' INTO TABLE sbtest.loaded FIELDS TERMINATED BY ','"])

    def load_create_index():
        srv.sql("CREATE INDEX k ON sbtest.loaded(k)")

    def load_data_bulk():  # as mysqldump's output sets it: both engines' bulk insert path
        srv.sql("CREATE TABLE sbtest.loaded2 (id INT NOT NULL, k INT NOT NULL DEFAULT 0, "
                "c CHAR(120) NOT NULL DEFAULT '', pad CHAR(60) NOT NULL DEFAULT '', PRIMARY KEY (id))")
        sh(["mariadb", "--no-defaults", f"--socket={srv.sock}", "-uroot", "--local-infile=1", "-e",
            "SET unique_checks=0, foreign_key_checks=0; "
            f"LOAD DATA LOCAL INFILE '{csv}' INTO TABLE sbtest.loaded2 FIELDS TERMINATED BY ','"])

    for name, fn in zip(PHASES, [insert, create_index, load_data, load_create_index, load_data_bulk]):
        if name == "load_create_index" and "error" in res["load_data"]:
            res[name] = {"error": "not run: LOAD DATA failed"}
            continue
        phase(srv, name, fn, res)
    counts = [int(srv.sql(f"SELECT COUNT(*) FROM sbtest.sbtest{i} FORCE INDEX (k_{i})").strip())
              for i in range(1, args.tables + 1)]
    if counts != [args.rows] * args.tables:
        raise SystemExit(f"{engine}: row counts {counts}: the load lost rows")
    if "seconds" in res["load_data_bulk"]:
        loaded = int(srv.sql("SELECT COUNT(*) FROM sbtest.loaded2").strip())
        if loaded != args.csv_rows:
            raise SystemExit(f"{engine}: {loaded} rows bulk-loaded of {args.csv_rows}")
    if "seconds" in res["load_create_index"]:
        loaded = int(srv.sql("SELECT COUNT(*) FROM sbtest.loaded FORCE INDEX (k)").strip())
        if loaded != args.csv_rows:
            raise SystemExit(f"{engine}: {loaded} rows loaded of {args.csv_rows}")
    srv.destroy()
    return res


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.38
    for k, engine in enumerate(ENGINES):  # a failed phase: no bar, "failed"
        xs = [i + (k - 0.5) * width for i in range(len(PHASES))]
        ax.bar(xs, [res[engine][p].get("seconds", 0) for p in PHASES], width, label=engine)
        for x, p in zip(xs, PHASES):
            if "error" in res[engine][p]:
                ax.text(x, 0.5, f"{engine}\nfailed", ha="center", va="bottom", fontsize=7,
                        rotation=90)
    ax.set_xticks(range(len(PHASES)))
    ax.set_xticklabels([LABELS[p].replace(": ", ":\n") for p in PHASES], fontsize=8)
    ax.set_ylabel("seconds (lower is better)")
    s = res["settings"]
    ax.set_title(f"Loading {s['tables']} x {s['rows']} rows + a {s['csv_rows']}-row CSV, "
                 f"{s['buffer_pool']} pools")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="8 x 100k rows, a 100k-row CSV")
    ap.add_argument("--tables", type=int, default=8)
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--csv-rows", type=int, default=1000000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--pool", default="128M")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--work", default="/var/tmp/subito-load")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-load")
    ap.add_argument("--out", default=os.path.join(ROOT, "out"))
    args = ap.parse_args()
    if args.quick:
        args.rows = args.csv_rows = 100000
    args.log_size = "256M"
    args.ppl_size = args.ppl_threshold = None
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    csv = os.path.join(args.work, f"load-{args.csv_rows}.csv")
    if not os.path.exists(csv):
        log(f"writing {csv}")
        write_csv(csv + ".tmp", args.csv_rows)
        os.rename(csv + ".tmp", csv)
    res = {"settings": {"tables": args.tables, "rows": args.rows, "csv_rows": args.csv_rows,
                        "threads": args.threads, "buffer_pool": args.pool, "log_file_size": args.log_size,
                        "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip()}}
    engines = args.engines.split(",")
    for engine in engines:
        res[engine] = run_engine(args, engine, csv)
    if set(ENGINES) <= set(engines):
        print(f"\n| phase | Subito s | InnoDB s | InnoDB / Subito (>1: Subito faster) |")
        print("|---|---:|---:|---:|")
        for p in PHASES:
            s, i = (res[e][p].get("seconds", "failed") for e in ENGINES)
            rel = f"{i / s:.2f}" if "failed" not in (s, i) else "-"
            print(f"| {LABELS[p]} | {s} | {i} | {rel} |")
        total = {e: res[e]["insert"]["seconds"] + res[e]["create_index"]["seconds"] for e in ENGINES}
        print(f"| sysbench prepare, both phases | {total['subito']:.2f} | {total['innodb']:.2f} | "
              f"{total['innodb'] / total['subito']:.2f} |")
        plot(res, os.path.join(args.out, "load.png"))
    with open(os.path.join(args.out, "load.json"), "w") as f:
        json.dump(res, f, indent=2)
    log(f"wrote {args.out}/load.json")


if __name__ == "__main__":
    sys.exit(main())
