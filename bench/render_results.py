#!/usr/bin/python3
"""Renders a benchmark's JSON into its section of docs/results.md, between
<!-- NAME:begin --> and <!-- NAME:end --> markers (added if missing)."""
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


def main(name, src, png, results="docs/results.md"):
    with open(src) as f:
        data = json.load(f)
    body = log_section(data, png)
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
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    with open(results, "w") as f:
        f.write(text)
    print(f"{results}: section {name} updated")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: render_results.py NAME RESULT.json IMAGE_PATH_IN_DOCS")
    main(*sys.argv[1:])
