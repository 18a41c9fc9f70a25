// Faults a production server meets besides power cuts: a full disk, I/O
// errors and short writes on page files, the catalog and space growth
// (FaultInjectingFileSystem), a rollback that cannot finish, a failed DROP,
// a start that fails after creating a new log, and the tracking file
// system's directory-sync model. Each test states the documented outcome
// (docs/faults.md) and checks that nothing committed is lost.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "engine/catalog.h"
#include "engine/engine_impl.h"
#include "engine_util.h"
#include "subito/interrupt.h"
#include "test_util.h"
#include "util/fault_file_system.h"
#include "util/file_io.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;
using test::ScanAll;

// ---- the crash file system's directory entries ----

TEST(TrackingDirectories, NamesSurviveACrashOnlyAfterTheirDirectoryIsSynced) {
  TrackingFileSystem fs;
  auto write_synced = [&](const std::string& path) {
    auto f = fs.Create(path);
    ASSERT_TRUE(f.ok());
    ASSERT_OK((*f)->Write(0, "abcd", 4));
    ASSERT_OK((*f)->Sync());
  };
  write_synced("/d/a");
  EXPECT_EQ(fs.CrashImage().count("/d/a"), 0u) << "created, synced, directory not synced";
  ASSERT_OK(fs.SyncDirOf("/d/a"));
  EXPECT_EQ(fs.CrashImage().count("/d/a"), 1u);

  ASSERT_OK(fs.Rename("/d/a", "/d/b"));
  auto image = fs.CrashImage();
  EXPECT_EQ(image.count("/d/a"), 1u) << "a rename is lost without a directory sync";
  EXPECT_EQ(image.count("/d/b"), 0u);
  ASSERT_OK(fs.SyncDirOf("/d/b"));
  image = fs.CrashImage();
  EXPECT_EQ(image.count("/d/a"), 0u);
  ASSERT_EQ(image.count("/d/b"), 1u);
  EXPECT_EQ(image["/d/b"].size(), 4u);

  ASSERT_OK(fs.Remove("/d/b"));
  EXPECT_EQ(fs.CrashImage().count("/d/b"), 1u) << "a removal is lost without a directory sync";
  ASSERT_OK(fs.SyncDirOf("/d/b"));
  EXPECT_EQ(fs.CrashImage().count("/d/b"), 0u);

  // Another directory's sync does not help; with keep_random a prefix of
  // the unsynced changes survives, never a later one without an earlier.
  write_synced("/e/x");
  ASSERT_OK(fs.Rename("/e/x", "/e/y"));
  ASSERT_OK(fs.SyncDirOf("/d/z"));
  EXPECT_TRUE(fs.CrashImage().empty());
  bool saw_x = false, saw_y = false;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    auto img = fs.CrashImage(seed, /*keep_random_unsynced=*/true);
    saw_x |= img.count("/e/x") > 0;
    saw_y |= img.count("/e/y") > 0;
    EXPECT_LE(img.size(), 1u);
  }
  EXPECT_TRUE(saw_x && saw_y);
}

// ---- the fault injector itself ----

TEST(FaultInjection, RulesSkipCountAndWriteShort) {
  TrackingFileSystem base;
  FaultInjectingFileSystem fs(&base);
  auto f = fs.Create("/d/f");
  ASSERT_TRUE(f.ok());
  fs.Add({kFaultWrite, "/d/f", ENOSPC, /*skip=*/1, /*times=*/2, 1.0, /*short_write=*/true});
  std::string data(1000, 'x');
  EXPECT_OK((*f)->Write(0, data.data(), data.size()));  // skipped
  Status s = (*f)->Write(1000, data.data(), data.size());
  EXPECT_TRUE(s.IsNoSpace()) << s.ToString();
  EXPECT_EQ((*f)->Size(), 1500u) << "a short write leaves half its bytes";
  EXPECT_TRUE((*f)->Write(0, data.data(), 10).IsNoSpace());
  EXPECT_OK((*f)->Write(0, data.data(), 10));  // the rule is spent
  EXPECT_EQ(fs.injected(), 2u);

  fs.Add({kFaultSync | kFaultExtend, "", EIO, 0, UINT64_MAX});
  EXPECT_TRUE((*f)->Sync().IsIOError());
  EXPECT_TRUE((*f)->Extend(1 << 20).IsIOError());
  EXPECT_OK((*f)->Extend(100));  // not a growth: nothing to fail
  fs.Clear();
  EXPECT_OK((*f)->Sync());
  fs.Add({kFaultCreate | kFaultRename | kFaultRemove | kFaultSyncDir, "/d/", EIO, 0, 4});
  EXPECT_FALSE(fs.Create("/d/g").ok());
  EXPECT_FALSE(fs.Rename("/d/f", "/d/h").ok());
  EXPECT_FALSE(fs.Remove("/d/f").ok());
  EXPECT_FALSE(fs.SyncDirOf("/d/f").ok());
  EXPECT_TRUE(fs.Exists("/d/f"));
}

// ---- the engine ----

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(dir_.Sub("db"));
    options_ = test::SmallOptions(dir_.path());
    options_.file_system = &fs_;
    options_.error_log = [this](const std::string& m) {
      std::lock_guard lock(reports_mu_);
      reports_.push_back(m);
    };
    options_.log_full_timeout_ms = 3000;
    Open();
  }
  void Open() {
    auto db = Database::Open(options_);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
  }
  // Without faults: a close that may fail (a stopped engine), then recovery.
  void Reopen() {
    fs_.Clear();
    if (db_) (void)db_->Close();
    db_.reset();
    Open();
  }
  Table* Create(const std::string& name) {
    auto t = db_->CreateTable(SampleTable(name));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }
  static std::string Value(int64_t id, size_t n) {
    std::string v(n, 'a');
    for (size_t i = 0; i < n; i += 64) v[i] = static_cast<char>('a' + (id + i) % 26);
    return v;
  }
  // The table's rows by id, checked against its secondary index on k.
  std::map<int64_t, std::string> Rows(const std::string& name) {
    std::map<int64_t, std::string> out;
    Table* t = db_->FindTable(name);
    EXPECT_NE(t, nullptr);
    if (t == nullptr) return out;
    auto txn = db_->Begin();
    for (const Row& r : ScanAll(txn.get(), t)) {
      out[std::get<int64_t>(r[0])] = std::get<std::string>(r[3]);
    }
    EXPECT_EQ(ScanAll(txn.get(), t, 1).size(), out.size()) << "index k disagrees with the table";
    EXPECT_OK(txn->Commit());
    return out;
  }

  test::ScratchDir dir_;
  std::unique_ptr<FileSystem> posix_ = NewPosixFileSystem(false, 0);
  FaultInjectingFileSystem fs_{posix_.get(), test::TestSeed()};
  Options options_;
  // The error log's messages (written by cleaner threads too).
  std::vector<std::string> Reports() {
    std::lock_guard lock(reports_mu_);
    return reports_;
  }
  void ClearReports() {
    std::lock_guard lock(reports_mu_);
    reports_.clear();
  }
  std::mutex reports_mu_;
  std::vector<std::string> reports_;
  std::unique_ptr<Database> db_;
};

bool Always(void*) {
  return true;
}

// A full disk appears when a page file grows (space is reserved, not
// sparse): the statement fails with NoSpace, reads and writes that need no
// new page go on, and once space is freed writes resume without a restart.
TEST_F(FaultTest, DiskFullFailsTheStatementThatGrowsAFileAndWritesResume) {
  Table* a = Create("a");
  Table* b = Create("b");
  ASSERT_TRUE(a && b);
  std::map<int64_t, std::string> want_a, want_b;
  {
    auto txn = db_->Begin();
    for (int64_t id = 0; id < 20; ++id) {
      ASSERT_OK(txn->Insert(b, SampleRow(id, id % 3, std::nullopt, Value(id, 100))));
      want_b[id] = Value(id, 100);
    }
    ASSERT_OK(txn->Commit());
  }
  fs_.Add({kFaultExtend, "", ENOSPC, 0, UINT64_MAX});
  Status failed;
  int64_t id = 0;
  for (; id < 100000 && failed.ok(); ++id) {
    auto txn = db_->Begin();
    failed = txn->Insert(a, SampleRow(id, id % 7, std::nullopt, Value(id, 1500)));
    if (failed.ok()) {
      ASSERT_OK(txn->Commit());
      want_a[id] = Value(id, 1500);
    } else {
      ASSERT_OK(txn->Rollback());
    }
  }
  ASSERT_TRUE(failed.IsNoSpace()) << failed.ToString();
  EXPECT_GT(want_a.size(), 0u);
  EXPECT_EQ(Rows("a"), want_a);
  {  // writes that need no new page: table b has room
    auto txn = db_->Begin();
    for (int64_t k = 0; k < 20; ++k) {
      Row old = SampleRow(k, k % 3, std::nullopt, Value(k, 100));
      ASSERT_OK(txn->Update(b, old, SampleRow(k, k % 3, std::nullopt, Value(k + 1, 100))));
      want_b[k] = Value(k + 1, 100);
    }
    ASSERT_OK(txn->Commit());
  }
  fs_.Clear();  // space freed
  for (int64_t more = id; more < id + 200; ++more) {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(a, SampleRow(more, more % 7, std::nullopt, Value(more, 1500))));
    ASSERT_OK(txn->Commit());
    want_a[more] = Value(more, 1500);
  }
  EXPECT_FALSE(db_->Stats().writes_stopped);
  Reopen();
  EXPECT_EQ(Rows("a"), want_a);
  EXPECT_EQ(Rows("b"), want_b);
}

// Page writes that fail (EIO or ENOSPC, short writes included) leave the
// pages dirty and are retried; once the log is 3/4 full the writing
// statements fail with the write's error; when writes succeed again the
// engine goes on without a restart, and the failed batch written again
// before anything else keeps torn pages repairable.
TEST_F(FaultTest, FailingPageWritesAreRetriedAndWritesResume) {
  // A pool larger than the log: the log fills to 3/4 before the pool fills
  // with dirty pages, so writers (and rollbacks) meet the failing writes in
  // their wait for log space.
  options_.buffer_pool_bytes = 64 << 20;
  Reopen();
  Table* a = Create("a");
  ASSERT_NE(a, nullptr);
  for (int err : {EIO, ENOSPC}) {
    SCOPED_TRACE(err);
    ClearReports();
    fs_.Add({kFaultWrite | kFaultSync, ".sbt", err, 0, UINT64_MAX, 1.0, /*short_write=*/true});
    Status failed;
    std::map<int64_t, std::string> want = Rows("a");
    // Transactions of 20 rows: the one that meets the failure is rolled
    // back while pages cannot be written, and with a KILL pending; neither
    // may turn its rollback into a fail-stop.
    for (int64_t base = err * 100000; base < err * 100000 + 200000 && failed.ok(); base += 20) {
      auto txn = db_->Begin();
      std::map<int64_t, std::string> mine;
      for (int64_t id = base; id < base + 20 && failed.ok(); ++id) {
        failed = txn->Insert(a, SampleRow(id, id % 5, std::nullopt, Value(id, 1200)));
        mine[id] = Value(id, 1200);
      }
      if (failed.ok()) failed = txn->Commit();
      if (failed.ok()) {
        want.insert(mine.begin(), mine.end());
      } else {
        InterruptScope killed(&Always, nullptr);
        EXPECT_OK(txn->Rollback());
      }
    }
    EXPECT_EQ(failed.IsNoSpace(), err == ENOSPC) << failed.ToString();
    EXPECT_EQ(failed.IsIOError(), err == EIO) << failed.ToString();
    DatabaseStats s = db_->Stats();
    EXPECT_TRUE(s.page_writes_failing);
    EXPECT_GT(s.page_write_failures, 0u);
    const auto reports = Reports();
    ASSERT_FALSE(reports.empty());
    EXPECT_NE(reports[0].find("page writes fail"), std::string::npos) << reports[0];
    EXPECT_FALSE(s.writes_stopped) << s.stop_reason;
    fs_.Clear();
    for (int64_t id = 0; id < 300; ++id) {
      const int64_t key = err * 100000 + 150000 + id;
      auto txn = db_->Begin();
      ASSERT_OK(txn->Insert(a, SampleRow(key, 1, std::nullopt, Value(key, 1200))));
      ASSERT_OK(txn->Commit());
      want[key] = Value(key, 1200);
    }
    EXPECT_EQ(Rows("a"), want);
    EXPECT_FALSE(db_->Stats().page_writes_failing);
    EXPECT_NE(Reports().back().find("succeed again"), std::string::npos) << Reports().back();
  }
  const auto want = Rows("a");
  Reopen();
  EXPECT_EQ(Rows("a"), want);
}

// Faults at random on every write path (page files, double-write file,
// catalog, growth, syncs, directory syncs), ENOSPC and EIO, short writes:
// every call returns (no hang, no crash), and after the faults stop and a
// restart every acknowledged transaction is there and nothing else.
TEST_F(FaultTest, RandomFaultsNeverLoseAnAcknowledgedTransaction) {
  options_.double_write_on_pm = false;  // the double-write file is faulted too
  Reopen();
  Table* t = Create("r");
  ASSERT_NE(t, nullptr);
  std::mt19937_64 rng(test::TestSeed());
  std::map<int64_t, std::string> want;
  std::optional<std::map<int64_t, std::string>> maybe;  // a commit of unknown outcome
  fs_.Add({kFaultAnyWrite, "", ENOSPC, 0, UINT64_MAX, 0.01, true});
  fs_.Add({kFaultAnyWrite, "", EIO, 0, UINT64_MAX, 0.005, true});
  int commits = 0, failures = 0;
  // Over 3,000 keys of ~1.6 KB: more than the 4 MB pool, so pages are
  // written (and faulted) by evictions as well as by the cleaner.
  for (int round = 0;
       round < 20000 && (round < 3000 || fs_.injected() < 20) && !db_->Stats().writes_stopped;
       ++round) {
    auto txn = db_->Begin();
    std::map<int64_t, std::string> next = want;
    Status st;
    for (int op = 0; op < 4 && st.ok(); ++op) {
      const int64_t id = static_cast<int64_t>(rng() % 3200);
      const std::string v = Value(static_cast<int64_t>(rng() % 1000), 200 + rng() % 2500);
      auto it = next.find(id);
      if (it == next.end()) {
        st = txn->Insert(t, SampleRow(id, id % 9, std::nullopt, v));
        if (st.ok()) next[id] = v;
      } else if (rng() % 3 == 0) {
        st = txn->Delete(t, SampleRow(id, id % 9, std::nullopt, it->second));
        if (st.ok()) next.erase(id);
      } else {
        st = txn->Update(t, SampleRow(id, id % 9, std::nullopt, it->second),
                         SampleRow(id, id % 9, std::nullopt, v));
        if (st.ok()) next[id] = v;
      }
    }
    if (st.ok()) {
      st = txn->Commit();
      if (st.ok()) {
        want = std::move(next);
        ++commits;
        continue;
      }
      if (db_->Stats().writes_stopped) {  // the commit's outcome is unknown
        maybe = std::move(next);
        break;
      }
    }
    ++failures;
    EXPECT_FALSE(st.IsCorruption()) << st.ToString();
    (void)txn->Rollback();
  }
  EXPECT_GT(commits, 50);
  // A fault reaches the engine as a failed statement, or as a failed page
  // write the cleaner retried without any statement failing.
  const DatabaseStats after = db_->Stats();
  EXPECT_GT(failures + (after.writes_stopped ? 1 : 0) + after.page_write_failures, 0u)
      << "no fault reached the engine";
  EXPECT_GT(fs_.injected(), 0u);
  Reopen();
  const auto got = Rows("r");
  if (maybe && got == *maybe) return;
  EXPECT_EQ(got, want);
}

// A failed DROP leaves its catalog entry for the next start to finish; a
// new table of the same name is a different table meanwhile and after.
TEST_F(FaultTest, FailedDropDoesNotConfuseANewTableOfTheSameName) {
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(1, 1, std::nullopt, "old")));
    ASSERT_OK(txn->Commit());
  }
  fs_.Add({kFaultRemove, ".sbt", EIO, 0, 1});
  EXPECT_FALSE(db_->DropTable("t").ok());
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  t = Create("t");
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(2, 2, std::nullopt, "new")));
    ASSERT_OK(txn->Commit());
  }
  ASSERT_OK(db_->RenameTable("t", "u"));
  EXPECT_EQ(Rows("u"), (std::map<int64_t, std::string>{{2, "new"}}));
  Reopen();
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  EXPECT_EQ(Rows("u"), (std::map<int64_t, std::string>{{2, "new"}}));
  // Again, and this time the new table is dropped before the restart.
  fs_.Add({kFaultRemove, ".sbt", EIO, 0, 1});
  EXPECT_FALSE(db_->DropTable("u").ok());
  ASSERT_NE(Create("u"), nullptr);
  ASSERT_OK(db_->DropTable("u"));
  Reopen();
  EXPECT_EQ(db_->FindTable("u"), nullptr);
  EXPECT_TRUE(db_->TableNames().empty());
}

// A start that creates a new log (the PM tier was lost after a clean
// shutdown) and then fails must not leave a log the next start refuses.
TEST_F(FaultTest, AStartFailingAfterCreatingALogDoesNotBlockTheNextOne) {
  ASSERT_NE(Create("t"), nullptr);
  ASSERT_OK(db_->Close());
  db_.reset();
  std::filesystem::remove_all(options_.pm_dir);
  fs_.Add({kFaultOpen, ".sbt", EIO, 0, 1});
  auto failed = Database::Open(options_);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(failed.status().IsIOError()) << failed.status().ToString();
  Open();
  EXPECT_NE(db_->FindTable("t"), nullptr);
  // The catalog rewrite that records a new log's salt fails (a power cut
  // there leaves the same files): the log was not made yet, so the next
  // start makes one and opens.
  ASSERT_OK(db_->Close());
  db_.reset();
  std::filesystem::remove_all(options_.pm_dir);
  fs_.Add({kFaultRename, "catalog", EIO, 0, 1});
  failed = Database::Open(options_);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(fs_.injected(), 2u);
  Open();
  EXPECT_NE(db_->FindTable("t"), nullptr);
}

// A rollback that cannot finish (its pages cannot be read) stops the
// engine's writes with the reason, in the stats and the error log; reads go
// on and never see the unfinished transaction; a restart undoes it.
TEST_F(FaultTest, ARollbackThatCannotFinishStopsWritesAndRecoveryFinishesIt) {
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(-1, 0, std::nullopt, "kept")));
    ASSERT_OK(txn->Commit());
  }
  auto big = db_->Begin();
  // Twice the pool: the rollback must read pages back from the file.
  for (int64_t id = 0; id < 6000; ++id) {
    ASSERT_OK(big->Insert(t, SampleRow(id, id % 11, std::nullopt, Value(id, 1400))));
  }
  fs_.Add({kFaultRead, ".sbt", EIO, 0, UINT64_MAX});
  Status r = big->Rollback();
  ASSERT_FALSE(r.ok());
  DatabaseStats s = db_->Stats();
  ASSERT_TRUE(s.writes_stopped);
  EXPECT_NE(s.stop_reason.find("rollback failed"), std::string::npos) << s.stop_reason;
  ASSERT_FALSE(Reports().empty());
  EXPECT_NE(Reports().back().find("stopped accepting writes"), std::string::npos);
  fs_.Clear();
  {
    auto txn = db_->Begin();
    Status w = txn->Insert(t, SampleRow(-2, 0, std::nullopt, "refused"));
    EXPECT_TRUE(w.IsReadOnly()) << w.ToString();
    (void)txn->Rollback();
  }
  EXPECT_TRUE(db_->CreateTable(SampleTable("other")).status().IsReadOnly());
  EXPECT_EQ(Rows("t"), (std::map<int64_t, std::string>{{-1, "kept"}}));
  big.reset();
  Reopen();
  EXPECT_FALSE(db_->Stats().writes_stopped);
  EXPECT_EQ(db_->recovery().transactions_rolled_back, 1u);
  EXPECT_EQ(Rows("t"), (std::map<int64_t, std::string>{{-1, "kept"}}));
  t = db_->FindTable("t");  // the reopened database's
  ASSERT_NE(t, nullptr);
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(-2, 0, std::nullopt, "after")));
  ASSERT_OK(txn->Commit());
}

// The classic log (pwrite + fdatasync, InnoDB's way) meets a failing
// write (EIO, or a short write as a full device leaves) or fdatasync: the
// commit waiting for it cannot know whether its record is durable, so the
// engine stops accepting writes and says why; reads go on, and after a
// restart every acknowledged transaction is there.
TEST_F(FaultTest, AFailingClassicLogStopsWritesAndLosesNoAcknowledgedCommit) {
  options_.log_write_mode = "classic";
  options_.log_file_system = &fs_;
  const FaultRule faults[] = {
      {kFaultSync, "/log.", EIO, 3, 1},
      {kFaultWrite, "/log.", ENOSPC, 5, 1, 1.0, /*short_write=*/true},
  };
  int64_t id = 0;
  std::map<int64_t, std::string> acknowledged;
  for (const FaultRule& fault : faults) {
    SCOPED_TRACE(fault.ops == kFaultSync ? "fdatasync fails" : "pwrite writes short");
    Reopen();
    Table* t = db_->FindTable("t") ? db_->FindTable("t") : Create("t");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(Rows("t"), acknowledged);
    const uint64_t injected_before = fs_.injected();
    fs_.Add(fault);
    Status failed;
    std::optional<int64_t> uncertain;
    for (int n = 0; n < 100 && failed.ok(); ++n, ++id) {
      auto txn = db_->Begin();
      // The fault may hit the log's flusher after a commit returned: the
      // next statement then meets the stopped engine.
      failed = txn->Insert(t, SampleRow(id, id % 5, std::nullopt, Value(id, 300)));
      if (failed.ok()) failed = txn->Commit();
      if (!failed.ok()) (void)txn->Rollback();
      if (failed.ok()) {
        acknowledged[id] = Value(id, 300);
      } else {
        uncertain = id;
      }
    }
    ASSERT_FALSE(failed.ok()) << "no commit met the fault";
    EXPECT_EQ(fs_.injected(), injected_before + 1);
    DatabaseStats s = db_->Stats();
    ASSERT_TRUE(s.writes_stopped);
    EXPECT_NE(s.stop_reason.find("/log."), std::string::npos) << s.stop_reason;
    {
      auto txn = db_->Begin();
      Status w = txn->Insert(t, SampleRow(-1, 0, std::nullopt, "refused"));
      EXPECT_TRUE(w.IsReadOnly()) << w.ToString();
      (void)txn->Rollback();
    }
    std::map<int64_t, std::string> seen = Rows("t");  // reads go on
    for (const auto& [k, v] : acknowledged) EXPECT_EQ(seen[k], v) << k;
    Reopen();
    EXPECT_FALSE(db_->Stats().writes_stopped);
    seen = Rows("t");
    if (uncertain && seen.count(*uncertain)) acknowledged[*uncertain] = seen[*uncertain];
    EXPECT_EQ(seen, acknowledged);
  }
}

// A write waiting for log space whose checkpoint cannot move (held here, as
// a page write that keeps failing or an old transaction would hold it)
// gives up after log_full_timeout_ms with Busy, and at once when its
// statement is killed; once the checkpoint moves, writes go on.
TEST_F(FaultTest, WaitsForLogSpaceAreBoundedAndHonourKill) {
  options_.log_full_timeout_ms = 300;
  options_.buffer_pool_bytes = 64 << 20;  // no page write needs to wait
  Reopen();
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  auto* pool = static_cast<engine::DatabaseImpl*>(db_.get())->pool();
  pool->HoldCheckpoint();
  Status st;
  int64_t id = 0;
  const auto start = std::chrono::steady_clock::now();
  for (; id < 200000 && st.ok(); ++id) {
    auto txn = db_->Begin();
    st = txn->Insert(t, SampleRow(id, 0, std::nullopt, Value(id, 1000)));
    if (st.ok()) st = txn->Commit();
    if (!st.ok()) (void)txn->Rollback();
  }
  EXPECT_TRUE(st.IsBusy()) << st.ToString();
  EXPECT_NE(st.message().find("3/4 full"), std::string::npos) << st.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  {
    InterruptScope killed(&Always, nullptr);
    const auto before = std::chrono::steady_clock::now();
    auto txn = db_->Begin();
    Status k = txn->Insert(t, SampleRow(-1, 0, std::nullopt, "killed"));
    EXPECT_TRUE(k.IsInterrupted()) << k.ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - before, std::chrono::milliseconds(250))
        << "the killed wait ran to its timeout";
    EXPECT_OK(txn->Rollback());
  }
  EXPECT_FALSE(db_->Stats().writes_stopped);
  pool->ReleaseCheckpoint();
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(-2, 0, std::nullopt, "after")));
  ASSERT_OK(txn->Commit());
}

// Stored values never depend on settings that may change: a 2 MiB value
// written with an 8 MiB log buffer reads back with a 1 MiB one.
TEST_F(FaultTest, ValuesWrittenUnderOneSettingReadUnderAnother) {
  options_.log_buffer_size = 8 << 20;
  options_.buffer_pool_bytes = 16 << 20;
  Reopen();
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  const std::string v = Value(7, 2 << 20);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(1, 1, std::nullopt, v)));
    ASSERT_OK(txn->Commit());
  }
  options_.log_buffer_size = 1 << 20;
  options_.buffer_pool_bytes = 4 << 20;
  Reopen();
  EXPECT_EQ(Rows("t"), (std::map<int64_t, std::string>{{1, v}}));
}

// ---- memory bounds ----

// A snapshot left open under a write load keeps old versions; past the
// budget the purge cuts it (its next read fails with SnapshotTooOld) and
// memory comes back within the budget. A snapshot taken afterwards reads
// as usual.
TEST_F(FaultTest, VersionsStayWithinTheirBudgetUnderALongSnapshot) {
  options_.version_store_budget_bytes = 1 << 20;
  options_.snapshot_page_budget_bytes = 0;  // cut, not moved (old_snapshot_test.cc)
  options_.buffer_pool_bytes = 32 << 20;
  Reopen();
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    for (int64_t id = 0; id < 10; ++id) {
      ASSERT_OK(txn->Insert(t, SampleRow(id, 0, std::nullopt, Value(0, 400))));
    }
    ASSERT_OK(txn->Commit());
  }
  auto old = db_->Begin(Isolation::kRepeatableRead);
  ASSERT_EQ(ScanAll(old.get(), t).size(), 10u);  // its snapshot
  {  // the last row goes: after the cut, the old snapshot finds nothing there
    auto txn = db_->Begin();
    ASSERT_OK(txn->Delete(t, SampleRow(9, 0, std::nullopt, Value(0, 400))));
    ASSERT_OK(txn->Commit());
  }
  uint64_t peak = 0;
  // 10,000 updates of 400 bytes (inline values; a long value's version is
  // a 9-byte chain reference): over 4 MB of versions.
  for (int64_t n = 1; n <= 10000; ++n) {
    auto txn = db_->Begin();
    const int64_t id = n % 9;
    ASSERT_OK(txn->Update(t, SampleRow(id, 0, std::nullopt, Value(n - 9 < 0 ? 0 : n - 9, 400)),
                          SampleRow(id, 0, std::nullopt, Value(n, 400))));
    ASSERT_OK(txn->Commit());
    peak = std::max(peak, db_->Stats().version_bytes);
  }
  DatabaseStats s = db_->Stats();
  for (int i = 0; i < 200 && s.version_bytes > s.version_budget;
       ++i) {  // the purge runs every 10 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    s = db_->Stats();
  }
  EXPECT_GE(s.snapshots_cut, 1u) << "peak " << peak << " now " << s.version_bytes << " keys "
                                 << s.version_keys;
  EXPECT_LE(s.version_bytes, s.version_budget);
  // Without the budget the versions would reach ~4.8 MB; the purge (every
  // 10 ms) keeps them near 1 MB.
  EXPECT_LT(peak, 4 * s.version_budget) << "versions grew far past the budget before the purge";
  auto c = old->OpenCursor(t, 0);
  ASSERT_TRUE(c.ok());
  Status read = (*c)->Seek(SeekOp::kFirst);
  EXPECT_TRUE(read.IsSnapshotTooOld()) << read.ToString();
  // Where the purge took the deleted row's versions a read finds nothing,
  // and must still fail rather than answer "no row".
  read = (*c)->Seek(SeekOp::kGE, {int64_t{9}});
  EXPECT_TRUE(read.IsSnapshotTooOld()) << read.ToString();
  auto got = old->Get(t, {int64_t{9}});
  EXPECT_TRUE(got.status().IsSnapshotTooOld()) << got.status().ToString();
  c->reset();
  (void)old->Rollback();
  auto fresh = db_->Begin(Isolation::kRepeatableRead);
  EXPECT_EQ(ScanAll(fresh.get(), t).size(), 9u);
  ASSERT_OK(fresh->Commit());
}

// A hot row's history behind an old snapshot: each read finds the
// snapshot's version by binary search (V5), and sees the right one.
TEST_F(FaultTest, OldSnapshotReadsOfAHotRowAreNotLinear) {
  options_.version_store_budget_bytes = 0;
  Reopen();
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(1, 0, std::nullopt, "v0")));
    ASSERT_OK(txn->Commit());
  }
  auto old = db_->Begin(Isolation::kRepeatableRead);
  ASSERT_EQ(ScanAll(old.get(), t).size(), 1u);
  std::unique_ptr<Transaction> middle;
  for (int n = 1; n <= 20000; ++n) {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Update(t, SampleRow(1, 0, std::nullopt, "v" + std::to_string(n - 1)),
                          SampleRow(1, 0, std::nullopt, "v" + std::to_string(n))));
    ASSERT_OK(txn->Commit());
    if (n == 10000) {
      middle = db_->Begin(Isolation::kRepeatableRead);
      ASSERT_EQ(ScanAll(middle.get(), t).size(), 1u);
    }
  }
  const uint64_t before = db_->Stats().versions_examined;
  for (int i = 0; i < 100; ++i) {
    auto r = old->Get(t, {int64_t{1}});
    ASSERT_TRUE(r.ok() && r->has_value());
    EXPECT_EQ(std::get<std::string>((**r)[3]), "v0");
    r = middle->Get(t, {int64_t{1}});
    ASSERT_TRUE(r.ok() && r->has_value());
    EXPECT_EQ(std::get<std::string>((**r)[3]), "v10000");
  }
  const uint64_t per_read = (db_->Stats().versions_examined - before) / 200;
  EXPECT_LT(per_read, 40u) << "a read walked the history";
  ASSERT_OK(old->Commit());
  ASSERT_OK(middle->Commit());
}

// Row locks past their budget fail the statement with TooManyLocks; the
// transaction can roll back and others go on.
TEST_F(FaultTest, RowLocksStayWithinTheirBudget) {
  options_.lock_memory_budget_bytes = 256 << 10;
  Reopen();
  Table* t = Create("t");
  ASSERT_NE(t, nullptr);
  auto txn = db_->Begin();
  Status st;
  int64_t id = 0;
  for (; id < 100000 && st.ok(); ++id) st = txn->Insert(t, SampleRow(id, 0, std::nullopt, "x"));
  EXPECT_TRUE(st.IsTooManyLocks()) << st.ToString();
  EXPECT_LT(id, 5000);
  DatabaseStats s = db_->Stats();
  EXPECT_LE(s.lock_bytes, s.lock_budget);
  ASSERT_OK(txn->Rollback());
  EXPECT_EQ(db_->Stats().lock_bytes, 0u);
  auto other = db_->Begin();
  ASSERT_OK(other->Insert(t, SampleRow(1, 0, std::nullopt, "y")));
  ASSERT_OK(other->Commit());
}

// ---- files and paths ----

// A catalog whose checksum is right but whose contents are not (a bug, a
// hand edit) is refused with what is wrong; the writer never writes one
// the reader would refuse for its size.
TEST_F(FaultTest, CatalogContentsAreValidatedAndSizeCapped) {
  ASSERT_NE(Create("t"), nullptr);
  ASSERT_OK(db_->Close());
  db_.reset();
  const std::string dir = options_.dir;
  auto read = engine::ReadCatalog(posix_.get(), dir);
  ASSERT_TRUE(read.ok() && read->has_value());
  const engine::Catalog good = **read;
  auto refused = [&](engine::Catalog c, const std::string& words) {
    ASSERT_OK(engine::WriteCatalog(posix_.get(), dir, c));
    auto db = Database::Open(options_);
    ASSERT_FALSE(db.ok());
    EXPECT_TRUE(db.status().IsCorruption()) << db.status().ToString();
    EXPECT_NE(db.status().message().find(words), std::string::npos) << db.status().ToString();
  };
  engine::Catalog twice = good;
  twice.tables.push_back(good.tables[0]);
  twice.tables.back().id = twice.next_table_id++;
  for (auto& i : twice.tables.back().indexes) i.space_id = twice.next_space_id++;
  refused(twice, "a second live table of that name");
  engine::Catalog bad_column = good;
  bad_column.tables[0].indexes[1].def.columns = {99};
  refused(bad_column, "invalid contents");
  engine::Catalog bad_space = good;
  bad_space.tables[0].indexes[1].space_id = bad_space.tables[0].indexes[0].space_id;
  refused(bad_space, "space id");
  engine::Catalog relative = good;
  relative.tables[0].def.data_dir = "../elsewhere";
  refused(relative, "not an absolute normal path");

  engine::Catalog huge = good;
  huge.tables[0].def.data_dir = "/" + std::string(65u << 20, 'x');
  EXPECT_TRUE(engine::WriteCatalog(posix_.get(), dir, huge).IsTooLarge());
  ASSERT_OK(engine::WriteCatalog(posix_.get(), dir, good));
  Open();
  EXPECT_NE(db_->FindTable("t"), nullptr);
}

// Files are created 0660 or stricter whatever the umask (0600 in the PM
// tier); links planted where the engine creates or opens a file are
// refused, never followed.
TEST_F(FaultTest, FilesArePrivateAndLinksAreNeverFollowed) {
  ASSERT_NE(Create("t"), nullptr);
  ASSERT_OK(db_->Close());
  db_.reset();
  auto mode = [](const std::string& p) {
    struct stat st {};
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir_.path())) {
    const std::string p = e.path().string();
    const bool in_pm = p.rfind(options_.pm_dir, 0) == 0;
    if (e.is_directory()) {
      if (p == options_.dir) continue;  // made by SetUp
      EXPECT_EQ(mode(p) & 077, 0u) << p << " is open to others";
    } else {
      EXPECT_EQ(mode(p) & (in_pm ? 077u : 007u), 0u) << p;
    }
  }
  // A planted link where a new table's .tmp file is made: the engine
  // removes the link and creates its own file; the target is untouched.
  const std::string victim = dir_.Sub("victim");
  test::WriteFile(victim, {1, 2, 3});
  options_.file_system = nullptr;  // the real file system, O_NOFOLLOW and all
  Open();
  ASSERT_NE(Create("u"), nullptr);
  ASSERT_OK(db_->Close());
  db_.reset();
  std::string u_file;
  for (const auto& e : std::filesystem::directory_iterator(options_.dir)) {
    if (e.path().string().find("PRIMARY") != std::string::npos) u_file = e.path().string();
  }
  ASSERT_FALSE(u_file.empty());
  const std::string next = options_.dir + "/t3-PRIMARY-7.sbt.tmp";  // the next table's name
  std::filesystem::create_symlink(victim, next);
  Open();
  EXPECT_NE(Create("w"), nullptr);
  EXPECT_FALSE(std::filesystem::is_symlink(next)) << "the link was not where w's file is made";
  EXPECT_TRUE(std::filesystem::exists(options_.dir + "/t3-PRIMARY-7.sbt"));
  EXPECT_EQ(std::filesystem::file_size(victim), 3u) << "the planted link was written through";
  // A page file replaced by a link is refused at open.
  ASSERT_OK(db_->Close());
  db_.reset();
  std::filesystem::rename(u_file, u_file + ".moved");
  std::filesystem::create_symlink(u_file + ".moved", u_file);
  auto db = Database::Open(options_);
  EXPECT_FALSE(db.ok());
  std::filesystem::remove(u_file);
  std::filesystem::rename(u_file + ".moved", u_file);
  Open();
}

// The PM directory holds the redo log: one that another user could write
// to is refused with a clear error, as is a link in its place.
TEST_F(FaultTest, APmDirectoryOthersCanWriteIsRefused) {
  ASSERT_OK(db_->Close());
  db_.reset();
  ::chmod(options_.pm_dir.c_str(), 0777);
  auto db = Database::Open(options_);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("writable by other users"), std::string::npos)
      << db.status().ToString();
  ::chmod(options_.pm_dir.c_str(), 0700);
  const std::string link = dir_.Sub("pmlink");
  std::filesystem::create_directory_symlink(options_.pm_dir, link);
  Options o = options_;
  o.pm_dir = link;
  db = Database::Open(o);
  ASSERT_FALSE(db.ok());
  EXPECT_NE(db.status().message().find("symbolic link"), std::string::npos)
      << db.status().ToString();
  Open();
}

// A transaction whose undo is larger than 1/16 of the redo log (InnoDB has
// no such bound): its undo spills to its undo file (txn/undo_file.h). It
// commits, rolls back whole or to a savepoint inside the file, and a crash
// leaves a loser that recovery undoes from its file; no file stays behind.
class BigTransactionTest : public FaultTest {
 protected:
  void SetUp() override {
    FaultTest::SetUp();
    ASSERT_OK(db_->Close());
    db_.reset();
    // A new database (a log keeps its size): undo past 64 KiB spills.
    std::filesystem::remove_all(options_.dir);
    std::filesystem::remove_all(options_.pm_dir);
    std::filesystem::create_directories(options_.dir);
    options_.log_file_size = 4096 + (1u << 20);
    Open();
    t_ = Create("t");
    auto setup = db_->Begin();
    for (int64_t id = 0; id < 300; ++id) {
      ASSERT_OK(setup->Insert(t_, SampleRow(id, id % 5, std::nullopt, Value(id, 80))));
      base_[id] = Value(id, 80);
    }
    ASSERT_OK(setup->Commit());
  }
  // Changes every base row and inserts ids [from, from + n): far more undo
  // than 64 KiB.
  void Write(Transaction* txn, int64_t from, int64_t n, std::map<int64_t, std::string>* model) {
    for (int64_t id = 0; id < 300; ++id) {
      const std::string before = model->count(id) ? (*model)[id] : base_.at(id);
      const std::string after = Value(id + from, 90);
      ASSERT_OK(txn->Update(t_, SampleRow(id, id % 5, std::nullopt, before),
                            SampleRow(id, 7, std::nullopt, after)));
      (*model)[id] = after;
    }
    for (int64_t id = from; id < from + n; ++id) {
      ASSERT_OK(txn->Insert(t_, SampleRow(id, 3, std::nullopt, Value(id, 100))));
      (*model)[id] = Value(id, 100);
    }
  }
  size_t UndoFiles() { return test::CountFiles(dir_.Sub("db"), ".sbu"); }
  Table* t_ = nullptr;
  std::map<int64_t, std::string> base_;
};

TEST_F(BigTransactionTest, CommitsAndRollsBackWholeAndToASavepointInItsUndoFile) {
  std::map<int64_t, std::string> model = base_;
  {
    auto big = db_->Begin();
    Write(big.get(), 1000, 3000, &model);
    EXPECT_GT(db_->Stats().undo_spills, 1u) << "the undo never spilled: the test lost its aim";
    EXPECT_EQ(UndoFiles(), 1u);
    ASSERT_OK(big->Rollback());
  }
  EXPECT_EQ(UndoFiles(), 0u);
  ASSERT_EQ(Rows("t"), base_);

  auto big = db_->Begin();
  Write(big.get(), 1000, 3000, &model);
  const uint64_t sp = big->Savepoint();
  const std::map<int64_t, std::string> at_sp = model;
  const uint64_t spills = db_->Stats().undo_spills;
  for (int64_t id = 5000; id < 9000; ++id) {
    ASSERT_OK(big->Insert(t_, SampleRow(id, 4, std::nullopt, Value(id, 100))));
  }
  ASSERT_GT(db_->Stats().undo_spills, spills) << "the savepoint is not inside the undo file";
  ASSERT_OK(big->RollbackTo(sp));
  model = at_sp;
  for (int64_t id = 9000; id < 10000; ++id) {
    ASSERT_OK(big->Insert(t_, SampleRow(id, 4, std::nullopt, Value(id, 100))));
    model[id] = Value(id, 100);
  }
  ASSERT_OK(big->Commit());
  EXPECT_EQ(UndoFiles(), 0u);
  ASSERT_EQ(Rows("t"), model);
  Reopen();
  EXPECT_EQ(db_->recovery().transactions_rolled_back, 0u);
  ASSERT_EQ(Rows("t"), model);
}

TEST_F(BigTransactionTest, ALoserLargerThanTheLogIsUndoneFromItsUndoFile) {
  std::map<int64_t, std::string> model = base_;
  auto big = db_->Begin();
  Write(big.get(), 1000, 4000, &model);
  ASSERT_OK(db_->Close());  // its rollback can no longer log: a loser
  big.reset();
  db_.reset();
  options_.background_undo = false;  // undone inside Open
  Open();
  EXPECT_EQ(db_->recovery().transactions_rolled_back, 1u);
  EXPECT_EQ(db_->recovery().losers_in_background, 0u);
  EXPECT_EQ(db_->recovery().losers_with_undo_files, 1u);
  EXPECT_GT(db_->recovery().undo_file_entries, 4000u);
  EXPECT_EQ(UndoFiles(), 0u);
  ASSERT_EQ(Rows("t"), base_);
}

// The default: Open rebuilds the loser (its keys locked, its changes
// invisible) and returns; a background thread rolls it back, DDL waits for
// it, and its undo file goes once its abort record is durable.
TEST_F(BigTransactionTest, ALoserIsRolledBackInTheBackgroundLockedAndInvisible) {
  std::map<int64_t, std::string> model = base_;
  auto big = db_->Begin();
  Write(big.get(), 1000, 4000, &model);
  ASSERT_OK(db_->Close());
  big.reset();
  db_.reset();
  std::promise<void> go;
  std::shared_future<void> started = go.get_future().share();
  options_.before_background_undo = [started] { started.wait(); };
  Open();
  t_ = db_->FindTable("t");
  EXPECT_EQ(db_->recovery().transactions_rolled_back, 1u);
  EXPECT_EQ(db_->recovery().losers_in_background, 1u);
  EXPECT_EQ(db_->Stats().recovery_losers_pending, 1u);
  // Held: readers see the rows before it, writers wait for its keys.
  ASSERT_EQ(Rows("t"), base_);
  {
    auto w = db_->Begin();
    w->SetLockWaitTimeout(std::chrono::milliseconds(50));
    EXPECT_TRUE(w->Update(t_, SampleRow(5, 5 % 5, std::nullopt, base_.at(5)),
                          SampleRow(5, 0, std::nullopt, "x"))
                    .IsTimedOut());
    EXPECT_TRUE(w->Insert(t_, SampleRow(1000, 3, std::nullopt, "x")).IsTimedOut());
    EXPECT_OK(w->Insert(t_, SampleRow(-7, 3, std::nullopt, "free")));
    EXPECT_OK(w->Rollback());
  }
  EXPECT_EQ(UndoFiles(), 1u);
  // DDL waits for the rollback (the loser uses the table).
  std::thread ddl([&] { EXPECT_OK(db_->CreateIndex("t", IndexDef{"by_k_id", {1, 0}, false})); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(db_->Stats().recovery_losers_pending, 1u);
  go.set_value();
  ddl.join();
  EXPECT_EQ(db_->Stats().recovery_losers_pending, 0u);
  EXPECT_EQ(UndoFiles(), 0u);
  ASSERT_EQ(Rows("t"), base_);
  auto w = db_->Begin();
  ASSERT_OK(w->Update(t_, SampleRow(5, 5 % 5, std::nullopt, base_.at(5)),
                      SampleRow(5, 0, std::nullopt, "x")));
  ASSERT_OK(w->Commit());
}

// A loser whose undo file holds entries of a temporary table (dropped by
// the next Open, K6) is rebuilt and rolled back without them, in either
// mode; DDL waiting for the background undo gives up after the lock wait
// timeout.
TEST_F(BigTransactionTest, ALoserThatWroteATemporaryTableIsRolledBackWithoutIt) {
  for (const bool background : {true, false}) {
    SCOPED_TRACE(background ? "background undo" : "undo in Open");
    TableDef def = SampleTable();
    def.name = "scratch";
    def.temporary = true;
    def.data_dir = dir_.Sub("tmp");
    std::filesystem::create_directories(def.data_dir);
    Result<Table*> scratch = db_->CreateTable(def);
    ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
    auto big = db_->Begin();
    for (int64_t id = 0; id < 3000; ++id) {  // its undo spills to the file
      ASSERT_OK(big->Insert(*scratch, SampleRow(id, 1, std::nullopt, Value(id, 100))));
    }
    ASSERT_OK(big->Update(t_, SampleRow(7, 7 % 5, std::nullopt, base_.at(7)),
                          SampleRow(7, 0, std::nullopt, "changed")));
    ASSERT_GT(db_->Stats().undo_spills, 0u);
    ASSERT_OK(db_->Close());
    big.reset();
    db_.reset();
    std::promise<void> go;
    std::shared_future<void> started = go.get_future().share();
    options_.background_undo = background;
    options_.before_background_undo = [started] { started.wait(); };
    options_.lock_wait_timeout_ms = 100;
    Open();
    t_ = db_->FindTable("t");
    ASSERT_NE(t_, nullptr);
    EXPECT_EQ(db_->FindTable("scratch"), nullptr);
    EXPECT_EQ(db_->recovery().transactions_rolled_back, 1u);
    EXPECT_EQ(db_->recovery().losers_in_background, background ? 1u : 0u);
    ASSERT_EQ(Rows("t"), base_);
    if (background) {
      const Status ddl = db_->DropIndex("t", "k");
      EXPECT_TRUE(ddl.IsTimedOut()) << ddl.ToString();
      EXPECT_NE(ddl.message().find("background rollback"), std::string::npos);
    }
    go.set_value();
    ASSERT_TRUE(test::AwaitBackgroundUndo(db_.get()));
    EXPECT_EQ(UndoFiles(), 0u);
    ASSERT_EQ(Rows("t"), base_);
    options_.before_background_undo = nullptr;
    options_.lock_wait_timeout_ms = 5000;
  }
}

TEST_F(BigTransactionTest, ADamagedUndoFileIsRefusedWithItsNameAndOffset) {
  std::map<int64_t, std::string> model = base_;
  auto big = db_->Begin();
  Write(big.get(), 1000, 3000, &model);
  ASSERT_OK(db_->Close());
  big.reset();
  db_.reset();
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(dir_.Sub("db"))) {
    if (e.path().extension() == ".sbu") path = e.path().string();
  }
  ASSERT_FALSE(path.empty());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 40);
    char c = 0;
    f.seekg(4096 + 40);
    f.get(c);
    f.seekp(4096 + 40);
    f.put(static_cast<char>(c ^ 0x10));
  }
  auto db = Database::Open(options_);
  ASSERT_FALSE(db.ok());
  EXPECT_TRUE(db.status().IsCorruption()) << db.status().ToString();
  EXPECT_NE(db.status().message().find(path), std::string::npos) << db.status().ToString();
  EXPECT_NE(db.status().message().find("offset 4096"), std::string::npos) << db.status().ToString();
}

// A full disk when the undo spills (its file's creation, a short write to
// it, a failed sync) fails the statement that needed the space; the
// transaction goes on once space is back, rolls back to a savepoint inside
// its file, and commits exactly what it kept, or is undone after a crash.
TEST_F(BigTransactionTest, AFullDiskFailsOnlyTheStatementWhoseUndoSpills) {
  for (const bool crash : {false, true}) {
    SCOPED_TRACE(crash ? "then a crash" : "then a commit");
    fs_.Add({kFaultCreate, ".sbu", ENOSPC, 0, 1});
    fs_.Add({kFaultWrite, ".sbu", ENOSPC, 2, 1, 1.0, /*short_write=*/true});
    fs_.Add({kFaultSync, ".sbu", EIO, 4, 1});
    std::map<int64_t, std::string> model = base_, at_sp;
    auto big = db_->Begin();
    int failed = 0;
    uint64_t sp = 0;
    for (int64_t id = 1000; id < 6000; ++id) {
      if (id == 2500) {
        sp = big->Savepoint();
        at_sp = model;
      }
      Status s = big->Insert(t_, SampleRow(id, 3, std::nullopt, Value(id, 100)));
      if (s.IsNoSpace() || s.IsIOError()) {
        ++failed;
        continue;
      }
      ASSERT_OK(s);
      model[id] = Value(id, 100);
    }
    EXPECT_EQ(failed, 3) << "a spill never met its fault";
    fs_.Clear();
    ASSERT_OK(big->RollbackTo(sp));
    for (int64_t id = 7000; id < 7100; ++id) {
      ASSERT_OK(big->Insert(t_, SampleRow(id, 3, std::nullopt, Value(id, 100))));
      at_sp[id] = Value(id, 100);
    }
    if (crash) {
      ASSERT_OK(db_->Close());
      big.reset();
      db_.reset();
      Open();
      t_ = db_->FindTable("t");
      EXPECT_EQ(db_->recovery().losers_with_undo_files, 1u);
      ASSERT_EQ(Rows("t"), base_);
      ASSERT_TRUE(test::AwaitBackgroundUndo(db_.get()));
    } else {
      ASSERT_OK(big->Commit());
      ASSERT_EQ(Rows("t"), at_sp);
      // Back to the base rows for the next round.
      auto undo = db_->Begin();
      for (const auto& [id, v] : at_sp) {
        if (!base_.count(id)) ASSERT_OK(undo->Delete(t_, SampleRow(id, 3, std::nullopt, v)));
      }
      ASSERT_OK(undo->Commit());
    }
    EXPECT_EQ(UndoFiles(), 0u);
  }
}

// A read of the undo file that fails during a rollback to a savepoint
// fails that rollback and loses nothing: tried again, it undoes every change
// after the savepoint.
TEST_F(BigTransactionTest, AFailedReadOfTheUndoFileFailsTheRollbackAndLosesNothing) {
  std::map<int64_t, std::string> model = base_;
  auto big = db_->Begin();
  const uint64_t sp = big->Savepoint();
  Write(big.get(), 1000, 6000, &model);
  ASSERT_GT(db_->Stats().undo_spills, 1u);
  fs_.Add({kFaultRead, ".sbu", EIO, 1, 1});  // the second read: the tail after the first
  Status r = big->RollbackTo(sp);
  EXPECT_TRUE(r.IsIOError()) << r.ToString();
  fs_.Clear();
  ASSERT_OK(big->RollbackTo(sp));
  ASSERT_OK(big->Commit());
  ASSERT_EQ(Rows("t"), base_);
}

}  // namespace
}  // namespace subito
