#!/usr/bin/env python3
"""CH-benCHmark (go-tpc `ch`): TPC-C and analytical queries at once, Subito
vs InnoDB in the same server build, in one run.

Per engine: a private server (bench/compare.py's Server: O_DIRECT, equal
pools, PM tier on /dev/shm), `go-tpc tpcc prepare` + `go-tpc ch prepare`,
then `go-tpc ch run` with OLTP threads and one analytical client for the
given time. Reported: tpmC, NEW_ORDER p99, each query's count and mean
latency, and, sampled every second, the server's resident memory and what
old versions hold (Subito: row-version bytes, snapshots moved to pages as of
their moment and their page bytes, snapshots cut; InnoDB: history list
length). Subito runs with a small version budget (--version-budget) so
that long queries move instead of holding versions: the mechanism under
test (docs/architecture.md, "Old snapshots on old pages").
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ENGINES, Server, log, sh  # noqa: E402


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    """Peaks of the server's memory and old-version counters, every second."""

    KEYS = {"subito": ["Subito_version_bytes", "Subito_snapshot_page_bytes",
                       "Subito_moved_snapshots_open", "Subito_snapshot_pages",
                       "Subito_snapshot_page_recipes"],
            "innodb": ["Innodb_history_list_length"]}

    def __init__(self, srv):
        super().__init__(daemon=True)
        self.srv, self.stop, self.peaks = srv, threading.Event(), {"rss_bytes": 0}

    def run(self):
        pid = self.srv.pid()
        while not self.stop.wait(1.0):
            try:
                self.peaks["rss_bytes"] = max(self.peaks["rss_bytes"], rss_bytes(pid))
                st = self.srv.status()
            except (OSError, subprocess.CalledProcessError):
                continue
            for k in self.KEYS[self.srv.engine]:
                if k in st:
                    self.peaks[k] = max(self.peaks.get(k, 0), int(st[k]))


def run_ch(args, engine):
    srv = Server(args, engine, "ch", args.pool)
    if engine == "subito":
        srv.extra = [f"--subito-version-store-budget={args.version_budget}"]
    srv.start()
    srv.sql("CREATE DATABASE tpcc")
    base = ["-H", "127.0.0.1", "-P", str(srv.port), "-U", "root", "-D", "tpcc",
            "--warehouses", str(args.warehouses)]
    log(f"{engine}: loading {args.warehouses} warehouse(s) and the CH tables")
    # go-tpc checks the whole load after prepare: stop it once loading is done.
    p = subprocess.Popen([args.go_tpc, "tpcc"] + base + ["prepare", "-T", str(args.warehouses)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if line.startswith("begin to check"):
            p.kill()
            break
    p.wait()
    sh([args.go_tpc, "ch"] + base + ["prepare"])
    caching = srv.caching()
    os.makedirs(args.out, exist_ok=True)
    before = srv.status()
    rd0, wr0 = srv.disk_io()
    sampler = Sampler(srv)
    sampler.start()
    log(f"{engine}: running {args.seconds} s, {args.threads} OLTP threads + 1 analytical client")
    # With stderr: go-tpc prints why a query failed there.
    out = subprocess.run([args.go_tpc, "ch"] + base + ["run", "-T", str(args.threads), "-t", "1",
                                                       "--time", f"{args.seconds}s",
                                                       "--interval", "10000s"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    sampler.stop.set()
    sampler.join()
    after = srv.status()
    rd1, wr1 = srv.disk_io()
    m = re.search(r"tpmC: ([\d.]+)", out)
    lat = re.search(r"\[Summary\] NEW_ORDER - .*?99th\(ms\): ([\d.]+)", out)
    with open(os.path.join(args.out, f"ch-{engine}.txt"), "w") as f:
        f.write(out)
    # go-tpc ch's summary: "[Summary] Q1     - Count: 3, Sum(ms): 9.1, Avg(ms): 3.0"; a
    # query that failed is counted as Q1_ERR.
    queries, query_errors = {}, {}
    for q, err, count, avg in re.findall(
            r"\[Summary\] (Q\d+)(_ERR)?\s+- Count: (\d+), Sum\(ms\): [\d.]+, Avg\(ms\): ([\d.]+)",
            out):
        if err:
            query_errors[q] = int(count)
        else:
            queries[q] = {"count": int(count), "avg_ms": float(avg)}
    errors = sum(int(x) for x in re.findall(r"_ERR - Takes\(s\): [\d.]+, Count: (\d+)", out))
    failures = sorted(set(re.findall(r"execute query (Q\d+) failed (.*)", out)))
    r = {"tpmC": float(m.group(1)) if m else None,
         "new_order_p99_ms": float(lat.group(1)) if lat else None,
         "queries": queries, "query_count": sum(q["count"] for q in queries.values()),
         "query_errors": query_errors, "query_failures": [f"{q}: {e}" for q, e in failures],
         "errors": errors, "peaks": sampler.peaks, "caching": caching["text"],
         "disk_read_bytes": rd1 - rd0, "disk_write_bytes": wr1 - wr0}
    if engine == "subito":
        for k in ("Subito_snapshots_moved", "Subito_snapshots_cut", "Subito_moved_snapshots_cut",
                  "Subito_snapshot_pages_rebuilt"):
            r[k] = int(after.get(k, 0)) - int(before.get(k, 0))
    if not m:
        r["output_tail"] = out[-2000:]
    log(f"{engine}: tpmC {r['tpmC']}, {r['query_count']} analytical queries "
        f"({sum(query_errors.values())} failed), {errors} OLTP errors")
    srv.destroy()
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--go-tpc", required=True)
    ap.add_argument("--warehouses", type=int, default=2)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=180)
    ap.add_argument("--pool", default="128M")
    ap.add_argument("--version-budget", default="32M",
                    help="Subito's subito_version_store_budget for the run")
    ap.add_argument("--engines", default=",".join(ENGINES),
                    help="comma-separated; the comparison needs both")
    ap.add_argument("--work", default="/var/tmp/subito-ch")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-ch")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                  "out"))
    args = ap.parse_args()
    args.log_size, args.ppl_size, args.ppl_threshold = "256M", None, None
    res = {"settings": {"warehouses": args.warehouses, "threads": args.threads,
                        "analytical_clients": 1, "seconds": args.seconds, "buffer_pool": args.pool,
                        "subito_version_store_budget": args.version_budget,
                        "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip()}}
    for engine in args.engines.split(","):
        res[engine] = run_ch(args, engine)
    os.makedirs(args.out, exist_ok=True)
    if "subito" not in res or "innodb" not in res:
        with open(os.path.join(args.out, "ch-one.json"), "w") as f:
            json.dump(res, f, indent=2)
        log(f"wrote {args.out}/ch-one.json (one engine: no comparison)")
        return 0
    s, i = res["subito"], res["innodb"]
    print(f"CH-benCHmark, {args.warehouses} warehouses, {args.threads} OLTP threads + 1 "
          f"analytical client, {args.seconds} s, {args.pool} pools")
    for name, key in (("tpmC", "tpmC"), ("NEW_ORDER p99 ms", "new_order_p99_ms"),
                      ("analytical queries done", "query_count")):
        a, b = s.get(key), i.get(key)
        ratio = f"{a / b:.2f}x" if a and b else "-"
        print(f"  {name:28} Subito {a}  InnoDB {b}  {ratio}")
    for q in sorted(set(s["queries"]) | set(i["queries"]), key=lambda x: int(x[1:])):
        a, b = s["queries"].get(q, {}), i["queries"].get(q, {})
        print(f"  {q:4} mean ms  Subito {a.get('avg_ms', '-')} ({a.get('count', 0)})  "
              f"InnoDB {b.get('avg_ms', '-')} ({b.get('count', 0)})")
    print(f"  failed queries: Subito {s['query_errors']} {s['query_failures']}; "
          f"InnoDB {i['query_errors']} {i['query_failures']}")
    print(f"  peaks: Subito {s['peaks']}; InnoDB {i['peaks']}")
    print(f"  Subito snapshots moved {s.get('Subito_snapshots_moved')}, cut "
          f"{s.get('Subito_snapshots_cut')}, moved then cut {s.get('Subito_moved_snapshots_cut')}")
    print(f"  caching: Subito: {s['caching']}; InnoDB: {i['caching']}")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "ch.json"), "w") as f:
        json.dump(res, f, indent=2)
    log(f"wrote {args.out}/ch.json")


if __name__ == "__main__":
    sys.exit(main())
