// Snapshots past the version budget move to pages as of an earlier moment
// (txn/version_store.h V6, buffer/page_versions.h) instead of being cut:
// they read exactly what they saw before, through scans, point reads and
// secondary indexes, across the move and under concurrent writers, while
// the row versions they held are purged; past the page budget they are cut.
#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>

#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::ScanAll;

class OldSnapshotTest : public ::testing::Test {
 protected:
  void Open(uint64_t version_budget, uint64_t page_budget, uint64_t ppl_bytes = 0,
            uint64_t pool_bytes = 0) {
    Options o = test::SmallOptions(dir_.path());
    o.version_store_budget_bytes = version_budget;
    o.snapshot_page_budget_bytes = page_budget;
    o.ppl_bytes = ppl_bytes;
    if (pool_bytes != 0) o.buffer_pool_bytes = pool_bytes;
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto t = db_->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    t_ = *t;
  }
  static std::string Value(int64_t id, int64_t n) {
    std::string v = std::to_string(id) + ":" + std::to_string(n) + ":";
    v.resize(200, static_cast<char>('a' + (id + n) % 26));
    return v;
  }
  static Row R(int64_t id, int64_t n) {
    return SampleRow(id, static_cast<uint64_t>((id + n) % 7), "u" + std::to_string(id),
                     Value(id, n));
  }
  void Load(int64_t rows) {
    auto txn = db_->Begin();
    for (int64_t id = 0; id < rows; ++id) ASSERT_OK(txn->Insert(t_, R(id, 0)));
    ASSERT_OK(txn->Commit());
  }
  // Waits (the purge runs every 10 ms) until `done` holds; false after 30 s
  // (sanitizer builds are slow).
  bool WaitFor(const std::function<bool(const DatabaseStats&)>& done) {
    for (int i = 0; i < 3000; ++i) {
      if (done(db_->Stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  // A snapshot moved and the versions back within their budget.
  bool WaitUntilMoved() {
    return WaitFor([](const DatabaseStats& s) {
      return s.snapshots_moved >= 1 && s.version_bytes <= s.version_budget;
    });
  }
  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
  Table* t_ = nullptr;
};

// A repeatable-read snapshot, cursors half-way through scans of the
// primary and a secondary index, then thousands of updates, deletes,
// inserts and key changes, and a long value (an overflow chain) replaced:
// far past the version budget. The snapshot moves (it is not cut), its
// versions go, and everything it reads afterwards is what it read before;
// a table created after the move is empty to it.
TEST_F(OldSnapshotTest, AMovedSnapshotReadsExactlyWhatItSaw) {
  Open(/*version_budget=*/256 << 10, /*page_budget=*/64 << 20);
  Load(300);
  const std::string long_old(20000, 'o'), long_new(20000, 'n');
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t_, SampleRow(9000, 1, std::nullopt, long_old)));
    ASSERT_OK(txn->Commit());
  }
  auto old = db_->Begin(Isolation::kRepeatableRead);
  const std::vector<Row> by_pk = ScanAll(old.get(), t_);
  // Shares old's snapshot (no commit in between); writes after the move.
  auto writes_later = db_->Begin(Isolation::kRepeatableRead);
  auto moved = writes_later->OpenCursor(t_, 0);
  ASSERT_TRUE(moved.ok());
  ASSERT_OK((*moved)->Seek(SeekOp::kFirst));
  const std::vector<Row> by_k = ScanAll(old.get(), t_, 1);
  const std::vector<Row> by_u_backward = ScanAll(old.get(), t_, 2, /*backward=*/true);
  ASSERT_EQ(by_pk.size(), 301u);
  auto half = old->OpenCursor(t_, 0);
  ASSERT_TRUE(half.ok());
  ASSERT_OK((*half)->Seek(SeekOp::kFirst));
  for (int i = 0; i < 100; ++i) ASSERT_OK((*half)->Next());
  auto half_k = old->OpenCursor(t_, 1);
  ASSERT_TRUE(half_k.ok());
  ASSERT_OK((*half_k)->Seek(SeekOp::kFirst));
  for (int i = 0; i < 150; ++i) ASSERT_OK((*half_k)->Next());
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Update(t_, SampleRow(9000, 1, std::nullopt, long_old),
                          SampleRow(9000, 1, std::nullopt, long_new)));
    ASSERT_OK(txn->Commit());
  }

  std::mt19937_64 rng(test::TestSeed());
  std::map<int64_t, int64_t> now;  // id -> n of its current value
  for (int64_t id = 0; id < 300; ++id) now[id] = 0;
  for (int64_t n = 1; n <= 3000; ++n) {
    auto txn = db_->Begin();
    const int64_t id = static_cast<int64_t>(rng() % 300);
    if (n % 10 == 0 && now.count(id)) {
      ASSERT_OK(txn->Delete(t_, R(id, now[id])));
      now.erase(id);
    } else if (n % 10 == 5) {
      const int64_t fresh = 1000 + n;
      ASSERT_OK(txn->Insert(t_, R(fresh, n)));
      now[fresh] = n;
    } else if (now.count(id)) {
      ASSERT_OK(txn->Update(t_, R(id, now[id]), R(id, n)));  // k changes too
      now[id] = n;
    }
    ASSERT_OK(txn->Commit());
  }
  ASSERT_TRUE(WaitUntilMoved()) << "versions " << db_->Stats().version_bytes;
  DatabaseStats s = db_->Stats();
  EXPECT_EQ(s.snapshots_cut, 0u);
  EXPECT_EQ(s.moved_snapshots_open, 1u);
  EXPECT_GT(s.snapshot_pages + s.snapshot_page_recipes, 0u);
  EXPECT_GT(s.snapshot_overlay_bytes, 0u);
  // Copies take a page each; recipes (pages a cleaner had written before
  // they changed) far less.
  EXPECT_GE(s.snapshot_page_bytes, s.snapshot_pages * 4096 + s.snapshot_overlay_bytes);
  EXPECT_LE(s.snapshot_page_bytes,
            s.snapshot_pages * 4096 + s.snapshot_overlay_bytes + s.snapshot_page_recipes * 2048);
  EXPECT_EQ(s.moved_snapshots_cut, 0u);
  // A cursor that moved keeps reading the old state until its transaction
  // writes; then its snapshot is cut (its own change is not in old pages).
  ASSERT_OK((*moved)->Next());
  ASSERT_EQ((*moved)->row(), by_pk[1]);
  ASSERT_OK(writes_later->Insert(t_, R(6000, 0)));
  Status after_write = (*moved)->Next();
  EXPECT_TRUE(after_write.IsSnapshotTooOld()) << after_write.ToString();
  moved->reset();
  (void)writes_later->Rollback();
  auto later = db_->CreateTable(test::SampleTable("later"));
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(*later, R(1, 1)));
    ASSERT_OK(txn->Commit());
  }
  EXPECT_TRUE(ScanAll(old.get(), *later).empty());
  auto none = old->Get(*later, {int64_t{1}});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  // A table bulk loaded since: its rows have no versions, so a snapshot not
  // moved would read them and the old pages need not hold them: refused.
  auto loaded = db_->CreateTable(test::SampleTable("loaded"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  {
    auto loader = db_->BeginBulkLoad(*loaded);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int64_t id = 0; id < 50; ++id) ASSERT_OK((*loader)->Add(R(id, 0)));
    ASSERT_OK((*loader)->Finish());
  }
  auto refused = old->Get(*loaded, {int64_t{1}});
  EXPECT_TRUE(refused.status().IsSnapshotTooOld()) << refused.status().ToString();
  auto scan = old->OpenCursor(*loaded, 0);
  ASSERT_TRUE(scan.ok());
  Status scanned = (*scan)->Seek(SeekOp::kFirst);
  EXPECT_TRUE(scanned.IsSnapshotTooOld()) << scanned.ToString();
  scan->reset();

  // The half-read cursor goes on where it was, in the old state.
  for (size_t i = 101; i < by_pk.size(); ++i) {
    ASSERT_OK((*half)->Next());
    ASSERT_TRUE((*half)->Valid()) << i;
    ASSERT_EQ((*half)->row(), by_pk[i]) << i;
  }
  ASSERT_OK((*half)->Next());
  EXPECT_FALSE((*half)->Valid());
  half->reset();
  for (size_t i = 151; i < by_k.size(); ++i) {
    ASSERT_OK((*half_k)->Next());
    ASSERT_TRUE((*half_k)->Valid()) << i;
    ASSERT_EQ((*half_k)->row(), by_k[i]) << i;
  }
  half_k->reset();
  auto chained = old->Get(t_, {int64_t{9000}});
  ASSERT_TRUE(chained.ok()) << chained.status().ToString();
  ASSERT_TRUE(chained->has_value());
  EXPECT_EQ(std::get<std::string>((**chained)[3]), long_old);
  EXPECT_EQ(ScanAll(old.get(), t_), by_pk);
  EXPECT_EQ(ScanAll(old.get(), t_, 1), by_k);
  EXPECT_EQ(ScanAll(old.get(), t_, 2, true), by_u_backward);
  for (int64_t id : {int64_t{0}, int64_t{150}, int64_t{299}, int64_t{1005}}) {  // by_pk[id]
    auto got = old->Get(t_, {id});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    if (id < 300) {
      ASSERT_TRUE(got->has_value()) << id;
      EXPECT_EQ(**got, by_pk[static_cast<size_t>(id)]);
    } else {
      EXPECT_FALSE(got->has_value()) << "a row inserted after the snapshot";
    }
  }
  // A fresh snapshot reads the present.
  auto fresh = db_->Begin(Isolation::kRepeatableRead);
  std::vector<Row> present = ScanAll(fresh.get(), t_);
  ASSERT_EQ(present.size(), now.size() + 1);
  EXPECT_EQ(std::get<std::string>(present.back()[3]), long_new);
  present.pop_back();
  size_t i = 0;
  for (auto& [id, n] : now) EXPECT_EQ(present[i++], R(id, n));
  ASSERT_OK(fresh->Commit());
  ASSERT_OK(old->Commit());
  s = db_->Stats();
  EXPECT_EQ(s.moved_snapshots_open, 0u);
  EXPECT_EQ(s.snapshot_page_bytes, 0u);
}

// NV-PPL's multi-versioning (buffer/page_versions.h E4): with per-page
// logs on and a pool smaller than the table, the pages a moved snapshot
// needs are mostly clean when first changed (read from their files): it
// keeps recipes instead of copies, and its reads rebuild them from the file
// images and per-page log entries. Everything it reads is what it saw.
TEST_F(OldSnapshotTest, WithPerPageLogsAMovedSnapshotRebuildsPagesFromStorage) {
  Open(/*version_budget=*/256 << 10, /*page_budget=*/64 << 20, /*ppl_bytes=*/8 << 20,
       /*pool_bytes=*/512 << 10);
  Load(3000);
  auto old = db_->Begin(Isolation::kRepeatableRead);
  const std::vector<Row> by_pk = ScanAll(old.get(), t_);
  const std::vector<Row> by_k = ScanAll(old.get(), t_, 1);
  ASSERT_EQ(by_pk.size(), 3000u);
  std::mt19937_64 rng(test::TestSeed());
  std::vector<int64_t> n(3000, 0);
  for (int64_t i = 1; i <= 4000; ++i) {
    auto txn = db_->Begin();
    const auto id = static_cast<int64_t>(rng() % 3000);
    ASSERT_OK(txn->Update(t_, R(id, n[id]), R(id, i)));
    n[id] = i;
    ASSERT_OK(txn->Commit());
  }
  ASSERT_TRUE(WaitUntilMoved()) << "versions " << db_->Stats().version_bytes;
  DatabaseStats s = db_->Stats();
  EXPECT_GT(s.ppl_pages_logged, 0u);
  EXPECT_GT(s.snapshot_page_recipes + s.snapshot_pages_rebuilt, 0u);
  EXPECT_EQ(ScanAll(old.get(), t_), by_pk);
  EXPECT_EQ(ScanAll(old.get(), t_, 1), by_k);
  for (int64_t id : {int64_t{0}, int64_t{1500}, int64_t{2999}}) {
    auto got = old->Get(t_, {id});
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value()) << id;
    EXPECT_EQ(**got, by_pk[static_cast<size_t>(id)]);
  }
  s = db_->Stats();
  EXPECT_EQ(s.moved_snapshots_cut, 0u);
  EXPECT_GT(s.snapshot_pages_rebuilt, 0u);
  std::printf("page copies %llu, recipes left %llu, rebuilt %llu, bytes %llu\n",
              static_cast<unsigned long long>(s.snapshot_pages),
              static_cast<unsigned long long>(s.snapshot_page_recipes),
              static_cast<unsigned long long>(s.snapshot_pages_rebuilt),
              static_cast<unsigned long long>(s.snapshot_page_bytes));
  ASSERT_OK(old->Commit());
  EXPECT_EQ(db_->Stats().snapshot_page_bytes, 0u);
}

// Past the page budget the moved snapshot is cut after all: its next read
// of a page changed since fails with SnapshotTooOld. A transaction that
// wrote is never moved (its own changes are not in the old pages): its
// snapshot is cut, as without pages as of an earlier moment.
TEST_F(OldSnapshotTest, PastThePageBudgetOrAfterAWriteTheSnapshotIsCut) {
  Open(/*version_budget=*/128 << 10, /*page_budget=*/8 * 4096);
  Load(400);  // about 25 leaves
  auto old = db_->Begin(Isolation::kRepeatableRead);
  ASSERT_EQ(ScanAll(old.get(), t_).size(), 400u);
  auto wrote = db_->Begin(Isolation::kRepeatableRead);
  ASSERT_EQ(ScanAll(wrote.get(), t_).size(), 400u);
  ASSERT_OK(wrote->Insert(t_, R(5000, 0)));

  for (int64_t n = 1; n <= 3; ++n) {  // every row, three times
    for (int64_t id = 0; id < 400; ++id) {
      auto txn = db_->Begin();
      ASSERT_OK(txn->Update(t_, R(id, n - 1), R(id, n)));
      ASSERT_OK(txn->Commit());
    }
  }
  ASSERT_TRUE(WaitFor([](const DatabaseStats& s) { return s.moved_snapshots_cut >= 1; }));

  auto c = old->OpenCursor(t_, 0);
  ASSERT_TRUE(c.ok());
  Status read = (*c)->Seek(SeekOp::kFirst);
  for (int i = 0; read.ok() && (*c)->Valid() && i < 1000; ++i) read = (*c)->Next();
  EXPECT_TRUE(read.IsSnapshotTooOld()) << read.ToString();
  c->reset();
  auto got = wrote->Get(t_, {int64_t{7}});
  EXPECT_TRUE(got.status().IsSnapshotTooOld()) << got.status().ToString();
  (void)old->Rollback();
  (void)wrote->Rollback();
}

// Transfers between accounts keep the total; a reader takes a snapshot,
// sums every account, waits until the small version budget has moved its
// snapshot, and reads again; other readers scan meanwhile, their snapshots
// moving mid-scan. Each sum is the total, and each second scan equals the
// first, row for row.
TEST_F(OldSnapshotTest, MovedSnapshotsStayExactUnderConcurrentWriters) {
  Open(/*version_budget=*/32 << 10, /*page_budget=*/64 << 20);
  constexpr int64_t kAccounts = 200, kStart = 1000;
  {
    auto txn = db_->Begin();
    for (int64_t id = 0; id < kAccounts; ++id) {
      ASSERT_OK(txn->Insert(t_, SampleRow(id, 0, std::nullopt, std::to_string(kStart))));
    }
    ASSERT_OK(txn->Commit());
  }
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  // The writer idles between transactions while `pause` is set, and says so
  // in `paused` (it clears `paused` before it reads `pause`, so a pause it
  // has not seen is never taken for one it has).
  std::atomic<bool> pause{false}, paused{false};
  std::thread writer([&] {
    std::mt19937_64 rng(test::TestSeed());
    while (!stop.load()) {
      paused.store(false);
      if (pause.load()) {
        paused.store(true);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      auto txn = db_->Begin();
      int64_t a = static_cast<int64_t>(rng() % kAccounts),
              b = static_cast<int64_t>(rng() % kAccounts);
      if (a == b) continue;
      if (a > b) std::swap(a, b);
      auto ra = txn->Get(t_, {a}, ReadMode::kExclusive);
      auto rb = txn->Get(t_, {b}, ReadMode::kExclusive);
      if (!ra.ok() || !rb.ok() || !ra->has_value() || !rb->has_value()) {
        ++failures;
        break;
      }
      const int64_t va = std::stoll(std::get<std::string>((**ra)[3]));
      const int64_t vb = std::stoll(std::get<std::string>((**rb)[3]));
      const int64_t amount = static_cast<int64_t>(rng() % 50);
      if (!txn->Update(t_, **ra, SampleRow(a, 0, std::nullopt, std::to_string(va - amount))).ok() ||
          !txn->Update(t_, **rb, SampleRow(b, 0, std::nullopt, std::to_string(vb + amount))).ok() ||
          !txn->Commit().ok()) {
        ++failures;
        break;
      }
    }
  });
  auto sum = [](const std::vector<Row>& rows) {
    int64_t total = 0;
    for (const Row& r : rows) total += std::stoll(std::get<std::string>(r[3]));
    return total;
  };
  std::atomic<bool> stop_scanning{false};
  std::thread scanner([&] {
    while (!stop_scanning.load()) {
      auto reader = db_->Begin(Isolation::kRepeatableRead);
      const std::vector<Row> first = ScanAll(reader.get(), t_);
      EXPECT_EQ(sum(first), kAccounts * kStart);
      for (int again = 0; again < 4 && !stop_scanning.load(); ++again) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_EQ(ScanAll(reader.get(), t_), first);
      }
      ASSERT_OK(reader->Commit());
    }
  });
  // Scanners' snapshots move mid-scan; then, with this thread's reader the
  // only snapshot, each move is the reader's.
  EXPECT_TRUE(WaitFor([](const DatabaseStats& s) { return s.snapshots_moved >= 2; }));
  stop_scanning = true;
  scanner.join();
  for (int round = 0; round < 10; ++round) {
    // The reader's snapshot moves once, so the move this round waits for must
    // come after `moved` is read: the writer idles until then (a move during
    // the first scan, under load, left nothing to wait for).
    pause = true;
    while (!paused.load() && failures.load() == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    auto reader = db_->Begin(Isolation::kRepeatableRead);
    const std::vector<Row> first = ScanAll(reader.get(), t_);
    EXPECT_EQ(first.size(), static_cast<size_t>(kAccounts));
    EXPECT_EQ(sum(first), kAccounts * kStart) << "round " << round;
    const uint64_t moved = db_->Stats().snapshots_moved;
    pause = false;
    EXPECT_TRUE(WaitFor([&](const DatabaseStats& s) { return s.snapshots_moved > moved; }))
        << "round " << round << ": no snapshot moved";
    EXPECT_EQ(ScanAll(reader.get(), t_), first) << "round " << round;
    ASSERT_OK(reader->Commit());
  }
  stop = true;
  writer.join();
  EXPECT_EQ(failures.load(), 0);
  const DatabaseStats s = db_->Stats();
  EXPECT_GT(s.snapshots_moved, 0u) << "the test never moved a snapshot";
  EXPECT_EQ(s.snapshots_cut, 0u);
  EXPECT_EQ(s.moved_snapshots_open, 0u);
}

}  // namespace
}  // namespace subito
