#!/usr/bin/python3
"""Instructions per transaction, Subito against InnoDB, under callgrind
(scripts/profile-callgrind.sh). On these noisy 2-core machines a timed
profile moves by 10-25% between runs; instruction counts do not.

Each engine's server runs under `valgrind --tool=callgrind` with
instrumentation off; after loading and a warm-up, one sysbench client runs a
fixed number of transactions of each workload with instrumentation on. The
report gives, per transaction, the instructions of the whole server and of
the server's handler entry points (handler::ha_*, ha_commit_trans, ...):
those functions are the same server code for both engines, so their
inclusive counts compare what each engine does for the same call. The
engine's own top functions (exclusive) follow. Writes out/callgrind-*.txt.
"""
import argparse
import datetime
import glob
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (bench/compare.py)
from compare import Server, log, sh, sysbench  # noqa: E402

# Server functions every engine's call passes through (inclusive counts).
ENTRY_POINTS = [
    "handler::ha_index_read_idx_map", "handler::ha_index_read_map", "handler::ha_index_next",
    "handler::ha_write_row", "handler::ha_update_row", "handler::ha_delete_row",
    "handler::ha_external_lock", "handler::ha_index_init", "handler::ha_index_end",
    "handler::ha_rnd_init", "handler::ha_reset", "ha_commit_trans", "ha_commit_one_phase",
    "trans_commit_stmt", "trans_commit", "open_tables", "close_thread_tables", "do_command",
]


def annotate(path, inclusive):
    """{function: Ir} from callgrind_annotate."""
    # --auto=no: no annotated source, whose call lines ("=> f (6,000x)") carry
    # the callee's inclusive cost and were read as the callee's own.
    out = sh(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}", "--show=Ir",
              "--threshold=100", "--auto=no", path], check=False).stdout
    costs = {}
    for line in out.splitlines():
        if "=>" in line:
            continue
        m = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(?:\*\s+)?(\S.*?):(.+?)(?: \[(.*)\])?$", line)
        if not m:
            continue
        ir = int(m.group(1).replace(",", ""))
        fn = re.sub(r"\(.*$", "", m.group(3)).strip()
        obj = os.path.basename(m.group(4) or m.group(2))
        key = (fn, obj)
        costs[key] = max(costs.get(key, 0), ir)
    totals = re.search(r"([\d,]+)\s+\(100.0%\)\s+PROGRAM TOTALS", out) or re.search(
        r"([\d,]+)\s+PROGRAM TOTALS", out)
    total = int(totals.group(1).replace(",", "")) if totals else 0
    return total, costs


def profile(args, engine):
    srv = Server(args, engine, "callgrind", args.pool)
    # valgrind knows no io_uring, nor a reservation of the largest pool size
    srv.extra = ["--innodb-use-native-aio=0", f"--innodb-buffer-pool-size-max={args.pool}"]
    cache = (f"--cache-sim=yes --D1={args.d1} --LL={args.ll} " if args.cache_sim else "")
    os.environ["SUBITO_SERVER_WRAPPER"] = (
        f"valgrind --tool=callgrind {cache}--instr-atstart=no --collect-atstart=yes "
        f"--callgrind-out-file={srv.dir}/callgrind.out.%p --separate-threads=no "
        f"--log-file={srv.dir}/valgrind.log")
    log(f"{engine}: starting the server under callgrind (a minute or two)")
    try:
        srv.start()
    finally:
        del os.environ["SUBITO_SERVER_WRAPPER"]
    pid = srv.pid()
    results = {}
    try:
        srv.sql("CREATE DATABASE sbtest")
        log(f"{engine}: loading {args.tables} x {args.rows} rows")
        sysbench(srv, args, args.tables, args.rows, "oltp_common", 0, action="prepare")
        for w in args.workloads:
            log(f"{engine}: {w}: warm-up {args.events // 4} transactions, then {args.events} counted")
            sysbench(srv, args, args.tables, args.rows, w, 0, events=args.events // 4)
            sh(["callgrind_control", "--zero", str(pid)])
            sh(["callgrind_control", "--instr=on", str(pid)])
            sysbench(srv, args, args.tables, args.rows, w, 0, events=args.events)
            sh(["callgrind_control", "--instr=off", str(pid)])
            before = set(glob.glob(f"{srv.dir}/callgrind.out.{pid}*"))
            sh(["callgrind_control", "--dump=" + w, str(pid)])
            dumps = sorted(set(glob.glob(f"{srv.dir}/callgrind.out.{pid}*")) - before, key=os.path.getmtime)
            if not dumps:
                raise RuntimeError(f"callgrind wrote no dump for {w}")
            kept = os.path.join(args.out, f"callgrind-{engine}-{w}.out")
            os.makedirs(args.out, exist_ok=True)
            shutil.copyfile(dumps[-1], kept)  # for callgrind_annotate --auto=yes
            total, inc = annotate(dumps[-1], True)
            _, exc = annotate(dumps[-1], False)
            results[w] = {"total": total, "inclusive": inc, "exclusive": exc}
            if args.cache_sim:
                results[w]["misses"] = cache_misses(dumps[-1])
            log(f"{engine}: {w}: {total / args.events:,.0f} instructions per transaction")
    finally:
        srv.destroy()
    return results


def cache_misses(path):
    """Simulated data-cache misses (reads + writes): whole server and, per
    function, exclusive; from a dump made with --cache-sim=yes."""
    out = sh(["callgrind_annotate", "--inclusive=no", "--show=D1mr,D1mw,DLmr,DLmw",
              "--sort=D1mr", "--threshold=100", "--auto=no", path], check=False).stdout
    funcs, totals = {}, None
    num = r"([\d,]+|\.)"
    for line in out.splitlines():
        if "=>" in line:
            continue
        m = re.match(r"\s*" + r"\s+".join([num + r"(?:\s+\([^)]*\))?"] * 4) + r"\s+(?:\*\s+)?(\S.*)$", line)
        if not m:
            continue
        vals = [0 if g == "." else int(g.replace(",", "")) for g in m.groups()[:4]]
        rest = m.group(5)
        if "PROGRAM TOTALS" in rest:
            totals = vals
            continue
        fm = re.match(r"(\S.*?):(.+?)(?: \[(.*)\])?$", rest)
        if not fm:
            continue
        fn = re.sub(r"\(.*$", "", fm.group(2)).strip()
        obj = os.path.basename(fm.group(3) or fm.group(1))
        prev = funcs.get((fn, obj), [0, 0])
        funcs[(fn, obj)] = [max(prev[0], vals[0] + vals[1]), max(prev[1], vals[2] + vals[3])]
    if totals is None:
        raise RuntimeError(f"callgrind_annotate gave no cache totals for {path}")
    return {"d1": totals[0] + totals[1], "ll": totals[2] + totals[3], "functions": funcs}


def engine_functions(costs, engine):
    """The engine's own functions, by object (Subito) or name (InnoDB)."""
    innodb = re.compile(r"^(btr_|buf_|row_|trx_|lock_|mtr_|page_|rec_|dict_|ha_innobase|fil_|log_|"
                        r"mem_heap|cmp_|que_|srv_|fsp_|ibuf_|dtuple|sel_|read_view|ReadView|"
                        r"innobase|rw_lock|sux_lock|ssux_lock|trx_t|mtr_t|dict_|undo|purge)")
    out = []
    for (fn, obj), ir in costs.items():
        if engine == "subito" and obj.startswith("ha_subito"):
            out.append((ir, fn))
        elif engine == "innodb" and innodb.search(fn):
            out.append((ir, fn))
    return sorted(out, reverse=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default="subito,innodb")
    ap.add_argument("--workloads", default="oltp_point_select,oltp_write_only,oltp_read_write")
    ap.add_argument("--events", type=int, default=2000, help="transactions counted per workload")
    ap.add_argument("--tables", type=int, default=4)
    ap.add_argument("--rows", type=int, default=10000)
    ap.add_argument("--pool", default="256M")
    ap.add_argument("--work", default="/var/tmp/subito-callgrind")
    ap.add_argument("--pm-dir", default="/dev/shm/subito-callgrind")
    ap.add_argument("--out", default=os.path.join(compare.ROOT, "out"))
    ap.add_argument("--cache-sim", action="store_true",
                    help="also simulate the data caches and report misses per transaction")
    ap.add_argument("--d1", default="49152,12,64", help="simulated L1 data cache (size,assoc,line)")
    ap.add_argument("--ll", default="1048576,8,64",
                    help="simulated last-level cache; the default is one core's L2 of this machine")
    args = ap.parse_args()
    args.workloads = args.workloads.split(",")
    args.threads = 1
    args.log_size, args.ppl_size, args.ppl_threshold = "256M", None, None
    engines = args.engines.split(",")
    res = {e: profile(args, e) for e in engines}
    n = args.events
    summary = {"date": datetime.date.today().isoformat(), "tables": args.tables, "rows": args.rows,
               "pool": args.pool, "events": n, "engines": engines, "workloads": {}}
    for w in args.workloads:
        entry = {"whole server": {e: res[e][w]["total"] / n for e in engines}}
        for fn in ENTRY_POINTS:
            vals = {e: max((ir for (f, _), ir in res[e][w]["inclusive"].items() if f == fn), default=0) / n
                    for e in engines}
            if any(vals.values()):
                entry[fn] = vals
        summary["workloads"][w] = entry
    lines = [f"callgrind, {args.tables} x {args.rows} rows, {args.pool} pools (all in memory), 1 client, "
             f"{n} transactions counted per workload; InnoDB without native AIO (valgrind knows no "
             "io_uring); instructions per transaction", ""]
    two = len(engines) == 2
    for w, entry in summary["workloads"].items():
        lines.append(f"## {w}")
        lines.append("| | " + " | ".join(engines) + (" | ratio |" if two else " |"))
        lines.append("|---" * (len(engines) + 1 + two) + "|")
        for label, vals in entry.items():
            v = [vals[e] for e in engines]
            ratio = [f"{v[0] / v[1]:.2f}" if v[1] else ""] if two else []
            suffix = "" if label == "whole server" else " (incl.)"
            lines.append(f"| {label}{suffix} | " + " | ".join([f"{x:,.0f}" for x in v] + ratio) + " |")
        for e in engines:
            lines.append("")
            lines.append(f"{e}: top engine functions (exclusive instructions per transaction)")
            for ir, fn in engine_functions(res[e][w]["exclusive"], e)[:25]:
                lines.append(f"  {ir / n:10,.0f}  {fn[:150]}")
        if args.cache_sim:
            lines.append("")
            lines.append(f"simulated data-cache misses per transaction (D1 {args.d1}, LL {args.ll}):")
            for e in engines:
                m = res[e][w]["misses"]
                entry.setdefault("d1 misses", {})[e] = m["d1"] / n
                entry.setdefault("ll misses", {})[e] = m["ll"] / n
                lines.append(f"  {e}: whole server D1 {m['d1'] / n:,.0f}, LL {m['ll'] / n:,.0f}")
                lines.append(f"  {e}: top functions by D1 misses (exclusive; D1, LL per transaction)")
                top = sorted(((v[0], v[1], fn, obj) for (fn, obj), v in m["functions"].items()),
                             reverse=True)[:30]
                for d1, ll, fn, obj in top:
                    lines.append(f"    {d1 / n:9,.0f} {ll / n:8,.0f}  {fn[:110]} [{obj}]")
        lines.append("")
    text = "\n".join(lines)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "callgrind-profile.txt")
    with open(path, "w") as f:
        f.write(text + "\n")
    print(text)
    log(f"wrote {path}")
    with open(os.path.join(args.out, "callgrind-profile.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
