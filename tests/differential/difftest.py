#!/usr/bin/python3
"""Differential SQL tester: the same statements against InnoDB and Subito.

Two databases of one server, `diff_innodb` and `diff_subito`, get the same
random schema (one session each, default_storage_engine set accordingly) and
then the same random statement stream, in lockstep. For every statement the
two sessions must agree on:
  - the error code and message (database names normalized), or
  - the result set (as a list where the statement's ORDER BY fixes the
    order, as a multiset otherwise), the affected-row count, the insert id,
  - and the warning list (Level, Code, Message).
Every few statements, and at the end of a seed, every table's contents,
SHOW CREATE TABLE (engine clause normalized) and CHECK TABLE are compared.

With --sessions 2, each database has two sessions and the stream moves
between them (each statement runs on the same session number on both
sides), so open transactions meet: snapshots, locking reads, row and gap
locks, statements of one session waiting for the other's. No session ever
waits (innodb_lock_wait_timeout, subito_lock_wait_timeout and
lock_wait_timeout are 0): a conflict is ER_LOCK_WAIT_TIMEOUT at once, and
which statements conflict must agree too.

The generator (gen.py) writes only statements whose outcome SQL defines:
a LIMIT, an UPDATE IGNORE or an INSERT ... SELECT is always ordered by every
column, so no difference can come from the two engines' plans or row order.

A difference stops the seed, prints the seed and the statement, then
minimizes the statement sequence (delta debugging on fresh databases) and
writes it as an mtr test (--out), ready to become a regression test.

Usage: difftest.py --socket S [--seeds 1-20] [--statements 1500]
"""
import argparse
import datetime
import decimal
import os
import random
import re
import sys
import time

import pymysql

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

DBS = {"innodb": "diff_innodb", "subito": "diff_subito"}
ENGINES = {"innodb": "InnoDB", "subito": "SUBITO"}


def _FromBytes(f):
    return lambda v: f(v.decode("latin1") if isinstance(v, (bytes, bytearray)) else v)


# Strings stay bytes (SHOW CREATE TABLE may hold a BINARY default that is not
# UTF-8); numbers and dates are converted as usual.
CONVERSIONS = dict(pymysql.converters.conversions)
CONVERSIONS.update({k: _FromBytes(f) for k, f in pymysql.converters.decoders.items()})


class Session:
    """One connection to one of the two databases."""

    def __init__(self, socket, side, fresh=True, no_wait=False):
        self.side = side
        self.db = DBS[side]
        self.conn = pymysql.connect(unix_socket=socket, user="root", charset="utf8mb4",
                                    autocommit=True, use_unicode=False, conv=CONVERSIONS)
        self.cur = self.conn.cursor()
        if fresh:
            self.cur.execute(f"DROP DATABASE IF EXISTS {self.db}")
            self.cur.execute(f"CREATE DATABASE {self.db} CHARACTER SET utf8mb4")
        self.cur.execute(f"USE {self.db}")
        for s in SessionSettings(side, no_wait):
            self.cur.execute(s)

    def close(self):
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - a broken connection is closed anyway
            pass

    def run(self, sql):
        """Runs one statement; returns its outcome as comparable values."""
        out = {"error": None, "rows": None, "affected": None, "insert_id": None}
        try:
            self.cur.execute(sql)
            if self.cur.description is not None:
                out["rows"] = [tuple(Norm(v) for v in r) for r in self.cur.fetchall()]
            else:
                out["affected"] = self.cur.rowcount
                out["insert_id"] = self.cur.lastrowid
        except pymysql.err.MySQLError as e:
            code = e.args[0] if e.args else None
            msg = e.args[1] if len(e.args) > 1 else str(e)
            out["error"] = (code, NormText(msg))
            if code in (2006, 2013, 0):  # the server went away
                raise
        self.cur.execute("SHOW WARNINGS")
        out["warnings"] = [(Text(w[0]), w[1], NormText(Text(w[2]))) for w in self.cur.fetchall()]
        return out


def SessionSettings(side, no_wait):
    settings = ["SET SESSION default_storage_engine=" + ENGINES[side],
                "SET SESSION time_zone='+00:00'", "SET SESSION timestamp=1700000000",
                "SET SESSION sql_mode=DEFAULT", "SET SESSION max_sort_length=1024"]
    if no_wait:  # a conflict fails at once, the same way on both sides
        settings += ["SET SESSION innodb_lock_wait_timeout=0",
                     "SET SESSION subito_lock_wait_timeout=0", "SET SESSION lock_wait_timeout=0"]
    return settings


def Norm(v):
    """A value as something that sorts and prints the same on both sides."""
    if v is None:
        return ("0null",)
    if isinstance(v, (bytes, bytearray)):  # strings come as bytes too
        try:
            return ("s", NormText(bytes(v).decode("utf-8")))
        except UnicodeDecodeError:
            return ("b", bytes(v).hex())
    if isinstance(v, (datetime.date, datetime.datetime, datetime.timedelta, datetime.time)):
        return ("t", str(v))
    if isinstance(v, decimal.Decimal):
        return ("d", str(v))
    if isinstance(v, float):
        return ("f", repr(v))
    if isinstance(v, int):
        return ("i", v)
    return ("s", NormText(str(v)))


def Text(v):
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else v


def NormText(text):
    """Database and engine names out of a text (SHOW CREATE TABLE, messages)."""
    for db in DBS.values():
        text = text.replace(db, "DB")
    return re.sub(r"ENGINE=\w+", "ENGINE=E", text)


def Compare(stmt, a, b):
    """None if the outcomes agree, else a description of the difference."""
    if a["error"] or b["error"]:
        ca = a["error"][0] if a["error"] else None
        cb = b["error"][0] if b["error"] else None
        # Both failed: for a statement whose rows follow the plan, which row
        # failed first (and so which error) is the plan's.
        loose = stmt.any_error or not stmt.exact_messages
        if ca != cb and not (loose and ca and cb):
            return f"error: innodb {a['error']} / subito {b['error']}"
        if stmt.exact_messages and a["error"] != b["error"]:
            return f"error message: innodb {a['error'][1]!r} / subito {b['error'][1]!r}"
    else:
        ra, rb = a["rows"], b["rows"]
        if ra is not None or rb is not None:
            if ra is None or rb is None:
                return "one side returned rows"
            if not stmt.ordered:
                ra, rb = sorted(ra, key=repr), sorted(rb, key=repr)
            if ra != rb:
                return "rows differ:\n" + RowDiff(ra, rb)
        if a["affected"] != b["affected"] and stmt.compare_affected:
            return f"affected rows: innodb {a['affected']} / subito {b['affected']}"
        if a["insert_id"] != b["insert_id"]:
            return f"insert id: innodb {a['insert_id']} / subito {b['insert_id']}"
    wa, wb = a["warnings"], b["warnings"]
    # A statement that failed after rows in plan order: which rows it met
    # (and warned about) before the failing one is the plan's.
    failed_in_plan_order = a["error"] and not stmt.exact_messages
    if not stmt.compare_warnings or failed_in_plan_order or (a["error"] and not stmt.warnings_if_failed):
        return None
    if not stmt.exact_messages:  # which row comes first follows the plan
        wa = sorted(LooseWarning(w) for w in wa)
        wb = sorted(LooseWarning(w) for w in wb)
    if wa != wb:
        return f"warnings: innodb {wa} / subito {wb}"
    return None


def LooseWarning(w):
    """A warning without what depends on the order rows are met in: row
    numbers, the key value of a duplicate, the value of the row whose error
    ended the statement."""
    if w[1] == 1062 or Text(w[0]) == "Error":  # the first row to fail
        return (w[0], w[1], "")
    m = re.sub(r"at row \d+", "at row N", w[2])
    return (w[0], w[1], re.sub(r"for column `[^`]*`\.`[^`]*`\.", "for column ", m))


def RowDiff(ra, rb, limit=8):
    lines = []
    only_a = [r for r in ra if r not in rb]
    only_b = [r for r in rb if r not in ra]
    for r in only_a[:limit]:
        lines.append(f"  innodb only: {r}")
    for r in only_b[:limit]:
        lines.append(f"  subito only: {r}")
    if not only_a and not only_b:
        lines.append(f"  same rows, other order or count ({len(ra)} / {len(rb)})")
    return "\n".join(lines)


class Pair:
    """The sessions of both sides, in lockstep: session k of one side runs
    what session k of the other does."""

    def __init__(self, socket, sessions=1):
        self.socket = socket
        # With several sessions, one more compares the state: CHECK TABLE
        # commits its session's transaction, which must stay the stream's.
        opened = sessions + (1 if sessions > 1 else 0)
        self.all = {side: [Session(socket, side, fresh=k == 0, no_wait=sessions > 1)
                           for k in range(opened)] for side in DBS}
        self.checker = opened - 1

    def close(self):
        for side in self.all.values():
            for s in side:
                s.close()

    def Run(self, stmt):
        k = getattr(stmt, "session", 0)
        a = self.all["innodb"][k].run(stmt.sql)
        b = self.all["subito"][k].run(stmt.sql)
        if a["error"] and stmt.undo:
            stmt.undo()
        return Compare(stmt, a, b), a, b

    def CheckState(self, tables):
        """Compares every table's contents, definition and CHECK TABLE."""
        for t in tables:
            for stmt in (gen.Stmt(f"SELECT * FROM {t}", ordered=False),
                         gen.Stmt(f"SHOW CREATE TABLE {t}", ordered=True),
                         gen.Stmt(f"CHECK TABLE {t}", ordered=True)):
                stmt.session = self.checker
                diff, a, b = self.Run(stmt)
                if diff:
                    return stmt, diff
                if stmt.sql.startswith("CHECK") and b["rows"] and b["rows"][-1][3] != ("s", "OK"):
                    return stmt, f"CHECK TABLE on Subito: {b['rows']}"
        return None


def Replay(socket, stmts, check_every):
    """Runs stmts on fresh databases; returns (index, stmt, diff) of the
    first difference, or None."""
    pair = Pair(socket, SESSIONS)
    try:
        tables = set()
        for i, stmt in enumerate(stmts):
            diff, a, _ = pair.Run(stmt)
            if diff:
                return i, stmt, diff
            if not a["error"]:
                tables |= stmt.creates
            tables -= stmt.drops
            if check_every and (i + 1) % check_every == 0 or i == len(stmts) - 1:
                found = pair.CheckState(sorted(tables))
                if found:
                    return i, found[0], found[1]
        return None
    finally:
        pair.close()


def Minimize(socket, stmts, deadline):
    """Delta debugging (ddmin): a shortest-found subsequence that still shows
    a difference, within the time left."""
    n = 2
    while len(stmts) >= 2 and time.time() < deadline:
        chunk = max(1, len(stmts) // n)
        reduced = False
        for start in range(0, len(stmts), chunk):
            if time.time() >= deadline:
                break
            candidate = stmts[:start] + stmts[start + chunk:]
            found = Replay(socket, candidate, check_every=0)
            if found:
                stmts = candidate[:found[0] + 1]
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(len(stmts), n * 2)
    return stmts


def WriteMtrTest(path, seed, stmts, diff_stmt, diff):
    """The minimized sequence as an mtr test of the subito suite, with the
    error InnoDB gave recorded for each failing statement."""
    pair = Pair(SOCKET, SESSIONS)
    lines = ["# Found by tests/differential/difftest.py, seed %d." % seed,
             "# Difference: " + diff.splitlines()[0],
             "--source include/have_subito.inc"]
    names = ["default"] + [f"s{k}" for k in range(1, len(pair.all["innodb"]))]
    settings = [x.replace("SET SESSION ", "SET ") + ";" for x in SessionSettings("subito", SESSIONS > 1)
                if not any(v in x for v in ("max_sort_length", "sql_mode", "innodb_"))]
    lines += settings
    for name in names[1:]:
        lines += [f"connect ({name}, localhost, root,,test);"] + settings
    current = names[-1]

    def On(stmt):
        nonlocal current
        name = names[getattr(stmt, "session", 0)]
        if name != current:
            current = name
            lines.append(f"connection {current};")

    try:
        for stmt in stmts:
            On(stmt)
            a = pair.Run(stmt)[1]
            if a["error"]:
                lines.append(f"--error {a['error'][0]}")
            lines.append(stmt.sql + ";")
        if diff_stmt is not None and diff_stmt not in stmts:
            On(diff_stmt)
            lines.append(diff_stmt.sql + ";")
    finally:
        pair.close()
    for name in names[1:]:
        lines.append(f"disconnect {name};")
    lines.append("connection default;")
    lines.append("DROP DATABASE IF EXISTS dummy_end;")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


class Turns:
    """Which session runs the generator's next statement. Each session keeps
    its own transaction state in the generator (open transaction,
    savepoints, statements due next); a session keeps the turn while it has
    statements due, else passes it with probability 0.3."""

    def __init__(self, g, r, sessions):
        self.g, self.r, self.n, self.k = g, r, sessions, 0
        self.state = [(False, [], []) for _ in range(sessions)]

    def Next(self):
        g = self.g
        if self.n > 1 and not g.pending and self.r.random() < 0.3:
            self.state[self.k] = (g.in_txn, g.savepoints, g.pending)
            self.k = (self.k + 1) % self.n
            g.in_txn, g.savepoints, g.pending = self.state[self.k]
        stmt = g.Next()
        stmt.session = self.k
        return stmt


def ParseSeeds(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            lo, hi = part.split("-")
            seeds.extend(range(int(lo), int(hi) + 1))
        else:
            seeds.append(int(part))
    return seeds


SOCKET = None
SESSIONS = 1


def main():
    global SOCKET, SESSIONS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--seeds", default="1-10", help="e.g. 1-20 or 3,7,9")
    ap.add_argument("--statements", type=int, default=1500, help="per seed")
    ap.add_argument("--check-every", type=int, default=50)
    ap.add_argument("--minimize-seconds", type=int, default=180)
    ap.add_argument("--out", default="/tmp", help="where minimized mtr tests go")
    ap.add_argument("--print", action="store_true", help="print each statement")
    ap.add_argument("--sessions", type=int, default=1, choices=(1, 2),
                    help="sessions per database; 2: the stream moves between them")
    args = ap.parse_args()
    SOCKET = args.socket
    SESSIONS = args.sessions

    total = 0
    failures = []
    started = time.time()
    for seed in ParseSeeds(args.seeds):
        g = gen.Generator(random.Random(seed))
        pair = Pair(args.socket, SESSIONS)
        turns = Turns(g, random.Random(seed * 7919 + 1), SESSIONS)
        log = []
        found = None
        try:
            tables = set()
            for i in range(args.statements):
                stmt = turns.Next()
                log.append(stmt)
                if args.print:
                    print(f"[{seed}:{i}{'' if SESSIONS == 1 else f'/{stmt.session}'}] {stmt.sql}")
                diff, a, _ = pair.Run(stmt)
                total += 1
                if diff:
                    found = (stmt, diff)
                    break
                if not a["error"]:
                    tables |= stmt.creates
                tables -= stmt.drops
                if (i + 1) % args.check_every == 0 or i == args.statements - 1:
                    found = pair.CheckState(sorted(tables))
                    if found:
                        break
        finally:
            pair.close()
        if not found:
            print(f"seed {seed}: {len(log)} statements, no difference "
                  f"({total} in all, {time.time() - started:.0f} s)", flush=True)
            continue
        stmt, diff = found
        print(f"seed {seed}: DIFFERENCE after {len(log)} statements at: {stmt.sql}\n{diff}", flush=True)
        small = Minimize(args.socket, log, time.time() + args.minimize_seconds)
        again = Replay(args.socket, small, check_every=0) or Replay(args.socket, small, 1)
        path = os.path.join(args.out, f"difftest_seed{seed}.test")
        WriteMtrTest(path, seed, small, again[1] if again else stmt, again[2] if again else diff)
        print(f"seed {seed}: minimized to {len(small)} statements ({path}):")
        for s in small:
            print(("  " if SESSIONS == 1 else f"  [{getattr(s, 'session', 0)}] ") + s.sql + ";")
        if again:
            print(f"  -> {again[2]}")
        failures.append(seed)
    print(f"differential: {total} statements, {len(failures)} seeds with differences"
          + (f" (seeds {', '.join(map(str, failures))})" if failures else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
