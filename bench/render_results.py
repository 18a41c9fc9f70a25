#!/usr/bin/python3
"""Renders a benchmark's JSON into its section of docs/results.md, between
<!-- NAME:begin --> and <!-- NAME:end --> markers (added, with the section's
heading and introduction, if missing)."""
import datetime
import json
import re
import sys


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

SECTIONS = {
    "log_bench": (log_section, None),
    "engine_bench": (engine_section, ENGINE_INTRO),
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
