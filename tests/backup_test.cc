// Online physical backups (Database::PauseFileWrites, MariaDB's BACKUP
// STAGE): while file writes are paused under a write load, a copy of the
// data directory and of the PM directory, the log last, taken while no
// transaction commits, opens to exactly the transactions committed before
// the copy, with the open ones rolled back and a prepared one still
// prepared.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <shared_mutex>
#include <thread>

#include "engine_util.h"
#include "subito/interrupt.h"
#include "test_util.h"

namespace subito {
namespace {

namespace fs = std::filesystem;
using test::ScanAll;

TableDef Accounts() {
  TableDef def;
  def.name = "acct";
  def.columns = {{"id", ColumnType::kInt, 8},
                 {"k", ColumnType::kUInt, 4},
                 {"v", ColumnType::kString, 8, false, 1u << 20}};
  def.primary_key = {0};
  def.indexes = {{"k", {1}, false}};
  return def;
}

Row AccountRow(int64_t id, uint64_t k, size_t pad) {
  return {id, k, std::string(pad, static_cast<char>('a' + k % 26))};
}

// Every regular file under `dir` and its bytes.
std::map<std::string, std::vector<uint8_t>> FileBytes(const std::string& dir) {
  std::map<std::string, std::vector<uint8_t>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().string()] = test::ReadFile(e.path().string());
  }
  return files;
}

// The names of files that differ between two FileBytes, but for growth by
// zero bytes (a page file extended for new pages, which read as zeros).
std::string Changed(const std::map<std::string, std::vector<uint8_t>>& a,
                    const std::map<std::string, std::vector<uint8_t>>& b) {
  std::string out;
  for (const auto& [name, bytes] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      out += " " + name + " (gone)";
    } else if (it->second.size() < bytes.size() ||
               !std::equal(bytes.begin(), bytes.end(), it->second.begin()) ||
               std::any_of(it->second.begin() + static_cast<ptrdiff_t>(bytes.size()),
                           it->second.end(), [](uint8_t c) { return c != 0; })) {
      out += " " + name + " (" + std::to_string(bytes.size()) + " -> " +
             std::to_string(it->second.size()) + " bytes)";
    }
  }
  for (const auto& [name, bytes] : b) {
    if (!a.count(name)) out += " " + name + " (new)";
  }
  return out;
}

// Rows whose value differs between two models, as text.
std::string Differences(const std::map<int64_t, uint64_t>& found,
                        const std::map<int64_t, uint64_t>& expected) {
  std::string out;
  int n = 0;
  for (const auto& [id, k] : expected) {
    auto it = found.find(id);
    if (it == found.end()) {
      out += " " + std::to_string(id) + ": missing (want " + std::to_string(k) + ")";
    } else if (it->second != k) {
      out += " " + std::to_string(id) + ": " + std::to_string(it->second) + " (want " +
             std::to_string(k) + ")";
    } else {
      continue;
    }
    if (++n == 20) return out + " ...";
  }
  for (const auto& [id, k] : found) {
    if (!expected.count(id) && ++n < 20) out += " " + std::to_string(id) + ": unexpected";
  }
  return out;
}

// Copies `from` into `to`, leaving out the subdirectory `but` (if any).
void CopyTree(const std::string& from, const std::string& to, const std::string& but = "") {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(from)) {
    if (!but.empty() && e.path().filename() == but) continue;
    fs::copy(e.path(), to + "/" + e.path().filename().string(), fs::copy_options::recursive);
  }
}

Options BackupOptions(const std::string& dir) {
  Options o = test::SmallOptions(dir);
  o.buffer_pool_bytes = 2 << 20;  // 512 frames: the cleaners write all the time
  o.max_checkpoint_age_bytes = 256 << 10;
  o.ppl_bytes = 4 << 20;
  o.ppl_threshold = 256;
  return o;
}

// Opens a database with options `o` and creates the table Accounts();
// null (the failure reported) if either fails.
Table* OpenWithAccounts(const Options& o, std::unique_ptr<Database>* db) {
  auto opened = Database::Open(o);
  EXPECT_TRUE(opened.ok()) << opened.status().ToString();
  if (!opened.ok()) return nullptr;
  *db = std::move(*opened);
  auto created = (*db)->CreateTable(Accounts());
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? *created : nullptr;
}

struct BackupCase {
  bool ppl;
  std::string log_mode;
  uint32_t streams;
};

Options CaseOptions(const std::string& dir, const BackupCase& c) {
  Options o = BackupOptions(dir);
  o.log_file_size = 4096 + (32 << 20) / c.streams;  // 32 MiB in all
  if (!c.ppl) o.ppl_bytes = 0;
  o.log_write_mode = c.log_mode;
  o.log_streams = c.streams;
  return o;
}

// Copies the log directory one file (stream) at a time, `gap` apart, as a
// copier that reaches each stream at another moment while records are
// appended.
void CopyLogSlowly(const std::string& from, const std::string& to, std::chrono::milliseconds gap) {
  fs::create_directories(to);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(from)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    fs::copy(f, to + "/" + f.filename().string(), fs::copy_options::recursive);
    std::this_thread::sleep_for(gap);
  }
}

class Backup : public ::testing::TestWithParam<BackupCase> {};

TEST_P(Backup, ACopyTakenWhileFileWritesArePausedOpensAtItsMoment) {
  test::ScratchDir dir, copy;
  const Options o = CaseOptions(dir.path(), GetParam());
  std::unique_ptr<Database> db;
  Table* t = OpenWithAccounts(o, &db);
  ASSERT_NE(t, nullptr);
  constexpr int64_t kRows = 3000;
  std::map<int64_t, uint64_t> committed;  // id -> k, as of the last commit
  {
    auto txn = db->Begin();
    for (int64_t id = 0; id < kRows; ++id) {
      ASSERT_OK(txn->Insert(t, AccountRow(id, 0, 200)));
      committed[id] = 0;
    }
    ASSERT_OK(txn->Commit());
  }
  // An XA transaction prepared before the backup stays prepared in the copy.
  {
    auto txn = db->Begin();
    ASSERT_OK(txn->Update(t, AccountRow(0, 0, 200), AccountRow(0, 777, 200)));
    ASSERT_OK(txn->Prepare("xid-before-backup"));
    ASSERT_OK(db->KeepPrepared(std::move(txn)));
  }

  // Writers update rows and insert new ones; each commit takes `commits`
  // shared, as MariaDB's commits take the backup lock that BLOCK_COMMIT
  // waits for.
  std::shared_mutex commits;
  std::mutex model_mu;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> commits_done{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(test::TestSeed() + w);
      int64_t next_insert = kRows + 1000000 * (w + 1);
      while (!stop.load()) {
        auto txn = db->Begin();
        std::map<int64_t, uint64_t> mine;
        Status st;
        for (int i = 0; i < 8 && st.ok(); ++i) {
          // Each writer its own rows: the model is updated after Commit
          // returns, so two writers' commits of one row could land in it
          // out of order.
          const int64_t id = 1 + w + 2 * static_cast<int64_t>(rng() % ((kRows - 2) / 2));
          const uint64_t k = rng() % 1000;
          st = txn->Update(t, AccountRow(id, 0, 200), AccountRow(id, k, 200));
          if (st.ok()) mine[id] = k;
        }
        if (st.ok()) {
          const int64_t id = next_insert++;
          st = txn->Insert(t, AccountRow(id, 1, 300));
          if (st.ok()) mine[id] = 1;
        }
        if (!st.ok()) continue;  // a deadlock or lock timeout: rolled back
        std::shared_lock may_commit(commits);
        std::this_thread::sleep_for(std::chrono::microseconds(500));  // as above
        if (txn->Commit().ok()) {
          std::lock_guard lock(model_mu);
          for (auto& [id, k] : mine) committed[id] = k;
          commits_done.fetch_add(1);
        }
      }
    });
  }
  // A large transaction open across the backup, its undo already in its
  // undo file (past 1/16 of the 32 MiB log): the copy rolls it back.
  constexpr int64_t kBig = 2600;
  TableDef big_def = Accounts();
  big_def.name = "big";
  big_def.indexes.clear();
  auto big_created = db->CreateTable(big_def);
  ASSERT_TRUE(big_created.ok()) << big_created.status().ToString();
  Table* big = *big_created;
  {
    auto txn = db->Begin();
    for (int64_t id = 0; id < kBig; ++id) ASSERT_OK(txn->Insert(big, AccountRow(id, 0, 900)));
    ASSERT_OK(txn->Commit());
  }
  auto open_txn = db->Begin();
  for (int64_t id = 0; id < kBig; ++id) {
    ASSERT_OK(open_txn->Update(big, AccountRow(id, 0, 900), AccountRow(id, 9, 900)));
  }
  for (int64_t id = kRows + 5000000; id < kRows + 5000400; ++id) {
    ASSERT_OK(open_txn->Insert(t, AccountRow(id, 2, 500)));
  }
  EXPECT_GT(db->Stats().undo_spills, 0u) << "the open transaction has no undo file";

  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  db->PauseFileWrites();  // BACKUP STAGE START
  EXPECT_TRUE(db->Stats().file_writes_paused);
  const uint64_t written_at_pause = db->Stats().page_file_bytes_written;
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // commits go on
  // A temporary table made now waits for the end of the backup (BACKUP
  // STAGE does not block temporary tables; the copy's catalog would miss it).
  std::atomic<bool> temporary_made{false};
  std::thread temporary([&] {
    TableDef tmp = Accounts();
    tmp.name = "tmp";
    tmp.temporary = true;
    EXPECT_TRUE(db->CreateTable(tmp).ok());
    temporary_made.store(true);
  });
  // Rollbacks make the log durable without a commit, so records land in
  // the log files while the copier goes through them.
  std::atomic<bool> stop_rollbacks{false};
  std::atomic<uint64_t> rollbacks{0};
  std::thread rollbacker([&] {
    for (int64_t id = kRows + 7000000; !stop_rollbacks.load(); id += 10) {
      auto txn = db->Begin();
      for (int64_t i = 0; i < 10; ++i) (void)txn->Insert(t, AccountRow(id + i, 3, 300));
      if (txn->Rollback().ok()) rollbacks.fetch_add(1);
      // The checkpoint is held: the log must hold what is written meanwhile.
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  });
  std::map<int64_t, uint64_t> expected;
  {
    std::unique_lock no_commits(commits);  // BACKUP STAGE BLOCK_COMMIT
    {
      std::lock_guard lock(model_mu);
      expected = committed;
    }
    const auto before = FileBytes(o.dir);
    std::map<std::string, std::vector<uint8_t>> pm_before = FileBytes(o.pm_dir);
    for (auto it = pm_before.begin(); it != pm_before.end();) {
      it = it->first.rfind(o.pm_dir + "/log", 0) == 0 ? pm_before.erase(it) : std::next(it);
    }
    // The open transaction goes on writing while the copy is made.
    for (int64_t id = kRows + 5000400; id < kRows + 5000800; ++id) {
      ASSERT_OK(open_txn->Insert(t, AccountRow(id, 2, 500)));
    }
    CopyTree(o.dir, copy.path() + "/db");
    CopyTree(o.pm_dir, copy.path() + "/pm", "log");
    const uint64_t rollbacks_before_log = rollbacks.load();
    CopyLogSlowly(o.pm_dir + "/log", copy.path() + "/pm/log", std::chrono::milliseconds(100));
    EXPECT_GT(rollbacks.load(), rollbacks_before_log) << "nothing was logged while copying the log";
    EXPECT_FALSE(temporary_made.load()) << "a temporary table was made while paused";
    // Nothing but the log changed meanwhile (undo files, page files, the
    // double-write area, the per-page log region), though the writers and
    // the open transaction kept changing pages.
    std::map<std::string, std::vector<uint8_t>> pm_after = FileBytes(o.pm_dir);
    for (auto it = pm_after.begin(); it != pm_after.end();) {
      it = it->first.rfind(o.pm_dir + "/log", 0) == 0 ? pm_after.erase(it) : std::next(it);
    }
    auto after = FileBytes(o.dir);
    after.erase(o.dir + "/pool_pages");
    auto before_files = before;
    before_files.erase(o.dir + "/pool_pages");
    EXPECT_EQ(Changed(before_files, after), "") << "data directory files changed while paused";
    EXPECT_EQ(Changed(pm_before, pm_after), "") << "PM directory files changed while paused";
    EXPECT_EQ(db->Stats().page_file_bytes_written, written_at_pause)
        << "pages written while paused";
  }
  db->ResumeFileWrites();  // BACKUP STAGE END
  temporary.join();
  EXPECT_TRUE(temporary_made.load());
  stop_rollbacks.store(true);
  rollbacker.join();
  EXPECT_FALSE(db->Stats().file_writes_paused);
  EXPECT_EQ(db->Stats().file_write_pauses, 1u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop.store(true);
  for (auto& th : writers) th.join();
  EXPECT_GT(commits_done.load(), 20u);
  EXPECT_GT(db->Stats().page_file_bytes_written, written_at_pause) << "writes did not resume";
  ASSERT_OK(open_txn->Rollback());
  ASSERT_OK(db->Close());
  db.reset();

  const Options co = CaseOptions(copy.path(), GetParam());
  auto restored = Database::Open(co);
  ASSERT_TRUE(restored.ok()) << restored.status().ToString();
  db = std::move(*restored);
  ASSERT_TRUE(test::AwaitBackgroundUndo(db.get()));
  EXPECT_GE(db->recovery().transactions_rolled_back, 1u) << "the open transaction";
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"xid-before-backup"});
  Table* ct = db->FindTable("acct");
  ASSERT_NE(ct, nullptr);
  auto reader = db->Begin();
  std::map<int64_t, uint64_t> found;
  for (const Row& r : ScanAll(reader.get(), ct)) {
    found[std::get<int64_t>(r[0])] = std::get<uint64_t>(r[1]);
  }
  // Row 0 is the prepared transaction's: readers see its value before.
  EXPECT_EQ(found.size(), expected.size());
  EXPECT_EQ(Differences(found, expected), "");
  EXPECT_EQ(ScanAll(reader.get(), ct, 1).size(), expected.size()) << "the k index";
  // The open transaction's updates, undone from its undo file.
  EXPECT_GE(db->recovery().losers_with_undo_files, 1u);
  Table* cbig = db->FindTable("big");
  ASSERT_NE(cbig, nullptr);
  const std::vector<Row> big_rows = ScanAll(reader.get(), cbig);
  EXPECT_EQ(big_rows.size(), static_cast<size_t>(kBig));
  for (const Row& r : big_rows) {
    ASSERT_EQ(std::get<uint64_t>(r[1]), 0u) << "big row " << std::get<int64_t>(r[0]);
  }
  EXPECT_EQ(db->FindTable("tmp"), nullptr) << "temporary tables do not outlive an open";
  reader.reset();
  auto held = db->TakePrepared("xid-before-backup");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_OK((*held)->Commit());
  auto after = db->Begin();
  auto row0 = after->Get(ct, {int64_t{0}});
  ASSERT_TRUE(row0.ok() && row0->has_value());
  EXPECT_EQ(std::get<uint64_t>((**row0)[1]), 777u);
  after.reset();
  ASSERT_OK(db->Close());
}

INSTANTIATE_TEST_SUITE_P(Logs, Backup,
                         ::testing::Values(BackupCase{true, "nf", 1}, BackupCase{false, "nf", 1},
                                           BackupCase{true, "nf", 2},
                                           BackupCase{true, "classic", 2}),
                         [](const auto& info) {
                           return std::string(info.param.ppl ? "Ppl" : "NoPpl") + "_" +
                                  info.param.log_mode + "_" + std::to_string(info.param.streams) +
                                  "streams";
                         });

// A writer that needs a frame while every free one is dirty waits for the
// resume rather than failing; and Close ends a pause.
TEST(BackupPause, AFetchWaitsForTheResumeAndCloseEndsAPause) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.buffer_pool_bytes = 256 << 10;  // 64 frames
  std::unique_ptr<Database> db;
  Table* t = OpenWithAccounts(o, &db);
  ASSERT_NE(t, nullptr);
  {
    auto txn = db->Begin();
    for (int64_t id = 0; id < 4000; ++id) ASSERT_OK(txn->Insert(t, AccountRow(id, 0, 100)));
    ASSERT_OK(txn->Commit());
  }
  db->PauseFileWrites();
  std::atomic<bool> resumed{false};
  std::thread resumer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    resumed.store(true);
    db->ResumeFileWrites();
  });
  // Far more pages than frames: the pool fills with dirty pages, then the
  // next fetch waits for the resume.
  auto txn = db->Begin();
  Status st;
  for (int64_t id = 0; id < 4000 && st.ok(); id += 7) {
    st = txn->Update(t, AccountRow(id, 0, 100), AccountRow(id, 5, 100));
  }
  EXPECT_OK(st);
  EXPECT_TRUE(resumed.load()) << "every update fitted in the pool: nothing had to wait";
  ASSERT_OK(txn->Commit());
  resumer.join();
  db->PauseFileWrites();
  ASSERT_OK(db->Close());  // resumes, then writes every page
  db.reset();
  auto reopened = Database::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->recovery().records_redone, 0u) << "Close was not clean";
  ASSERT_OK((*reopened)->Close());
}

// While writes are paused a growing transaction keeps its undo in the log
// (the checkpoint is held anyway) instead of writing its undo file; only a
// new entry at a position a rollback freed below its undo file's anchor
// (txn/undo_file.h U2) must rewrite the file: it waits for the resume, and
// past log_full_timeout_ms the statement fails with Busy.
TEST(BackupPause, UndoFilesWaitOnlyWhenTheyMust) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.log_file_size = 4096 + (4 << 20);  // undo past 256 KiB goes to the undo file
  o.log_full_timeout_ms = 300;
  o.buffer_pool_bytes = 32 << 20;  // the changes made while paused stay in it
  std::unique_ptr<Database> db;
  Table* t = OpenWithAccounts(o, &db);
  ASSERT_NE(t, nullptr);
  auto txn = db->Begin();
  int64_t id = 0;
  uint64_t early = 0;  // a savepoint whose position the first spill anchors
  int64_t rows_at_early = 0;
  for (; id < 4000 && db->Stats().undo_spills == 0; ++id) {
    if (id == 10) {
      early = txn->Savepoint();
      rows_at_early = id;
    }
    ASSERT_OK(txn->Insert(t, AccountRow(id, 1, 1000)));
  }
  ASSERT_GT(db->Stats().undo_spills, 0u);
  const int64_t per_spill = id;  // rows past which the undo goes to the file
  for (int64_t n = 0; n < 50; ++n, ++id) ASSERT_OK(txn->Insert(t, AccountRow(id, 1, 1000)));

  db->PauseFileWrites();
  const uint64_t spills = db->Stats().undo_spills;
  // Nothing resumes the writes here: an insert that waited for the resume
  // would fail with Busy after log_full_timeout_ms.
  for (int64_t n = 0; n < per_spill + 20; ++n, ++id) {
    ASSERT_OK(txn->Insert(t, AccountRow(id, 1, 1000)));
  }
  EXPECT_EQ(db->Stats().undo_spills, spills) << "the undo file was written while paused";
  // Back to a position below the file's anchor: the next entry must rewrite
  // the file.
  ASSERT_OK(txn->RollbackTo(early));
  id = rows_at_early;
  const uint64_t sp = txn->Savepoint();
  Status st = txn->Insert(t, AccountRow(id, 1, 1000));
  EXPECT_TRUE(st.IsBusy()) << st.ToString();
  EXPECT_NE(st.ToString().find("BACKUP STAGE"), std::string::npos) << st.ToString();
  if (!st.ok()) ASSERT_OK(txn->RollbackTo(sp));
  db->ResumeFileWrites();
  ASSERT_OK(txn->Insert(t, AccountRow(id, 1, 1000)));
  EXPECT_GT(db->Stats().undo_spills, spills);
  ASSERT_OK(txn->Commit());
  auto reader = db->Begin();
  EXPECT_EQ(ScanAll(reader.get(), t).size(), static_cast<size_t>(id + 1));
  reader.reset();
  ASSERT_OK(db->Close());
}

// While writes are paused the checkpoint cannot move. A rollback that
// needs more log than is left (here of a transaction whose undo is in its
// file, most of it written before the pause) goes on until 7/8 of the log
// is in use, then waits, holding nothing, for the backup's end: filling the
// log would leave it holding its transaction, whose pin only a relocation
// moves, and the log would fail.
TEST(BackupPause, ARollbackWaitsForTheResumeNearAFullLog) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.log_file_size = 4096 + (4 << 20);
  o.log_full_timeout_ms = 300;
  o.buffer_pool_bytes = 32 << 20;
  o.max_checkpoint_age_bytes = 256 << 10;  // the checkpoint follows the writes
  const uint64_t capacity = o.log_file_size - 4096;
  std::unique_ptr<Database> db;
  Table* t = OpenWithAccounts(o, &db);
  ASSERT_NE(t, nullptr);
  auto txn = db->Begin();
  int64_t id = 0;
  for (; id < 6000; ++id) ASSERT_OK(txn->Insert(t, AccountRow(id, 1, 1000)));
  ASSERT_GT(db->Stats().undo_spills, 0u);
  for (int i = 0; i < 500 && db->Stats().checkpoint_age > capacity / 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_LE(db->Stats().checkpoint_age, capacity / 4);
  db->PauseFileWrites();
  auto small = db->Begin();
  for (int64_t n = 0; n < 20; ++n) ASSERT_OK(small->Insert(t, AccountRow(1000000 + n, 1, 1000)));
  // Writers stop at 3/4 of the log (Busy after log_full_timeout_ms).
  Status st;
  for (int64_t n = 0; n < 6000 && st.ok(); ++n, ++id) st = txn->Insert(t, AccountRow(id, 1, 1000));
  EXPECT_TRUE(st.IsBusy()) << st.ToString();
  EXPECT_GT(db->Stats().checkpoint_age, capacity / 4 * 3);

  std::atomic<bool> rolled_back{false};
  std::thread rollback([&] {
    EXPECT_OK(txn->Rollback());
    rolled_back.store(true);
  });
  for (int i = 0; i < 3000 && db->Stats().checkpoint_age <= capacity / 8 * 7; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(rolled_back.load()) << "the rollback fitted: the test shows nothing";
  EXPECT_GT(db->Stats().checkpoint_age, capacity / 8 * 7);
  EXPECT_LT(db->Stats().checkpoint_age, capacity / 8 * 7 + (64 << 10));
  // A rollback in a thread that holds what the backup waits for (MariaDB's
  // commit lock) does not wait: it goes on in the log's reserve.
  std::atomic<bool> small_done{false};
  std::thread small_rollback([&] {
    BackupLockScope commit_lock_held(true);
    EXPECT_OK(small->Rollback());
    small_done.store(true);
  });
  for (int i = 0; i < 3000 && !small_done.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(small_done.load()) << "a rollback holding the commit lock waited for the backup";
  EXPECT_FALSE(rolled_back.load());
  db->ResumeFileWrites();
  small_rollback.join();
  rollback.join();
  EXPECT_TRUE(rolled_back.load());
  auto reader = db->Begin();
  EXPECT_EQ(ScanAll(reader.get(), t).size(), 0u);
  reader.reset();
  ASSERT_OK(db->Close());
  db.reset();
  auto reopened = Database::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  Table* rt = (*reopened)->FindTable("acct");
  ASSERT_NE(rt, nullptr);
  auto r2 = (*reopened)->Begin();
  EXPECT_EQ(ScanAll(r2.get(), rt).size(), 0u);
  r2.reset();
  ASSERT_OK((*reopened)->Close());
}

}  // namespace
}  // namespace subito
