#!/usr/bin/python3
"""Renders a benchmark's JSON into its section of docs/results.md, between
<!-- NAME:begin --> and <!-- NAME:end --> markers (added, with the section's
heading and introduction, if missing)."""
import datetime
import json
import re
import sys

import compare  # bench/compare.py: the regimes' derived figures


def log_section(data, png):
    out = []
    out.append(f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-log.sh --record`.")
    out.append("")
    out.append(f"- machine: {data['machine']}")
    out.append(f"- tier: {data['tier']} (`{data['dir']}`)")
    s = data["settings"]
    out.append(f"- log: {s['log_file_size']} B per stream file, {s['log_buffer_size']} B buffer, "
               f"write-ahead {s['log_write_ahead_size']} B; {data['seconds_per_point']} s per point")
    out.append("- record size = whole record (32 B header + payload); each commit = append + wait "
               "until durable")
    out.append("")
    out.append("Raw persist rate of the tier (one thread, non-temporal copy + fence per chunk):")
    out.append("")
    out.append("| chunk | persists/s | MB/s |")
    out.append("|---:|---:|---:|")
    for r in data["raw"]:
        out.append(f"| {r['size']} B | {r['persists_per_s']:,.0f} | {r['mb_per_s']:,.0f} |")
    out.append("")
    out.append("| mode | streams | threads | record | commits/s | p50 µs | p99 µs | bytes persisted/commit | % of raw |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in data["runs"]:
        out.append(f"| {r['mode']} | {r['streams']} | {r['threads']} | {r['record_bytes']} B | "
                   f"{r['commits_per_s']:,.0f} | {r['p50_us']:.2f} | {r['p99_us']:.2f} | "
                   f"{r['persisted_bytes_per_commit']:,.0f} | {100 * r['fraction_of_raw']:.1f}% |")
    out.append("")
    out.append("Targets:")
    out.append("")
    out.append("| target | measured | limit | |")
    out.append("|---|---:|---:|---|")
    for t in data["targets"]:
        out.append(f"| {t['name']} | {t['value']:.2f} | {t['limit']:.2f} | "
                   f"{'met' if t['met'] else '**missed**'} |")
    out.append("")
    out.append(f"![log benchmark]({png})")
    return "\n".join(out)


def engine_section(data, png):
    s = data["settings"]
    p = data["prepare"]
    out = []
    out.append(f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-engine.sh --record`"
               + (" (a `--quick` run)" if s.get("quick") else "") + ".")
    out.append("")
    out.append(f"- machine: {data['machine']}")
    out.append(f"- PM tier: {data['tier']} (`{data['pm_dir']}`); page files in `{data['dir']}`")
    out.append(f"- {s['tables']} tables x {s['rows']:,} rows, {s['threads']} threads, "
               f"{s['seconds_per_workload']:g} s per workload, log `{s['log_mode']}`, "
               f"{s['page_size']} B pages")
    out.append(f"- prepare: {s['tables'] * s['rows'] / p['load_seconds']:,.0f} rows/s in "
               f"transactions of 1000 rows, then the `k` indexes in {p['index_seconds']:.1f} s; "
               f"{p['data_bytes'] / 2**20:.1f} MiB of pages for "
               f"{p['row_value_bytes'] / 2**20:.1f} MiB of row values "
               f"({100 * p['row_value_bytes'] / max(1, p['data_bytes']):.0f}% full)")
    pools = "; ".join(f"{c['name']}: {c['pool_bytes'] / 2**20:.1f} MiB "
                      f"({100 * c['pool_fraction']:.0f}% of the data)" for c in data["configs"])
    out.append(f"- buffer pool: {pools}; reopened (and warmed by a scan of both indexes) "
               "between the two")
    out.append("- latency = one transaction from its first attempt to its durable commit; "
               "retries = deadlock victims and lock timeouts, retried")
    out.append("- bytes per transaction: PM = redo log (padding included) + double-write copies; "
               "page files = bytes the page cleaners wrote during the interval")
    out.append("")
    out.append("| config | workload | txn/s | p50 µs | p99 µs | retries | PM B/txn (log + dw) "
               "| page-file B/txn written | read | buffer hits |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in data["runs"]:
        out.append(f"| {r['config']} | {r['workload']} | {r['tps']:,.0f} | {r['p50_us']:,.1f} | "
                   f"{r['p99_us']:,.1f} | {r['retries']} | {r['pm_bytes_per_txn']:,.0f} "
                   f"({r['log_bytes_per_txn']:,.0f} + {r['double_write_bytes_per_txn']:,.0f}) | "
                   f"{r['page_file_bytes_written_per_txn']:,.0f} | "
                   f"{r['page_file_bytes_read_per_txn']:,.0f} | "
                   f"{100 * r['buffer_hit_ratio']:.1f}% |")
    anomalies = sum(r["anomalies"] for r in data["runs"])
    if anomalies:
        out.append("")
        out.append(f"**{anomalies} anomalies**: a row or range that must exist was not seen.")
    out.append("")
    out.append(f"![engine benchmark]({png})")
    return "\n".join(out)


ENGINE_INTRO = """## Engine (sysbench-shaped)

`scripts/bench-engine.sh --record` (`bench/engine_bench.cc`): sysbench's OLTP
workloads through the embedded API, on sysbench's `sbtest` tables (`id` primary
key, `k` with a non-unique index, `c` CHAR(120), `pad` CHAR(60)). Each
transaction uses one random table and uniform random ids:
`point_select` (10 primary-key reads), `read_only` (10 point selects + a range
of 100 rows on the primary key), `update_index` (`k=k+1`), `update_non_index`
(new `c`), `delete_insert` (delete a row, insert it back with new values),
`read_write` (all of these in one transaction). Each runs in two
configurations: a buffer pool 4x the data (`in-memory`) and one of 10% of the
data (`pool-10pct`); the workloads run in this order within a configuration,
so page-file writes of one write workload can land in the next one's interval.
"""

REGIME_TEXT = {
    "a": lambda s: f"(a) in memory: {s['a']['tables']} x {s['a']['rows']} rows, "
                   f"{s['a']['buffer_pool']} buffer pools",
    "b": lambda s: f"(b) I/O-bound: {s['b']['tables']} x {s['b']['rows']} rows, "
                   f"{s['b']['buffer_pool']} pools",
    "c": lambda s: f"(c) TPC-C (go-tpc 1.0.9): {s['c']['warehouses']} warehouse(s), "
                   f"{s['c']['seconds']} s, {s['c']['buffer_pool']} pools",
    "d": lambda s: "(d) loading (b)'s data with sysbench prepare",
    "e": lambda s: "(e) SIGKILL during oltp_write_only on (b)'s data, to the first answered query",
    "g": lambda s: f"(g) (b)'s write workloads again on the same servers and data, right after "
                   f"(b), with the server's write operations to the data directory's device "
                   f"capped at {s['write_cap_iops']:,} per second (the NV-PPL seed's SSD: 28K "
                   f"random 4 KiB writes/s, as 16 KiB pages) by the kernel's block throttle, "
                   f"reads not capped, after {s['cap_settle_seconds']} s of oltp_write_only under "
                   f"the cap, not measured",
    "h": lambda s: f"(h) (c)'s run again on the same servers and data, right after (c), with the "
                   f"server's write operations capped at {s['write_cap_iops']:,} per second, after "
                   f"{s['cap_settle_seconds']} s of TPC-C under the cap, not measured",
}


def compare_section(data, png, script="scripts/bench-compare.sh"):
    s = data["settings"]
    regimes = s.get("regimes", "abcdef")
    out = [f"Recorded {datetime.date.today().isoformat()} by `{script} "
           f"{'--quick ' if s['quick'] else ''}--record`.", ""]
    out.append(f"- server: {s['server']}; machine: {s['machine']}")
    out.append(f"- {s['threads']} client threads, {s['seconds_per_workload']} s per sysbench workload; "
               f"both engines: durable commits (innodb_flush_log_at_trx_commit=1), doublewrite on, "
               f"O_DIRECT data files under `{s['data_dir']}`, redo log under `{s['pm_dir']}` "
               f"(tmpfs, emulated PM), {s['log_file_size']} log, binary log off; a fresh server per "
               f"engine and regime" + (" ((g) and (h) excepted)" if "g" in regimes or "h" in regimes
                                       else ""))
    out.append("- " + "; ".join(REGIME_TEXT[r](s) for r in "abcdegh" if r in regimes))
    if data.get("f", {}).get("caching"):
        out.append("- (f) the ceiling: (a) again with commits not durable for both engines "
                   "(innodb_flush_log_at_trx_commit=0, subito_flush_log_at_trx_commit=0: a commit "
                   "does not wait for its log; InnoDB's is made durable once a second, Subito's by "
                   "its flush thread right after); "
                   "\"durable / not durable\" is each engine's (a) throughput as a share of its own (f)")
    # (d), (e) and (g) run on (b)'s servers, (h) on (c)'s.
    ran = {"a": "a", "b": "bdeg", "c": "ch", "f": "f", "g": "g", "h": "h"}
    for regime in ("a", "b", "c", "f", "g", "h"):
        if not any(r in regimes for r in ran[regime]):
            continue
        for engine, c in data.get(regime, {}).get("caching", {}).items():
            cap = f"; {c['write_cap']}" if "write_cap" in c else ""
            out.append(f"- ({regime}) {'Subito' if engine == 'subito' else 'InnoDB'}: {c['text']}, "
                       f"buffer pool {c['pool'] >> 20} MiB{cap}")
    out.append("- disk reads and writes per transaction: the server process's `read_bytes` and "
               "`write_bytes` from `/proc/PID/io` (block-device I/O of both engines, the binary "
               "and error logs included; the PM tier on tmpfs counts in neither)")
    out.append("")
    out.append("| figure | Subito | InnoDB | Subito / InnoDB |")
    out.append("|---|---:|---:|---:|")

    def row(label, sv, iv, fmt="{:,.0f}"):
        r = sv / iv if iv else float("nan")
        out.append(f"| {label} | {fmt.format(sv)} | {fmt.format(iv)} | {r:.2f} |")

    for regime in ("a", "b", "g", "f"):
        for w, v in data.get(regime, {}).items():
            if "subito" in v and "innodb" in v and "tps" in v["subito"]:
                sv, iv = v["subito"], v["innodb"]
                row(f"({regime}) {w}: transactions/s", sv["tps"], iv["tps"])
                row(f"({regime}) {w}: p95 latency ms", sv["p95_ms"], iv["p95_ms"], "{:.2f}")
                row(f"({regime}) {w}: redo/PM bytes per transaction", sv["pm_bytes_per_txn"],
                    iv["pm_bytes_per_txn"])
                if "redo_bytes_per_txn" in sv and "redo_bytes_per_txn" in iv:
                    row(f"({regime}) {w}: of which redo log", sv["redo_bytes_per_txn"],
                        iv["redo_bytes_per_txn"])
                row(f"({regime}) {w}: data-file bytes per transaction", sv["data_bytes_per_txn"],
                    iv["data_bytes_per_txn"])
                if "disk_read_bytes_per_txn" in sv and "disk_read_bytes_per_txn" in iv:
                    row(f"({regime}) {w}: server process disk reads, bytes per transaction",
                        sv["disk_read_bytes_per_txn"], iv["disk_read_bytes_per_txn"])
                    row(f"({regime}) {w}: server process disk writes, bytes per transaction",
                        sv["disk_write_bytes_per_txn"], iv["disk_write_bytes_per_txn"])
    for w, share in compare.ceiling_shares(data).items():
        row(f"(a)/(f) {w}: durable / not durable", share["subito"], share["innodb"], "{:.2f}")
    for regime in ("c", "h"):
        t = data.get(regime, {}).get("tpcc", {})
        if "subito" in t and "innodb" in t:
            row(f"({regime}) TPC-C tpmC", t["subito"]["tpmC"], t["innodb"]["tpmC"])
            if t["subito"].get("new_order_p99_ms") and t["innodb"].get("new_order_p99_ms"):
                row(f"({regime}) TPC-C NEW_ORDER p99 latency ms", t["subito"]["new_order_p99_ms"],
                    t["innodb"]["new_order_p99_ms"])
            row(f"({regime}) TPC-C transactions failed (deadlocks, timeouts)",
                t["subito"]["errors"], t["innodb"]["errors"])
            row(f"({regime}) TPC-C data-file bytes per transaction",
                t["subito"]["data_bytes_per_txn"], t["innodb"]["data_bytes_per_txn"])
            if all("disk_write_bytes_per_txn" in t[e] for e in ("subito", "innodb")):
                row(f"({regime}) TPC-C server process disk reads, bytes per transaction",
                    t["subito"]["disk_read_bytes_per_txn"], t["innodb"]["disk_read_bytes_per_txn"])
                row(f"({regime}) TPC-C server process disk writes, bytes per transaction",
                    t["subito"]["disk_write_bytes_per_txn"],
                    t["innodb"]["disk_write_bytes_per_txn"])
    for key, label in (("bulk_load", "(d) bulk load, seconds"), ("restart", "(e) restart, seconds")):
        v = data["b"].get(key, {})
        if "subito" in v and "innodb" in v:
            row(label, v["subito"]["seconds"], v["innodb"]["seconds"], "{:.2f}")
    out.append("")
    out.append(f"![Subito / InnoDB]({png})")
    return "\n".join(out)


def compare_ssd_section(data, png):
    return compare_section(data, png, "scripts/bench-ssd.sh")


COMPARE_INTRO = """## Subito vs InnoDB in MariaDB (`scripts/bench-compare.sh`)

The same Debian MariaDB 10.11.18 server runs each engine's tables with equal
durability and resources. Ratios above 1 favour Subito, except for seconds
(d, e), where below 1 does. Emulated PM (tmpfs) serves both engines' logs,
so the redo path costs little for either; the page-write side is where the
engines differ today, and per-page logs (NV-PPL, next) aim at it.
"""


COMPARE_SSD_INTRO = """## I/O-bound on the seed's SSD (`scripts/bench-ssd.sh`)

This machine's virtio disk takes InnoDB's page writes (about 190 KB per
I/O-bound sysbench write transaction) without making it wait: in (b) and
(c) above both engines are bound by the two cores, so the page writes
that per-page logs save show only as far as they cost CPU. The NV-PPL
seed measured on an SSD whose random writes were its bottleneck (28K 4-KiB
writes per second, 555K reads). `scripts/bench-ssd.sh` runs (b)'s write
workloads and (c) as above and then, on the same servers and data, again
with the server's write operations to the data device capped at that
rate (as 16-KiB pages, the page size of both engines: 7,000 per second)
by the kernel's block throttle: equal for both engines, reads not capped,
the PM tier (tmpfs) not a block device. An operation is one bio of any
size, so InnoDB's doublewrite batches (many pages in one write) and
Subito's runs of consecutive pages count once each, as a real SSD writes
sequential runs faster than random pages. (b) and (c) in this table are
this run's own, not the recorded run's above.
"""


PPL_SWEEP_INTRO = """## NV-PPL sweeps

`scripts/bench-ppl-sweep.sh --record` (`bench/ppl_sweep.py`): the per-page
log region's size (0 = off, then a share of the table files' bytes) and the
threshold (a page whose changes since its last write take more than this is
written instead of logged) against tps and bytes written per transaction, on
the I/O-bound sysbench data. InnoDB is measured in the same run with the same
pool. Subito's data is loaded once; every point is a clean restart with its
settings, a warm-up, then the measured interval, so a point starts with an
empty region: a short interval flatters large regions, which fill slowly
(the region's use at the end is in the table).
"""


def ppl_sweep_section(data, png):
    s = data["settings"]
    out = []
    out.append(f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-ppl-sweep.sh "
               f"--record`.")
    out.append("")
    out.append(f"- {s['tables']} tables x {s['rows']:,} rows ({s['data_bytes'] / 2**20:,.0f} MiB of "
               f"Subito table files), {s['pool']} buffer pools, {s['threads']} threads, "
               f"{s['warmup']} s warm-up + {s['seconds']} s measured per point; {s['server']}")
    for engine, c in data.get("caching", {}).items():
        out.append(f"- {engine}: {c['text']}")
    out.append(f"- redo logs and the PPL region on `{s['pm_dir']}` (tmpfs: DRAM emulating PM); "
               f"bytes per transaction from the engines' counters; disk reads from /proc/PID/io")
    for w in s["workloads"]:
        b = data["innodb"][w]
        out.append("")
        out.append(f"InnoDB {w}: {b['tps']:,.0f} tps, p95 {b['p95_ms']} ms, "
                   f"{b['data_bytes_per_txn'] / 1024:,.1f} KB to data files and "
                   f"{b['pm_bytes_per_txn'] / 1024:,.1f} KB redo per transaction, disk reads "
                   f"{b['disk_read_bytes_per_txn'] / 1024:,.1f} KB per transaction.")
        out.append("")
        out.append("| sweep | region | threshold | tps | vs InnoDB | p95 ms | page-file KB/txn | "
                   "PPL KB/txn | PM KB/txn | disk read KB/txn | logged/txn | written back/txn | "
                   "region used |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for sweep in ("sizes", "thresholds"):
            for p in data[sweep]:
                r = p[w]
                region = (f"{p['region_bytes'] >> 20} MiB" if p["region_bytes"] else "off")
                out.append(
                    f"| {sweep[:-1]} | {region} | {p['threshold']} B | {r['tps']:,.0f} | "
                    f"{r['tps'] / b['tps'] if b['tps'] else float('nan'):.2f}x | {r['p95_ms']} | {r['data_bytes_per_txn'] / 1024:,.1f} | "
                    f"{r['ppl_bytes_per_txn'] / 1024:,.2f} | {r['pm_bytes_per_txn'] / 1024:,.1f} | "
                    f"{r['disk_read_bytes_per_txn'] / 1024:,.1f} | {r['ppl_pages_logged_per_txn']:.2f} | "
                    f"{r['ppl_pages_delogged_per_txn']:.2f} | {100 * r['ppl_region_use']:.0f}% |")
    out.append("")
    out.append(f"![NV-PPL sweeps]({png})")
    return "\n".join(out)

CH_INTRO = """## CH-benCHmark: TPC-C with analytical queries at once

`scripts/bench-ch.sh --record` (`bench/ch.py`, go-tpc `ch`): TPC-C clients
and one client running the 22 analytical queries in turn, on each engine in
the same server build, one after the other. Subito runs with a small version
budget, so that the long queries' snapshots move to pages as of their moment
(docs/architecture.md, "Old snapshots on old pages") instead of holding row
versions; the peaks are sampled every second.
"""


def ch_section(data, png):
    s = data["settings"]
    sub, inn = data["subito"], data["innodb"]
    out = [f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-ch.sh --record`.", ""]
    out.append(f"- {s['warehouses']} warehouses, {s['threads']} TPC-C threads + "
               f"{s['analytical_clients']} analytical client, {s['seconds']} s, "
               f"{s['buffer_pool']} pools; Subito's version budget "
               f"{s['subito_version_store_budget']}; {s['server']}")
    out.append(f"- Subito: {sub['caching']}")
    out.append(f"- InnoDB: {inn['caching']}")
    out.append("")

    def ratio(a, b):
        return f"{a / b:.2f}x" if a and b else "-"

    mib = 2**20
    out.append("| figure | Subito | InnoDB | Subito / InnoDB |")
    out.append("|---|---:|---:|---:|")
    out.append(f"| tpmC | {sub['tpmC']:,.0f} | {inn['tpmC']:,.0f} | {ratio(sub['tpmC'], inn['tpmC'])} |")
    out.append(f"| NEW_ORDER p99 ms | {sub['new_order_p99_ms']} | {inn['new_order_p99_ms']} | "
               f"{ratio(sub['new_order_p99_ms'], inn['new_order_p99_ms'])} |")
    out.append(f"| analytical queries done | {sub['query_count']} | {inn['query_count']} | "
               f"{ratio(sub['query_count'], inn['query_count'])} |")
    out.append(f"| analytical queries failed (a query cut off by the end of the run counts) | "
               f"{sum(sub['query_errors'].values())} | {sum(inn['query_errors'].values())} | |")
    for name, r in (("Subito", sub), ("InnoDB", inn)):
        for f in r.get("query_failures", []):
            out.append(f"| {name}: {f[:150]} | | | |")
    out.append(f"| peak server RSS MiB | {sub['peaks']['rss_bytes'] / mib:,.0f} | "
               f"{inn['peaks']['rss_bytes'] / mib:,.0f} | |")
    out.append(f"| disk read MB / written MB | {sub['disk_read_bytes'] / 1e6:,.0f} / "
               f"{sub['disk_write_bytes'] / 1e6:,.0f} | {inn['disk_read_bytes'] / 1e6:,.0f} / "
               f"{inn['disk_write_bytes'] / 1e6:,.0f} | |")
    p = sub["peaks"]
    out.append("")
    out.append(f"Old versions: Subito's row versions peaked at "
               f"{p.get('Subito_version_bytes', 0) / mib:,.1f} MiB, its page copies and overlays "
               f"for moved snapshots at {p.get('Subito_snapshot_page_bytes', 0) / mib:,.1f} MiB; "
               f"{sub.get('Subito_snapshots_moved', 0)} snapshots moved, "
               f"{sub.get('Subito_moved_snapshots_cut', 0)} of them cut past the page budget, "
               f"{sub.get('Subito_snapshots_cut', 0)} cut without moving. Pages of moved "
               f"snapshots: at most {p.get('Subito_snapshot_pages', 0):,} copies and "
               f"{p.get('Subito_snapshot_page_recipes', 0):,} recipes (old page + per-page "
               f"logs) held at once, {sub.get('Subito_snapshot_pages_rebuilt', 0):,} recipes "
               f"rebuilt. InnoDB's history list "
               f"peaked at {inn['peaks'].get('Innodb_history_list_length', '-')} entries (undo, "
               f"on disk).")
    out.append("")
    out.append("| query | Subito mean ms (runs) | InnoDB mean ms (runs) | Subito / InnoDB |")
    out.append("|---|---:|---:|---:|")
    for q in sorted(set(sub["queries"]) | set(inn["queries"]), key=lambda x: int(x[1:])):
        a, b = sub["queries"].get(q), inn["queries"].get(q)
        cell = [f"{x['avg_ms']:,.0f} ({x['count']})" if x else "-" for x in (a, b)]
        rel = ratio(a["avg_ms"], b["avg_ms"]) if a and b else "-"
        out.append(f"| {q} | {cell[0]} | {cell[1]} | {rel} |")
    return "\n".join(out)


def cpu_profile_section(data, png):
    out = [f"Recorded {data['date']} by `scripts/profile-callgrind.sh --record`: each engine's server "
           f"under callgrind, {data['tables']} x {data['rows']} rows in {data['pool']} pools (all in "
           f"memory), one sysbench client, {data['events']} transactions counted per workload after a "
           "warm-up. Instructions per transaction; the handler entry points are the server's own "
           "functions, the same code for both engines, counted with everything they call. InnoDB "
           "runs without native AIO (valgrind knows no io_uring), and its whole-server count "
           "includes its background threads.", ""]
    engines = data["engines"]
    for w, entry in data["workloads"].items():
        out.append(f"**{w}**")
        out.append("")
        out.append("| instructions per transaction | " + " | ".join(
            "Subito" if e == "subito" else "InnoDB" for e in engines) + " | Subito / InnoDB |")
        out.append("|---" + "|---:" * (len(engines) + 1) + "|")
        for label, vals in entry.items():
            v = [vals[e] for e in engines]
            ratio = f"{v[0] / v[1]:.2f}" if len(v) == 2 and v[1] else ""
            out.append(f"| {label} | " + " | ".join(f"{x:,.0f}" for x in v) + f" | {ratio} |")
        out.append("")
    return "\n".join(out)


CPU_PROFILE_INTRO = """## Where the CPU goes, in instructions (`scripts/profile-callgrind.sh`)

Timed profiles move by 10-25% between runs on these machines; instruction
counts repeat. Caveat: callgrind counts each byte of a `rep movsb` copy as
an instruction, so large copies weigh more here than in time.
"""


def load_section(data, png):
    s = data["settings"]
    sub, inn = data["subito"], data["innodb"]
    out = [f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-load.sh --record`: "
           f"{s['tables']} x {s['rows']:,} sysbench rows loaded by {s['threads']} clients, then a "
           f"{s['csv_rows']:,}-row CSV; {s['buffer_pool']} buffer pools, {s['log_file_size']} logs on "
           f"the PM tier (/dev/shm). Caches: Subito: {sub['caching']['text']}; InnoDB: "
           f"{inn['caching']['text']}. Disk bytes are the server process's (`/proc/PID/io`), "
           "redo/PM bytes its own counters.", "",
           f"![loading]({png})", "",
           "| phase | Subito s | InnoDB s | InnoDB / Subito | Subito disk written | InnoDB disk "
           "written | Subito redo/PM | InnoDB redo |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    mib = lambda b: f"{b / 1048576:,.0f} MiB"  # noqa: E731
    from load import LABELS  # bench/load.py, beside this file
    for p, label in LABELS.items():
        a, b = sub[p], inn[p]
        if "error" in a or "error" in b:
            cells = [f"failed: {x['error']}" if "error" in x else str(x["seconds"]) for x in (a, b)]
            out.append(f"| {label} | {cells[0]} | {cells[1]} | - | | | | |")
            continue
        out.append(f"| {label} | {a['seconds']} | {b['seconds']} | {b['seconds'] / a['seconds']:.2f}x | "
                   f"{mib(a['disk_write_bytes'])} | {mib(b['disk_write_bytes'])} | {mib(a['pm_bytes'])} | "
                   f"{mib(b['pm_bytes'])} |")
    ts = sub["insert"]["seconds"] + sub["create_index"]["seconds"]
    ti = inn["insert"]["seconds"] + inn["create_index"]["seconds"]
    out.append(f"| sysbench prepare, both phases | {ts:.2f} | {ti:.2f} | {ti / ts:.2f}x | | | | |")
    return "\n".join(out)


def streams_section(data, png):
    s = data["settings"]
    out = [f"Recorded {data['date']} by `scripts/bench-streams.sh --record`: {data['machine']}, "
           f"{data['server']}; {s['tables']} x {s['rows']:,} sysbench rows loaded by "
           f"{s['load_threads']} clients (sysbench prepare, timed), then oltp_write_only for "
           f"{s['seconds']} s with " + " and ".join(str(t) for t in s["write_threads"]) +
           f" clients; {s['pool']} buffer pool (the data in it), {s['log_size']} log on the PM "
           f"tier ({s['pm_dir']}), durable commits; a fresh server per stream count, "
           f"{s['rounds']} rounds in alternating order. Caches: {data['runs'][0]['caching']}. "
           "Each cell: the mean over the rounds, then the lowest and highest.", "",
           f"![log streams]({png})", ""]
    keys = list(data["summary"][str(s["streams"][0])])
    out.append("| subito_log_streams | " + " | ".join(keys) + " |")
    out.append("|---:|" + "---:|" * len(keys))
    for n in s["streams"]:
        cells = []
        for k in keys:
            v = data["summary"][str(n)][k]
            cells.append(f"{v['mean']:,.0f} ({v['min']:,.0f}-{v['max']:,.0f})")
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out.append("")
    out.append("Bytes per oltp_write_only transaction (the mean over the rounds): the "
               "server process's disk reads and writes (`/proc/PID/io`; the PM tier on "
               "tmpfs counts in neither), and the engine's own redo-log and PM-tier bytes.")
    out.append("")
    out.append("| subito_log_streams | clients | disk read | disk written | redo log | PM tier |")
    out.append("|---:|---:|---:|---:|---:|---:|")
    for n in s["streams"]:
        for t in s["write_threads"]:
            mine = [r[f"write_{t}"] for r in data["runs"] if r["streams"] == n]
            mean = lambda k: sum(r[k] for r in mine) / len(mine)  # noqa: E731
            out.append(f"| {n} | {t} | {mean('disk_read_bytes_per_txn'):,.0f} | "
                       f"{mean('disk_write_bytes_per_txn'):,.0f} | "
                       f"{mean('redo_bytes_per_txn'):,.0f} | {mean('pm_bytes_per_txn'):,.0f} |")
    out.append("")
    for k, n in data["best"].items():
        out.append(f"- highest mean, {k}: {n} stream(s)")
    return "\n".join(out)


def restart_section(data, png):
    s = data["settings"]
    engines = [e for e in ("subito", "innodb") if e in data]
    first = {e: data[e][f"{s['sizes_gb'][0]:g}"] for e in engines}
    out = [f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-restart.sh --record`"
           + (" (a `--quick` run)" if s.get("quick") else "") + f": {s['machine']}, {s['server']}; "
           f"{s['tables']} sysbench tables, {s['threads']} threads of oltp_write_only for "
           f"{s['load_seconds']} s, SIGKILL, then the time from the start command to the first "
           f"answer from one of the engine's tables; {s['buffer_pool']} buffer pools, logs on the "
           "PM tier (/dev/shm). Caches: "
           + "; ".join(f"{e}: {first[e]['caching']}" for e in engines) + ". The clean start is "
           "the same server and data after a clean shutdown (the server's own start-up); "
           "Subito's engine open is its error-log line. "
           + ("Both pools are warmed after each start from the page list the engine wrote "
              "(Subito: at the last clean shutdown or at most 60 s before the kill; InnoDB: at the "
              "last clean shutdown)" if s.get("warm_up", False) else
              "Both pools start cold (no page list loaded)" if "warm_up" in s else
              "Subito had no pool warm-up yet; InnoDB loaded its page list of the last clean "
              "shutdown")
           + ". Steady state: the mean of the last 30 s before the kill"
           + ("" if "warm_up" in s else " (10 s in runs before the warm-up)")
           + "; back to 90%: the first second whose 3-second mean reaches 90% of it"
           + (f". Pinned: each server on CPUs {s['server_cpus']}, sysbench on CPUs "
              f"{s['client_cpus']}, from the first start after the load (unpinned, the "
              "throughput swings in phases as the scheduler places client and server threads)"
              if s.get("server_cpus") else "") + ".", "",
           f"![restart]({png})", "",
           "| data | log | Subito: first answer s | Subito: engine open s (redo records) | "
           "Subito: pages left to redo lazily, all redone after s | "
           "Subito: warm-up pages, s | "
           "InnoDB: first answer s | clean start s, Subito / InnoDB | s to 90% tps, Subito / InnoDB |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    def back(p):  # seconds to 90% of the steady tps, or not within the series
        if not p:
            return "-"
        t = p.get("seconds_to_90pct")
        return t if t is not None else f"> {len(p.get('tps_after', []))}"

    def warm(p):
        w = p.get("warm_up") if p else None
        return f"{w['pages']:,}, {w['seconds']}" if w and "pages" in w else "-"

    for gb in s["sizes_gb"]:
        for i, log_size in enumerate(s["logs"]):
            c = {e: data[e][f"{gb:g}"]["points"][i] for e in engines}
            sub, inn = c.get("subito", {}), c.get("innodb", {})
            size = data[engines[0]][f"{gb:g}"]["data_bytes"] / 2**30
            out.append(f"| {gb:g} GB ({size:.2f} GiB on disk) | {log_size} | "
                       f"{sub.get('restart_seconds', '-')} | {sub.get('open_seconds', '-')} "
                       f"({sub.get('redo_records', 0):,}) | "
                       f"{sub.get('pages_pending', '-')}, {sub.get('background_redo_seconds', '-')} | "
                       f"{warm(sub)} | {inn.get('restart_seconds', '-')} | "
                       f"{sub.get('clean_start_seconds', '-')} / {inn.get('clean_start_seconds', '-')} | "
                       f"{back(sub)} / {back(inn)} |")
    return "\n".join(out)


def kv_section(data, png):
    out = []
    out.append(f"Recorded {datetime.date.today().isoformat()} by `scripts/bench-embedded.sh --record`.")
    out.append("")
    out.append(f"- machine: {data['machine']}")
    out.append(f"- one table of {data['rows']:,} keys (8 B) with {data['value_bytes']} B values, "
               f"loaded, then every key read once; {data['seconds']:g} s per point; data files "
               f"under `{data['dir']}`, PM tier `{data['pm_dir']}` (tmpfs, emulated PM)")
    for engine, caches in data["caches"].items():
        out.append(f"- {engine}: {caches}")
    out.append("- ops per CPU-s: operations per second of the process's user + system CPU time "
               "(every thread, background ones included): the per-core rate")
    out.append("")
    out.append("| workload | threads | engine | ops/s | ops per CPU-s | p50 µs | p99 µs | "
               "Subito / this, ops/s | Subito / this, per CPU-s |")
    out.append("|---|---:|---|---:|---:|---:|---:|---:|---:|")
    by = {(r["engine"], r["workload"], r["threads"]): r for r in data["results"]}
    for r in data["results"]:
        s = by.get(("subito", r["workload"], r["threads"]))
        ratio = cpu_ratio = ""
        if s and r["engine"] != "subito":
            ratio = f"{s['ops_per_s'] / r['ops_per_s']:.2f}"
            cpu_ratio = f"{s['ops_per_cpu_s'] / r['ops_per_cpu_s']:.2f}"
        out.append(f"| {r['workload']} | {r['threads']} | {r['engine']} | {r['ops_per_s']:,.0f} | "
                   f"{r['ops_per_cpu_s']:,.0f} | {r['p50_us']:.1f} | {r['p99_us']:.1f} | "
                   f"{ratio} | {cpu_ratio} |")
    out.append("")
    out.append(f"![embedded engines]({png})")
    return "\n".join(out)


RESTART_INTRO = """## Restart after SIGKILL (`scripts/bench-restart.sh`)

Issue 14's restart sweep: data of several sizes and redo logs of several
sizes, a write load, SIGKILL, and the time to the first answered query on
one of the engine's tables, Subito and InnoDB in the same run; then the
throughput second by second after the restart against the steady state
before the kill. The target: Subito's engine open <= 0.2 s and flat
across sizes. Since commit a63fb60 redo is lazy (`docs/recovery.md`): the
open indexes each page's records and the pages get them when read; the
table says how many pages were left so and when the background thread had
redone the last one. Since 2390a59 the redo since the checkpoint is
bounded (`subito_max_checkpoint_age`) and the search past the log's end
covers three log buffers, not the log; since 5442b6d the losers are rolled
back after the open by a background thread, their keys locked meanwhile.
The error log's open line splits the open into steps (`open_steps` in the
JSON).
"""


LOAD_INTRO = """## Loading (`scripts/bench-load.sh`)

sysbench's prepare in its two phases (multi-row INSERTs, then CREATE INDEX
k on each table, which on Subito is a copying ALTER through the bulk
loader), then LOAD DATA of a CSV into a new table and CREATE INDEX on it,
then the same LOAD DATA into another new table as mysqldump's output runs
it (unique_checks=0, foreign_key_checks=0), which both engines turn into a
bulk insert into an empty table. InnoDB / Subito above 1 means Subito is
faster.
"""


STREAMS_INTRO = """## Parallel log streams (`scripts/bench-streams.sh`)

Issue 13 asks for the stream count to be chosen from a measurement of the
load and write workloads with 1, 2, 4 and 8 streams (the Yahoo! JAPAN
engine found 4 best). `subito_log_streams` stripes the redo log over that
many files, each persisted under its own lock (`docs/architecture.md`).
"""


KV_INTRO = """## The embedded engine beside RocksDB and LMDB (`scripts/bench-embedded.sh`)

Issue 13 asks for the core's own speed apart from the server's: point
reads, updates and inserts through the embedded API, beside well-kept
embedded engines measured in the same run with equal durability
(`bench/kv_compare.cc`: Subito; RocksDB 7.8 as a pessimistic
TransactionDB; LMDB 0.9.24; Debian's packages). A commit returns once it
is durable on the PM tier: Subito's redo log and RocksDB's WAL are there;
LMDB, which has no log, keeps its whole file there and syncs it per
commit. An update reads its key for update (a row lock in Subito and
RocksDB; LMDB has one writer at a time) and writes a new value; an
insert adds a new key; a read is a consistent point read.
"""


SECTIONS = {
    "load": (load_section, LOAD_INTRO),
    "streams": (streams_section, STREAMS_INTRO),
    "kv_compare": (kv_section, KV_INTRO),
    "restart": (restart_section, RESTART_INTRO),
    "ch": (ch_section, CH_INTRO),
    "compare": (compare_section, COMPARE_INTRO),
    "compare_ssd": (compare_ssd_section, COMPARE_SSD_INTRO),
    "log_bench": (log_section, None),
    "engine_bench": (engine_section, ENGINE_INTRO),
    "ppl_sweep": (ppl_sweep_section, PPL_SWEEP_INTRO),
    "cpu_profile": (cpu_profile_section, CPU_PROFILE_INTRO),
}


def main(name, src, png, results="docs/results.md"):
    with open(src) as f:
        data = json.load(f)
    render, intro = SECTIONS[name]
    body = render(data, png)
    try:
        with open(results) as f:
            text = f.read()
    except FileNotFoundError:
        text = "# Results\n"
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    block = f"{begin}\n{body}\n{end}"
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        if intro:
            block = intro + "\n" + block
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(results, "w") as f:
        f.write(text)
    print(f"{results}: section {name} updated")


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in SECTIONS:
        sys.exit(f"usage: render_results.py {{{'|'.join(SECTIONS)}}} RESULT.json "
                 "IMAGE_PATH_IN_DOCS")
    main(*sys.argv[1:])
