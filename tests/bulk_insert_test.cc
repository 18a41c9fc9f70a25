// Transaction::BulkInsert (engine/bulk_insert.cc): which tables qualify,
// what other transactions see and wait for meanwhile and afterwards, and
// that every rollback past it (of a statement, of the transaction) leaves
// the table empty and usable. Power cuts: engine_crash_test.cc.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>

#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::ScanAll;
using namespace std::chrono_literals;

class BulkInsertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open(test::SmallOptions(dir_.path()));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto t = db_->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    t_ = *t;
  }
  static Row RowOf(int64_t id) {
    return SampleRow(id, static_cast<uint64_t>(id * 7919 % 1000), "u" + std::to_string(id),
                     "value " + std::to_string(id) + std::string(60, 'v'));
  }
  // Loads ids [from, to) through a bulk insert of txn, then finishes it.
  static void Load(Transaction* txn, Table* t, int64_t from, int64_t to) {
    auto loader = txn->BulkInsert(t);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int64_t id = from; id < to; ++id) ASSERT_OK((*loader)->Add(RowOf(id)));
    ASSERT_OK((*loader)->Finish());
  }
  // A transaction whose snapshot predates a committed load of ids [0, n).
  std::unique_ptr<Transaction> SnapshotBeforeALoadOf(int64_t n) {
    auto older = db_->Begin();
    older->TakeSnapshot();
    auto txn = db_->Begin();
    Load(txn.get(), t_, 0, n);
    EXPECT_OK(txn->Commit());
    return older;
  }
  // Every index holds `n` entries, seen by a new transaction.
  void ExpectRows(size_t n) {
    auto check = db_->Begin();
    for (uint32_t index = 0; index < 3; ++index) {
      EXPECT_EQ(ScanAll(check.get(), t_, index).size(), n) << "index " << index;
    }
    ASSERT_OK(check->Commit());
  }
  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
  Table* t_ = nullptr;
};

TEST_F(BulkInsertTest, OthersSeeTheRowsOnlyWithASnapshotThatSeesTheCommit) {
  auto older = db_->Begin();
  older->TakeSnapshot();  // before the load, without touching the table
  auto txn = db_->Begin();
  auto loader = txn->BulkInsert(t_);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  for (int64_t id = 0; id < 3000; ++id) ASSERT_OK((*loader)->Add(RowOf(id)));
  {
    // Meanwhile: consistent reads see an empty table; writes and locking
    // reads wait, here until their timeout.
    auto other = db_->Begin();
    other->SetLockWaitTimeout(50ms);
    auto got = other->Get(t_, {int64_t{5}});
    ASSERT_TRUE(got.ok() && !got->has_value());
    EXPECT_TRUE(ScanAll(other.get(), t_, 1).empty());
    EXPECT_TRUE(other->Insert(t_, RowOf(100000)).IsTimedOut());
    EXPECT_TRUE(other->Get(t_, {int64_t{5}}, ReadMode::kExclusive).status().IsTimedOut());
    ASSERT_OK(other->Rollback());
  }
  ASSERT_OK((*loader)->Finish());
  EXPECT_EQ(ScanAll(txn.get(), t_, 0).size(), 3000u);  // its own rows
  EXPECT_EQ(ScanAll(txn.get(), t_, 2).size(), 3000u);
  ASSERT_OK(txn->Commit());
  EXPECT_TRUE(ScanAll(older.get(), t_).empty()) << "a snapshot older than the commit saw rows";
  ASSERT_OK(older->Commit());
  ExpectRows(3000);
  const DatabaseStats s = db_->Stats();
  EXPECT_EQ(s.bulk_inserts, 1u);
  EXPECT_GE(s.bulk_built_entries, 3000u);  // built bottom up, not inserted one by one
  auto later = db_->Begin();
  auto got = later->Get(t_, {int64_t{1234}});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(*got, RowOf(1234));
  EXPECT_TRUE(later->Insert(t_, RowOf(1234)).IsAlreadyExists());
  ASSERT_OK(later->Update(t_, RowOf(1234), SampleRow(1234, 1, "u1234", "changed")));
  ASSERT_OK(later->Commit());
}

TEST_F(BulkInsertTest, AWaitingWriterGoesOnOnceTheLoadEnds) {
  auto txn = db_->Begin();
  Load(txn.get(), t_, 0, 500);
  auto waiter = std::async(std::launch::async, [&] {
    auto other = db_->Begin();
    Status st = other->Insert(t_, RowOf(7));
    Status st2 = other->Insert(t_, RowOf(9000));
    EXPECT_OK(other->Commit());
    return std::make_pair(st, st2);
  });
  EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
  ASSERT_OK(txn->Commit());
  auto [dup, fresh] = waiter.get();
  EXPECT_TRUE(dup.IsAlreadyExists()) << dup.ToString();
  EXPECT_OK(fresh);
  ExpectRows(501);
}

TEST_F(BulkInsertTest, OnlyAnEmptyPristineTableNobodyElseUsesQualifies) {
  {
    auto reader = db_->Begin();  // another user of the table
    (void)ScanAll(reader.get(), t_);
    auto txn = db_->Begin();
    EXPECT_TRUE(txn->BulkInsert(t_).status().IsBusy());
    ASSERT_OK(txn->Insert(t_, RowOf(1)));  // row by row instead
    ASSERT_OK(txn->Commit());
    ASSERT_OK(reader->Commit());
  }
  auto txn = db_->Begin();
  auto refused = txn->BulkInsert(t_);
  EXPECT_TRUE(refused.status().IsBusy());
  EXPECT_NE(refused.status().message().find("not empty"), std::string::npos)
      << refused.status().ToString();
  ASSERT_OK(txn->Delete(t_, RowOf(1)));
  ASSERT_OK(txn->Commit());
  // Empty again, but with versions of its last row a snapshot may read,
  // or pages freed: row by row still.
  auto again = db_->Begin();
  EXPECT_TRUE(again->BulkInsert(t_).status().IsBusy());
  ASSERT_OK(again->Commit());
  EXPECT_EQ(db_->Stats().bulk_inserts, 0u);
}

TEST_F(BulkInsertTest, EveryRollbackPastItEmptiesTheTable) {
  {
    // The whole transaction: the load, then rows one by one (the loader
    // is finished first), then a rollback.
    auto txn = db_->Begin();
    Load(txn.get(), t_, 0, 2500);
    ASSERT_OK(txn->Insert(t_, RowOf(5000)));
    ASSERT_OK(txn->Update(t_, RowOf(10), SampleRow(10, 3, "u10", "changed")));
    ASSERT_OK(txn->Rollback());
    ExpectRows(0);
    // An aborted bulk writer hides nothing from later transactions.
    auto later = db_->Begin();
    ASSERT_OK(later->Insert(t_, RowOf(77)));
    ASSERT_OK(later->Commit());
    ExpectRows(1);
    auto cleanup = db_->Begin();
    ASSERT_OK(cleanup->Delete(t_, RowOf(77)));
    ASSERT_OK(cleanup->Commit());
  }
  {
    // A statement's rollback (to the savepoint before the load), with the
    // loader still open; the transaction goes on and commits.
    auto created = db_->CreateTable(test::SampleTable("t2"));
    ASSERT_TRUE(created.ok());
    t_ = *created;
    auto txn = db_->Begin();
    const uint64_t sp = txn->Savepoint();
    auto loader = txn->BulkInsert(t_);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int64_t id = 0; id < 1500; ++id) ASSERT_OK((*loader)->Add(RowOf(id)));
    EXPECT_TRUE((*loader)->Add(RowOf(1499)).IsAlreadyExists());  // a duplicate changes nothing
    ASSERT_OK(txn->RollbackTo(sp));
    EXPECT_FALSE((*loader)->Add(RowOf(2000)).ok()) << "a loader rolled back took a row";
    EXPECT_TRUE(ScanAll(txn.get(), t_).empty());
    // The table is pristine again: the same transaction loads it anew.
    Load(txn.get(), t_, 100, 200);
    ASSERT_OK(txn->Insert(t_, RowOf(7)));
    ASSERT_OK(txn->Commit());
    ExpectRows(101);
  }
}

// A claim that fails its checks hides nothing from the table's users,
// also while it is being made (a reader in another thread).
TEST_F(BulkInsertTest, ARefusedClaimHidesNothing) {
  auto user = db_->Begin(Isolation::kReadCommitted);
  ASSERT_OK(user->Insert(t_, RowOf(1)));
  std::atomic<bool> stop{false};
  std::atomic<int> hidden{0}, reads{0};
  std::thread reader([&] {
    while (!stop.load()) {
      auto got = user->Get(t_, {int64_t{1}});
      if (!got.ok() || !got->has_value()) ++hidden;
      ++reads;
    }
  });
  for (int i = 0; i < 300 || reads.load() < 300; ++i) {
    auto txn = db_->Begin();
    EXPECT_TRUE(txn->BulkInsert(t_).status().IsBusy());
    ASSERT_OK(txn->Rollback());
  }
  stop = true;
  reader.join();
  EXPECT_EQ(hidden.load(), 0) << "the user's own row was hidden";
  ASSERT_OK(user->Commit());
}

// A statement that reads the table it bulk-inserts into (INSERT ... SELECT
// ... LEFT JOIN the target) finishes the load at its first read; its
// remaining rows go in one by one and nothing is lost.
TEST_F(BulkInsertTest, ReadingTheTableMidLoadFinishesItAndTheRestGoesInRowByRow) {
  auto txn = db_->Begin();
  auto loader = txn->BulkInsert(t_);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  for (int64_t id = 0; id < 1000; ++id) {
    ASSERT_OK((*loader)->Add(RowOf(id)));
    if (id % 250 == 249) {
      auto got = txn->Get(t_, {id});
      ASSERT_TRUE(got.ok() && got->has_value()) << "its own row " << id;
    }
  }
  ASSERT_OK((*loader)->Finish());
  ASSERT_OK(txn->Commit());
  ExpectRows(1000);
}

// Waiting for a bulk writer's table is a lock wait: a cycle through it is
// a deadlock, found at once (the request closing it is the victim).
TEST_F(BulkInsertTest, AWaitForTheTableTakesPartInDeadlockDetection) {
  auto other_table = db_->CreateTable(test::SampleTable("s"));
  ASSERT_TRUE(other_table.ok());
  Table* s = *other_table;
  {
    auto setup = db_->Begin();
    ASSERT_OK(setup->Insert(s, RowOf(1)));
    ASSERT_OK(setup->Commit());
  }
  auto writer = db_->Begin();
  Load(writer.get(), t_, 0, 100);
  auto other = db_->Begin();
  ASSERT_OK(other->Update(s, RowOf(1), SampleRow(1, 2, "u1", "theirs")));
  const uint64_t waits = db_->Stats().lock_waits;
  auto waiting = std::async(std::launch::async, [&] { return other->Insert(t_, RowOf(500)); });
  while (db_->Stats().lock_waits == waits) std::this_thread::sleep_for(1ms);  // it waits now
  const Status st = writer->Update(s, RowOf(1), SampleRow(1, 3, "u1", "mine"));
  EXPECT_TRUE(st.IsDeadlock()) << st.ToString();  // rolled back: the table is free
  ASSERT_OK(waiting.get());
  ASSERT_OK(other->Commit());
  ExpectRows(1);
}

// A savepoint is never inside a load: taking one finishes the load, and
// the later rows go in one by one, so a rollback to it undoes exactly them.
// A statement that fails on another table leaves the load open.
TEST_F(BulkInsertTest, ASavepointFinishesTheLoadSoItsRollbackIsExact) {
  auto other_table = db_->CreateTable(test::SampleTable("s"));
  ASSERT_TRUE(other_table.ok());
  auto txn = db_->Begin();
  auto loader = txn->BulkInsert(t_);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  ASSERT_OK((*loader)->Add(RowOf(1)));
  ASSERT_OK(txn->Insert(*other_table, RowOf(1)));
  EXPECT_TRUE(txn->Insert(*other_table, RowOf(1)).IsAlreadyExists());  // a failed statement
  ASSERT_OK((*loader)->Add(RowOf(2)));
  const uint64_t before = db_->Stats().bulk_built_entries;
  const uint64_t sp = txn->Savepoint();
  EXPECT_GT(db_->Stats().bulk_built_entries, before) << "the savepoint left the load open";
  ASSERT_OK((*loader)->Add(RowOf(3)));  // one by one now
  ASSERT_OK(txn->RollbackTo(sp));
  ASSERT_OK(txn->Commit());
  auto check = db_->Begin();
  const std::vector<Row> rows = ScanAll(check.get(), t_);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1], RowOf(2));
  ASSERT_OK(check->Commit());
}

// A change of a loaded row taken back by a rollback to a savepoint hands the
// row's version to a stand-in (VersionStore::HandOver); the rollback of the
// load then drops that version too: no snapshot finds the row whose load
// was rolled back, even while an older snapshot holds the purge back.
TEST_F(BulkInsertTest, ARolledBackLoadLeavesNoVersionOfItsRows) {
  auto older = db_->Begin();
  older->TakeSnapshot();
  auto txn = db_->Begin();
  Load(txn.get(), t_, 0, 3);
  const uint64_t sp = txn->Savepoint();
  Row changed = RowOf(1);
  changed[3] = std::string("changed, taken back");
  ASSERT_OK(txn->Update(t_, RowOf(1), changed));
  ASSERT_OK(txn->RollbackTo(sp));
  ASSERT_OK(txn->Rollback());
  auto check = db_->Begin();
  auto got = check->Get(t_, {int64_t{1}});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_FALSE(got->has_value());
  for (uint32_t index = 0; index < 3; ++index) {
    EXPECT_EQ(ScanAll(check.get(), t_, index).size(), 0u) << "index " << index;
  }
  ASSERT_OK(check->Commit());
  EXPECT_EQ(ScanAll(older.get(), t_).size(), 0u);
  ASSERT_OK(older->Commit());
}

// A snapshot older than a bulk insert's commit reads the table empty, so it
// may not change the table (it would not see its own rows): retry.
TEST_F(BulkInsertTest, ASnapshotOlderThanTheLoadMayNotChangeTheTable) {
  auto older = SnapshotBeforeALoadOf(10);
  EXPECT_TRUE(ScanAll(older.get(), t_).empty());
  EXPECT_TRUE(older->Insert(t_, RowOf(100)).IsTableChanged());
  ASSERT_OK(older->Rollback());
  auto newer = db_->Begin();
  ASSERT_OK(newer->Insert(t_, RowOf(100)));
  ASSERT_OK(newer->Commit());
  ExpectRows(11);
}

// A load that added no row changes nothing for older snapshots.
TEST_F(BulkInsertTest, AnEmptyLoadHidesNothing) {
  auto older = SnapshotBeforeALoadOf(0);
  ASSERT_OK(older->Insert(t_, RowOf(5)));
  EXPECT_EQ(ScanAll(older.get(), t_).size(), 1u);
  ASSERT_OK(older->Commit());
  ExpectRows(1);
}

TEST_F(BulkInsertTest, ACommitFinishesAnOpenLoader) {
  auto txn = db_->Begin();
  auto loader = txn->BulkInsert(t_);
  ASSERT_TRUE(loader.ok()) << loader.status().ToString();
  for (int64_t id = 0; id < 800; ++id) ASSERT_OK((*loader)->Add(RowOf(id)));
  ASSERT_OK(txn->Commit());  // secondary indexes are built from their sorted runs here
  EXPECT_FALSE((*loader)->Add(RowOf(900)).ok());
  ExpectRows(800);
}

}  // namespace
}  // namespace subito
