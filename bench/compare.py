#!/usr/bin/env python3
"""Subito vs InnoDB in the same MariaDB server build, on the same machine, in
one run, with equal durability and resources (scripts/bench-compare.sh).

Both engines: commits durable at return (innodb_flush_log_at_trx_commit=1),
doublewrite on, data files with O_DIRECT in the same datadir, the redo log on
the same PM-tier directory, the same buffer pool and log sizes, binary log
off. Each engine gets a fresh server per regime ((g) and (h) excepted).

Regimes: (a) in memory (pool larger than the data), (b) I/O-bound
(pool much smaller than the data), (c) TPC-C (go-tpc), (d) bulk load time of
(b)'s data, (e) restart: SIGKILL during a write load to the first answered
query, (f) the ceiling: (a) again with commits not durable for both engines
(innodb_flush_log_at_trx_commit=0, subito_flush_log_at_trx_commit=0), and
each engine's durable throughput in (a) as a share of it, (g) and (h): (b)'s
write workloads and (c) again on the same servers and data with the write
operations to the data directory's device capped at the random-write rate
of the SSD of the NV-PPL seed (28K 4-KiB writes per second, as 16-KiB pages:
7,000 per second) by the kernel's block throttle, for both engines
(`--write-cap`). Prints each figure for both
engines and the ratio, writes JSON and a PNG.
"""
import argparse
import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENGINES = ["subito", "innodb"]
# The sysbench workloads of the in-memory regimes, (a) and (f).
MEM_WORKLOADS = ["oltp_point_select", "oltp_read_only", "oltp_write_only", "oltp_read_write"]
START = time.time()


def log(msg):
    print(f"[{time.time() - START:7.1f}s] {msg}", flush=True)


def sh(cmd, check=True, **kw):
    return subprocess.run(cmd, check=check, text=True, capture_output=True, **kw)


class Server:
    """A private server (scripts/server-start.sh) for one engine and regime."""

    def __init__(self, args, engine, name, pool):
        self.engine = engine
        self.dir = os.path.join(args.work, f"{name}-{engine}")
        self.pm = os.path.join(args.pm_dir, f"{name}-{engine}")
        self.port = 3400 + (ENGINES.index(engine))
        self.pool = pool
        self.log_size = args.log_size
        self.ppl_size = args.ppl_size
        self.ppl_threshold = args.ppl_threshold
        self.extra = []  # more server options (bench/ch.py)
        self.durable = True  # commits durable at return; False: regime (f)
        self.cpus = None  # a taskset CPU list the server is started on (bench/restart.py --pin)
        for d in (self.dir, self.pm):
            shutil.rmtree(d, ignore_errors=True)
        os.makedirs(self.pm, exist_ok=True)
        self.sock = os.path.join(self.dir, "mysqld.sock")

    def options(self):
        common = [f"--default-storage-engine={self.engine.upper()}", "--max-prepared-stmt-count=1000000"]
        innodb = [f"--innodb-buffer-pool-size={self.pool}", "--innodb-flush-log-at-trx-commit=1",
                  "--innodb-doublewrite=1", "--innodb-flush-method=O_DIRECT",
                  f"--innodb-log-group-home-dir={self.pm}", f"--innodb-log-file-size={self.log_size}"]
        subito = [f"--subito-buffer-pool-size={self.pool}", f"--subito-pm-dir={self.pm}/subito",
                  f"--subito-log-file-size={self.log_size}", "--subito-double-write-on-pm=ON"]
        if not self.durable:
            innodb[1] = "--innodb-flush-log-at-trx-commit=0"
            subito.append("--subito-flush-log-at-trx-commit=0")
        if self.ppl_size is not None:  # else the server's default
            subito.append(f"--subito-ppl-size={self.ppl_size}")
        if self.ppl_threshold is not None:
            subito.append(f"--subito-ppl-threshold={self.ppl_threshold}")
        # The engine not measured keeps a small pool (and Subito no region).
        if self.engine == "innodb":
            subito = [o for o in subito if not o.startswith("--subito-ppl-")]
            subito[0] = "--subito-buffer-pool-size=16M"
            subito.append("--subito-ppl-size=0")
        else:
            innodb[0] = "--innodb-buffer-pool-size=16M"
        return common + innodb + subito + self.extra

    def start_command(self):
        """scripts/server-start.sh for this server, on its CPUs if it has any."""
        init = [f"--innodb-log-group-home-dir={self.pm}", f"--innodb-log-file-size={self.log_size}"]
        pin = ["taskset", "-c", self.cpus] if self.cpus else []
        return (pin + ["bash", f"{ROOT}/scripts/server-start.sh", "--dir", self.dir, "--port",
                       str(self.port)]
                + [x for o in init for x in ("--init-option", o)] + ["--"] + self.options())

    def start(self):
        t0 = time.time()
        sh(self.start_command())
        return time.time() - t0

    def stop(self, kill=False):
        sh(["bash", f"{ROOT}/scripts/server-stop.sh", "--dir", self.dir] + (["--kill"] if kill else []))

    def sql(self, q):
        return sh(["mariadb", "--no-defaults", f"--socket={self.sock}", "-uroot", "-N", "-e", q]).stdout

    def status(self):
        out = self.sql("SHOW GLOBAL STATUS")
        return {k: v for k, v in (line.split("\t", 1) for line in out.splitlines() if "\t" in line)}

    def pid(self):
        with open(os.path.join(self.dir, "mysqld.pid")) as f:
            return int(f.read().strip())

    def disk_io(self):
        """(read_bytes, write_bytes) of the server process from /proc/PID/io: what
        reached or came from a block device (tmpfs, and so the PM tier, counts
        in neither; page-cache hits are not reads)."""
        with open(f"/proc/{self.pid()}/io") as f:
            io = dict(line.split(": ") for line in f.read().splitlines())
        return int(io["read_bytes"]), int(io["write_bytes"])

    def caching(self):
        """What caches this engine's data files, from the server itself."""
        s = self.status()
        if self.engine == "subito":
            v = self.sql("SELECT @@subito_direct_io, @@subito_buffer_pool_size").split()
            buffered = int(s.get("Subito_page_files_cached_by_os", "0"))
            ppl = self.sql("SELECT @@subito_ppl_size, @@subito_ppl_threshold").split()
            ppl_text = (f"; per-page log region {int(ppl[0]) >> 20} MiB on the PM tier, threshold "
                        f"{ppl[1]} B" if ppl[0] != "0" else "; per-page logs off")
            out = {"pool": int(v[1]), "ppl_size": int(ppl[0]), "ppl_threshold": int(ppl[1])}
            if v[0] != "1" or buffered:
                return {**out, "direct_io": False,
                        "text": f"page files cached by the OS ({buffered} files on a file system "
                                f"in memory or without O_DIRECT){ppl_text}"}
            return {**out, "direct_io": True,
                    "text": f"page files O_DIRECT: the buffer pool is their only cache{ppl_text}"}
        v = self.sql("SELECT @@innodb_flush_method, @@innodb_buffer_pool_size").split()
        return {"direct_io": v[0].startswith("O_DIRECT"), "pool": int(v[1]),
                "text": f"innodb_flush_method={v[0]}: the buffer pool is the data files' only cache"
                if v[0].startswith("O_DIRECT") else f"innodb_flush_method={v[0]}"}

    def written(self):
        """(bytes to the PM tier / redo, bytes to data files, redo log bytes alone)
        since start. Subito's PM bytes also hold its double-write copies and
        per-page log entries; InnoDB's doublewrite goes to its data files."""
        s = self.status()
        if self.engine == "subito":
            return (int(s["Subito_pm_bytes_written"]), int(s["Subito_page_file_bytes_written"]),
                    int(s["Subito_log_bytes"]))
        return (int(s["Innodb_os_log_written"]), int(s["Innodb_data_written"]),
                int(s["Innodb_os_log_written"]))

    def destroy(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        shutil.rmtree(self.pm, ignore_errors=True)


# The NV-PPL seed's SSD (its table of media): 28K random 4 KiB writes per
# second (555K reads, left uncapped: above what this machine's disk serves).
# Both engines write 16 KiB pages: 7,000 page writes per second.
SEED_SSD_WRITE_IOPS = 28000 * 4096 // 16384


class WriteCap:
    """Caps the block-device write operations per second of a process (all
    its threads, and those it starts later) to the device holding `path`,
    with the kernel's block throttle: a cgroup v1 `blkio` group
    (`blkio.throttle.write_iops_device`) or a cgroup v2 group (`io.max`).
    An operation is one bio of any size, so a large sequential write (a
    batch of pages) counts as one, as a page does. O_DIRECT writes are
    throttled as they are issued; tmpfs (the PM tier) is not a block device
    and is not capped."""

    def __init__(self, path, iops, name="subito-write-cap"):
        self.iops = iops
        self.device = self.whole_disk(os.stat(path).st_dev, path)
        v1, v2 = "/sys/fs/cgroup/blkio", "/sys/fs/cgroup"
        v2_controllers = os.path.join(v2, "cgroup.controllers")
        if os.path.exists(os.path.join(v1, "blkio.throttle.write_iops_device")):
            self.group = os.path.join(v1, name)
            os.makedirs(self.group, exist_ok=True)
            self.write("blkio.throttle.write_iops_device", f"{self.device} {iops}")
        elif os.path.exists(v2_controllers) and "io" in open(v2_controllers).read().split():
            with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
                f.write("+io")
            self.group = os.path.join(v2, name)
            os.makedirs(self.group, exist_ok=True)
            self.write("io.max", f"{self.device} wiops={iops}")
        else:
            sys.exit("write cap: neither cgroup v1 blkio nor the cgroup v2 io controller is "
                     "available on this machine (and root is needed to use them)")

    @staticmethod
    def whole_disk(dev, path):
        """MAJ:MIN of the disk holding device `dev` (the throttle takes disks,
        not partitions)."""
        node = os.path.realpath(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
        if not os.path.exists(os.path.join(node, "dev")):
            sys.exit(f"write cap: {path} is not on a block device ({os.major(dev)}:{os.minor(dev)})")
        if os.path.exists(os.path.join(node, "partition")):
            node = os.path.dirname(node)
        with open(os.path.join(node, "dev")) as f:
            return f.read().strip()

    def write(self, name, value):
        with open(os.path.join(self.group, name), "w") as f:
            f.write(value)

    def add(self, pid):
        self.write("cgroup.procs", str(pid))

    def remove(self, pid):
        """Back to the root group (a no-op once the process has ended)."""
        try:
            with open(os.path.join(os.path.dirname(self.group), "cgroup.procs"), "w") as f:
                f.write(str(pid))
        except OSError:
            pass

    def delete(self):
        try:
            os.rmdir(self.group)
        except OSError:
            pass

    def describe(self):
        return (f"write operations to device {self.device} capped at {self.iops:,} per second "
                f"for the server process, reads not capped")


def sysbench(server, args, tables, rows, workload, seconds, action="run", events=None):
    """events: a fixed number of transactions (seconds 0), with a fixed seed."""
    cmd = ["sysbench", "--db-driver=mysql", f"--mysql-socket={server.sock}", "--mysql-user=root",
           "--mysql-db=sbtest", f"--mysql-storage-engine={server.engine}", f"--tables={tables}",
           f"--table-size={rows}", f"--threads={args.threads}", "--report-interval=0",
           "--percentile=95", f"--time={seconds}"]
    if events is not None:
        cmd += [f"--events={events}", "--rand-seed=1"]
    cmd += [workload, action]
    out = sh(cmd).stdout
    if action != "run":
        return {}
    tps = float(re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", out).group(1))
    p95 = float(re.search(r"95th percentile:\s+([\d.]+)", out).group(1))
    txns = int(re.search(r"transactions:\s+(\d+)", out).group(1))
    return {"tps": tps, "p95_ms": p95, "transactions": txns}


def sysbench_prepare(srv, tables, rows, threads):
    """sysbench's own load of `tables` x `rows` into a database sbtest it creates."""
    srv.sql("CREATE DATABASE sbtest")
    sh(["sysbench", "--db-driver=mysql", f"--mysql-socket={srv.sock}", "--mysql-user=root",
        "--mysql-db=sbtest", f"--mysql-storage-engine={srv.engine}", f"--tables={tables}",
        f"--table-size={rows}", f"--threads={min(threads, tables)}", "oltp_common", "prepare"])


def measured_sysbench(server, args, tables, rows, workload, seconds):
    """A sysbench run with the server's bytes per transaction: to the PM tier
    or redo, to data files, and its process's disk reads and writes."""
    pm0, data0, redo0 = server.written()
    rd0, wr0 = server.disk_io()
    r = sysbench(server, args, tables, rows, workload, seconds)
    pm1, data1, redo1 = server.written()
    rd1, wr1 = server.disk_io()
    n = max(r["transactions"], 1)
    r["pm_bytes_per_txn"] = round((pm1 - pm0) / n)
    r["redo_bytes_per_txn"] = round((redo1 - redo0) / n)
    r["data_bytes_per_txn"] = round((data1 - data0) / n)
    r["disk_read_bytes_per_txn"] = round((rd1 - rd0) / n)
    r["disk_write_bytes_per_txn"] = round((wr1 - wr0) / n)
    return r


@contextlib.contextmanager
def write_capped(args, srv, name, result, settle, settle_what):
    """The server's writes capped (args.cap) for the block's measured runs,
    into result (regimes g and h), after `settle` (a call) ran for
    args.cap_settle seconds under the cap, not measured: both engines start
    the measured runs in the capped steady state, not with what the uncapped
    runs left them to write."""
    result.setdefault("caching", {})[srv.engine] = {**srv.caching(),
                                                    "write_cap": args.cap.describe()}
    try:
        args.cap.add(srv.pid())
        log(f"({name}) {srv.engine}: {args.cap.describe()}; {settle_what} for "
            f"{args.cap_settle} s first, not measured")
        settle()
        yield
    finally:
        args.cap.remove(srv.pid())


def capped_workloads(args, srv, name, tables, rows, workloads, result):
    """Runs `workloads` again on srv with its writes capped (regime g)."""
    with write_capped(args, srv, name, result,
                      lambda: sysbench(srv, args, tables, rows, workloads[0], args.cap_settle),
                      workloads[0]):
        for w in workloads:
            r = measured_sysbench(srv, args, tables, rows, w, args.seconds)
            result.setdefault(w, {})[srv.engine] = r
            log_workload(name, srv.engine, w, r)


def log_workload(name, engine, w, r):
    log(f"({name}) {engine} {w}: {r['tps']:.0f} tps, p95 {r['p95_ms']} ms, "
        f"{r['pm_bytes_per_txn']} B redo/PM (redo log {r['redo_bytes_per_txn']} B) + "
        f"{r['data_bytes_per_txn']} B data per txn; "
        f"process disk I/O per txn: read {r['disk_read_bytes_per_txn']} B, "
        f"written {r['disk_write_bytes_per_txn']} B")


def run_sysbench_regime(args, name, engine, tables, rows, pool, workloads, result, timed_load=False,
                        restart=False, durable=True, capped=None):
    """capped: (workloads, result) run after `workloads` with the writes
    capped (regime g), before the restart."""
    srv = Server(args, engine, name, pool)
    srv.durable = durable
    srv.start()
    log(f"({name}) {engine}: loading {tables} x {rows} rows")
    t0 = time.time()
    sysbench_prepare(srv, tables, rows, args.threads)
    load_s = time.time() - t0
    if timed_load:
        result.setdefault("bulk_load", {})[engine] = {"seconds": round(load_s, 2),
                                                      "rows": tables * rows}
        log(f"(d) {engine}: bulk load {load_s:.1f} s")
    cache = srv.caching()
    result.setdefault("caching", {})[engine] = cache
    log(f"({name}) {engine}: {cache['text']}, pool {cache['pool'] >> 20} MiB")
    if not cache["direct_io"]:
        log(f"({name}) WARNING: {engine}'s data files are cached by the OS: not an equal comparison")
    for w in workloads:
        r = measured_sysbench(srv, args, tables, rows, w, args.seconds)
        result.setdefault(w, {})[engine] = r
        log_workload(name, engine, w, r)
    if capped:
        capped_workloads(args, srv, "g", tables, rows, capped[0], capped[1])
    if restart:
        log(f"(e) {engine}: oltp_write_only, SIGKILL after {args.kill_after} s")
        load = subprocess.Popen(["sysbench", "--db-driver=mysql", f"--mysql-socket={srv.sock}",
                                 "--mysql-user=root", "--mysql-db=sbtest", f"--tables={tables}",
                                 f"--table-size={rows}", f"--threads={args.threads}",
                                 f"--time={args.kill_after * 3}", "oltp_write_only", "run"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(args.kill_after)
        t0 = time.time()
        srv.stop(kill=True)
        load.wait()
        srv.start()  # returns after the first answered query
        seconds = time.time() - t0
        result.setdefault("restart", {})[engine] = {"seconds": round(seconds, 2)}
        log(f"(e) {engine}: restart {seconds:.2f} s from SIGKILL to the first answered query")
    srv.destroy()


def run_tpcc(args, engine, result, capped=None):
    """(c), and with `capped` (a result dict) the same run again with the
    writes capped (h), on the same server and data."""
    srv = Server(args, engine, "c", args.tpcc_pool)
    srv.start()
    srv.sql("CREATE DATABASE tpcc")
    tpcc = [args.go_tpc, "tpcc", "-H", "127.0.0.1", "-P", str(srv.port), "-U", "root", "-D", "tpcc",
            "--warehouses", str(args.warehouses)]
    log(f"(c) {engine}: loading {args.warehouses} warehouse(s)")
    # go-tpc checks the whole load after prepare, which takes far longer than
    # the load on any engine here: stop it once loading is done.
    p = subprocess.Popen(tpcc + ["prepare", "-T", str(min(args.threads, args.warehouses * 2))],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    t0 = time.time()
    for line in p.stdout:
        if line.startswith("begin to check"):
            p.kill()
            break
    p.wait()
    log(f"(c) {engine}: loaded in {time.time() - t0:.0f} s")
    if "c" in args.regimes:
        result.setdefault("caching", {})[engine] = srv.caching()
        tpcc_run(args, srv, "c", tpcc, result)
    if capped is not None:
        settle = tpcc + ["run", "-T", str(args.threads), "--time", f"{args.cap_settle}s",
                         "--interval", "10000s"]
        with write_capped(args, srv, "h", capped, lambda: sh(settle), "TPC-C"):
            tpcc_run(args, srv, "h", tpcc, capped)
    srv.destroy()


def tpcc_run(args, srv, name, tpcc, result):
    """One measured go-tpc run on a loaded server, into result["tpcc"]."""
    engine = srv.engine
    pm0, data0, _ = srv.written()
    rd0, wr0 = srv.disk_io()
    out = sh(tpcc + ["run", "-T", str(args.threads), "--time", f"{args.tpcc_seconds}s",
                     "--interval", "10000s"]).stdout
    pm1, data1, _ = srv.written()
    rd1, wr1 = srv.disk_io()
    m = re.search(r"tpmC: ([\d.]+), tpmTotal: ([\d.]+)", out)
    errs = sum(int(x) for x in re.findall(r"_ERR - Takes\(s\): [\d.]+, Count: (\d+)", out))
    # go-tpc's summary line per transaction type; NEW_ORDER's is tpmC's.
    lat = re.search(r"\[Summary\] NEW_ORDER - .*?95th\(ms\): ([\d.]+), 99th\(ms\): ([\d.]+)", out)
    total = float(m.group(2)) * args.tpcc_seconds / 60
    r = {"tpmC": float(m.group(1)), "tpmTotal": float(m.group(2)), "errors": errs,
         "new_order_p95_ms": float(lat.group(1)) if lat else None,
         "new_order_p99_ms": float(lat.group(2)) if lat else None,
         "pm_bytes_per_txn": round((pm1 - pm0) / max(total, 1)),
         "data_bytes_per_txn": round((data1 - data0) / max(total, 1)),
         "disk_read_bytes_per_txn": round((rd1 - rd0) / max(total, 1)),
         "disk_write_bytes_per_txn": round((wr1 - wr0) / max(total, 1))}
    result.setdefault("tpcc", {})[engine] = r
    log(f"({name}) {engine}: tpmC {r['tpmC']:.0f}, NEW_ORDER p99 {r['new_order_p99_ms']} ms, "
        f"{errs} errors (deadlocks/timeouts), "
        f"{r['pm_bytes_per_txn']} B redo/PM + {r['data_bytes_per_txn']} B data per txn; "
        f"process disk I/O per txn: read {r['disk_read_bytes_per_txn']} B, "
        f"written {r['disk_write_bytes_per_txn']} B")


def ratio(a, b):
    return a / b if b else float("nan")


def ceiling_shares(res):
    """Per workload run in (a) and (f): each engine's durable tps as a share of
    its own tps with commits not durable (the ceiling the server allows)."""
    out = {}
    for w, v in res.get("a", {}).items():
        f = res.get("f", {}).get(w, {})
        if all(e in v and e in f and "tps" in v[e] and "tps" in f[e] for e in ENGINES):
            out[w] = {e: ratio(v[e]["tps"], f[e]["tps"]) for e in ENGINES}
    return out


def print_table(res):
    print()
    print(f"{'figure':44} {'Subito':>12} {'InnoDB':>12} {'ratio':>8}")

    def row(label, s, i, higher_better=True):
        r = ratio(s, i)
        print(f"{label:44} {s:12.1f} {i:12.1f} {r:7.2f}x")

    for regime in ("a", "b", "g", "f"):
        for w, v in res.get(regime, {}).items():
            if "subito" in v and "innodb" in v and "tps" in v["subito"]:
                row(f"({regime}) {w} tps", v["subito"]["tps"], v["innodb"]["tps"])
                row(f"({regime}) {w} p95 ms", v["subito"]["p95_ms"], v["innodb"]["p95_ms"])
                row(f"({regime}) {w} bytes to data files / txn", v["subito"]["data_bytes_per_txn"],
                    v["innodb"]["data_bytes_per_txn"])
                row(f"({regime}) {w} redo (PM) bytes / txn", v["subito"]["pm_bytes_per_txn"],
                    v["innodb"]["pm_bytes_per_txn"])
                row(f"({regime}) {w} of which redo log / txn", v["subito"]["redo_bytes_per_txn"],
                    v["innodb"]["redo_bytes_per_txn"])
                row(f"({regime}) {w} process disk reads / txn", v["subito"]["disk_read_bytes_per_txn"],
                    v["innodb"]["disk_read_bytes_per_txn"], False)
                row(f"({regime}) {w} process disk writes / txn",
                    v["subito"]["disk_write_bytes_per_txn"], v["innodb"]["disk_write_bytes_per_txn"],
                    False)
    for w, share in ceiling_shares(res).items():
        row(f"(a)/(f) {w}: durable tps / not durable", share["subito"], share["innodb"])
    for regime in ("c", "h"):
        t = res.get(regime, {}).get("tpcc", {})
        if "subito" in t and "innodb" in t:
            row(f"({regime}) TPC-C tpmC", t["subito"]["tpmC"], t["innodb"]["tpmC"])
            if t["subito"].get("new_order_p99_ms") and t["innodb"].get("new_order_p99_ms"):
                row(f"({regime}) TPC-C NEW_ORDER p99 ms (lower is better)",
                    t["subito"]["new_order_p99_ms"], t["innodb"]["new_order_p99_ms"])
            row(f"({regime}) TPC-C bytes to data files / txn", t["subito"]["data_bytes_per_txn"],
                t["innodb"]["data_bytes_per_txn"])
    d = res["b"].get("bulk_load", {})
    if "subito" in d and "innodb" in d:
        row("(d) bulk load seconds (lower is better)", d["subito"]["seconds"], d["innodb"]["seconds"])
    e = res["b"].get("restart", {})
    if "subito" in e and "innodb" in e:
        row("(e) restart seconds (lower is better)", e["subito"]["seconds"], e["innodb"]["seconds"])


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels, ratios = [], []
    for regime in ("a", "b", "g", "f"):
        for w, v in res.get(regime, {}).items():
            if "subito" in v and "innodb" in v and "tps" in v["subito"]:
                labels.append(f"({regime}) {w.replace('oltp_', '')}")
                ratios.append(ratio(v["subito"]["tps"], v["innodb"]["tps"]))
    for regime in ("c", "h"):
        t = res.get(regime, {}).get("tpcc", {})
        if "subito" in t and "innodb" in t:
            labels.append(f"({regime}) tpmC")
            ratios.append(ratio(t["subito"]["tpmC"], t["innodb"]["tpmC"]))
    for key, name in (("bulk_load", "(d) load speed"), ("restart", "(e) restart speed")):
        v = res["b"].get(key, {})
        if "subito" in v and "innodb" in v:
            labels.append(name)
            ratios.append(ratio(v["innodb"]["seconds"], v["subito"]["seconds"]))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    colors = ["tab:green" if r >= 1 else "tab:red" for r in ratios]
    ax.barh(labels[::-1], ratios[::-1], color=colors[::-1])
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("Subito / InnoDB (higher is better; d, e: InnoDB time / Subito time)")
    ax.set_title("Subito vs InnoDB, same MariaDB 10.11.18 server, same machine")
    for i, r in enumerate(ratios[::-1]):
        ax.text(r, i, f" {r:.2f}x", va="center")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, short runs (minutes)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--work", default="/var/tmp/subito-compare")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-compare")
    ap.add_argument("--go-tpc", required=True)
    ap.add_argument("--out", default=os.path.join(ROOT, "out"))
    ap.add_argument("--regimes", default="abcdef")
    ap.add_argument("--ppl-size", default=None,
                    help="Subito's per-page log region (subito_ppl_size), e.g. 64M; 0: off; "
                         "default: the server's")
    ap.add_argument("--write-cap", type=int, default=SEED_SSD_WRITE_IOPS,
                    help="regimes g and h: the data device's write operations per second "
                         "(default: the NV-PPL seed's SSD's 28K random 4-KiB writes per second, "
                         "as 16-KiB pages: 7,000)")
    ap.add_argument("--cap-settle", type=int, default=20,
                    help="regimes g and h: seconds of load under the cap before measuring")
    ap.add_argument("--ppl-threshold", type=int, default=None,
                    help="subito_ppl_threshold; default: the server's")
    args = ap.parse_args()
    if args.quick:
        args.seconds = min(args.seconds, 10)
        mem_tables, mem_rows = 4, 20000
        io_tables, io_rows = 8, 100000
        args.io_pool, args.mem_pool = "16M", "1G"
        args.warehouses, args.tpcc_seconds, args.tpcc_pool = 1, 30, "32M"
        args.kill_after = 5
    else:
        mem_tables, mem_rows = 8, 100000
        io_tables, io_rows = 8, 1000000
        args.io_pool, args.mem_pool = "128M", "4G"
        args.warehouses, args.tpcc_seconds, args.tpcc_pool = 10, 120, "128M"
        args.kill_after = 20
    args.log_size = "256M"
    settings = {
        "quick": args.quick, "threads": args.threads, "seconds_per_workload": args.seconds,
        "a": {"tables": mem_tables, "rows": mem_rows, "buffer_pool": args.mem_pool},
        "f": {"tables": mem_tables, "rows": mem_rows, "buffer_pool": args.mem_pool,
              "durable": False},
        "b": {"tables": io_tables, "rows": io_rows, "buffer_pool": args.io_pool},
        "c": {"warehouses": args.warehouses, "seconds": args.tpcc_seconds, "buffer_pool": args.tpcc_pool},
        "regimes": args.regimes, "write_cap_iops": args.write_cap, "cap_settle_seconds": args.cap_settle,
        "log_file_size": args.log_size, "pm_dir": args.pm_dir, "data_dir": args.work,
        "subito_ppl_size": args.ppl_size, "subito_ppl_threshold": args.ppl_threshold,
        "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                   f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') >> 30} GiB",
    }
    res = {"settings": settings, "a": {}, "b": {}, "c": {}, "f": {}, "g": {}, "h": {}}
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(args.work, exist_ok=True)
    # Checked before anything runs: a machine that cannot cap fails now.
    args.cap = WriteCap(args.work, args.write_cap) if any(r in args.regimes for r in "gh") else None
    for engine in ENGINES:
        if "a" in args.regimes:
            run_sysbench_regime(args, "a", engine, mem_tables, mem_rows, args.mem_pool,
                                MEM_WORKLOADS, res["a"])
        if any(r in args.regimes for r in "bdeg"):
            run_sysbench_regime(args, "b", engine, io_tables, io_rows, args.io_pool,
                                ["oltp_point_select", "oltp_write_only", "oltp_read_write"]
                                if "b" in args.regimes else [],
                                res["b"], timed_load="d" in args.regimes, restart="e" in args.regimes,
                                capped=(["oltp_write_only", "oltp_read_write"], res["g"])
                                if "g" in args.regimes else None)
        if "c" in args.regimes or "h" in args.regimes:
            run_tpcc(args, engine, res["c"], res["h"] if "h" in args.regimes else None)
        if "f" in args.regimes:
            run_sysbench_regime(args, "f", engine, mem_tables, mem_rows, args.mem_pool,
                                MEM_WORKLOADS, res["f"], durable=False)
    if args.cap:
        args.cap.delete()
    print_table(res)
    for regime in ("a", "b", "c", "f", "g", "h"):
        for engine, c in res[regime].get("caching", {}).items():
            cap = f"; {c['write_cap']}" if "write_cap" in c else ""
            print(f"({regime}) {engine}: {c['text']}, pool {c['pool'] >> 20} MiB{cap}")
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(res, f, indent=2)
    plot(res, os.path.join(args.out, "compare.png"))
    log(f"wrote {args.out}/compare.json and {args.out}/compare.png")


if __name__ == "__main__":
    sys.exit(main())
