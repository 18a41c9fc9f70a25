#!/usr/bin/python3
"""Restart after SIGKILL, Subito vs InnoDB in one run (scripts/bench-restart.sh;
issue 14, SOFORT): for each data size and each redo log size, a write load
(sysbench oltp_write_only), SIGKILL, then the time from the start command to
the first answered query on one of the engine's tables, and the throughput
second by second after it against the steady state before the kill.

Both engines: the settings of bench/compare.py (O_DIRECT data files, the same
buffer pool, durable commits, doublewrite on, redo on the PM tier) with the
log size of the point. The data is loaded once per size and engine; each log
size then starts from a clean shutdown with the old log removed (both
engines make a new one of the new size). The server's own start-up is
measured apart: a clean restart of the same data (no recovery), and
Subito's own open time comes from its error-log line. Writes JSON and a PNG.
"""
import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import ENGINES, ROOT, Server, log, sh, sysbench_prepare  # noqa: E402

ROWS_PER_GB = 4_000_000  # sysbench rows (about 250 B each with index k) per GB of data
TABLES = 8
QUERY = "SELECT c FROM sbtest.sbtest1 WHERE id = 1"


def size_bytes(text):
    m = re.fullmatch(r"(\d+)([KMG]?)", text)
    return int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]


def first_answer(srv, t0, timeout=1800):
    """Seconds from t0 to the first answer to QUERY (polled every 10 ms)."""
    while time.time() - t0 < timeout:
        r = subprocess.run(["mariadb", "--no-defaults", f"--socket={srv.sock}", "-uroot", "-N",
                            "-e", QUERY], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return time.time() - t0
        time.sleep(0.01)
    raise RuntimeError(f"no answer from {srv.engine} within {timeout} s")


def timed_start(srv):
    """Starts the server; seconds from the start command to the first answered
    query on the engine's table."""
    t0 = time.time()
    p = subprocess.Popen(srv.start_command(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True)
    seconds = first_answer(srv, t0)
    _, err = p.communicate()
    if p.returncode != 0:
        raise RuntimeError(f"server-start failed: {err[-2000:]}")
    return seconds


def check_pinned(srv):
    """With --pin: refuses a server that is not on its CPUs (a start path that
    left out taskset would compare unpinned throughput with pinned)."""
    if not srv.cpus:
        return
    with open(f"/proc/{srv.pid()}/status") as f:
        allowed = next(line.split()[1] for line in f if line.startswith("Cpus_allowed_list"))
    if allowed != srv.cpus:
        raise RuntimeError(f"{srv.engine}'s server runs on CPUs {allowed}, not {srv.cpus}")


def engine_open(srv):
    """What the engine said of its open in the error log of the last start."""
    with open(os.path.join(srv.dir, "error.log")) as f:
        text = f.read()
    if srv.engine == "subito":
        m = re.search(r"Subito: opened \S+ in ([\d.]+) s \((\d+) redo records, (\d+) transactions "
                      r"rolled back(?:, \d+ of them left to a background thread)?(?:, \d+ kept prepared)?"
                      r"(?:, (\d+) pages left to redo lazily)?\)", text)
        if not m:
            return {}
        out = {"open_seconds": float(m.group(1)), "redo_records": int(m.group(2)),
               "rolled_back": int(m.group(3)), "pages_pending": int(m.group(4) or 0)}
        # Lazy redo: when the background thread had redone the last page.
        steps = re.search(r"Subito: opened .*?; steps \(s\): (.*?); ", text)
        if steps:
            out["open_steps"] = {name: float(sec) for name, sec in
                                 re.findall(r"([^,]+?) ([\d.]+)(?:, |$)", steps.group(1))}
        done = re.search(r"Subito: background redo finished ([\d.]+) s after the open", text)
        if done:
            out["background_redo_seconds"] = float(done.group(1))
        load = re.search(r"Subito: buffer pool load (completed|ended early): (\d+) of (\d+) listed "
                         r"page\(s\) loaded in ([\d.]+) s", text)
        if load:
            out["warm_up"] = {"pages": int(load.group(2)), "listed": int(load.group(3)),
                              "seconds": float(load.group(4)), "complete": load.group(1) == "completed"}
        return out
    m = re.search(r"InnoDB: Starting crash recovery from checkpoint LSN=(\d+)", text)
    end = re.search(r"InnoDB: log sequence number (\d+)", text)
    out = {}
    if "InnoDB: Buffer pool(s) load completed" in text:
        out["warm_up"] = {"complete": True}
    if m:
        out["checkpoint_lsn"] = int(m.group(1))
        if end:
            out["redo_bytes_since_checkpoint"] = int(end.group(1)) - int(m.group(1))
    return out


def sysbench_cmd(srv, args, rows, seconds):
    pin = ["taskset", "-c", args.client_cpus] if getattr(args, "client_cpus", None) else []
    return pin + ["sysbench", "--db-driver=mysql", f"--mysql-socket={srv.sock}", "--mysql-user=root",
            "--mysql-db=sbtest", f"--mysql-storage-engine={srv.engine}", f"--tables={TABLES}",
            f"--table-size={rows}", f"--threads={args.threads}", "--report-interval=1",
            f"--time={seconds}", "oltp_write_only", "run"]


def per_second_tps(text):
    return [float(x) for x in re.findall(r"^\[ *\d+s \] thds: \d+ tps: ([\d.]+)", text, re.M)]


def remove_log(srv):
    """After a clean shutdown, so that the next start has a log of the new
    size: Subito's PM tier goes (the start makes a new log); InnoDB resizes
    its log itself at a start after a clean shutdown."""
    if srv.engine == "subito":
        shutil.rmtree(os.path.join(srv.pm, "subito"), ignore_errors=True)


def data_bytes(srv):
    total = 0
    for dirpath, _, files in os.walk(os.path.join(srv.dir, "data")):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total


def point(args, srv, rows, log_size):
    """One (size, log) point of one engine, from a clean shutdown."""
    srv.log_size = log_size
    remove_log(srv)
    srv.start()
    check_pinned(srv)
    before = subprocess.Popen(sysbench_cmd(srv, args, rows, args.load_seconds + 600),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(args.load_seconds)
    srv.stop(kill=True)
    out, _ = before.communicate()
    tps = per_second_tps(out)
    # The steady state: the last 30 s before the kill (this load's throughput
    # moves by a quarter between 10-second windows of one run).
    steady = sum(tps[-30:]) / max(len(tps[-30:]), 1)
    restart = timed_start(srv)
    check_pinned(srv)
    opened = engine_open(srv)
    after = sh(sysbench_cmd(srv, args, rows, args.after_seconds), check=False)
    after_tps = per_second_tps(after.stdout)
    # Lazy redo's background thread says when it finished, meanwhile.
    later = engine_open(srv)
    for key in ("background_redo_seconds", "warm_up"):
        if key in later:
            opened[key] = later[key]
    failed = None
    if after.returncode != 0:
        failed = (after.stdout + after.stderr).strip().splitlines()[-3:]
        log(f"{srv.engine}: sysbench after the restart failed: {failed}")
    # Back: the first second whose 3-second trailing mean reaches 90%.
    back = next((i + 1 for i in range(len(after_tps))
                 if sum(after_tps[max(0, i - 2):i + 1]) / len(after_tps[max(0, i - 2):i + 1])
                 >= 0.9 * steady), None)
    srv.stop()
    clean = timed_start(srv)
    clean_open = engine_open(srv)
    srv.stop()
    r = {"log_size": log_size, "restart_seconds": round(restart, 3), **opened,
         "clean_start_seconds": round(clean, 3), "steady_tps": round(steady, 1),
         "tps_before": tps, "tps_after": after_tps,
         "seconds_to_90pct": None if back is None else round(restart + back, 1)}
    if failed:
        r["load_after_failed"] = failed
    if "open_seconds" in clean_open:
        r["clean_open_seconds"] = clean_open["open_seconds"]
    return r


def run_engine(args, engine, gb):
    rows = int(gb * ROWS_PER_GB / TABLES)
    srv = Server(args, engine, f"restart-{gb:g}g", args.pool)
    if args.no_warm_up:
        srv.extra += ["--subito-buffer-pool-load-at-startup=OFF",
                      "--innodb-buffer-pool-load-at-startup=OFF"]
    if engine == "subito" and args.dump_interval is not None:
        srv.extra += [f"--subito-buffer-pool-dump-interval={args.dump_interval}"]
    srv.log_size = args.logs[0]
    srv.start()
    log(f"{engine} {gb:g} GB: loading {TABLES} x {rows:,} rows")
    t0 = time.time()
    sysbench_prepare(srv, TABLES, rows, args.threads)
    cache = srv.caching()
    srv.stop()
    srv.cpus = args.server_cpus  # the load above ran on every CPU
    res = {"rows": TABLES * rows, "load_seconds": round(time.time() - t0, 1),
           "data_bytes": data_bytes(srv), "caching": cache["text"], "points": []}
    log(f"{engine} {gb:g} GB: loaded in {res['load_seconds']} s, {res['data_bytes'] / 2**30:.2f} GiB "
        f"on disk; {cache['text']}")
    for log_size in args.logs:
        p = point(args, srv, rows, log_size)
        res["points"].append(p)
        extra = (f", engine open {p['open_seconds']} s ({p['redo_records']:,} redo records, "
                 f"{p['rolled_back']} rolled back, {p['pages_pending']:,} pages left to redo "
                 f"lazily, all redone {p.get('background_redo_seconds', '-')} s after the open)"
                 if "open_seconds" in p else "")
        w = p.get("warm_up")
        warm = ("; pool not warmed from a page list" if not w else
                f"; warm-up: {w['pages']:,} of {w['listed']:,} listed pages in {w['seconds']} s"
                if "pages" in w else "; warm-up: the page list loaded")
        log(f"{engine} {gb:g} GB, log {log_size}: first answer {p['restart_seconds']} s after the "
            f"start command{extra}; clean start {p['clean_start_seconds']} s; 90% of "
            f"{p['steady_tps']:.0f} tps after {p['seconds_to_90pct']} s{warm}")
    srv.destroy()
    return res


def plot(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.5))
    sizes = res["settings"]["sizes_gb"]
    for engine, style in (("subito", "-"), ("innodb", "--")):
        for log_size in res["settings"]["logs"]:
            ys = []
            for gb in sizes:
                pts = [p for p in res[engine][f"{gb:g}"]["points"] if p["log_size"] == log_size]
                ys.append(pts[0]["restart_seconds"] if pts else float("nan"))
            a1.plot(sizes, ys, style, marker="o", label=f"{engine}, log {log_size}")
    a1.axhline(0.2, color="grey", lw=0.8, ls=":", label="target 0.2 s (engine open)")
    a1.set_xlabel("data, GB (sysbench rows)")
    a1.set_ylabel("SIGKILL restart: s to the first answer")
    a1.set_title("Restart after SIGKILL during oltp_write_only")
    a1.legend(fontsize=7)
    gb, log_size = sizes[-1], res["settings"]["logs"][-1]
    for engine, style in (("subito", "-"), ("innodb", "--")):
        p = [p for p in res[engine][f"{gb:g}"]["points"] if p["log_size"] == log_size][0]
        xs = [p["restart_seconds"] + i + 1 for i in range(len(p["tps_after"]))]
        ys = [t / p["steady_tps"] * 100 if p["steady_tps"] else 0 for t in p["tps_after"]]
        a2.plot(xs, ys, style, label=f"{engine} ({p['steady_tps']:.0f} tps steady)")
    a2.axhline(90, color="grey", lw=0.8, ls=":")
    a2.set_xlabel("s after the start command")
    a2.set_ylabel("% of the steady tps before the kill")
    a2.set_title(f"Throughput after the restart ({gb:g} GB, log {log_size})")
    a2.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="0.25 GB, logs 64M and 256M, short loads")
    ap.add_argument("--sizes-gb", default="1,4,16")
    ap.add_argument("--logs", default="256M,1G,4G", help="redo log sizes (per stream for Subito)")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--pool", default="1G")
    ap.add_argument("--load-seconds", type=int, default=60, help="write load before the kill")
    ap.add_argument("--after-seconds", type=int, default=30, help="throughput after the restart")
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--no-warm-up", action="store_true",
                    help="both engines start with a cold pool (no page list loaded)")
    ap.add_argument("--dump-interval", type=int, default=None,
                    help="subito_buffer_pool_dump_interval in seconds (the server's default if unset)")
    ap.add_argument("--pin", action="store_true",
                    help="the server on the upper half of the CPUs, sysbench on the lower half, from "
                         "the first start after the load: 4 client and 4 server threads sharing "
                         "every core make the throughput swing in phases (scheduling), which "
                         "the 90%% figure cannot be told from")
    ap.add_argument("--work", default="/var/tmp/subito-restart")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-restart")
    ap.add_argument("--out", default=os.path.join(ROOT, "out"))
    args = ap.parse_args()
    if args.quick:
        args.sizes_gb, args.logs, args.pool = "0.25", "64M,256M", "128M"
        args.load_seconds, args.after_seconds = 15, 10
    args.sizes = [float(x) for x in args.sizes_gb.split(",")]
    args.logs = args.logs.split(",")
    for s in args.logs:
        size_bytes(s)  # refuses a malformed size before hours of loading
    args.ppl_size = args.ppl_threshold = None
    args.server_cpus = args.client_cpus = None
    if args.pin:
        n = os.cpu_count() or 1
        if n < 2:
            sys.exit("--pin needs at least 2 CPUs")
        def span(a, b):  # as /proc/PID/status writes it
            return f"{a}" if a == b else f"{a}-{b}"
        args.client_cpus, args.server_cpus = span(0, n // 2 - 1), span(n // 2, n - 1)
    args.log_size = args.logs[0]
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    res = {"settings": {"sizes_gb": args.sizes, "logs": args.logs, "tables": TABLES,
                        "threads": args.threads, "buffer_pool": args.pool,
                        "load_seconds": args.load_seconds, "after_seconds": args.after_seconds,
                        "quick": args.quick, "warm_up": not args.no_warm_up,
                        "server_cpus": args.server_cpus, "client_cpus": args.client_cpus,
                        "subito_dump_interval": args.dump_interval,
                        "server": sh(["/usr/sbin/mariadbd", "--version"]).stdout.strip(),
                        "machine": f"{platform.machine()}, {os.cpu_count()} cores"}}
    engines = args.engines.split(",")
    for gb in args.sizes:
        for engine in engines:
            res.setdefault(engine, {})[f"{gb:g}"] = run_engine(args, engine, gb)
            # What is measured so far survives a later size's failure.
            with open(os.path.join(args.out, "restart.partial.json"), "w") as f:
                json.dump(res, f, indent=2)
    print("\n| data | log | Subito first answer s (engine open s) | InnoDB first answer s | "
          "clean start s (Subito / InnoDB) | s to 90% tps (Subito / InnoDB) |")
    print("|---|---|---:|---:|---:|---:|")
    for gb in args.sizes:
        for i, log_size in enumerate(args.logs):
            cells = {e: res[e][f"{gb:g}"]["points"][i] for e in engines}
            s, n = cells.get("subito", {}), cells.get("innodb", {})
            print(f"| {gb:g} GB | {log_size} | {s.get('restart_seconds')} ({s.get('open_seconds')}) | "
                  f"{n.get('restart_seconds')} | {s.get('clean_start_seconds')} / "
                  f"{n.get('clean_start_seconds')} | {s.get('seconds_to_90pct')} / "
                  f"{n.get('seconds_to_90pct')} |")
    if set(ENGINES) <= set(engines):
        plot(res, os.path.join(args.out, "restart.png"))
    with open(os.path.join(args.out, "restart.json"), "w") as f:
        json.dump(res, f, indent=2)
    log(f"wrote {args.out}/restart.json")


if __name__ == "__main__":
    sys.exit(main())
