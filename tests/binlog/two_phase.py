#!/usr/bin/env python3
"""Load and checks of scripts/test-binlog.sh: the binary log and Subito
commit together (two-phase commit), across SIGKILL of the server.

  two_phase.py load --socket S --client C --round R --acked FILE
      transfers between accounts, each with a ledger row (C, R * 1000000 + n)
      and client C's count in table counts raised by one, one transaction
      each (tables acct, ledger and counts: tests/binlog/schema.sql); every acknowledged commit's n goes to FILE; ends
      when the server goes away.
  two_phase.py check --socket S --round R --binlog-dir D --acked-glob G
      after the restart: the balances sum to the start, every acknowledged
      ledger row is in the table, and this round's ledger rows in the table
      are exactly those of the transactions the binary log holds whole
      (ended by their Xid event). Prints one line per check; exits 1 if any
      failed.
"""
import argparse
import glob
import os
import random
import re
import subprocess
import sys

import pymysql


def connect(socket):
    return pymysql.connect(unix_socket=socket, user="root", database="sbtest", autocommit=False)


def load(a):
    conn = connect(a.socket)
    n = a.round * 1000000
    with open(a.acked, "a") as acked:
        while True:
            n += 1
            src, dst = random.randint(1, 100), random.randint(1, 100)
            try:
                with conn.cursor() as c:
                    c.execute("BEGIN")
                    c.execute("UPDATE acct SET bal = bal - 1 WHERE id = %s", (src,))
                    c.execute("UPDATE acct SET bal = bal + 1 WHERE id = %s", (dst,))
                    c.execute("INSERT INTO ledger VALUES (%s, %s)", (a.client, n))
                    c.execute("UPDATE counts SET n = n + 1 WHERE client = %s", (a.client,))
                conn.commit()
            except pymysql.err.OperationalError as e:
                if e.args and e.args[0] in (1205, 1213):  # lock wait timeout, deadlock: retry
                    conn.rollback()
                    continue
                return  # the server went away
            except pymysql.err.InterfaceError:
                return
            acked.write(f"{n}\n")
            acked.flush()


def binlog_ledger_rows(binlog_dir, round_no):
    """(client, seq) of this round's ledger rows in whole transactions of the binlog."""
    files = sorted(f for f in glob.glob(os.path.join(binlog_dir, "mysql-bin.[0-9]*")))
    # A SIGKILL in the middle of writing a transaction to the binlog leaves
    # its GTID event without the Xid; the server's crash recovery counts a
    # GTID only at its Xid, so the next server hands out the same GTID again
    # ("Found out of order GTID" in mariadb-binlog's default strict mode).
    # Such a torn group has no Xid and is never counted below.
    run = subprocess.run(["mariadb-binlog", "--no-defaults", "--skip-gtid-strict-mode", "-v",
                          "--base64-output=decode-rows"] + files, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"mariadb-binlog failed ({run.returncode}): {run.stderr.strip()}")
    out = run.stdout
    rows, group, in_ledger, values = set(), [], False, []
    lo, hi = round_no * 1000000, (round_no + 1) * 1000000
    for line in out.splitlines():
        if line.startswith("### INSERT INTO `sbtest`.`ledger`"):
            in_ledger, values = True, []
        elif in_ledger and (m := re.match(r"###\s+@(\d)=(-?\d+)", line)):
            values.append(int(m.group(2)))
            if len(values) == 2:
                group.append(tuple(values))
                in_ledger = False
        elif re.search(r"\bXid = \d+", line):
            rows.update(r for r in group if lo < r[1] < hi)
            group = []
        elif re.search(r"\tGTID \d+-\d+-\d+", line) or line.startswith(("BEGIN", "START TRANSACTION")):
            group = []  # a group starts: rows of a torn one before it are dropped
    return rows


def check(a):
    conn = connect(a.socket)
    failed = 0

    def outcome(label, ok, detail=""):
        nonlocal failed
        print(f"{label}: {'ok' if ok else 'FAILED'}{(' (' + detail + ')') if detail else ''}")
        failed += not ok

    with conn.cursor() as c:
        c.execute("SELECT SUM(bal) FROM acct")
        total = int(c.fetchone()[0])
        c.execute("SELECT client, seq FROM ledger WHERE seq > %s AND seq < %s",
                  (a.round * 1000000, (a.round + 1) * 1000000))
        table = {(int(x), int(y)) for x, y in c.fetchall()}
    outcome("no transfer half applied", total == 100000, f"balances sum to {total}")
    with conn.cursor() as c:
        c.execute("SELECT c.client, c.n, COUNT(l.seq) FROM counts c LEFT JOIN ledger l ON l.client = c.client "
                  "GROUP BY c.client, c.n")
        off = [(cl, n, rows) for cl, n, rows in c.fetchall() if int(n) != int(rows)]
    outcome("each client's count equals its ledger rows (one transaction across tables)", not off,
            f"{len(off)} client(s) off: {off}" if off else "")
    acked = set()
    for path in glob.glob(a.acked_glob):
        client = int(path.rsplit(".", 1)[1])
        with open(path) as f:
            acked.update((client, int(s)) for s in f.read().split())
    lost = acked - table
    outcome("every acknowledged commit kept", bool(acked) and not lost,
            f"{len(acked)} acknowledged, {len(lost)} missing")
    try:
        binlog = binlog_ledger_rows(a.binlog_dir, a.round)
    except RuntimeError as e:
        outcome("the binary log can be read", False, str(e))
        return 1
    only_binlog, only_table = binlog - table, table - binlog
    outcome("the binary log and Subito agree", bool(binlog) and not only_binlog and not only_table,
            f"{len(table)} ledger rows in the table, {len(binlog)} in whole binlog transactions, "
            f"{len(only_binlog)} only in the binlog, {len(only_table)} only in the table")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("load")
    lp.add_argument("--socket", required=True)
    lp.add_argument("--client", type=int, required=True)
    lp.add_argument("--round", type=int, required=True)
    lp.add_argument("--acked", required=True)
    cp = sub.add_parser("check")
    cp.add_argument("--socket", required=True)
    cp.add_argument("--round", type=int, required=True)
    cp.add_argument("--binlog-dir", required=True)
    cp.add_argument("--acked-glob", required=True)
    a = p.parse_args()
    if a.cmd == "load":
        load(a)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
