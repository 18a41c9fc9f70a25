#!/usr/bin/env python3
"""The online physical backup of docs/mariadb.md ("Backups"), as a backup
tool would run it, for scripts/test-backup.sh:

  online_backup.py --socket S --data-dir D --pm-dir P --to DIR
                   --tables "db.t1, db.t2" --checksums FILE --acked-glob G

One connection holds the backup stages throughout:
  BACKUP STAGE START        Subito stops writing its files but the redo log
  BACKUP STAGE FLUSH, BLOCK_DDL, BLOCK_COMMIT
                            no DDL, no commit from here
  CHECKSUM TABLE of the tables (to FILE) and a copy of the acknowledged
  commits so far (the files matching G, to DIR/acked.*)
  copy D to DIR/data, then P to DIR/pm without its log directory, then the
  log directory last
  BACKUP STAGE END
Prints the time each part took and how long commits were blocked.
"""
import argparse
import glob
import os
import shutil
import time

import pymysql


def copy_tree(src, dst, leave_out=None):
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name == leave_out:
            continue
        s, d = os.path.join(src, name), os.path.join(dst, name)
        if os.path.isdir(s):
            shutil.copytree(s, d, symlinks=True)
        elif os.path.exists(s):  # a temporary file may go meanwhile
            try:
                shutil.copy2(s, d)
            except FileNotFoundError:
                pass


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--pm-dir", required=True)
    p.add_argument("--to", required=True)
    p.add_argument("--tables", required=True)
    p.add_argument("--checksums", required=True)
    p.add_argument("--acked-glob", required=True)
    a = p.parse_args()
    conn = pymysql.connect(unix_socket=a.socket, user="root", autocommit=True)
    t0 = time.monotonic()
    with conn.cursor() as c:
        c.execute("BACKUP STAGE START")
        c.execute("SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS "
                  "WHERE VARIABLE_NAME = 'SUBITO_BACKUP_FILE_WRITES_PAUSED'")
        paused = c.fetchone()[0]
        for stage in ("FLUSH", "BLOCK_DDL", "BLOCK_COMMIT"):
            c.execute("BACKUP STAGE " + stage)
        t1 = time.monotonic()
        for f in glob.glob(a.acked_glob):
            shutil.copy(f, os.path.join(a.to, "acked." + f.rsplit(".", 1)[-1]))
        c.execute("CHECKSUM TABLE " + a.tables)
        with open(a.checksums, "w") as out:
            for table, checksum in c.fetchall():
                out.write(f"{table}\t{checksum}\n")
        copy_tree(a.data_dir, os.path.join(a.to, "data"))
        copy_tree(a.pm_dir, os.path.join(a.to, "pm"), leave_out="log")
        t2 = time.monotonic()
        copy_tree(os.path.join(a.pm_dir, "log"), os.path.join(a.to, "pm", "log"))
        t3 = time.monotonic()
        c.execute("BACKUP STAGE END")
    print(f"file writes paused at BACKUP STAGE START: {paused}; stages to BLOCK_COMMIT "
          f"{t1 - t0:.2f} s, checksums and files {t2 - t1:.2f} s, the log {t3 - t2:.2f} s; "
          f"commits blocked {time.monotonic() - t1:.2f} s")


if __name__ == "__main__":
    main()
