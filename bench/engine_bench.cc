// Engine benchmark in the shape of sysbench's OLTP workloads, run through the
// embedded API (include/subito/database.h). Tables are sysbench's sbtest
// (id PK, k with a non-unique index, c CHAR(120), pad CHAR(60)); prepare
// loads them once, then every workload runs for --seconds in two
// configurations: "in-memory" (buffer pool 4x the data) and "pool-10pct"
// (buffer pool 10% of the data), the database closed and reopened between
// them. For each (configuration, workload): transactions/s, p50/p99
// transaction latency and bytes written per transaction to the PM tier (redo
// log + double-write area) and to the page files. Not a test: it prints and
// writes JSON.
//
// Workloads (one random table per transaction, ids uniform in 1..rows):
//   point_select      10 primary-key reads (consistent reads)
//   read_only         oltp_read_only: 10 point selects + 1 range of 100 rows
//   update_index      UPDATE sbtest SET k=k+1 WHERE id=?
//   update_non_index  UPDATE sbtest SET c=? WHERE id=?
//   delete_insert     DELETE WHERE id=?; INSERT the same id with new values
//   read_write        oltp_read_write: 10 point selects, 1 range of 100,
//                     1 index update, 1 non-index update, 1 delete + 1 insert
// A transaction that is a deadlock victim or times out on a lock is retried
// (with new random ids, as sysbench restarts the event); its latency runs from
// the first attempt to the successful commit.
//
// usage: engine_bench [--dir D] [--pm-dir P] [--tables N] [--rows M] [--threads T]
//                     [--seconds S] [--pool-mb MB] [--log-mode nf|classic]
//                     [--workloads a,b,...] [--json FILE] [--quick]
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "pmem/pm_file.h"
#include "subito/database.h"
#include "util/strings.h"

using namespace subito;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kMarker = ".engine_bench";  // a directory this program may empty

struct Config {
  std::string dir = "/var/tmp/subito-engine-bench";
  std::string pm_dir = "/dev/shm/subito-engine-bench";
  uint32_t tables = 4;
  uint64_t rows = 20000;
  int threads = 2;
  double seconds = 10;
  uint64_t pool_mb = 0;  // 0: 4x the data size for "in-memory"
  std::string log_mode = "nf";
  std::string json;
  std::vector<std::string> workloads;  // empty: all
  bool quick = false;
};

enum class Kind {
  kPointSelect,
  kReadOnly,
  kUpdateIndex,
  kUpdateNonIndex,
  kDeleteInsert,
  kReadWrite
};

struct WorkloadDef {
  Kind kind;
  const char* name;
};
constexpr WorkloadDef kWorkloads[] = {
    {Kind::kPointSelect, "point_select"},   {Kind::kReadOnly, "read_only"},
    {Kind::kUpdateIndex, "update_index"},   {Kind::kUpdateNonIndex, "update_non_index"},
    {Kind::kDeleteInsert, "delete_insert"}, {Kind::kReadWrite, "read_write"},
};

constexpr int kPointSelects = 10;
constexpr int kRangeSize = 100;
constexpr uint64_t kPrepareBatch = 1000;  // rows per prepare transaction

[[noreturn]] void Die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "\nengine_bench: %s: %s\n", what.c_str(), st.ToString().c_str());
  std::exit(1);
}

// ---- sbtest rows ----

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Uniform(uint64_t lo, uint64_t hi) {  // inclusive
    return std::uniform_int_distribution<uint64_t>(lo, hi)(gen_);
  }
  // sysbench's sb_rand_str: every '#' becomes a random digit.
  std::string Digits(const char* tmpl, size_t width) {
    std::string s(tmpl);
    for (char& ch : s) {
      if (ch == '#') ch = static_cast<char>('0' + Uniform(0, 9));
    }
    s.resize(width, ' ');  // CHAR(width) pads with spaces
    return s;
  }

 private:
  std::mt19937_64 gen_;
};

// sysbench's templates: 10 (c) and 5 (pad) groups of 11 digits.
constexpr const char* kCTemplate =
    "###########-###########-###########-###########-###########-"
    "###########-###########-###########-###########-###########";
constexpr const char* kPadTemplate = "###########-###########-###########-###########-###########";
constexpr size_t kCWidth = 120, kPadWidth = 60;

std::string RandomC(Rng& r) {
  return r.Digits(kCTemplate, kCWidth);
}
std::string RandomPad(Rng& r) {
  return r.Digits(kPadTemplate, kPadWidth);
}

std::string TableName(uint32_t i) {
  return StrFormat("sbtest%u", i + 1);
}

TableDef SbtestDef(uint32_t i) {
  TableDef def;
  def.name = TableName(i);
  def.columns = {{"id", ColumnType::kInt, 8},
                 {"k", ColumnType::kUInt, 4},
                 {"c", ColumnType::kString, 8, false, kCWidth},
                 {"pad", ColumnType::kString, 8, false, kPadWidth}};
  def.primary_key = {0};
  def.auto_increment_column = 0;  // id INTEGER AUTO_INCREMENT, as sysbench declares it
  return def;
}

Row NewRow(int64_t id, Rng& r, uint64_t rows) {
  return {Value(id), Value(r.Uniform(1, rows)), Value(RandomC(r)), Value(RandomPad(r))};
}

// ---- database handling ----

Options DbOptions(const Config& c, uint64_t pool_bytes) {
  Options o;
  o.dir = c.dir;
  o.pm_dir = c.pm_dir;
  o.buffer_pool_bytes = pool_bytes;
  o.log_write_mode = c.log_mode;
  return o;
}

std::unique_ptr<Database> OpenDb(const Config& c, uint64_t pool_bytes) {
  Result<std::unique_ptr<Database>> db = Database::Open(DbOptions(c, pool_bytes));
  if (!db.ok()) Die("open " + c.dir, db.status());
  return std::move(*db);
}

void CloseDb(std::unique_ptr<Database>& db) {
  Status st = db->Close();
  if (!st.ok()) Die("close", st);
  db.reset();
}

std::vector<Table*> FindTables(Database* db, uint32_t n) {
  std::vector<Table*> out;
  for (uint32_t i = 0; i < n; ++i) {
    Table* t = db->FindTable(TableName(i));
    if (t == nullptr) Die("find " + TableName(i), Status::NotFound("table missing"));
    out.push_back(t);
  }
  return out;
}

// Pages of every index of every table, in bytes.
uint64_t DataBytes(const std::vector<Table*>& tables, uint32_t page_size) {
  uint64_t pages = 0;
  for (Table* t : tables) {
    for (const IndexStats& is : t->Stats().indexes) pages += is.pages;
  }
  return pages * page_size;
}

// Empties (or creates) a directory this program owns: refuses one that holds
// anything else, so a mistyped --dir cannot delete someone's files.
void ResetDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) Die(dir, Status::InvalidArgument("not a directory"));
    if (!fs::is_empty(dir, ec) && !fs::exists(dir + "/" + kMarker, ec)) {
      Die(dir, Status::InvalidArgument(
                   "exists, is not empty and was not made by engine_bench: pick another"));
    }
    fs::remove_all(dir, ec);
    if (ec) Die(dir, Status::IOError(ec.message()));
  }
  fs::create_directories(dir, ec);
  if (ec) Die(dir, Status::IOError(ec.message()));
  std::ofstream(dir + "/" + kMarker) << "engine_bench scratch directory\n";
}

void RemoveDir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir + "/" + kMarker, ec)) std::filesystem::remove_all(dir, ec);
}

bool Retryable(const Status& st) {
  return st.IsDeadlock() || st.IsTimedOut();
}

const char* Eol() {
  static const bool tty = ::isatty(2);
  return tty ? "\r" : "\n";
}

// ---- prepare ----

struct PrepareResult {
  double load_seconds = 0, index_seconds = 0;
  uint64_t data_bytes = 0;
  uint64_t row_bytes = 0;  // bytes of the rows' values, for the fill factor
};

PrepareResult Prepare(const Config& c, uint64_t pool_bytes, uint32_t page_size) {
  std::unique_ptr<Database> db = OpenDb(c, pool_bytes);
  std::vector<Table*> tables;
  for (uint32_t i = 0; i < c.tables; ++i) {
    Result<Table*> t = db->CreateTable(SbtestDef(i));
    if (!t.ok()) Die("create " + TableName(i), t.status());
    tables.push_back(*t);
  }
  std::atomic<uint32_t> next_table{0};
  std::atomic<uint64_t> loaded{0};
  std::atomic<int> running{c.threads};
  auto load = [&](int thread) {
    Rng r(0x5eed0000u + static_cast<uint64_t>(thread));
    for (uint32_t ti; (ti = next_table.fetch_add(1)) < c.tables;) {
      for (uint64_t first = 1; first <= c.rows; first += kPrepareBatch) {
        const uint64_t last = std::min(c.rows, first + kPrepareBatch - 1);
        for (;;) {
          std::unique_ptr<Transaction> txn = db->Begin();
          Status st;
          for (uint64_t id = first; id <= last && st.ok(); ++id) {
            st = txn->Insert(tables[ti], NewRow(static_cast<int64_t>(id), r, c.rows));
          }
          if (st.ok()) st = txn->Commit();
          if (st.ok()) break;
          if (!Retryable(st)) Die("prepare " + TableName(ti), st);
        }
        loaded.fetch_add(last - first + 1);
      }
    }
    running.fetch_sub(1);
  };
  const uint64_t total = c.rows * c.tables;
  std::fprintf(stderr, "prepare: %u table(s) x %llu rows, %d thread(s)\n", c.tables,
               static_cast<unsigned long long>(c.rows), c.threads);
  const auto start = Clock::now();
  std::vector<std::thread> ts;
  ts.reserve(static_cast<size_t>(c.threads));
  for (int t = 0; t < c.threads; ++t) ts.emplace_back(load, t);
  auto last_print = start;
  while (running.load() > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Clock::now() - last_print >= std::chrono::seconds(1)) {
      last_print = Clock::now();
      const double el = std::chrono::duration<double>(last_print - start).count();
      std::fprintf(stderr, "prepare: %llu / %llu rows, %.0f rows/s, %.0f s%s",
                   static_cast<unsigned long long>(loaded.load()),
                   static_cast<unsigned long long>(total), loaded.load() / el, el, Eol());
    }
  }
  for (auto& th : ts) th.join();
  PrepareResult p;
  p.load_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::fprintf(stderr, "prepare: %llu rows loaded in %.1f s (%.0f rows/s)          \n",
               static_cast<unsigned long long>(total), p.load_seconds, total / p.load_seconds);

  // As sysbench does: the secondary index is created after the load.
  const auto istart = Clock::now();
  for (uint32_t i = 0; i < c.tables; ++i) {
    std::fprintf(stderr, "prepare: creating index k_%u on %s%s", i + 1, TableName(i).c_str(),
                 Eol());
    Status st = db->CreateIndex(TableName(i), IndexDef{StrFormat("k_%u", i + 1), {1}, false});
    if (!st.ok()) Die("create index on " + TableName(i), st);
  }
  p.index_seconds = std::chrono::duration<double>(Clock::now() - istart).count();
  std::fprintf(stderr, "prepare: %u index(es) built in %.1f s                    \n", c.tables,
               p.index_seconds);
  tables = FindTables(db.get(), c.tables);
  p.data_bytes = DataBytes(tables, page_size);
  p.row_bytes = total * (8 + 4 + kCWidth + kPadWidth);
  CloseDb(db);
  return p;
}

// Reads every row through both indexes, so the pool starts warm (as a
// sysbench run after prewarm would).
double Warm(Database* db, const std::vector<Table*>& tables, uint64_t rows) {
  const auto start = Clock::now();
  std::unique_ptr<Transaction> txn = db->Begin();
  for (Table* t : tables) {
    for (uint32_t index = 0; index < 2; ++index) {
      Result<std::unique_ptr<Cursor>> cur = txn->OpenCursor(t, index);
      if (!cur.ok()) Die("warm-up cursor", cur.status());
      Status st = (*cur)->Seek(SeekOp::kFirst);
      uint64_t n = 0;
      while (st.ok() && (*cur)->Valid()) {
        ++n;
        st = (*cur)->Next();
      }
      if (!st.ok()) Die("warm-up scan of " + t->def().name, st);
      if (n != rows) {
        std::fprintf(stderr, "engine_bench: warm-up: %s index %u has %llu rows, expected %llu\n",
                     t->def().name.c_str(), index, static_cast<unsigned long long>(n),
                     static_cast<unsigned long long>(rows));
      }
    }
  }
  Status st = txn->Commit();
  if (!st.ok()) Die("warm-up commit", st);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// ---- workloads ----

struct alignas(64) Worker {
  std::atomic<uint64_t> txns{0};
  uint64_t retries = 0;
  uint64_t anomalies = 0;  // a row or range that should exist was not (fully) seen
  std::vector<uint32_t> lat_ns;
};

class Session {
 public:
  Session(Database* db, const std::vector<Table*>& tables, uint64_t rows, uint64_t seed, Worker* w)
      : db_(db), tables_(tables), rows_(rows), rng_(seed), w_(w) {}

  // One transaction, retried until it commits.
  void Run(Kind kind) {
    for (;;) {
      std::unique_ptr<Transaction> txn = db_->Begin();
      Table* t = tables_[rng_.Uniform(0, tables_.size() - 1)];
      Status st = Body(kind, txn.get(), t);
      if (st.ok()) st = txn->Commit();
      if (st.ok()) return;
      if (!Retryable(st)) Die(StrFormat("transaction on %s", t->def().name.c_str()), st);
      ++w_->retries;  // the transaction rolls back as it goes out of scope
    }
  }

 private:
  int64_t RandomId() { return static_cast<int64_t>(rng_.Uniform(1, rows_)); }

  Status Body(Kind kind, Transaction* txn, Table* t) {
    switch (kind) {
      case Kind::kPointSelect:
        return PointSelects(txn, t);
      case Kind::kReadOnly:
        SUBITO_RETURN_IF_ERROR(PointSelects(txn, t));
        return Range(txn, t);
      case Kind::kUpdateIndex:
        return UpdateIndex(txn, t);
      case Kind::kUpdateNonIndex:
        return UpdateNonIndex(txn, t);
      case Kind::kDeleteInsert:
        return DeleteInsert(txn, t);
      case Kind::kReadWrite:
        SUBITO_RETURN_IF_ERROR(PointSelects(txn, t));
        SUBITO_RETURN_IF_ERROR(Range(txn, t));
        SUBITO_RETURN_IF_ERROR(UpdateIndex(txn, t));
        SUBITO_RETURN_IF_ERROR(UpdateNonIndex(txn, t));
        return DeleteInsert(txn, t);
    }
    return Status::InvalidArgument("unknown workload");
  }

  // SELECT c FROM sbtest WHERE id=?
  Status PointSelects(Transaction* txn, Table* t) {
    for (int i = 0; i < kPointSelects; ++i) {
      Result<std::optional<Row>> r = txn->Get(t, {Value(RandomId())});
      if (!r.ok()) return r.status();
      if (!r->has_value()) ++w_->anomalies;
    }
    return Status::OK();
  }

  // SELECT c FROM sbtest WHERE id BETWEEN ? AND ?+99
  Status Range(Transaction* txn, Table* t) {
    const int64_t lo = RandomId(), hi = lo + kRangeSize - 1;
    Result<std::unique_ptr<Cursor>> cur = txn->OpenCursor(t, 0);
    if (!cur.ok()) return cur.status();
    Cursor& c = **cur;
    SUBITO_RETURN_IF_ERROR(c.Seek(SeekOp::kGE, {Value(lo)}));
    int64_t seen = 0;
    while (c.Valid() && std::get<int64_t>(c.row()[0]) <= hi) {
      ++seen;
      SUBITO_RETURN_IF_ERROR(c.Next());
    }
    if (seen != std::min<int64_t>(kRangeSize, static_cast<int64_t>(rows_) - lo + 1)) {
      ++w_->anomalies;
    }
    return Status::OK();
  }

  // The row as UPDATE finds it: newest version, exclusive lock.
  Result<Row> ReadForUpdate(Transaction* txn, Table* t, int64_t id) {
    Result<std::optional<Row>> r = txn->Get(t, {Value(id)}, ReadMode::kExclusive);
    if (!r.ok()) return r.status();
    if (!r->has_value()) return Status::NotFound(StrFormat("id %lld", static_cast<long long>(id)));
    return std::move(**r);
  }

  // UPDATE sbtest SET k=k+1 WHERE id=?
  Status UpdateIndex(Transaction* txn, Table* t) {
    Result<Row> old = ReadForUpdate(txn, t, RandomId());
    if (!old.ok()) return MissingIsAnomaly(old.status());
    Row row = *old;
    row[1] = Value((std::get<uint64_t>(row[1]) + 1) & 0xffffffffu);
    return txn->Update(t, *old, row);
  }

  // UPDATE sbtest SET c=? WHERE id=?
  Status UpdateNonIndex(Transaction* txn, Table* t) {
    Result<Row> old = ReadForUpdate(txn, t, RandomId());
    if (!old.ok()) return MissingIsAnomaly(old.status());
    Row row = *old;
    row[2] = Value(RandomC(rng_));
    return txn->Update(t, *old, row);
  }

  // DELETE FROM sbtest WHERE id=?; INSERT INTO sbtest (id, k, c, pad) VALUES (...)
  Status DeleteInsert(Transaction* txn, Table* t) {
    const int64_t id = RandomId();
    // Delete names the row by its primary key; the other values are unused.
    Status st =
        txn->Delete(t, {Value(id), Value(uint64_t{0}), Value(std::string()), Value(std::string())});
    if (!st.ok() && !st.IsNotFound()) return st;
    if (st.IsNotFound()) ++w_->anomalies;
    st = txn->Insert(t, NewRow(id, rng_, rows_));
    if (st.IsAlreadyExists()) {
      ++w_->anomalies;
      return Status::OK();
    }
    return st;
  }

  Status MissingIsAnomaly(const Status& st) {
    if (!st.IsNotFound()) return st;
    ++w_->anomalies;
    return Status::OK();
  }

  Database* const db_;
  const std::vector<Table*>& tables_;
  const uint64_t rows_;
  Rng rng_;
  Worker* const w_;
};

struct Run {
  std::string config, workload;
  uint64_t pool_bytes = 0;
  double seconds = 0;
  uint64_t txns = 0, retries = 0, anomalies = 0;
  double tps = 0, p50_us = 0, p99_us = 0, max_us = 0;
  double log_per_txn = 0, dwb_per_txn = 0, file_written_per_txn = 0, file_read_per_txn = 0;
  double hit_ratio = 0;
  uint64_t deadlocks = 0, lock_waits = 0, lock_timeouts = 0, checkpoints = 0;
};

Run Measure(const Config& c, Database* db, const std::vector<Table*>& tables, const WorkloadDef& wl,
            const std::string& config, uint64_t pool_bytes, uint64_t seed) {
  std::vector<std::unique_ptr<Worker>> workers;
  for (int t = 0; t < c.threads; ++t) {
    workers.push_back(std::make_unique<Worker>());
    workers.back()->lat_ns.reserve(4u << 20);
  }
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> ts;
  ts.reserve(static_cast<size_t>(c.threads));
  for (int t = 0; t < c.threads; ++t) {
    ts.emplace_back([&, t] {
      Worker* w = workers[t].get();
      Session s(db, tables, c.rows, seed * 1000 + static_cast<uint64_t>(t), w);
      while (!go.load()) std::this_thread::yield();
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = Clock::now();
        s.Run(wl.kind);
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        if (w->lat_ns.size() < w->lat_ns.capacity()) {
          w->lat_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX)));
        }
        w->txns.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  auto total_txns = [&] {
    uint64_t n = 0;
    for (auto& w : workers) n += w->txns.load(std::memory_order_relaxed);
    return n;
  };
  const DatabaseStats before = db->Stats();
  const auto start = Clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.seconds));
  go = true;
  for (int s = 1;; ++s) {
    const auto wake = std::min(start + std::chrono::seconds(s), deadline);
    std::this_thread::sleep_until(wake);
    const double el = std::chrono::duration<double>(Clock::now() - start).count();
    std::fprintf(stderr, "[%-10s %-16s %5.1f / %.1f s] %10.0f tps%s", config.c_str(), wl.name, el,
                 c.seconds, total_txns() / el, Eol());
    if (wake >= deadline) break;
  }
  stop = true;
  for (auto& th : ts) th.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  const DatabaseStats after = db->Stats();

  Run r;
  r.config = config;
  r.workload = wl.name;
  r.pool_bytes = pool_bytes;
  r.seconds = secs;
  std::vector<uint32_t> all;
  for (auto& w : workers) {
    r.txns += w->txns.load();
    r.retries += w->retries;
    r.anomalies += w->anomalies;
    all.insert(all.end(), w->lat_ns.begin(), w->lat_ns.end());
  }
  r.tps = r.txns / secs;
  r.p50_us = bench::QuantileUs(all, 0.50);
  r.p99_us = bench::QuantileUs(all, 0.99);
  r.max_us = all.empty() ? 0.0 : *std::max_element(all.begin(), all.end()) / 1000.0;
  const double n = r.txns ? static_cast<double>(r.txns) : 1.0;
  r.log_per_txn = (after.log_bytes - before.log_bytes) / n;
  r.dwb_per_txn = (after.double_write_bytes - before.double_write_bytes) / n;
  r.file_written_per_txn = (after.page_file_bytes_written - before.page_file_bytes_written) / n;
  r.file_read_per_txn = (after.page_file_bytes_read - before.page_file_bytes_read) / n;
  const uint64_t hits = after.buffer_hits - before.buffer_hits;
  const uint64_t misses = after.buffer_misses - before.buffer_misses;
  r.hit_ratio = hits + misses ? static_cast<double>(hits) / static_cast<double>(hits + misses) : 1;
  r.deadlocks = after.deadlocks - before.deadlocks;
  r.lock_waits = after.lock_waits - before.lock_waits;
  r.lock_timeouts = after.lock_timeouts - before.lock_timeouts;
  r.checkpoints = after.checkpoints - before.checkpoints;
  std::fprintf(stderr, "[%-10s %-16s %5.1f s] %10.0f tps, p99 %.0f us, %llu retries        \n",
               config.c_str(), wl.name, secs, r.tps, r.p99_us,
               static_cast<unsigned long long>(r.retries));
  return r;
}

// ---- output ----

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      out += StrFormat("\\u%04x", ch);
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

struct ConfigInfo {
  std::string name;
  uint64_t pool_bytes = 0;
  double open_seconds = 0, warm_seconds = 0;
  uint64_t data_bytes = 0;  // measured again after the configuration's runs
};

void Usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--dir D] [--pm-dir P] [--tables N] [--rows M] [--threads T]\n"
               "       [--seconds S] [--pool-mb MB] [--log-mode nf|classic]\n"
               "       [--workloads a,b,...] [--json FILE] [--quick]\n"
               "workloads: point_select read_only update_index update_non_index delete_insert "
               "read_write\n",
               argv0);
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return subito::bench::OptionValue(argc, argv, i); };
    try {
      if (a == "--dir") {
        c.dir = next();
      } else if (a == "--pm-dir") {
        c.pm_dir = next();
      } else if (a == "--tables") {
        c.tables = static_cast<uint32_t>(std::stoul(next()));
      } else if (a == "--rows") {
        c.rows = std::stoull(next());
      } else if (a == "--threads") {
        c.threads = std::stoi(next());
      } else if (a == "--seconds") {
        c.seconds = std::stod(next());
      } else if (a == "--pool-mb") {
        c.pool_mb = std::stoull(next());
      } else if (a == "--log-mode") {
        c.log_mode = next();
      } else if (a == "--json") {
        c.json = next();
      } else if (a == "--workloads") {
        for (std::string& w : bench::SplitCommas(next())) c.workloads.push_back(std::move(w));
      } else if (a == "--quick") {
        c.quick = true;
        c.rows = 5000;
        c.seconds = 1.5;
      } else {
        Usage(argv[0]);
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "%s: bad value\n", a.c_str());
      return 2;
    }
  }
  if (c.tables < 1 || c.rows < 1 || c.threads < 1 || c.seconds <= 0) {
    std::fprintf(stderr, "--tables, --rows, --threads and --seconds must be positive\n");
    return 2;
  }
  if (c.log_mode != "nf" && c.log_mode != "classic") {
    std::fprintf(stderr, "--log-mode: nf or classic\n");
    return 2;
  }
  std::vector<WorkloadDef> workloads;
  for (const WorkloadDef& w : kWorkloads) {
    if (c.workloads.empty() ||
        std::find(c.workloads.begin(), c.workloads.end(), w.name) != c.workloads.end()) {
      workloads.push_back(w);
    }
  }
  for (const std::string& name : c.workloads) {
    if (std::none_of(std::begin(kWorkloads), std::end(kWorkloads),
                     [&](const WorkloadDef& w) { return name == w.name; })) {
      std::fprintf(stderr, "unknown workload %s\n", name.c_str());
      Usage(argv[0]);
      return 2;
    }
  }

  ResetDir(c.dir);
  ResetDir(c.pm_dir);
  std::string tier;
  {
    auto probe = pmem::PmFile::Create(c.pm_dir + "/probe", 1 << 20);
    if (!probe.ok()) Die("probe " + c.pm_dir, probe.status());
    tier = pmem::PmKindName((*probe)->kind());
  }
  std::filesystem::remove(c.pm_dir + "/probe");
  const uint32_t page_size = Options().page_size;

  std::printf("Subito engine benchmark (sysbench-shaped)\nmachine: %s\nPM tier: %s in %s\n",
              subito::bench::MachineDescription().c_str(), tier.c_str(), c.pm_dir.c_str());
  std::printf("data: %s; %u table(s) x %llu rows; %d thread(s); %.1f s per workload; log %s\n",
              c.dir.c_str(), c.tables, static_cast<unsigned long long>(c.rows), c.threads,
              c.seconds, c.log_mode.c_str());
  std::fflush(stdout);

  // Prepare, with a pool that holds the data while it is loaded.
  const uint64_t prepare_pool =
      c.pool_mb ? c.pool_mb << 20 : std::max<uint64_t>(64ull << 20, c.tables * c.rows * 1024);
  const PrepareResult prep = Prepare(c, prepare_pool, page_size);
  std::printf(
      "prepared: %.1f MiB of pages (%llu B of row values: %.0f%% full), loaded in %.1f s, "
      "indexes in %.1f s\n",
      prep.data_bytes / 1048576.0, static_cast<unsigned long long>(prep.row_bytes),
      100.0 * prep.row_bytes / std::max<uint64_t>(1, prep.data_bytes), prep.load_seconds,
      prep.index_seconds);

  const uint64_t min_pool = 32ull * page_size;
  std::vector<ConfigInfo> configs = {
      {"in-memory", c.pool_mb ? c.pool_mb << 20 : std::max(min_pool, 4 * prep.data_bytes)},
      {"pool-10pct", std::max(min_pool, prep.data_bytes / 10 / page_size * page_size)},
  };
  std::string describe;
  std::vector<Run> runs;
  uint64_t seed = 1;
  for (ConfigInfo& ci : configs) {
    std::unique_ptr<Database> db = OpenDb(c, ci.pool_bytes);
    ci.open_seconds = db->recovery().seconds;
    if (describe.empty()) describe = db->Describe();
    const std::vector<Table*> tables = FindTables(db.get(), c.tables);
    std::fprintf(stderr, "[%s] buffer pool %.1f MiB (%.0f%% of the data): warming up%s",
                 ci.name.c_str(), ci.pool_bytes / 1048576.0,
                 100.0 * ci.pool_bytes / std::max<uint64_t>(1, prep.data_bytes), Eol());
    ci.warm_seconds = Warm(db.get(), tables, c.rows);
    std::fprintf(stderr, "[%s] buffer pool %.1f MiB, warmed up in %.1f s              \n",
                 ci.name.c_str(), ci.pool_bytes / 1048576.0, ci.warm_seconds);
    for (const WorkloadDef& wl : workloads) {
      runs.push_back(Measure(c, db.get(), tables, wl, ci.name, ci.pool_bytes, seed++));
    }
    ci.data_bytes = DataBytes(tables, page_size);
    CloseDb(db);
  }
  std::fprintf(stderr, "\n");

  std::printf("\n%-10s %-16s %10s %9s %9s %7s %10s %10s %10s %10s %6s\n", "config", "workload",
              "txn/s", "p50 us", "p99 us", "retries", "log B/txn", "dw B/txn", "file W/txn",
              "file R/txn", "hit %");
  for (const Run& r : runs) {
    std::printf("%-10s %-16s %10.0f %9.1f %9.1f %7llu %10.0f %10.0f %10.0f %10.0f %6.2f\n",
                r.config.c_str(), r.workload.c_str(), r.tps, r.p50_us, r.p99_us,
                static_cast<unsigned long long>(r.retries), r.log_per_txn, r.dwb_per_txn,
                r.file_written_per_txn, r.file_read_per_txn, 100 * r.hit_ratio);
  }
  uint64_t anomalies = 0;
  for (const Run& r : runs) anomalies += r.anomalies;
  std::printf(
      "PM B/txn = log + dw (double-write copies); file W/R = page-file bytes written/read "
      "per transaction (background cleaners included)\n");
  if (anomalies) {
    std::printf("WARNING: %llu anomalies (a row or range that must exist was not seen)\n",
                static_cast<unsigned long long>(anomalies));
  }

  if (!c.json.empty()) {
    std::ofstream j(c.json);
    j << "{\n  \"machine\": " << JsonString(subito::bench::MachineDescription())
      << ",\n  \"tier\": " << JsonString(tier) << ",\n  \"describe\": " << JsonString(describe)
      << ",\n  \"dir\": " << JsonString(c.dir) << ",\n  \"pm_dir\": " << JsonString(c.pm_dir)
      << ",\n";
    j << StrFormat(
        "  \"settings\": {\"tables\": %u, \"rows\": %llu, \"threads\": %d, "
        "\"seconds_per_workload\": %.2f, \"page_size\": %u, \"log_mode\": \"%s\", "
        "\"quick\": %s, \"point_selects\": %d, \"range_size\": %d},\n",
        c.tables, static_cast<unsigned long long>(c.rows), c.threads, c.seconds, page_size,
        c.log_mode.c_str(), c.quick ? "true" : "false", kPointSelects, kRangeSize);
    j << StrFormat(
        "  \"prepare\": {\"load_seconds\": %.3f, \"rows_per_s\": %.0f, \"index_seconds\": %.3f, "
        "\"data_bytes\": %llu, \"row_value_bytes\": %llu},\n",
        prep.load_seconds, c.rows * c.tables / prep.load_seconds, prep.index_seconds,
        static_cast<unsigned long long>(prep.data_bytes),
        static_cast<unsigned long long>(prep.row_bytes));
    j << "  \"configs\": [\n";
    for (size_t i = 0; i < configs.size(); ++i) {
      const ConfigInfo& ci = configs[i];
      j << StrFormat(
          "    {\"name\": \"%s\", \"pool_bytes\": %llu, \"pool_fraction\": %.4f, "
          "\"open_seconds\": %.3f, \"warm_seconds\": %.3f, \"data_bytes_after\": %llu}%s\n",
          ci.name.c_str(), static_cast<unsigned long long>(ci.pool_bytes),
          static_cast<double>(ci.pool_bytes) / std::max<uint64_t>(1, prep.data_bytes),
          ci.open_seconds, ci.warm_seconds, static_cast<unsigned long long>(ci.data_bytes),
          i + 1 < configs.size() ? "," : "");
    }
    j << "  ],\n  \"runs\": [\n";
    for (size_t i = 0; i < runs.size(); ++i) {
      const Run& r = runs[i];
      j << StrFormat(
          "    {\"config\": \"%s\", \"workload\": \"%s\", \"pool_bytes\": %llu, "
          "\"seconds\": %.3f, \"txns\": %llu, \"tps\": %.1f, \"p50_us\": %.2f, "
          "\"p99_us\": %.2f, \"max_us\": %.2f, \"retries\": %llu, \"anomalies\": %llu, "
          "\"log_bytes_per_txn\": %.1f, \"double_write_bytes_per_txn\": %.1f, "
          "\"pm_bytes_per_txn\": %.1f, \"page_file_bytes_written_per_txn\": %.1f, "
          "\"page_file_bytes_read_per_txn\": %.1f, \"buffer_hit_ratio\": %.5f, "
          "\"deadlocks\": %llu, \"lock_waits\": %llu, \"lock_timeouts\": %llu, "
          "\"checkpoints\": %llu}%s\n",
          r.config.c_str(), r.workload.c_str(), static_cast<unsigned long long>(r.pool_bytes),
          r.seconds, static_cast<unsigned long long>(r.txns), r.tps, r.p50_us, r.p99_us, r.max_us,
          static_cast<unsigned long long>(r.retries), static_cast<unsigned long long>(r.anomalies),
          r.log_per_txn, r.dwb_per_txn, r.log_per_txn + r.dwb_per_txn, r.file_written_per_txn,
          r.file_read_per_txn, r.hit_ratio, static_cast<unsigned long long>(r.deadlocks),
          static_cast<unsigned long long>(r.lock_waits),
          static_cast<unsigned long long>(r.lock_timeouts),
          static_cast<unsigned long long>(r.checkpoints), i + 1 < runs.size() ? "," : "");
    }
    j << "  ]\n}\n";
    std::printf("\nJSON written to %s\n", c.json.c_str());
  }
  RemoveDir(c.dir);
  RemoveDir(c.pm_dir);
  return anomalies ? 3 : 0;
}
