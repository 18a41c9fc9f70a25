"""Random schemas and statements for difftest.py.

Every statement's outcome is defined by SQL alone, so that any difference
between two engines is a bug of one of them:
  - a LIMIT, UPDATE IGNORE, INSERT ... SELECT or ORDER BY comes with an
    ORDER BY over every column, then over the bytes of every text column
    (rows that tie are then equal, also in case- and accent-insensitive
    collations);
  - a multi-table UPDATE joins on the other table's single-column primary
    key (at most one partner per row);
  - ALTER TABLE runs with ALGORITHM=COPY on both engines;
  - statements whose error depends on which row comes first (an UPDATE of
    a key over many rows) compare error codes, not messages.
"""
import random

# Subito's ALTER TABLE always copies; InnoDB's in-place ALTER would not
# re-check existing values against the sql_mode (docs/mariadb.md).
COPY = ", ALGORITHM=COPY"


class Stmt:
    def __init__(self, sql, ordered=False, exact_messages=True, compare_affected=True,
                 creates=(), drops=(), undo=None, warnings_if_failed=True,
                 compare_warnings=True, any_error=False):
        self.sql = sql
        self.any_error = any_error  # failing at all is what must agree
        self.compare_warnings = compare_warnings
        self.warnings_if_failed = warnings_if_failed
        self.undo = undo  # called when the statement fails: the model forgets it
        self.ordered = ordered
        self.exact_messages = exact_messages
        self.compare_affected = compare_affected
        self.creates = set(creates)
        self.drops = set(drops)


def Session(sql):
    """A statement on the session, not on tables: it may leave the previous
    statement's warnings in place, which are compared with that one."""
    return Stmt(sql, compare_warnings=False)


# kind, SQL type, key-able without a prefix
TYPES = [
    ("int", "TINYINT", True), ("uint", "TINYINT UNSIGNED", True), ("int", "SMALLINT", True),
    ("int", "MEDIUMINT", True), ("int", "INT", True), ("uint", "INT UNSIGNED", True),
    ("int", "BIGINT", True), ("uint", "BIGINT UNSIGNED", True),
    ("dec", "DECIMAL(10,2)", True), ("dec", "DECIMAL(20,0) UNSIGNED", True),
    ("float", "FLOAT", True), ("float", "DOUBLE", True),
    ("bit", "BIT(1)", True), ("bit", "BIT(8)", True), ("bit", "BIT(64)", True),
    ("str", "CHAR(5)", True), ("str", "VARCHAR(20)", True),
    ("str", "VARCHAR(20) COLLATE utf8mb4_bin", True),
    ("str", "VARCHAR(12) CHARACTER SET latin1", True),
    ("str", "CHAR(4) COLLATE utf8mb4_unicode_ci", True),
    ("str", "VARCHAR(10) COLLATE utf8mb4_nopad_bin", True),
    ("str", "VARCHAR(10) COLLATE utf8mb4_general_nopad_ci", True),
    ("text", "TEXT CHARACTER SET latin1 COLLATE latin1_swedish_nopad_ci", False),
    ("bin", "BINARY(4)", True), ("bin", "VARBINARY(16)", True),
    ("text", "TEXT", False), ("text", "TINYTEXT COLLATE utf8mb4_bin", False),
    ("blob", "BLOB", False), ("blob", "MEDIUMBLOB", False),
    ("date", "DATE", True), ("time", "TIME", True), ("time", "TIME(2)", True),
    ("datetime", "DATETIME", True), ("datetime", "DATETIME(3)", True),
    ("timestamp", "TIMESTAMP NULL", True), ("year", "YEAR", True),
    ("enum", "ENUM('a','b','c')", True), ("set", "SET('x','y','z')", True),
]

INT_RANGES = {"TINYINT": (-128, 127), "TINYINT UNSIGNED": (0, 255), "SMALLINT": (-32768, 32767),
              "MEDIUMINT": (-8388608, 8388607), "INT": (-2147483648, 2147483647),
              "INT UNSIGNED": (0, 4294967295), "BIGINT": (-2**63, 2**63 - 1),
              "BIGINT UNSIGNED": (0, 2**64 - 1)}

# No NUL inside text: a LIKE 'a%' range misses 'a\0b' in PAD SPACE
# collations, through InnoDB's indexes too (a server bug); binary columns
# get NULs (x'00ff'), and NO PAD columns trailing ones (Value).
STRINGS = ["''", "'a'", "'A'", "'a '", "'b'", "'ab'", "'Ab'", "'abc'", "'abcdef'", "'e'",
           "'\u00e9'", "'E'", "'zz'", "'x y'", "'0'", "'10'", "'9'", "'\u00df'", "'ss'"]


# Literals that warn when converted (a date that does not exist, a time out
# of range): in a WHERE clause, whether they are converted, and how often,
# depends on the plan.
# So do literals outside the column's range or precision: the range
# optimizer stores them into the column's type (YEAR 3000 becomes 0000, TIME
# 00:00:01.55 becomes 00:00:01) and a ref or range read then answers
# differently from a scan (a server bug that shows with InnoDB too, e.g.
# WHERE year_col < 3000 finds nothing through an index).
INVALID = {"'2020-02-30'", "'0000-00-00'", "'839:00:00'", "'2020-13-01 00:00:00'",
           "123456789012.5", "99999999.99", "'00:00:01.55'", "'2020-01-01 10:00:00.1234'",
           "3000", "0", "99", "255", "b'101'", "2"}


def InRange(c, v):
    lo, hi = INT_RANGES[c.sqltype]
    return lo <= int(v) <= hi


class Col:
    def __init__(self, name, kind, sqltype, nullable=True, auto=False):
        self.name, self.kind, self.sqltype = name, kind, sqltype
        self.nullable, self.auto = nullable, auto

    def keyable(self):
        return self.kind not in ("text", "blob")

    def key_part(self, r):
        return f"{self.name}({r.choice([2, 3, 5])})" if not self.keyable() else self.name


class TableDef:
    def __init__(self, name):
        self.name = name
        self.cols = []
        self.pk = []          # column names
        self.indexes = {}     # name -> (unique, [parts])

    def col(self, name):
        return next(c for c in self.cols if c.name == name)

    def all_cols(self):
        return ", ".join(c.name for c in self.cols)


class Generator:
    def __init__(self, r: random.Random):
        self.r = r
        self.tables = {}
        self.next_table = 1
        self.in_txn = False
        self.savepoints = []
        self.pending = []

    # ---- values ----

    def Value(self, c: Col, allow_null=True, valid=False):
        """A literal for c; valid: one every plan compares without warnings."""
        r = self.r
        if allow_null and r.random() < 0.08:
            return "NULL"
        if valid:
            while True:
                v = self.Value(c, allow_null=False)
                if c.kind in ("int", "uint"):
                    if InRange(c, v):
                        return v
                elif c.kind == "dec":  # within the column's scale and range
                    scale0 = ",0)" in c.sqltype
                    if v not in INVALID and not (scale0 and "." in v) and v != "0.005":
                        return v
                elif c.kind == "float":  # exact in a FLOAT too
                    if v not in ("0.1", "2.5e-3"):
                        return v
                elif c.kind in ("year", "bit", "date", "time", "datetime", "timestamp"):
                    if v not in INVALID:
                        return v
                elif c.kind in ("enum", "set"):  # not numbers: each value one type
                    if not v.isdigit():
                        return v
                else:
                    return v
        k, t = c.kind, c.sqltype
        if k in ("int", "uint"):
            lo, hi = INT_RANGES[t]
            if c.auto:
                return str(r.choice([0, 1, 2, 3, 5, 8, 20, 100, -1]))
            v = r.choice([0, 1, 2, 3, 4, 5, 7, 10, -1, -2, 42, lo, hi, hi + 1, lo - 1]
                         if r.random() < 0.2 else [0, 1, 2, 3, 4, 5, 6, 7, 8, -1, -3])
            return str(v)
        if k == "dec":
            return r.choice(["0", "1", "1.5", "2.25", "-2.25", "3", "99999999.99", "0.005",
                             "123456789012.5", "7", "-1", "10"])
        if k == "float":
            return r.choice(["0", "1", "1.5", "-0.25", "0.1", "1e10", "3", "-7.5", "2.5e-3", "100"])
        if k == "bit":
            return r.choice(["0", "1", "b'1'", "b'101'", "255", "2", "b'0'"])
        if k in ("str", "text"):
            if r.random() < 0.05:
                # A TINYTEXT's sort key holds its first 63 characters (255
                # bytes of utf8mb4): longer values that agree there tie in
                # an ORDER BY LIMIT's priority queue but not in a full sort,
                # so the order would follow the server's choice of sort.
                lengths = [19, 21] if t.startswith("TINYTEXT") else [19, 21, 70, 300]
                return f"REPEAT('q', {r.choice(lengths)})"
            if "nopad" in t and r.random() < 0.15:
                # NO PAD: a trailing NUL (weight zero) makes another key.
                return r.choice(["CONCAT('a', CHAR(0))", "CONCAT('ab', CHAR(0), CHAR(0))",
                                 "CHAR(0)"])
            return r.choice(STRINGS)
        if k in ("bin", "blob"):
            if k == "blob" and r.random() < 0.04:
                # Long enough for an overflow chain (a row over a quarter
                # page); the length leads, so sort keys (the first
                # max_sort_length bytes) of different values differ.
                n = r.choice([3000, 9000, 40000])
                return f"CONCAT('{n}', REPEAT('z', {n}))"
            return r.choice(["'a'", "'A'", "x'00ff'", "'ab'", "''", "x'00'", "'abcd'", "'abcde'",
                             "x'ff'"])
        if k == "date":
            return r.choice(["'2020-01-01'", "'2020-02-30'", "'0000-00-00'", "'1999-12-31'",
                             "'2038-01-19'", "'2020-01-02'", "'2020-1-1'", "20200103"])
        if k == "time":
            return r.choice(["'10:00:00'", "'-838:59:59'", "'25:00:00'", "'12:30'", "'00:00:01.55'",
                             "'839:00:00'", "'10:00:00'", "'01:02:03'"])
        if k == "datetime":
            return r.choice(["'2020-01-01 10:00:00'", "'2020-01-01 10:00:00.1234'",
                             "'2020-01-01'", "'1000-01-01 00:00:00'", "'2020-13-01 00:00:00'",
                             "'2021-06-15 12:00:00'"])
        if k == "timestamp":
            return r.choice(["'2020-01-01 10:00:00'", "'1970-01-01 00:00:00'",
                             "'2038-01-19 03:14:07'", "'2020-06-01 00:00:00'", "'2020-06-01'"])
        if k == "year":
            return r.choice(["2000", "1901", "2155", "99", "0", "3000", "'2020'", "2001"])
        if k == "enum":
            return r.choice(["'a'", "'b'", "'c'", "'B'", "'d'", "1", "2", "''"])
        if k == "set":
            return r.choice(["'x'", "'x,y'", "'z,x'", "'w'", "''", "3", "'y'"])
        raise ValueError(k)

    def Expr(self, c: Col):
        """A new value for column c, maybe computed from the row."""
        r = self.r
        x = r.random()
        if x < 0.5 or c.auto:
            return self.Value(c)
        if c.kind in ("int", "uint", "dec", "float", "year", "bit"):
            return r.choice([f"{c.name} + 1", f"{c.name} - 1", f"{c.name} * 2", f"{c.name} + 100"])
        if c.kind in ("str", "text", "bin", "blob"):
            return r.choice([f"CONCAT({c.name}, 'x')", f"UPPER({c.name})", f"LEFT({c.name}, 1)",
                             f"REVERSE({c.name})"])
        if c.kind in ("date", "datetime", "timestamp"):
            return f"{c.name} + INTERVAL 1 DAY"
        return self.Value(c)

    def Cond(self, t: TableDef):
        """A WHERE condition on t, often on an indexed column."""
        r = self.r
        cols = self.IndexedCols(t) if r.random() < 0.7 else t.cols
        cols = cols or t.cols
        c = r.choice(cols)
        v = self.Value(c, allow_null=False, valid=True)
        form = r.random()
        if form < 0.3:
            s = f"{c.name} = {v}"
        elif form < 0.5:
            s = f"{c.name} {r.choice(['<', '<=', '>', '>='])} {v}"
        elif form < 0.6:
            s = f"{c.name} BETWEEN {v} AND {self.Value(c, allow_null=False, valid=True)}"
        elif form < 0.7:
            s = f"{c.name} IS {r.choice(['', 'NOT '])}NULL"
        elif form < 0.8:
            s = f"{c.name} IN ({v}, {self.Value(c, allow_null=False, valid=True)}, {self.Value(c, allow_null=False, valid=True)})"
        elif form < 0.9 and len(cols) > 1:
            d = r.choice(cols)
            s = f"({c.name} = {v} OR {d.name} = {self.Value(d, allow_null=False, valid=True)})"
        elif c.kind in ("str", "text"):
            s = f"{c.name} LIKE " + r.choice(["'a%'", "'%b'", "'A_'", "'%'"])
        else:
            s = f"{c.name} <> {v}"
        if r.random() < 0.2:
            s += f" AND {self.Cond(t)}"
        return s

    def IndexedCols(self, t):
        names = list(t.pk)
        for _, parts in t.indexes.values():
            names += [p.split("(")[0] for p in parts]
        return [c for c in t.cols if c.name in names]

    def JoinPair(self, t, o, b_cols=None):
        """Columns a of t and b of o of one type: a conversion's warnings
        count the rows a plan compares, and a value that does not fit the
        other column is cut to fit by a ref read (the server then finds
        b'101' in a BIT(1) index as 1, with InnoDB too)."""
        pairs = [(a, b) for a in t.cols for b in (b_cols or o.cols) if a.sqltype == b.sqltype]
        return self.r.choice(pairs) if pairs else None

    def OrderAll(self, t, desc=None):
        r = self.r
        d = desc if desc is not None else r.random() < 0.3
        return ", ".join(self.OrderTerm(c, d) for c in t.cols) + self.Tiebreak(t, d)

    @staticmethod
    def OrderTerm(c, desc):
        """A NO PAD column is followed by its bytes: the server's filesort
        keys (not packed) tie 'a' and 'a' followed by NUL, which its packed
        keys and indexes order, so without them the next column would
        decide that order in some sorts only."""
        d = " DESC" if desc else ""
        return f"{c.name}{d}, BINARY {c.name}{d}" if "nopad" in c.sqltype else f"{c.name}{d}"

    @staticmethod
    def Tiebreak(t, desc):
        """Text that ties in its collation ('E' and 'e' in a _ci one) may
        differ in bytes: ordering by the bytes last makes the order total,
        whichever sort or index the server picks."""
        return "".join(f", BINARY {c.name}{' DESC' if desc else ''}" for c in t.cols
                       if c.kind in ("str", "text"))

    # ---- schema ----

    def CreateTable(self):
        r = self.r
        name = f"t{self.next_table}"
        self.next_table += 1
        t = TableDef(name)
        pk_style = r.choice(["none", "auto", "single", "single", "composite", "unique_nn"])
        if pk_style == "auto":
            t.cols.append(Col("id", "int", r.choice(["INT", "BIGINT UNSIGNED", "SMALLINT"]),
                              nullable=False, auto=True))
            t.pk = ["id"]
        for i in range(r.randint(2, 6)):
            kind, sqltype, _ = r.choice(TYPES)
            t.cols.append(Col(f"c{i}", kind, sqltype, nullable=r.random() < 0.8))
        keyable = [c for c in t.cols if c.keyable() and not c.auto]
        if pk_style in ("single", "composite", "unique_nn") and keyable:
            n = 1 if pk_style != "composite" else min(2, len(keyable))
            chosen = r.sample(keyable, n)
            for c in chosen:
                c.nullable = False
            if pk_style == "unique_nn":
                t.indexes["u_nn"] = (True, [c.name for c in chosen])
            else:
                t.pk = [c.name for c in chosen]
        for j in range(r.randint(0, 3)):
            parts_cols = r.sample(t.cols, min(len(t.cols), r.choice([1, 1, 2])))
            unique = r.random() < 0.35 and all(c.keyable() for c in parts_cols)
            parts = [c.key_part(r) + (" DESC" if r.random() < 0.15 else "") for c in parts_cols]
            t.indexes[f"k{j}"] = (unique, parts)
        defs = []
        for c in t.cols:
            d = f"{c.name} {c.sqltype}"
            if c.auto:
                d += " AUTO_INCREMENT"
            elif not c.nullable:
                d += " NOT NULL"
                if r.random() < 0.5 and c.kind not in ("text", "blob"):
                    d += f" DEFAULT {self.Value(c, allow_null=False)}"
            defs.append(d)
        if t.pk:
            # Sometimes descending: rowids then order backwards (cmp_ref).
            desc = [" DESC" if r.random() < 0.15 else "" for _ in t.pk]
            defs.append(f"PRIMARY KEY ({', '.join(p + d for p, d in zip(t.pk, desc))})")
        for iname, (unique, parts) in t.indexes.items():
            defs.append(f"{'UNIQUE ' if unique else ''}KEY {iname} ({', '.join(parts)})")
        self.tables[name] = t
        sql = f"CREATE TABLE {name} ({', '.join(defs)})"
        return Stmt(sql, creates=[name], undo=lambda: self.tables.pop(name, None))

    # ---- statements ----

    def Next(self) -> Stmt:
        if self.pending:
            return self.pending.pop(0)
        r = self.r
        if len(self.tables) < 2:
            return self.CreateTable()
        t = self.tables[r.choice(sorted(self.tables))]
        choices = [
            (18, self.Insert), (4, self.InsertIgnore), (4, self.Replace), (5, self.InsertOnDup),
            (3, self.InsertSelect), (10, self.Update), (3, self.UpdateKey), (5, self.Delete),
            (2, self.MultiUpdate), (2, self.MultiDelete), (22, self.Select), (6, self.Txn),
            (1, self.Truncate), (2, self.Alter), (2, self.SqlMode), (1, self.Recreate),
        ]
        total = sum(w for w, _ in choices)
        x = r.uniform(0, total)
        for w, f in choices:
            x -= w
            if x <= 0:
                return f(t)
        return self.Select(t)

    def Rows(self, t, n, negative_auto=True):
        r = self.r
        cols = [c for c in t.cols if not (c.auto and r.random() < 0.6)]
        if r.random() < 0.15 and len(cols) > 1:  # leave some column to its default
            cols = [c for c in cols if c is not r.choice(cols)]
        def V(c):
            v = self.Value(c)
            return "1" if c.auto and not negative_auto and v.startswith("-") else v
        rows = ", ".join("(" + ", ".join(V(c) for c in cols) + ")" for _ in range(n))
        return f"({', '.join(c.name for c in cols)}) VALUES {rows}"

    def Insert(self, t):
        return Stmt(f"INSERT INTO {t.name} {self.Rows(t, self.r.choice([1, 1, 2, 3, 5]))}")

    def InsertIgnore(self, t):
        return Stmt(f"INSERT IGNORE INTO {t.name} {self.Rows(t, self.r.choice([1, 2, 4]))}")

    def Replace(self, t):
        return Stmt(f"REPLACE INTO {t.name} {self.Rows(t, self.r.choice([1, 2, 3]))}")

    def InsertOnDup(self, t):
        c = self.r.choice(t.cols)
        e = self.Expr(c)
        if c.auto and e.startswith("-"):
            e = "1"
        upd = self.r.choice([f"{c.name} = {e}", f"{c.name} = VALUES({c.name})"])
        # A negative auto-increment value that meets a duplicate here, or
        # that the update sets, makes InnoDB fail the next generated value
        # (ER_AUTOINC_READ_FAILED).
        rows = self.Rows(t, self.r.choice([1, 2, 3]), negative_auto=False)
        return Stmt(f"INSERT INTO {t.name} {rows} ON DUPLICATE KEY UPDATE {upd}")

    def InsertSelect(self, t):
        r = self.r
        src = self.tables[r.choice(sorted(self.tables))]
        n = min(len(t.cols), len(src.cols))
        dst = [c.name for c in t.cols[:n]]
        sel = [c.name for c in src.cols[:n]]
        ign = r.choice(["", "IGNORE "])
        return Stmt(f"INSERT {ign}INTO {t.name} ({', '.join(dst)}) SELECT {', '.join(sel)} "
                    f"FROM {src.name} WHERE {self.Cond(src)} ORDER BY {self.OrderAll(src)} "
                    f"LIMIT {r.choice([1, 3, 10])}",
                    exact_messages=False)  # row numbers count the rows the plan read

    def UniqueCols(self, t):
        names = set(t.pk)
        for unique, parts in t.indexes.values():
            if unique:
                names |= {p.split("(")[0].split(" ")[0] for p in parts}
        return names

    def Update(self, t):
        """Non-key columns: without ORDER BY, which row meets a unique key's
        other row first (an error, or none) would follow the plan."""
        r = self.r
        cols = [c for c in t.cols if c.name not in self.UniqueCols(t) and not c.auto]
        if not cols or r.random() < 0.4:
            cols = cols or [c for c in t.cols if not c.auto] or t.cols
            sets = ", ".join(f"{c.name} = {self.Expr(c)}" for c in r.sample(cols, min(len(cols), 2)))
            ign = r.choice(["", "IGNORE "])
            return Stmt(f"UPDATE {ign}{t.name} SET {sets} WHERE {self.Cond(t)} "
                        f"ORDER BY {self.OrderAll(t)} LIMIT {r.choice([1, 2, 5])}")
        sets = ", ".join(f"{c.name} = {self.Expr(c)}" for c in r.sample(cols, min(len(cols), r.choice([1, 2]))))
        return Stmt(f"UPDATE {t.name} SET {sets} WHERE {self.Cond(t)}", exact_messages=False)

    def UpdateKey(self, t):
        """Key columns, in an order SQL fixes (LIMIT or not)."""
        r = self.r
        keyed = self.IndexedCols(t)
        if not keyed:
            return self.Update(t)
        c = r.choice(keyed)
        limit = r.choice(["", " LIMIT 1", " LIMIT 3"])
        return Stmt(f"UPDATE {t.name} SET {c.name} = {self.Expr(c)} WHERE {self.Cond(t)} "
                    f"ORDER BY {self.OrderAll(t)}{limit}")

    def Delete(self, t):
        r = self.r
        if r.random() < 0.4:
            return Stmt(f"DELETE FROM {t.name} WHERE {self.Cond(t)} ORDER BY {self.OrderAll(t)} "
                        f"LIMIT {r.choice([1, 2, 5])}")
        return Stmt(f"DELETE FROM {t.name} WHERE {self.Cond(t)}")

    def Partner(self, t):
        """Another table with a single-column primary key, and the column."""
        others = [o for o in self.tables.values() if o is not t and len(o.pk) == 1]
        return self.r.choice(others) if others else None

    def MultiUpdate(self, t):
        r = self.r
        o = self.Partner(t)
        cols = [c for c in t.cols if not c.auto and c.name not in self.UniqueCols(t)]
        pair = self.JoinPair(t, o, [o.col(o.pk[0])]) if o else None
        if pair is None or not cols:
            return self.Update(t)
        a, b = pair
        c = r.choice(cols)
        return Stmt(f"UPDATE {t.name} a JOIN {o.name} b ON a.{a.name} = b.{b.name} "
                    f"SET a.{c.name} = {self.Expr(c).replace(c.name, 'a.' + c.name)}",
                    exact_messages=False, compare_warnings=False)
        # (the server may buffer the new values in a temporary table first,
        # depending on the join order, and warn twice about a conversion)

    def MultiDelete(self, t):
        r = self.r
        o = self.tables[r.choice(sorted(self.tables))]
        pair = self.JoinPair(t, o) if o is not t else None
        if pair is None:
            return self.Delete(t)
        a, b = pair
        return Stmt(f"DELETE a FROM {t.name} a JOIN {o.name} b ON a.{a.name} = b.{b.name}",
                    exact_messages=False)

    def Select(self, t):
        r = self.r
        x = r.random()
        lock = r.choice(["", "", "", " FOR UPDATE", " LOCK IN SHARE MODE"])
        if x < 0.2:  # point or range read through an index, maybe forced
            hint = ""
            if t.indexes and r.random() < 0.5:
                hint = f" FORCE INDEX ({r.choice(sorted(t.indexes))})"
            return Stmt(f"SELECT * FROM {t.name}{hint} WHERE {self.Cond(t)}{lock}")
        if x < 0.4:  # ordered, limited
            return Stmt(f"SELECT * FROM {t.name} WHERE {self.Cond(t)} ORDER BY {self.OrderAll(t)} "
                        f"LIMIT {r.choice([1, 2, 5, 100])}{lock}", ordered=True)
        if x < 0.5:  # index-only
            cols = self.IndexedCols(t)
            if cols:
                names = ", ".join(c.name for c in cols if c.keyable()) or "COUNT(*)"
                return Stmt(f"SELECT {names} FROM {t.name} WHERE {self.Cond(t)}")
            return Stmt(f"SELECT COUNT(*) FROM {t.name}")
        if x < 0.6:  # aggregates
            g = r.choice(t.cols)
            nums = [c for c in t.cols if c.kind in ("int", "uint", "dec")]
            agg = f", SUM({r.choice(nums).name})" if nums else ""
            return Stmt(f"SELECT {g.name}, COUNT(*), MIN({r.choice(t.cols).name}), "
                        f"MAX({r.choice(t.cols).name}){agg} FROM {t.name} GROUP BY {g.name}")
        if x < 0.7:  # join
            o = self.tables[r.choice(sorted(self.tables))]
            pair = self.JoinPair(t, o)
            if pair is None:
                return Stmt(f"SELECT * FROM {t.name}")
            a, b = pair
            return Stmt(f"SELECT a.*, b.* FROM {t.name} a {r.choice(['', 'LEFT '])}JOIN {o.name} b "
                        f"ON a.{a.name} = b.{b.name}")
        if x < 0.8:  # by index order, maybe descending
            cols = self.IndexedCols(t)
            c = r.choice(cols) if cols else r.choice(t.cols)
            d = r.choice(["", " DESC"])
            rest = ", ".join(self.OrderTerm(o, d != "") for o in t.cols if o is not c)
            order = self.OrderTerm(c, d != "") + (f", {rest}" if rest else "") + \
                self.Tiebreak(t, d == " DESC")
            return Stmt(f"SELECT * FROM {t.name} ORDER BY {order} LIMIT {r.choice([1, 3, 7])}",
                        ordered=True)
        if x < 0.9:
            return Stmt(f"SELECT COUNT(*) FROM {t.name} WHERE {self.Cond(t)}")
        if x < 0.935:
            return self.IndexMinMax(t)
        if x < 0.97:  # a subquery: semi-join, materialization or EXISTS
            o = self.tables[r.choice(sorted(self.tables))]
            pair = self.JoinPair(t, o)
            if pair is None:
                return Stmt(f"SELECT * FROM {t.name}{lock}")
            a, b = pair
            if r.random() < 0.5:
                return Stmt(f"SELECT * FROM {t.name} WHERE {a.name} {r.choice(['', 'NOT '])}IN "
                            f"(SELECT {b.name} FROM {o.name} WHERE {self.Cond(o)})")
            return Stmt(f"SELECT * FROM {t.name} x WHERE {r.choice(['', 'NOT '])}EXISTS "
                        f"(SELECT 1 FROM {o.name} y WHERE y.{b.name} = x.{a.name})")
        return Stmt(f"SELECT * FROM {t.name}{lock}")

    def IndexMinMax(self, t):
        """MIN and MAX that the optimizer reads off an index's ends
        (index_read_map with a prefix, HA_READ_PREFIX_LAST), and a GROUP BY
        it may read by a loose index scan. Only over types whose equal
        values are one value: of strings that tie in their collation, which
        one MIN gives depends on the plan."""
        r = self.r
        keys = [parts for _, parts in t.indexes.values()]
        if t.pk:
            keys.append(list(t.pk))
        exact = ("int", "uint", "dec", "date", "datetime", "time", "year")
        keys = [[p.split(" ")[0] for p in parts] for parts in keys
                if "(" not in " ".join(parts)]
        keys = [k for k in keys if all(t.col(n).kind in exact for n in k)]
        if not keys:
            return Stmt(f"SELECT COUNT(*) FROM {t.name}")
        k = r.choice(keys)
        a = t.col(k[0])
        if len(k) == 1:
            op = r.choice(["<", "<=", ">", ">="])
            v = self.Value(a, allow_null=False, valid=True)
            return Stmt(f"SELECT MIN({a.name}), MAX({a.name}), COUNT(*) FROM {t.name} "
                        f"WHERE {a.name} {op} {v}")
        b = t.col(k[1])
        if r.random() < 0.5:
            v = self.Value(a, allow_null=False, valid=True)
            return Stmt(f"SELECT MIN({b.name}), MAX({b.name}) FROM {t.name} WHERE {a.name} = {v}")
        return Stmt(f"SELECT {a.name}, MIN({b.name}), MAX({b.name}), COUNT(*) FROM {t.name} "
                    f"GROUP BY {a.name}")

    def Txn(self, t):
        r = self.r
        if not self.in_txn:
            self.in_txn = True
            self.savepoints = []
            return Session(r.choice(["BEGIN", "START TRANSACTION", "SET autocommit=0"]))
        x = r.random()
        if x < 0.3:
            sp = f"sp{len(self.savepoints) + 1}"
            self.savepoints.append(sp)
            return Session(f"SAVEPOINT {sp}")
        if x < 0.5 and self.savepoints:
            sp = r.choice(self.savepoints)
            self.savepoints = self.savepoints[:self.savepoints.index(sp) + 1]
            return Session(f"ROLLBACK TO SAVEPOINT {sp}")
        if x < 0.55:
            return Session("ROLLBACK TO SAVEPOINT nope")
        self.in_txn = False
        self.pending.append(Session("SET autocommit=1"))
        return Session(r.choice(["COMMIT", "ROLLBACK", "COMMIT", "ROLLBACK"]))

    def Truncate(self, t):
        self.in_txn = False
        return Stmt(f"TRUNCATE TABLE {t.name}")

    def Alter(self, t):
        r = self.r
        self.in_txn = False  # DDL commits
        saved = (list(t.cols), dict(t.indexes))

        def Undo():  # the ALTER failed: the table is as it was
            t.cols, t.indexes = list(saved[0]), dict(saved[1])

        x = r.random()
        if x < 0.35:
            c = r.choice(t.cols)
            name = f"k{len(t.indexes) + 10}"
            unique = r.random() < 0.3 and c.keyable()
            if not unique:
                t.indexes[name] = (False, [c.key_part(r)])
                return Stmt(f"ALTER TABLE {t.name} ADD INDEX {name} ({t.indexes[name][1][0]}){COPY}",
                            undo=Undo)
            # May fail on duplicates: the table must then stay as it was.
            # Which duplicate is named, how many rows were copied (and
            # warned about) before, and whether a duplicate or a bad value
            # is met first, follow each engine's copy order.
            t.indexes[name] = (True, [c.name])
            self.pending.append(Stmt(
                "SELECT index_name, seq_in_index, column_name, non_unique, sub_part, nullable "
                "FROM information_schema.statistics WHERE table_schema = DATABASE() AND "
                f"table_name = '{t.name}' ORDER BY 1, 2", ordered=True))
            return Stmt(f"ALTER TABLE {t.name} ADD UNIQUE INDEX {name} ({c.name}){COPY}",
                        exact_messages=False, warnings_if_failed=False, any_error=True,
                        undo=Undo)
        if x < 0.55 and t.indexes:
            name = r.choice(sorted(t.indexes))
            del t.indexes[name]
            return Stmt(f"ALTER TABLE {t.name} DROP INDEX {name}{COPY}", undo=Undo)
        if x < 0.8:
            kind, sqltype, _ = r.choice(TYPES)
            c = Col(f"c{len(t.cols) + 20}", kind, sqltype)
            t.cols.append(c)
            return Stmt(f"ALTER TABLE {t.name} ADD COLUMN {c.name} {sqltype}{COPY}", undo=Undo)
        cands = [c for c in t.cols if c.name not in t.pk and not c.auto and len(t.cols) > 2]
        if not cands:
            return self.Select(t)
        c = r.choice(cands)
        t.cols.remove(c)
        for iname in list(t.indexes):  # the server drops the column's parts
            unique, parts = t.indexes[iname]
            rest = [p for p in parts if p.split("(")[0].split(" ")[0] != c.name]
            if rest:
                t.indexes[iname] = (unique, rest)
            else:
                del t.indexes[iname]
        return Stmt(f"ALTER TABLE {t.name} DROP COLUMN {c.name}{COPY}", undo=Undo)

    def SqlMode(self, t):
        return Session("SET sql_mode = " + self.r.choice(
            ["DEFAULT", "''", "'STRICT_ALL_TABLES'", "'TRADITIONAL'", "'NO_ZERO_DATE'"]))

    def Recreate(self, t):
        self.in_txn = False
        del self.tables[t.name]
        self.pending.append(self.CreateTable())
        return Stmt(f"DROP TABLE {t.name}", drops=[t.name])
