// Values several times larger than the redo log and the buffer pool, through
// transactions: inserted, read back, updated and deleted in one statement
// each (the undo names the retired chain, btree.h), old versions read by
// older snapshots, rollbacks that put them back, pages freed by the purge
// and reused, and everything recovered after a crash.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;

Options TightOptions(const std::string& dir) {
  Options o = test::SmallOptions(dir);
  o.buffer_pool_bytes = 256 * 4096;     // 1 MiB
  o.log_file_size = 4096 + (2u << 20);  // 2 MiB
  o.log_buffer_size = 256 * 1024;
  return o;
}

std::string Bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string v(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

std::optional<std::string> ReadV(Transaction* txn, Table* t, int64_t id) {
  auto r = txn->Get(t, {Value(id)}, ReadMode::kSnapshot);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok() || !r->has_value()) return std::nullopt;
  return std::get<std::string>((**r)[3]);
}

// Until old versions are gone and their pages freed.
void WaitForPurge(Database* db) {
  auto busy = [&] {
    const DatabaseStats s = db->Stats();
    return s.purge_backlog > 0 || s.version_keys > 0 || s.garbage_indexes > 0;
  };
  for (int i = 0; i < 4000 && busy(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_FALSE(busy()) << "the purge did not finish";
  ASSERT_EQ(db->Stats().chain_release_failures, 0u);
}

class LargeValues : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    auto db = Database::Open(TightOptions(dir_.path()));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
  }
  uint64_t PrimaryPages() { return db_->FindTable("t")->Stats().indexes[0].pages; }
  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(LargeValues, SnapshotsRollbacksAndThePurgeSeeTheRightValue) {
  auto created = db_->CreateTable(SampleTable());
  ASSERT_TRUE(created.ok());
  Table* t = *created;
  const std::string a = Bytes(3 << 20, 1), b = Bytes((5 << 19) + 3, 2);
  {
    auto w = db_->Begin();
    ASSERT_OK(w->Insert(t, SampleRow(1, 1, "a", a)));
    ASSERT_OK(w->Insert(t, SampleRow(2, 2, std::nullopt, "small")));
    ASSERT_OK(w->Commit());
  }
  auto reader = db_->Begin();
  ASSERT_TRUE(ReadV(reader.get(), t, 1) == a);  // its snapshot

  {  // an update that rolls back: the old chain goes back in place
    auto w = db_->Begin();
    ASSERT_OK(w->Update(t, SampleRow(1, 1, "a", a), SampleRow(1, 1, "a", b)));
    ASSERT_TRUE(ReadV(w.get(), t, 1) == b) << "a writer reads its own write";
    ASSERT_TRUE(ReadV(reader.get(), t, 1) == a) << "an older snapshot reads the retired chain";
    ASSERT_OK(w->Rollback());
  }
  {
    auto fresh = db_->Begin();
    ASSERT_TRUE(ReadV(fresh.get(), t, 1) == a);
  }
  {  // savepoints: update twice, roll back the second, commit the first
    auto w = db_->Begin();
    ASSERT_OK(w->Update(t, SampleRow(1, 1, "a", a), SampleRow(1, 1, "a", b)));
    const uint64_t sp = w->Savepoint();
    ASSERT_OK(w->Update(t, SampleRow(1, 1, "a", b), SampleRow(1, 1, "a", a + "x")));
    ASSERT_OK(w->RollbackTo(sp));
    ASSERT_TRUE(ReadV(w.get(), t, 1) == b);
    ASSERT_OK(w->Commit());
  }
  ASSERT_TRUE(ReadV(reader.get(), t, 1) == a) << "the snapshot still reads the old value";
  {
    auto fresh = db_->Begin();
    ASSERT_TRUE(ReadV(fresh.get(), t, 1) == b);
    ASSERT_OK(fresh->Delete(t, SampleRow(1, 1, "a", b)));
    ASSERT_OK(fresh->Commit());
  }
  ASSERT_TRUE(ReadV(reader.get(), t, 1) == a) << "a deleted row's old value stays readable";
  ASSERT_OK(reader->Commit());
  WaitForPurge(db_.get());

  // With no snapshot left, the purge frees every retired chain: rewriting
  // the row over and over reuses the same pages.
  {
    auto w = db_->Begin();
    ASSERT_OK(w->Insert(t, SampleRow(1, 1, "a", a)));
    ASSERT_OK(w->Commit());
  }
  WaitForPurge(db_.get());
  const uint64_t pages = PrimaryPages();
  std::string cur = a;
  for (int round = 0; round < 6; ++round) {
    const std::string next = Bytes(3 << 20, 10 + round);
    auto w = db_->Begin();
    ASSERT_OK(w->Update(t, SampleRow(1, 1, "a", cur), SampleRow(1, 1, "a", next)));
    ASSERT_OK(w->Commit());
    cur = next;
    WaitForPurge(db_.get());
  }
  // One more value's worth at most: a new chain is written before the
  // old one is released.
  EXPECT_LE(PrimaryPages(), pages + (3u << 20) / 4000 + 64) << "retired chains are not reused";

  // A crash: recovery redoes the last value and frees nothing it needs.
  {
    auto w = db_->Begin();  // a loser holding a retired chain
    ASSERT_OK(w->Update(t, SampleRow(1, 1, "a", cur), SampleRow(1, 1, "a", b)));
    // Closed under it: its rollback can no longer log, so the log keeps it
    // open and the restart finds a loser.
    ASSERT_OK(db_->Close());
    w.reset();
    db_.reset();
  }
  Open();
  EXPECT_EQ(db_->recovery().transactions_rolled_back, 1u);
  t = db_->FindTable("t");
  auto check = db_->Begin();
  ASSERT_TRUE(ReadV(check.get(), t, 1) == cur) << "the loser's update is undone";
  ASSERT_TRUE(ReadV(check.get(), t, 2) == "small");
  ASSERT_OK(check->Commit());
}

TEST_F(LargeValues, AValueLargerThanTheUndoLimitCanBeDeletedAndUpdated) {
  // A value stored as a chain is named by its undo, not copied: the undo
  // stays far below 1/16 of the log, past which it would spill to a file.
  auto created = db_->CreateTable(SampleTable());
  ASSERT_TRUE(created.ok());
  Table* t = *created;
  const std::string a = Bytes(3 << 19, 3), b = Bytes(2 << 20, 4);
  auto w = db_->Begin();
  for (int64_t id = 1; id <= 4; ++id) ASSERT_OK(w->Insert(t, SampleRow(id, 1, std::nullopt, a)));
  ASSERT_OK(w->Commit());
  w = db_->Begin();
  for (int64_t id = 1; id <= 4; ++id) {
    ASSERT_OK(w->Update(t, SampleRow(id, 1, std::nullopt, a), SampleRow(id, 1, std::nullopt, b)));
  }
  ASSERT_OK(w->Delete(t, SampleRow(4, 1, std::nullopt, b)));
  ASSERT_OK(w->Rollback());
  w = db_->Begin();
  for (int64_t id = 1; id <= 4; ++id) ASSERT_TRUE(ReadV(w.get(), t, id) == a) << id;
  for (int64_t id = 1; id <= 4; ++id) ASSERT_OK(w->Delete(t, SampleRow(id, 1, std::nullopt, a)));
  ASSERT_OK(w->Commit());
  WaitForPurge(db_.get());
  EXPECT_EQ(db_->Stats().version_keys, 0u);
}

}  // namespace
}  // namespace subito
