// The embedded engine beside well-kept embedded engines, with no server in
// between (issue 13): point reads, updates and inserts on one table of
// 8-byte keys and 180-byte values, measured in one run of this program for
// Subito, RocksDB (TransactionDB) and LMDB, each at 1 and 2 threads.
//
//   read    one key, a consistent read (Subito: a read-only transaction;
//           RocksDB: DB::Get; LMDB: a read-only transaction)
//   update  read one key for update, write a new value, commit durably
//           (Subito: Get(kExclusive) + Update; RocksDB: GetForUpdate + Put
//           in a pessimistic transaction; LMDB: get + put in a write txn)
//   insert  a key above the loaded ones, commit durably
//
// Equal durability: a commit returns once it is durable on the PM tier
// (--pm-dir). Subito: its redo log there; RocksDB: its WAL there (wal_dir,
// sync=true); LMDB, which has no log, keeps its whole file there and
// fdatasyncs it at each commit. Equal caches: Subito's buffer pool and
// RocksDB's block cache are --cache-mb and both read and write their data
// files (--dir) with O_DIRECT; LMDB's file on the PM tier is mapped, so the
// OS page cache (DRAM) is its cache. Before measuring, every key is read
// once so that each engine starts warm.
//
// Figures per workload and engine: operations/s and operations per second
// of the process's CPU time (user + system, all threads, background ones
// included: getrusage), which is the per-core rate; p50/p99 latency.
//
// usage: kv_compare [--dir D] [--pm-dir P] [--rows N] [--seconds S]
//                   [--cache-mb MB] [--engines a,b] [--threads 1,2]
//                   [--workloads read,update,insert] [--json F]
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "subito/database.h"
#include "util/strings.h"

#ifdef SUBITO_HAVE_ROCKSDB
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/transaction.h>
#include <rocksdb/utilities/transaction_db.h>
#endif
#ifdef SUBITO_HAVE_LMDB
#include <lmdb.h>
#endif

using namespace subito;
using Clock = std::chrono::steady_clock;

namespace {

constexpr size_t kValueBytes = 180;  // sbtest's c (120) + pad (60)

struct Config {
  std::string dir = "/var/tmp/subito-kv-compare";
  std::string pm_dir = "/dev/shm/subito-kv-compare";
  uint64_t rows = 1000000;
  double seconds = 10;
  uint64_t cache_mb = 1024;
  std::vector<std::string> engines = {"subito", "rocksdb", "lmdb"};
  std::vector<int> threads = {1, 2};
  std::vector<std::string> workloads = {"read", "update", "insert"};
  std::string json;
};

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "\nkv_compare: %s\n", what.c_str());
  std::exit(1);
}

std::string BigEndianKey(uint64_t id) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(id >> (56 - 8 * i));
  return k;
}

std::string RandomValue(std::mt19937_64& rng) {
  std::string v(kValueBytes, '\0');
  for (size_t i = 0; i < kValueBytes; i += 8) {
    const uint64_t x = rng();
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, kValueBytes - i));
  }
  return v;
}

// One engine under test. Calls from several threads at once; each returns
// false on an error it has printed (the program then stops).
class Engine {
 public:
  virtual ~Engine() = default;
  virtual const char* name() const = 0;
  virtual std::string caches() const = 0;
  // Loads keys 1..rows (ascending) with values from rng.
  virtual void Load(uint64_t rows, std::mt19937_64& rng) = 0;
  // Whether key id was found (its value's size checked).
  virtual bool Read(uint64_t id) = 0;
  virtual void Update(uint64_t id, const std::string& value) = 0;
  virtual void Insert(uint64_t id, const std::string& value) = 0;
};

// ---- Subito ----

class SubitoEngine final : public Engine {
 public:
  explicit SubitoEngine(const Config& c) {
    Options o;
    o.dir = c.dir;
    o.pm_dir = c.pm_dir;
    o.buffer_pool_bytes = c.cache_mb << 20;
    Result<std::unique_ptr<Database>> db = Database::Open(o);
    if (!db.ok()) Die("subito open: " + db.status().ToString());
    db_ = std::move(*db);
    TableDef def;
    def.name = "kv";
    def.columns = {{"id", ColumnType::kUInt, 8}, {"v", ColumnType::kString, 8, false, 255}};
    def.primary_key = {0};
    Result<Table*> t = db_->CreateTable(def);
    if (!t.ok()) Die("subito create: " + t.status().ToString());
    table_ = *t;
  }
  ~SubitoEngine() override {
    if (Status st = db_->Close(); !st.ok()) Die("subito close: " + st.ToString());
  }
  const char* name() const override { return "subito"; }
  std::string caches() const override {
    return "buffer pool " + std::to_string(db_->options().buffer_pool_bytes >> 20) +
           " MiB, page files O_DIRECT; redo log on the PM tier";
  }
  void Load(uint64_t rows, std::mt19937_64& rng) override {
    Result<std::unique_ptr<BulkLoader>> l = db_->BeginBulkLoad(table_);
    if (!l.ok()) Die("subito bulk load: " + l.status().ToString());
    for (uint64_t id = 1; id <= rows; ++id) {
      Status st = (*l)->Add({Value(id), Value(RandomValue(rng))});
      if (!st.ok()) Die("subito load: " + st.ToString());
    }
    if (Status st = (*l)->Finish(); !st.ok()) Die("subito load: " + st.ToString());
  }
  bool Read(uint64_t id) override {
    std::unique_ptr<Transaction> txn = db_->Begin();
    Result<std::optional<Row>> r = txn->Get(table_, {Value(id)});
    if (!r.ok()) Die("subito get: " + r.status().ToString());
    const bool found = r->has_value() && std::get<std::string>((**r)[1]).size() == kValueBytes;
    Check(txn->Commit());
    return found;
  }
  void Update(uint64_t id, const std::string& value) override {
    std::unique_ptr<Transaction> txn = db_->Begin();
    Result<std::optional<Row>> r = txn->Get(table_, {Value(id)}, ReadMode::kExclusive);
    if (!r.ok()) Die("subito get for update: " + r.status().ToString());
    if (!r->has_value()) Die("subito update: key missing");
    Row row = **r;
    row[1] = Value(value);
    Check(txn->Update(table_, **r, row));
    Check(txn->Commit());
  }
  void Insert(uint64_t id, const std::string& value) override {
    std::unique_ptr<Transaction> txn = db_->Begin();
    Check(txn->Insert(table_, {Value(id), Value(value)}));
    Check(txn->Commit());
  }

 private:
  static void Check(const Status& st) {
    if (!st.ok()) Die("subito: " + st.ToString());
  }
  std::unique_ptr<Database> db_;
  Table* table_ = nullptr;
};

// ---- RocksDB ----

#ifdef SUBITO_HAVE_ROCKSDB
class RocksEngine final : public Engine {
 public:
  explicit RocksEngine(const Config& c) : cache_mb_(c.cache_mb) {
    rocksdb::Options o;
    o.create_if_missing = true;
    o.wal_dir = c.pm_dir;
    o.use_direct_reads = true;
    o.use_direct_io_for_flush_and_compaction = true;
    o.IncreaseParallelism(2);
    rocksdb::BlockBasedTableOptions t;
    t.block_cache = rocksdb::NewLRUCache(c.cache_mb << 20);
    o.table_factory.reset(rocksdb::NewBlockBasedTableFactory(t));
    rocksdb::TransactionDBOptions to;
    rocksdb::Status st = rocksdb::TransactionDB::Open(o, to, c.dir, &db_);
    if (!st.ok()) Die("rocksdb open: " + st.ToString());
    sync_.sync = true;
  }
  ~RocksEngine() override { delete db_; }
  const char* name() const override { return "rocksdb"; }
  std::string caches() const override {
    return "block cache " + std::to_string(cache_mb_) +
           " MiB, SST files O_DIRECT (reads, flush, compaction); WAL on the PM tier, sync";
  }
  void Load(uint64_t rows, std::mt19937_64& rng) override {
    rocksdb::WriteOptions nosync;
    rocksdb::WriteBatch batch;
    for (uint64_t id = 1; id <= rows; ++id) {
      batch.Put(BigEndianKey(id), RandomValue(rng));
      if (id % 1000 == 0 || id == rows) {
        Check(db_->Write(nosync, &batch));
        batch.Clear();
      }
    }
    Check(db_->FlushWAL(true));
    Check(db_->Flush(rocksdb::FlushOptions()));
    Check(db_->CompactRange(rocksdb::CompactRangeOptions(), nullptr, nullptr));
  }
  bool Read(uint64_t id) override {
    std::string v;
    rocksdb::Status st = db_->Get(rocksdb::ReadOptions(), BigEndianKey(id), &v);
    if (!st.ok() && !st.IsNotFound()) Die("rocksdb get: " + st.ToString());
    return st.ok() && v.size() == kValueBytes;
  }
  void Update(uint64_t id, const std::string& value) override {
    std::unique_ptr<rocksdb::Transaction> txn(db_->BeginTransaction(sync_));
    std::string old;
    const std::string key = BigEndianKey(id);
    Check(txn->GetForUpdate(rocksdb::ReadOptions(), key, &old));
    Check(txn->Put(key, value));
    Check(txn->Commit());
  }
  void Insert(uint64_t id, const std::string& value) override {
    std::unique_ptr<rocksdb::Transaction> txn(db_->BeginTransaction(sync_));
    Check(txn->Put(BigEndianKey(id), value));
    Check(txn->Commit());
  }

 private:
  static void Check(const rocksdb::Status& st) {
    if (!st.ok()) Die("rocksdb: " + st.ToString());
  }
  uint64_t cache_mb_;
  rocksdb::TransactionDB* db_ = nullptr;
  rocksdb::WriteOptions sync_;
};
#endif

// ---- LMDB ----

#ifdef SUBITO_HAVE_LMDB
class LmdbEngine final : public Engine {
 public:
  explicit LmdbEngine(const Config& c) {
    Check(mdb_env_create(&env_), "env_create");
    Check(mdb_env_set_mapsize(env_, size_t{c.rows} * 2 * 512 + (size_t{1} << 30)), "set_mapsize");
    Check(mdb_env_set_maxreaders(env_, 64), "set_maxreaders");
    // MDB_NOTLS: a read transaction is not bound to its thread's slot.
    Check(mdb_env_open(env_, c.pm_dir.c_str(), MDB_NOTLS, 0644), "env_open " + c.pm_dir);
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env_, nullptr, 0, &txn), "txn_begin");
    Check(mdb_dbi_open(txn, nullptr, 0, &dbi_), "dbi_open");
    Check(mdb_txn_commit(txn), "txn_commit");
  }
  ~LmdbEngine() override { mdb_env_close(env_); }
  const char* name() const override { return "lmdb"; }
  std::string caches() const override {
    return "whole file on the PM tier, memory-mapped (the OS page cache is its cache); "
           "fdatasync per commit";
  }
  void Load(uint64_t rows, std::mt19937_64& rng) override {
    MDB_txn* txn = nullptr;
    for (uint64_t id = 1; id <= rows; ++id) {
      if (txn == nullptr) Check(mdb_txn_begin(env_, nullptr, 0, &txn), "txn_begin");
      std::string k = BigEndianKey(id), v = RandomValue(rng);
      MDB_val key{k.size(), k.data()}, val{v.size(), v.data()};
      Check(mdb_put(txn, dbi_, &key, &val, MDB_APPEND), "put");
      if (id % 10000 == 0 || id == rows) {
        Check(mdb_txn_commit(txn), "txn_commit");
        txn = nullptr;
      }
    }
  }
  bool Read(uint64_t id) override {
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env_, nullptr, MDB_RDONLY, &txn), "txn_begin");
    std::string k = BigEndianKey(id);
    MDB_val key{k.size(), k.data()}, val{};
    const int rc = mdb_get(txn, dbi_, &key, &val);
    if (rc != 0 && rc != MDB_NOTFOUND) Check(rc, "get");
    const bool found = rc == 0 && val.mv_size == kValueBytes;
    mdb_txn_abort(txn);
    return found;
  }
  void Update(uint64_t id, const std::string& value) override {
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env_, nullptr, 0, &txn), "txn_begin");
    std::string k = BigEndianKey(id);
    MDB_val key{k.size(), k.data()}, old{};
    Check(mdb_get(txn, dbi_, &key, &old), "get");
    MDB_val val{value.size(), const_cast<char*>(value.data())};
    Check(mdb_put(txn, dbi_, &key, &val, 0), "put");
    Check(mdb_txn_commit(txn), "txn_commit");
  }
  void Insert(uint64_t id, const std::string& value) override {
    MDB_txn* txn = nullptr;
    Check(mdb_txn_begin(env_, nullptr, 0, &txn), "txn_begin");
    std::string k = BigEndianKey(id);
    MDB_val key{k.size(), k.data()}, val{value.size(), const_cast<char*>(value.data())};
    Check(mdb_put(txn, dbi_, &key, &val, MDB_NOOVERWRITE), "put");
    Check(mdb_txn_commit(txn), "txn_commit");
  }

 private:
  static void Check(int rc, const std::string& what) {
    if (rc != 0) Die("lmdb " + what + ": " + mdb_strerror(rc));
  }
  MDB_env* env_ = nullptr;
  MDB_dbi dbi_ = 0;
};
#endif

std::unique_ptr<Engine> MakeEngine(const std::string& name, const Config& c) {
  if (name == "subito") return std::make_unique<SubitoEngine>(c);
#ifdef SUBITO_HAVE_ROCKSDB
  if (name == "rocksdb") return std::make_unique<RocksEngine>(c);
#endif
#ifdef SUBITO_HAVE_LMDB
  if (name == "lmdb") return std::make_unique<LmdbEngine>(c);
#endif
  Die("engine " + name + " is not built in (install librocksdb-dev / liblmdb-dev and rebuild)");
}

// Empties and creates the two directories; refuses ones that hold files
// this program did not make.
void ResetDirs(const Config& c) {
  namespace fs = std::filesystem;
  for (const std::string& d : {c.dir, c.pm_dir}) {
    std::error_code ec;
    if (fs::exists(d, ec) && !fs::is_empty(d, ec) && !fs::exists(d + "/.kv_compare", ec)) {
      Die(d + " exists, is not empty and was not made by kv_compare: pick another");
    }
    fs::remove_all(d, ec);
    fs::create_directories(d, ec);
    if (ec) Die(d + ": " + ec.message());
    std::ofstream(d + "/.kv_compare") << "kv_compare scratch directory\n";
  }
}

double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Result_ {
  std::string engine, workload;
  int threads = 0;
  uint64_t ops = 0, missing = 0;
  double seconds = 0, cpu_seconds = 0, p50_us = 0, p99_us = 0;
};

Result_ Measure(Engine* e, const std::string& workload, int threads, const Config& c,
                std::atomic<uint64_t>* next_insert) {
  struct alignas(64) Worker {
    uint64_t ops = 0, missing = 0;
    std::vector<uint32_t> lat_ns;
  };
  std::vector<Worker> workers(static_cast<size_t>(threads));
  std::atomic<bool> stop{false};
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now();
  std::vector<std::thread> ts;
  for (int t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] {
      Worker& w = workers[static_cast<size_t>(t)];
      w.lat_ns.reserve(1u << 22);
      std::mt19937_64 rng(1000u * static_cast<unsigned>(t) + workload.size());
      std::uniform_int_distribution<uint64_t> id(1, c.rows);
      while (!stop.load(std::memory_order_relaxed)) {
        std::string value;
        if (workload != "read") value = RandomValue(rng);
        const auto t0 = Clock::now();
        if (workload == "read") {
          if (!e->Read(id(rng))) ++w.missing;
        } else if (workload == "update") {
          e->Update(id(rng), value);
        } else {
          e->Insert(next_insert->fetch_add(1), value);
        }
        const auto ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        if (w.lat_ns.size() < w.lat_ns.capacity()) {
          w.lat_ns.push_back(static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX)));
        }
        ++w.ops;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(c.seconds));
  stop = true;
  for (auto& th : ts) th.join();
  Result_ r;
  r.engine = e->name();
  r.workload = workload;
  r.threads = threads;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.cpu_seconds = CpuSeconds() - cpu0;
  std::vector<uint32_t> all;
  for (Worker& w : workers) {
    r.ops += w.ops;
    r.missing += w.missing;
    all.insert(all.end(), w.lat_ns.begin(), w.lat_ns.end());
  }
  r.p50_us = bench::QuantileUs(all, 0.5);
  r.p99_us = bench::QuantileUs(all, 0.99);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir") {
      c.dir = bench::OptionValue(argc, argv, i);
    } else if (a == "--pm-dir") {
      c.pm_dir = bench::OptionValue(argc, argv, i);
    } else if (a == "--rows") {
      c.rows = std::stoull(bench::OptionValue(argc, argv, i));
    } else if (a == "--seconds") {
      c.seconds = std::stod(bench::OptionValue(argc, argv, i));
    } else if (a == "--cache-mb") {
      c.cache_mb = std::stoull(bench::OptionValue(argc, argv, i));
    } else if (a == "--engines") {
      c.engines = bench::SplitCommas(bench::OptionValue(argc, argv, i));
    } else if (a == "--threads") {
      c.threads.clear();
      for (const std::string& t : bench::SplitCommas(bench::OptionValue(argc, argv, i))) {
        c.threads.push_back(std::stoi(t));
      }
    } else if (a == "--workloads") {
      c.workloads = bench::SplitCommas(bench::OptionValue(argc, argv, i));
    } else if (a == "--json") {
      c.json = bench::OptionValue(argc, argv, i);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--dir D] [--pm-dir P] [--rows N] [--seconds S] [--cache-mb MB] "
          "[--engines subito,rocksdb,lmdb] [--threads 1,2] [--workloads read,update,insert] "
          "[--json FILE]\n",
          argv[0]);
      return 2;
    }
  }
  if (c.rows == 0 || c.seconds <= 0 || c.threads.empty() || c.engines.empty()) {
    Die("--rows, --seconds, --threads and --engines must be positive / non-empty");
  }
  std::vector<Result_> results;
  std::vector<std::pair<std::string, std::string>> caches;
  for (const std::string& name : c.engines) {
    ResetDirs(c);
    std::unique_ptr<Engine> e = MakeEngine(name, c);
    caches.emplace_back(name, e->caches());
    std::mt19937_64 rng(42);
    const auto t0 = Clock::now();
    e->Load(c.rows, rng);
    const double load_s = std::chrono::duration<double>(Clock::now() - t0).count();
    uint64_t missing = 0;
    for (uint64_t id = 1; id <= c.rows; ++id) missing += e->Read(id) ? 0 : 1;
    if (missing != 0)
      Die(StrFormat("%s: %llu loaded keys not found", e->name(), (unsigned long long)missing));
    std::fprintf(stderr, "%s: %llu rows loaded in %.1f s and read once\n", e->name(),
                 static_cast<unsigned long long>(c.rows), load_s);
    std::atomic<uint64_t> next_insert{c.rows + 1};
    for (const std::string& wl : c.workloads) {
      for (int threads : c.threads) {
        Result_ r = Measure(e.get(), wl, threads, c, &next_insert);
        if (r.missing != 0)
          Die(StrFormat("%s: %llu reads missed a loaded key", e->name(),
                        (unsigned long long)r.missing));
        std::fprintf(
            stderr, "%-8s %-7s %d thr: %10.0f ops/s %10.0f ops/CPU-s  p50 %7.1f us  p99 %8.1f us\n",
            r.engine.c_str(), wl.c_str(), threads, r.ops / r.seconds, r.ops / r.cpu_seconds,
            r.p50_us, r.p99_us);
        results.push_back(r);
      }
    }
    e.reset();
  }
  for (const std::string& d : {c.dir, c.pm_dir}) {
    std::error_code ec;
    std::filesystem::remove_all(d, ec);
  }
  if (!c.json.empty()) {
    std::ofstream out(c.json);
    out << "{\n  \"machine\": \"" << bench::MachineDescription() << "\",\n";
    out << StrFormat(
        "  \"rows\": %llu, \"value_bytes\": %zu, \"seconds\": %.1f, \"cache_mb\": %llu,\n",
        (unsigned long long)c.rows, kValueBytes, c.seconds, (unsigned long long)c.cache_mb);
    out << "  \"dir\": \"" << c.dir << "\", \"pm_dir\": \"" << c.pm_dir << "\",\n  \"caches\": {";
    for (size_t i = 0; i < caches.size(); ++i) {
      out << (i ? ", " : "") << "\"" << caches[i].first << "\": \"" << caches[i].second << "\"";
    }
    out << "},\n  \"results\": [\n";
    for (size_t i = 0; i < results.size(); ++i) {
      const Result_& r = results[i];
      out << StrFormat(
          "    {\"engine\": \"%s\", \"workload\": \"%s\", \"threads\": %d, \"ops\": %llu, "
          "\"seconds\": %.3f, \"cpu_seconds\": %.3f, \"ops_per_s\": %.1f, \"ops_per_cpu_s\": %.1f, "
          "\"p50_us\": %.2f, \"p99_us\": %.2f}%s\n",
          r.engine.c_str(), r.workload.c_str(), r.threads, (unsigned long long)r.ops, r.seconds,
          r.cpu_seconds, r.ops / r.seconds, r.ops / r.cpu_seconds, r.p50_us, r.p99_us,
          i + 1 < results.size() ? "," : "");
    }
    out << "  ]\n}\n";
  }
  return 0;
}
