// Isolation at READ COMMITTED and REPEATABLE READ: dirty reads, non-
// repeatable reads, phantoms, lost updates, deadlocks, lock wait timeouts,
// a long snapshot while writers go on, and purge of old versions.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;

class IsolationTest : public ::testing::TestWithParam<Isolation> {
 protected:
  void SetUp() override {
    Options o = test::SmallOptions(dir_.path());
    o.lock_wait_timeout_ms = 1000;
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    auto t = db_->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    t_ = *t;
    auto txn = db_->Begin();
    for (int i = 0; i < 10; ++i) ASSERT_OK(txn->Insert(t_, R(i, "v0")));
    ASSERT_OK(txn->Commit());
  }
  static subito::Row R(int64_t id, const std::string& v, uint64_t k = 0) {
    return SampleRow(id, k, std::nullopt, v);
  }
  std::string V(Transaction* txn, int64_t id, ReadMode mode = ReadMode::kSnapshot) {
    auto r = txn->Get(t_, {id}, mode);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (!r.ok() || !r->has_value()) return "<none>";
    return std::get<std::string>((**r)[3]);
  }
  size_t Count(Transaction* txn) { return test::ScanAll(txn, t_).size(); }
  bool rc() const { return GetParam() == Isolation::kReadCommitted; }

  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
  Table* t_ = nullptr;
};

TEST_P(IsolationTest, NoDirtyReads) {
  auto writer = db_->Begin(GetParam());
  auto reader = db_->Begin(GetParam());
  ASSERT_OK(writer->Update(t_, R(1, ""), R(1, "dirty")));
  ASSERT_OK(writer->Insert(t_, R(100, "new")));
  ASSERT_OK(writer->Delete(t_, R(2, "")));
  EXPECT_EQ(V(reader.get(), 1), "v0");
  EXPECT_EQ(V(reader.get(), 100), "<none>");
  EXPECT_EQ(V(reader.get(), 2), "v0");
  EXPECT_EQ(Count(reader.get()), 10u);
  EXPECT_EQ(V(writer.get(), 1), "dirty");  // its own writes
  ASSERT_OK(writer->Rollback());
  EXPECT_EQ(V(reader.get(), 1), "v0");
  ASSERT_OK(reader->Commit());
}

TEST_P(IsolationTest, NonRepeatableReadOnlyAtReadCommitted) {
  auto reader = db_->Begin(GetParam());
  EXPECT_EQ(V(reader.get(), 1), "v0");
  auto writer = db_->Begin(GetParam());
  ASSERT_OK(writer->Update(t_, R(1, ""), R(1, "v1")));
  ASSERT_OK(writer->Commit());
  EXPECT_EQ(V(reader.get(), 1), rc() ? "v1" : "v0");
  // A locking read always sees the newest committed version.
  EXPECT_EQ(V(reader.get(), 1, ReadMode::kShared), "v1");
  ASSERT_OK(reader->Commit());
}

// With statements, a READ COMMITTED statement reads one snapshot (taken at
// its first read) however many reads it makes; the next statement sees
// what was committed meanwhile. A cursor keeps its snapshot past the
// statement, while purge runs.
TEST_P(IsolationTest, ReadCommittedStatementsReadOneSnapshot) {
  auto reader = db_->Begin(GetParam());
  reader->StartStatement();
  EXPECT_EQ(V(reader.get(), 1), "v0");
  auto writer = db_->Begin(GetParam());
  ASSERT_OK(writer->Update(t_, R(1, ""), R(1, "v1")));
  ASSERT_OK(writer->Insert(t_, R(50, "new")));
  ASSERT_OK(writer->Commit());
  EXPECT_EQ(V(reader.get(), 1), "v0") << "the same statement";
  EXPECT_EQ(Count(reader.get()), 10u);
  auto cursor = reader->OpenCursor(t_, 0);
  ASSERT_TRUE(cursor.ok());
  reader->StartStatement();
  EXPECT_EQ(V(reader.get(), 1), rc() ? "v1" : "v0");
  EXPECT_EQ(Count(reader.get()), rc() ? 11u : 10u);
  // The older statement's cursor still reads its snapshot after purge.
  for (int i = 0; i < 3; ++i) {
    auto w = db_->Begin(GetParam());
    ASSERT_OK(w->Update(t_, R(1, ""), R(1, "v" + std::to_string(i + 2))));
    ASSERT_OK(w->Commit());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // purge runs every 10 ms
  ASSERT_OK((*cursor)->Seek(SeekOp::kEq, {int64_t{1}}));
  ASSERT_TRUE((*cursor)->Valid());
  EXPECT_EQ(std::get<std::string>((*cursor)->row()[3]), "v0");
  cursor->reset();
  ASSERT_OK(reader->Commit());
}

TEST_P(IsolationTest, PhantomsOnlyAtReadCommitted) {
  auto reader = db_->Begin(GetParam());
  EXPECT_EQ(Count(reader.get()), 10u);
  auto writer = db_->Begin(GetParam());
  ASSERT_OK(writer->Insert(t_, R(50, "phantom")));
  ASSERT_OK(writer->Delete(t_, R(3, "")));
  ASSERT_OK(writer->Insert(t_, R(51, "phantom")));
  ASSERT_OK(writer->Commit());
  EXPECT_EQ(Count(reader.get()), rc() ? 11u : 10u);
  auto c = reader->OpenCursor(t_, 0);
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{3}}));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_EQ(std::get<int64_t>((*c)->row()[0]), rc() ? 4 : 3);
  ASSERT_OK(reader->Commit());
}

// Ids a locking read of the primary key meets from `from` on, up to and
// including the first past `to` (the handler reads that one and stops).
std::vector<int64_t> LockingScan(Transaction* txn, Table* t, int64_t from, int64_t to,
                                 ReadMode mode = ReadMode::kExclusive) {
  std::vector<int64_t> ids;
  auto c = txn->OpenCursor(t, 0, mode);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return ids;
  Status s = (*c)->Seek(SeekOp::kGE, {from});
  while (s.ok() && (*c)->Valid()) {
    ids.push_back(std::get<int64_t>((*c)->row()[0]));
    if (ids.back() > to) break;
    s = (*c)->Next();
  }
  EXPECT_TRUE(s.ok()) << s.ToString();
  return ids;
}

// A locking read through `index` of `reader` (which will not wait) from
// `from` on: it returns the row `first_id`, and its next step times out on
// a row another transaction holds.
void ReadOneThenTimeOut(Transaction* reader, Table* t, uint32_t index, const Row& from,
                        int64_t first_id) {
  reader->SetLockWaitTimeout(std::chrono::milliseconds(0));
  auto c = reader->OpenCursor(t, index, ReadMode::kExclusive);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_OK((*c)->Seek(SeekOp::kGE, from));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_EQ(std::get<int64_t>((*c)->row()[0]), first_id);
  Status next = (*c)->Next();
  EXPECT_TRUE(next.IsTimedOut()) << next.ToString();
}

// Next-key locking: at REPEATABLE READ a locking read's range blocks other
// transactions' inserts into it until it ends (no phantom); READ COMMITTED
// locks the rows it read only, as InnoDB.
TEST_P(IsolationTest, LockingReadsBlockPhantomsOnlyAtRepeatableRead) {
  // Gaps (20, 22) and (30, 32): keys never stored there (a deleted one
  // still in the version store would be locked as a row).
  auto setup = db_->Begin(GetParam());
  for (int64_t id : {20, 22, 30, 32}) ASSERT_OK(setup->Insert(t_, R(id, "")));
  ASSERT_OK(setup->Commit());
  for (auto [mode, low] :
       {std::pair{ReadMode::kExclusive, int64_t{20}}, std::pair{ReadMode::kShared, int64_t{30}}}) {
    auto reader = db_->Begin(GetParam());
    EXPECT_EQ(LockingScan(reader.get(), t_, low, low, mode), (std::vector<int64_t>{low, low + 2}));
    auto writer = db_->Begin(GetParam());
    auto phantom =
        std::async(std::launch::async, [&] { return writer->Insert(t_, R(low + 1, "p")); });
    EXPECT_EQ(phantom.wait_for(std::chrono::milliseconds(rc() ? 5000 : 200)),
              rc() ? std::future_status::ready : std::future_status::timeout);
    auto outside = db_->Begin(GetParam());
    ASSERT_OK(outside->Insert(t_, R(100 + low, "beyond the range")));  // never waits
    ASSERT_OK(outside->Commit());
    if (rc()) {  // the insert went in; committed, the next locking read meets it
      ASSERT_OK(phantom.get());
      ASSERT_OK(writer->Commit());
    }
    const std::vector<int64_t> again = LockingScan(reader.get(), t_, low, low, mode);
    EXPECT_EQ(again,
              rc() ? std::vector<int64_t>({low, low + 1}) : std::vector<int64_t>({low, low + 2}));
    ASSERT_OK(reader->Commit());
    if (!rc()) {  // the reader's end lets the insert in
      ASSERT_OK(phantom.get());
      ASSERT_OK(writer->Commit());
    }
  }
}

// A locking read whose key lock fails keeps no range it took on its way to
// that key (L11), as InnoDB's next-key request (gap and record) keeps
// nothing when its wait times out: an insert into the gap before the held
// key goes in at once. The range up to the key it read stays.
TEST_P(IsolationTest, ALockingReadThatTimesOutKeepsNoRangeBeforeItsKey) {
  auto setup = db_->Begin(GetParam());
  for (int64_t id : {20, 30}) ASSERT_OK(setup->Insert(t_, R(id, "")));
  ASSERT_OK(setup->Commit());
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(30, ""), R(30, "held")));
  auto reader = db_->Begin(GetParam());
  ReadOneThenTimeOut(reader.get(), t_, 0, {int64_t{15}}, 20);
  auto writer = db_->Begin(GetParam());
  writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
  ASSERT_OK(writer->Insert(t_, R(25, "in the gap before the held key")));
  Status before_read = writer->Insert(t_, R(17, "in the range read"));
  if (rc()) {
    ASSERT_OK(before_read);  // READ COMMITTED holds rows only
  } else {
    EXPECT_TRUE(before_read.IsTimedOut()) << before_read.ToString();
  }
  ASSERT_OK(writer->Commit());
  ASSERT_OK(reader->Commit());
  ASSERT_OK(holder->Commit());
}

// Through a secondary index, the entry's own lock is the next-key lock
// InnoDB takes on the secondary record: once it is granted, a wait for the
// row behind it that times out keeps the range before the entry (L11).
TEST_P(IsolationTest, ASecondaryReadKeepsItsRangeWhenOnlyTheRowWaitFails) {
  auto setup = db_->Begin(GetParam());
  for (int64_t id : {20, 30}) ASSERT_OK(setup->Insert(t_, R(id, "", 100 + id)));
  ASSERT_OK(setup->Commit());
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(30, "", 130), R(30, "held", 130)));  // the row, not its entry
  auto reader = db_->Begin(GetParam());
  ReadOneThenTimeOut(reader.get(), t_, 1, {uint64_t{115}}, 20);
  auto writer = db_->Begin(GetParam());
  writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
  Status in_gap = writer->Insert(t_, R(25, "before the entry read", 125));
  if (rc()) {
    ASSERT_OK(in_gap);  // READ COMMITTED holds rows only
  } else {
    EXPECT_TRUE(in_gap.IsTimedOut()) << in_gap.ToString();
  }
  ASSERT_OK(writer->Commit());
  ASSERT_OK(reader->Commit());
  ASSERT_OK(holder->Commit());
}

// An entry another transaction inserted and has not committed is, in
// InnoDB, implicitly locked by it: a locking read's request waits on the
// secondary record itself and keeps nothing when the wait fails. So the
// inserter's own locking read of its entry, and an insert into the gap
// before it, do not wait for the reader that timed out (L11).
TEST_P(IsolationTest, ASecondaryReadThatTimesOutOnAnUncommittedEntryKeepsNothing) {
  auto setup = db_->Begin(GetParam());
  ASSERT_OK(setup->Insert(t_, R(20, "", 120)));
  ASSERT_OK(setup->Commit());
  auto inserter = db_->Begin(GetParam());
  ASSERT_OK(inserter->Insert(t_, R(25, "uncommitted", 125)));
  auto reader = db_->Begin(GetParam());
  ReadOneThenTimeOut(reader.get(), t_, 1, {uint64_t{115}}, 20);
  // SKIP LOCKED passes over it and keeps nothing of it either.
  auto skipper = db_->Begin(GetParam());
  {
    auto c = skipper->OpenCursor(t_, 1, ReadMode::kExclusiveSkipLocked);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::vector<int64_t> ids;
    Status st = (*c)->Seek(SeekOp::kGE, {uint64_t{115}});
    while (st.ok() && (*c)->Valid()) {
      ids.push_back(std::get<int64_t>((*c)->row()[0]));
      st = (*c)->Next();
    }
    ASSERT_OK(st);
    EXPECT_TRUE(ids.empty()) << "20 is the reader's, 25 the inserter's";
  }
  inserter->SetLockWaitTimeout(std::chrono::milliseconds(0));
  auto own = inserter->OpenCursor(t_, 1, ReadMode::kExclusive);
  ASSERT_TRUE(own.ok()) << own.status().ToString();
  ASSERT_OK((*own)->Seek(SeekOp::kEq, {uint64_t{125}}));
  ASSERT_TRUE((*own)->Valid());
  EXPECT_EQ(std::get<int64_t>((*own)->row()[0]), 25);
  own->reset();
  ASSERT_OK(inserter->Insert(t_, R(23, "in the gap before it", 123)));
  ASSERT_OK(inserter->Commit());
  ASSERT_OK(reader->Commit());
  ASSERT_OK(skipper->Commit());
}

// A range read told its end (SetEnd) locks the first entry past it as
// InnoDB locks it: through a secondary index in shared mode the entry
// alone, so a row another transaction holds there makes no wait; in
// exclusive mode the row too. At REPEATABLE READ the range up to that
// entry stays locked either way.
TEST_P(IsolationTest, ARangeReadLocksTheEntryPastItsEndAsInnoDB) {
  auto setup = db_->Begin(GetParam());
  for (int64_t id : {20, 30}) ASSERT_OK(setup->Insert(t_, R(id, "", 100 + id)));
  ASSERT_OK(setup->Commit());
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(30, "", 130), R(30, "held", 130)));
  for (ReadMode mode : {ReadMode::kShared, ReadMode::kExclusive}) {
    auto reader = db_->Begin(GetParam());
    reader->SetLockWaitTimeout(std::chrono::milliseconds(0));
    auto c = reader->OpenCursor(t_, 1, mode);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    Result<std::string> end = (*c)->EncodeKey({uint64_t{125}});
    ASSERT_TRUE(end.ok()) << end.status().ToString();
    (*c)->SetEnd(*end, /*inclusive=*/true);
    ASSERT_OK((*c)->Seek(SeekOp::kGE, {uint64_t{115}}));
    ASSERT_TRUE((*c)->Valid());
    EXPECT_EQ(std::get<int64_t>((*c)->row()[0]), 20);
    Status next = (*c)->Next();
    if (mode == ReadMode::kShared) {
      ASSERT_OK(next);
      EXPECT_FALSE((*c)->Valid()) << "the entry past the end is locked, not returned";
    } else {
      EXPECT_TRUE(next.IsTimedOut()) << next.ToString();
    }
    if (mode == ReadMode::kShared && !rc()) {
      auto writer = db_->Begin(GetParam());
      writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
      Status in_range = writer->Insert(t_, R(27, "before the entry past the end", 127));
      EXPECT_TRUE(in_range.IsTimedOut()) << in_range.ToString();
      ASSERT_OK(writer->Commit());
    }
    ASSERT_OK(reader->Commit());
  }
  // Shared, with an exclusive end at the held row's entry: past the range.
  auto reader = db_->Begin(GetParam());
  reader->SetLockWaitTimeout(std::chrono::milliseconds(0));
  auto open = [&](Transaction* txn, uint64_t end, bool inclusive) {
    auto c = txn->OpenCursor(t_, 1, ReadMode::kShared);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    Result<std::string> e = (*c)->EncodeKey({end});
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    (*c)->SetEnd(*e, inclusive);
    EXPECT_OK((*c)->Seek(SeekOp::kGE, {uint64_t{115}}));
    EXPECT_TRUE((*c)->Valid());
    return std::move(*c);
  };
  auto c = open(reader.get(), 130, false);
  ASSERT_OK(c->Next());
  EXPECT_FALSE(c->Valid());
  c.reset();
  ASSERT_OK(reader->Commit());
  ASSERT_OK(holder->Commit());
  // An entry past the end that another transaction inserted and has not
  // committed is its implicit lock in InnoDB: the read waits for it.
  auto inserter = db_->Begin(GetParam());
  ASSERT_OK(inserter->Insert(t_, R(25, "uncommitted", 125)));
  auto waiter = db_->Begin(GetParam());
  waiter->SetLockWaitTimeout(std::chrono::milliseconds(0));
  c = open(waiter.get(), 122, true);
  Status next = c->Next();
  EXPECT_TRUE(next.IsTimedOut()) << next.ToString();
  c.reset();
  ASSERT_OK(waiter->Commit());
  ASSERT_OK(inserter->Commit());
}

// "Lock, look, then insert" at REPEATABLE READ: an insert that waits for
// another transaction's range holds no lock on its key meanwhile, so the
// range's owner may look the key up and insert it itself; the waiting
// insert then meets the duplicate (as InnoDB, where no deadlock occurs).
TEST_P(IsolationTest, AnInsertWaitingForARangeHoldsNoLockOnItsKey) {
  if (rc()) {
    auto reader = db_->Begin(GetParam());
    EXPECT_EQ(LockingScan(reader.get(), t_, 8, 100), (std::vector<int64_t>{8, 9}));
    auto writer = db_->Begin(GetParam());
    ASSERT_OK(writer->Insert(t_, R(20, "w")));  // READ COMMITTED: rows only
    ASSERT_OK(writer->Commit());
    ASSERT_OK(reader->Commit());
    return;
  }
  auto owner = db_->Begin(GetParam());
  EXPECT_EQ(LockingScan(owner.get(), t_, 8, 100), (std::vector<int64_t>{8, 9}));
  auto other = db_->Begin(GetParam());
  auto waiting = std::async(std::launch::async, [&] { return other->Insert(t_, R(20, "other")); });
  ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  EXPECT_EQ(V(owner.get(), 20, ReadMode::kExclusive), "<none>");  // no wait, no deadlock
  ASSERT_OK(owner->Insert(t_, R(20, "owner")));
  ASSERT_OK(owner->Commit());
  EXPECT_TRUE(waiting.get().IsAlreadyExists());
  ASSERT_OK(other->Commit());
}

// A locking read through a secondary index waits for a row whose entry
// another transaction moved away and has not committed: its rollback puts
// the entry back into the range read.
TEST_P(IsolationTest, LockingReadsOfASecondaryIndexWaitForAnUncommittedMove) {
  auto setup = db_->Begin(GetParam());
  ASSERT_OK(setup->Update(t_, R(1, ""), R(1, "v0", 5)));
  ASSERT_OK(setup->Commit());
  auto mover = db_->Begin(GetParam());
  ASSERT_OK(mover->Update(t_, R(1, ""), R(1, "v0", 100)));
  auto reader = db_->Begin(GetParam());
  auto scan = std::async(std::launch::async, [&] {
    std::vector<int64_t> ids;
    auto c = reader->OpenCursor(t_, 1, ReadMode::kExclusive);  // index k
    if (!c.ok()) return ids;
    Status s = (*c)->Seek(SeekOp::kGE, {uint64_t{1}});
    while (s.ok() && (*c)->Valid() && std::get<uint64_t>((*c)->row()[1]) <= 10) {
      ids.push_back(std::get<int64_t>((*c)->row()[0]));
      s = (*c)->Next();
    }
    if (!s.ok()) ids.push_back(-1);
    return ids;
  });
  EXPECT_EQ(scan.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
  ASSERT_OK(mover->Rollback());
  EXPECT_EQ(scan.get(), (std::vector<int64_t>{1}));
  ASSERT_OK(reader->Commit());
}

// InnoDB's duplicate check takes a row lock only: an insert of a key that
// exists does not wait for a range that reaches it, and a prefix seek's
// range stops before the first key past its prefix.
TEST_P(IsolationTest, AnInsertOfAnExistingKeyDoesNotWaitForRanges) {
  auto reader = db_->Begin(GetParam());
  auto c = reader->OpenCursor(t_, 0, ReadMode::kExclusive);
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kEq, {int64_t{-5}}));  // misses: locks [-5, 0), not row 0
  EXPECT_FALSE((*c)->Valid());
  auto writer = db_->Begin(GetParam());
  writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
  EXPECT_TRUE(writer->Insert(t_, R(0, "dup")).IsAlreadyExists());  // at once
  if (rc()) {
    ASSERT_OK(writer->Insert(t_, R(-3, "x")));
  } else {
    EXPECT_TRUE(writer->Insert(t_, R(-3, "x")).IsTimedOut());
  }
  ASSERT_OK(writer->Rollback());
  ASSERT_OK(reader->Commit());
}

// A locking read through a secondary index passes over an entry whose move
// committed, without the row's lock (another transaction may hold it).
TEST_P(IsolationTest, LockingReadsPassOverEntriesMovedByCommittedTransactions) {
  auto old_snapshot = db_->Begin(GetParam());
  EXPECT_EQ(V(old_snapshot.get(), 1), "v0");  // keeps the moved entry in the version store
  auto mover = db_->Begin(GetParam());
  ASSERT_OK(mover->Update(t_, R(1, ""), R(1, "v0", 100)));
  ASSERT_OK(mover->Commit());
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(1, ""), R(1, "held", 100)));
  auto reader = db_->Begin(GetParam());
  reader->SetLockWaitTimeout(std::chrono::milliseconds(0));
  auto c = reader->OpenCursor(t_, 1, ReadMode::kExclusive);  // index k
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {uint64_t{0}}));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_NE(std::get<int64_t>((*c)->row()[0]), 1);
  ASSERT_OK(reader->Rollback());
  ASSERT_OK(holder->Rollback());
  ASSERT_OK(old_snapshot->Commit());
}

// Under racing inserts, a locking read at REPEATABLE READ reads its range
// the same twice (no phantom slips between an insert's checks, L8). A read
// that meets an insert caught between its checks may be a deadlock victim
// (the insert waits for its range, it for the insert's row); it retries.
TEST_P(IsolationTest, LockingReadsRepeatUnderRacingInserts) {
  std::atomic<bool> stop{false};
  std::atomic<int> inserted{0};
  std::thread inserter([&] {
    for (int64_t id = 1000; !stop.load(); ++id) {
      auto w = db_->Begin(GetParam());
      w->SetLockWaitTimeout(std::chrono::milliseconds(100));
      if (w->Insert(t_, R(id, "racing")).ok() && w->Commit().ok()) ++inserted;
      w.reset();
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
  });
  // The ids a locking read of [900, end) meets, or nothing if it failed.
  auto scan = [&](Transaction* txn) -> std::optional<std::vector<int64_t>> {
    std::vector<int64_t> ids;
    auto c = txn->OpenCursor(t_, 0, ReadMode::kExclusive);
    if (!c.ok()) return std::nullopt;
    Status st = (*c)->Seek(SeekOp::kGE, {int64_t{900}});
    for (; st.ok() && (*c)->Valid(); st = (*c)->Next()) {
      ids.push_back(std::get<int64_t>((*c)->row()[0]));
    }
    if (!st.ok()) return std::nullopt;
    return ids;
  };
  int phantoms = 0, compared = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((compared < 50 || inserted.load() < 20) && std::chrono::steady_clock::now() < deadline) {
    auto reader = db_->Begin(GetParam());
    const auto first = scan(reader.get());
    std::this_thread::yield();
    const auto second = first ? scan(reader.get()) : std::nullopt;
    if (first && second) {
      ++compared;
      if (*first != *second) ++phantoms;
    }
    (void)reader->Rollback();
  }
  stop = true;
  inserter.join();
  EXPECT_GE(compared, 50);
  EXPECT_GE(inserted.load(), 20);
  if (!rc()) {
    EXPECT_EQ(phantoms, 0);  // READ COMMITTED allows them, as InnoDB
  }
}

// A locking read that stops at the index's end locks up to it, and a wait
// for a range joins the deadlock detection.
TEST_P(IsolationTest, RangeLocksReachTheEndAndTakePartInDeadlocks) {
  auto reader = db_->Begin(GetParam());
  EXPECT_EQ(LockingScan(reader.get(), t_, 8, 100), (std::vector<int64_t>{8, 9}));
  auto writer = db_->Begin(GetParam());
  ASSERT_OK(writer->Update(t_, R(1, ""), R(1, "w")));
  if (rc()) {  // rows only: the insert goes in at once
    ASSERT_OK(writer->Insert(t_, R(1000, "x")));
    ASSERT_OK(writer->Commit());
    ASSERT_OK(reader->Commit());
    return;
  }
  EXPECT_TRUE(writer->Insert(t_, R(1000, "x")).IsTimedOut());  // past the last key
  // reader waits for writer's row 1, writer's insert into the range closes
  // the cycle: the inserter is the victim, rolled back whole.
  auto waiting =
      std::async(std::launch::async, [&] { return V(reader.get(), 1, ReadMode::kShared); });
  while (db_->Stats().lock_waits < 2) std::this_thread::yield();
  Status s = writer->Insert(t_, R(50, "x"));
  EXPECT_TRUE(s.IsDeadlock()) << s.ToString();
  EXPECT_EQ(waiting.get(), "v0");
  ASSERT_OK(reader->Commit());
  EXPECT_TRUE(writer->Commit().IsInvalidArgument());
}

// A write rolled back to a savepoint gives the transaction back its
// snapshot's version, not the newest one its write had read.
TEST_P(IsolationTest, RollbackToSavepointRestoresTheSnapshotView) {
  auto reader = db_->Begin(GetParam());
  EXPECT_EQ(V(reader.get(), 1), "v0");
  auto writer = db_->Begin(GetParam());
  ASSERT_OK(writer->Update(t_, R(1, ""), R(1, "v1")));
  ASSERT_OK(writer->Delete(t_, R(2, "")));
  ASSERT_OK(writer->Commit());
  const uint64_t sp = reader->Savepoint();
  ASSERT_OK(reader->Update(t_, R(1, ""), R(1, "mine")));
  ASSERT_OK(reader->Insert(t_, R(2, "mine")));
  EXPECT_EQ(V(reader.get(), 1), "mine");
  ASSERT_OK(reader->RollbackTo(sp));
  EXPECT_EQ(V(reader.get(), 1), rc() ? "v1" : "v0");
  EXPECT_EQ(V(reader.get(), 2), rc() ? "<none>" : "v0");
  ASSERT_OK(reader->Commit());
}

// A rollback to a savepoint gives up the locks its inserts took (InnoDB's
// implicit locks go with the records a rollback removes): another
// transaction may insert the same primary key and unique value at once.
// Locks the transaction had before its insert (a locking read, an earlier
// write of the key) and locks of rows that existed stay, as InnoDB's
// explicit locks do.
TEST_P(IsolationTest, ARollbackToASavepointReleasesTheLocksOfItsInserts) {
  using std::chrono::milliseconds;
  auto t1 = db_->Begin(GetParam());
  t1->SetLockWaitTimeout(milliseconds(0));
  EXPECT_EQ(V(t1.get(), 100), "<none>");  // the snapshot (REPEATABLE READ)
  ASSERT_OK(t1->Insert(t_, SampleRow(100, 1, "a", "kept")));
  ASSERT_OK(t1->Delete(t_, R(7, "")));
  const uint64_t sp = t1->Savepoint();
  ASSERT_OK(t1->Insert(t_, SampleRow(101, 2, "b", "taken back")));
  ASSERT_OK(t1->Update(t_, SampleRow(101, 0, std::nullopt, ""),
                       SampleRow(101, 3, "c", "taken back, changed")));
  ASSERT_OK(t1->Update(t_, R(5, ""), R(5, "taken back")));
  ASSERT_OK(t1->Insert(t_, R(7, "again, taken back")));
  EXPECT_EQ(V(t1.get(), 200, ReadMode::kExclusive), "<none>");  // locks a missing key
  ASSERT_OK(t1->Insert(t_, R(200, "taken back")));
  ASSERT_OK(t1->RollbackTo(sp));

  auto t2 = db_->Begin(GetParam());
  t2->SetLockWaitTimeout(milliseconds(0));
  ASSERT_OK(t2->Insert(t_, SampleRow(101, 4, "c", "t2")));               // 101 and "c": given up
  ASSERT_OK(t2->Insert(t_, SampleRow(102, 5, "b", "t2")));               // "b": given up
  EXPECT_TRUE(t2->Insert(t_, SampleRow(103, 6, "a", "")).IsTimedOut());  // before the savepoint
  EXPECT_TRUE(t2->Insert(t_, R(100, "")).IsTimedOut());
  EXPECT_TRUE(t2->Update(t_, R(5, ""), R(5, "t2")).IsTimedOut());  // a row that existed
  EXPECT_TRUE(t2->Insert(t_, R(7, "t2")).IsTimedOut());            // t1 deleted it before
  EXPECT_TRUE(t2->Insert(t_, R(200, "t2")).IsTimedOut());          // locked by t1's read first
  EXPECT_EQ(V(t2.get(), 101), "t2");
  ASSERT_OK(t2->Commit());

  // t1 reads its snapshot (REPEATABLE READ: without t2's rows), never its
  // own changes taken back; its locking reads see t2's rows.
  EXPECT_EQ(V(t1.get(), 101), rc() ? "t2" : "<none>");
  EXPECT_EQ(V(t1.get(), 102), rc() ? "t2" : "<none>");
  EXPECT_EQ(V(t1.get(), 5), "v0");
  EXPECT_EQ(V(t1.get(), 7), "<none>");
  EXPECT_EQ(V(t1.get(), 101, ReadMode::kExclusive), "t2");
  ASSERT_OK(t1->Commit());

  auto after = db_->Begin(GetParam());
  EXPECT_EQ(V(after.get(), 100), "kept");
  EXPECT_EQ(V(after.get(), 101), "t2");
  EXPECT_EQ(V(after.get(), 102), "t2");
  EXPECT_EQ(V(after.get(), 7), "<none>");
  EXPECT_EQ(V(after.get(), 200), "<none>");
  // The unique index holds each value once, for the right row.
  std::map<std::string, int64_t> by_u;
  for (const Row& r : test::ScanAll(after.get(), t_, 2)) {
    if (std::holds_alternative<std::string>(r[2])) {
      EXPECT_TRUE(by_u.emplace(std::get<std::string>(r[2]), std::get<int64_t>(r[0])).second);
    }
  }
  EXPECT_EQ(by_u, (std::map<std::string, int64_t>{{"a", 100}, {"b", 102}, {"c", 101}}));
  ASSERT_OK(after->Commit());
}

// A locking read passes over keys whose inserts were taken back (by a
// rollback to a savepoint or of the whole transaction): they keep versions
// for older snapshots, but no row was committed there, so nothing is locked
// (InnoDB's rollback removes the records).
TEST_P(IsolationTest, LockingReadsPassOverInsertsTakenBack) {
  using std::chrono::milliseconds;
  auto older = db_->Begin(GetParam());
  older->TakeSnapshot();  // holds the versions back from the purge
  EXPECT_EQ(V(older.get(), 1), "v0");
  // READ COMMITTED has no transaction snapshot: an open cursor's holds the
  // versions instead (without it the purge may take them before the check
  // below, as it once did in an ASan run).
  auto holder = older->OpenCursor(t_, 0, ReadMode::kSnapshot);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  {
    auto whole = db_->Begin(GetParam());
    ASSERT_OK(whole->Insert(t_, R(100, "taken back")));
    ASSERT_OK(whole->Rollback());
    auto part = db_->Begin(GetParam());
    const uint64_t sp = part->Savepoint();
    ASSERT_OK(part->Insert(t_, R(101, "taken back")));
    ASSERT_OK(part->RollbackTo(sp));
    ASSERT_OK(part->Commit());
  }
  EXPECT_GT(db_->Stats().version_keys, 0u);
  auto scanner = db_->Begin(GetParam());
  auto c = scanner->OpenCursor(t_, 0, ReadMode::kExclusive);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  size_t rows = 0;
  Status st = (*c)->Seek(SeekOp::kFirst);
  for (; st.ok() && (*c)->Valid(); st = (*c)->Next()) ++rows;
  ASSERT_OK(st);
  EXPECT_EQ(rows, 10u);
  auto other = db_->Begin(GetParam());
  other->SetLockWaitTimeout(milliseconds(0));
  for (int64_t id : {100, 101}) {
    auto got = other->Get(t_, {id}, ReadMode::kExclusive);
    ASSERT_TRUE(got.ok()) << id << ": " << got.status().ToString();
    EXPECT_FALSE(got->has_value());
  }
  ASSERT_OK(other->Commit());
  ASSERT_OK(scanner->Commit());
  // An exact locking seek of such a key finds nothing, and at REPEATABLE
  // READ still keeps another transaction from inserting it (no phantom).
  auto exact = db_->Begin(GetParam());
  auto ec = exact->OpenCursor(t_, 0, ReadMode::kExclusive);
  ASSERT_TRUE(ec.ok()) << ec.status().ToString();
  ASSERT_OK((*ec)->Seek(SeekOp::kEq, {int64_t{100}}));
  EXPECT_FALSE((*ec)->Valid());
  auto inserter = db_->Begin(GetParam());
  inserter->SetLockWaitTimeout(milliseconds(0));
  const Status inserted = inserter->Insert(t_, R(100, "after the exact read"));
  if (rc()) {
    EXPECT_OK(inserted);
  } else {
    EXPECT_TRUE(inserted.IsTimedOut()) << inserted.ToString();
  }
  ASSERT_OK(inserter->Rollback());
  ASSERT_OK(exact->Commit());
  ASSERT_OK(older->Commit());
}

// An insert that meets a duplicate locks it shared, as InnoDB's duplicate
// check does (another transaction's duplicate check or locking read goes
// on; its write waits), or exclusively when the transaction replaces
// duplicates (REPLACE, ON DUPLICATE KEY UPDATE). Keys it locked for the row
// that did not go in are given up.
TEST_P(IsolationTest, ADuplicateIsLockedSharedUnlessDuplicatesAreReplaced) {
  using std::chrono::milliseconds;
  {
    auto setup = db_->Begin(GetParam());
    ASSERT_OK(setup->Insert(t_, SampleRow(50, 0, "w", "unique w")));
    ASSERT_OK(setup->Commit());
  }
  auto t1 = db_->Begin(GetParam());
  EXPECT_TRUE(t1->Insert(t_, R(1, "dup")).IsAlreadyExists());
  EXPECT_TRUE(t1->Insert(t_, SampleRow(60, 0, "w", "dup of w")).IsAlreadyExists());
  t1->SetReplacesDuplicates(true);
  EXPECT_TRUE(t1->Insert(t_, R(2, "dup, to replace")).IsAlreadyExists());

  auto t2 = db_->Begin(GetParam());
  t2->SetLockWaitTimeout(milliseconds(0));
  EXPECT_TRUE(t2->Insert(t_, R(1, "")).IsAlreadyExists());  // no wait
  EXPECT_EQ(V(t2.get(), 1, ReadMode::kShared), "v0");
  EXPECT_TRUE(t2->Update(t_, R(1, ""), R(1, "t2")).IsTimedOut());
  EXPECT_TRUE(t2->Insert(t_, SampleRow(61, 0, "w", "")).IsAlreadyExists());
  // t1's shared lock on the unique value keeps a change of it out.
  EXPECT_TRUE(t2->Delete(t_, SampleRow(50, 0, "w", "")).IsTimedOut());
  ASSERT_OK(t2->Insert(t_, R(60, "t2")));  // the key t1's failed row locked first
  EXPECT_TRUE(t2->Get(t_, {int64_t{2}}, ReadMode::kShared).status().IsTimedOut());
  ASSERT_OK(t2->Commit());
  ASSERT_OK(t1->Commit());
}

// A duplicate met by an insert leaves a lock the transaction held before
// as it was: a row locked for update stays locked exclusive (InnoDB keeps
// the stronger lock); a row it read shared stays shared.
TEST_P(IsolationTest, ADuplicateKeepsTheLockHeldBefore) {
  using std::chrono::milliseconds;
  auto t1 = db_->Begin(GetParam());
  EXPECT_EQ(V(t1.get(), 1, ReadMode::kExclusive), "v0");
  EXPECT_EQ(V(t1.get(), 2, ReadMode::kShared), "v0");
  EXPECT_TRUE(t1->Insert(t_, R(1, "dup")).IsAlreadyExists());
  EXPECT_TRUE(t1->Insert(t_, R(2, "dup")).IsAlreadyExists());
  auto t2 = db_->Begin(GetParam());
  t2->SetLockWaitTimeout(milliseconds(0));
  EXPECT_TRUE(t2->Get(t_, {int64_t{1}}, ReadMode::kShared).status().IsTimedOut());
  EXPECT_EQ(V(t2.get(), 2, ReadMode::kShared), "v0");
  EXPECT_TRUE(t2->Update(t_, R(2, ""), R(2, "t2")).IsTimedOut());
  ASSERT_OK(t2->Commit());
  ASSERT_OK(t1->Commit());
}

// An insert that finds its key free, then waits for another transaction's
// lock on it, looks again once it has the lock: the other transaction may
// have put the key back (a rollback of its delete) or anew while it waited
// (LockManager L12 skips only the second look of an insert no lock was
// given up around).
TEST_P(IsolationTest, AnInsertThatWaitedForItsKeyLooksAgain) {
  for (const bool commit : {false, true}) {
    SCOPED_TRACE(commit ? "deleted and put back, committed" : "deleted, rolled back");
    auto owner = db_->Begin(GetParam());
    ASSERT_OK(owner->Delete(t_, R(3, "")));
    auto other = db_->Begin(GetParam());
    auto waiting = std::async(std::launch::async, [&] { return other->Insert(t_, R(3, "other")); });
    ASSERT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout);
    if (commit) ASSERT_OK(owner->Insert(t_, R(3, "again")));  // while `other` waits
    ASSERT_OK(commit ? owner->Commit() : owner->Rollback());
    EXPECT_TRUE(waiting.get().IsAlreadyExists());
    ASSERT_OK(other->Commit());
    auto after = db_->Begin(GetParam());
    EXPECT_EQ(V(after.get(), 3), commit ? "again" : "v0");
    ASSERT_OK(after->Commit());
  }
}

// A cursor outlives neither its transaction's end nor, for snapshots, an
// index built after the snapshot.
TEST_P(IsolationTest, CursorsRefuseEndedTransactionsAndNewerIndexes) {
  auto txn = db_->Begin(GetParam());
  auto c = txn->OpenCursor(t_, 0);
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kFirst));
  EXPECT_TRUE((*c)->Valid());
  ASSERT_OK(txn->Commit());
  EXPECT_TRUE((*c)->Next().IsInvalidArgument());
  EXPECT_FALSE((*c)->Valid());
  if (rc()) return;
  auto other = db_->CreateTable(test::SampleTable("other"));
  ASSERT_TRUE(other.ok());
  auto old = db_->Begin(GetParam());
  EXPECT_EQ(test::ScanAll(old.get(), *other).size(), 0u);  // takes the snapshot
  {
    auto w = db_->Begin(GetParam());
    ASSERT_OK(w->Insert(t_, R(10, "after the snapshot")));
    ASSERT_OK(w->Commit());
  }
  ASSERT_OK(db_->CreateIndex("t", {"by_v", {3}, false}));
  EXPECT_TRUE(old->OpenCursor(t_, 3).status().IsTableChanged());
  ASSERT_OK(old->Commit());
  auto fresh = db_->Begin(GetParam());
  EXPECT_EQ(test::ScanAll(fresh.get(), t_, 3).size(), 11u);
}

// Read-modify-write through locking reads never loses an update: the
// second reader waits for the first writer's commit.
TEST_P(IsolationTest, LockingReadsPreventLostUpdates) {
  constexpr int kThreads = 2, kIncrements = 50;
  auto txn = db_->Begin();
  ASSERT_OK(txn->Update(t_, R(1, ""), R(1, "0")));
  ASSERT_OK(txn->Commit());
  std::vector<std::thread> threads;
  std::atomic<int> retries{0};
  for (int w = 0; w < kThreads; ++w) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        auto tx = db_->Begin(GetParam());
        const int n = std::stoi(V(tx.get(), 1, ReadMode::kExclusive));
        Status s = tx->Update(t_, R(1, ""), R(1, std::to_string(n + 1)));
        if (s.ok()) s = tx->Commit();
        if (s.ok()) {
          ++i;
        } else {
          ++retries;
          (void)tx->Rollback();
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  auto check = db_->Begin(GetParam());
  EXPECT_EQ(V(check.get(), 1), std::to_string(kThreads * kIncrements));
  ASSERT_OK(check->Commit());
}

TEST_P(IsolationTest, DeadlockPicksAVictimAndTheOtherGoesOn) {
  auto a = db_->Begin(GetParam());
  auto b = db_->Begin(GetParam());
  ASSERT_OK(a->Update(t_, R(1, ""), R(1, "a")));
  ASSERT_OK(b->Update(t_, R(2, ""), R(2, "b")));
  auto waiting = std::async(std::launch::async, [&] {
    return a->Update(t_, R(2, ""), R(2, "a"));  // waits for b
  });
  while (db_->Stats().lock_waits == 0) std::this_thread::yield();
  Status s = b->Update(t_, R(1, ""), R(1, "b"));  // closes the cycle
  ASSERT_TRUE(s.IsDeadlock()) << s.ToString();
  // The victim was rolled back whole: its lock on 2 is gone, a goes on.
  ASSERT_OK(waiting.get());
  EXPECT_TRUE(b->Commit().IsInvalidArgument());
  ASSERT_OK(a->Commit());
  auto check = db_->Begin(GetParam());
  EXPECT_EQ(V(check.get(), 1), "a");
  EXPECT_EQ(V(check.get(), 2), "a");
  EXPECT_EQ(db_->Stats().deadlocks, 1u);
}

TEST_P(IsolationTest, LockWaitTimeoutFailsOnlyTheStatement) {
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(1, ""), R(1, "held")));
  auto other = db_->Begin(GetParam());
  ASSERT_OK(other->Insert(t_, R(200, "kept")));
  Status s = other->Update(t_, R(1, ""), R(1, "other"));
  EXPECT_TRUE(s.IsTimedOut()) << s.ToString();
  ASSERT_OK(other->Commit());  // its earlier statement stands
  ASSERT_OK(holder->Commit());
  auto check = db_->Begin(GetParam());
  EXPECT_EQ(V(check.get(), 200), "kept");
  EXPECT_EQ(V(check.get(), 1), "held");
}

// A transaction that will not wait (NOWAIT) fails at once, with no
// deadlock check, and its later waits follow its new limit.
TEST_P(IsolationTest, ZeroLockWaitFailsAtOnce) {
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(1, ""), R(1, "held")));
  auto other = db_->Begin(GetParam());
  other->SetLockWaitTimeout(std::chrono::milliseconds(0));
  const auto start = std::chrono::steady_clock::now();
  auto read = other->Get(t_, {int64_t{1}}, ReadMode::kExclusive);
  EXPECT_TRUE(read.status().IsTimedOut()) << read.status().ToString();
  Status s = other->Delete(t_, R(1, ""));
  EXPECT_TRUE(s.IsTimedOut()) << s.ToString();
  // Far below the database's one-second limit (a loose bound: noisy machines).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
  other->SetLockWaitTimeout(std::chrono::milliseconds(50000));
  auto waiting = std::async(std::launch::async, [&] { return other->Delete(t_, R(1, "")); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(200)), std::future_status::timeout)
      << "a transaction with a long limit waits";
  ASSERT_OK(holder->Commit());
  ASSERT_OK(waiting.get());
  ASSERT_OK(other->Commit());
}

// SKIP LOCKED: locking reads pass over rows others hold (by primary key or
// through a secondary index), lock the rest, and never wait.
TEST_P(IsolationTest, SkipLockedReadsPassOverHeldRows) {
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(1, ""), R(1, "held", 0)));
  ASSERT_OK(holder->Delete(t_, R(2, "")));
  auto shared = db_->Begin(GetParam());
  ASSERT_TRUE(shared->Get(t_, {int64_t{3}}, ReadMode::kShared)
                  .ok());  // shared holders let shared readers in
  for (const ReadMode mode : {ReadMode::kSharedSkipLocked, ReadMode::kExclusiveSkipLocked}) {
    auto worker = db_->Begin(GetParam());
    for (uint32_t index : {0u, 1u}) {
      auto c = worker->OpenCursor(t_, index, mode);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      std::vector<int64_t> ids;
      Status s = (*c)->Seek(SeekOp::kFirst);
      while (s.ok() && (*c)->Valid()) {
        ids.push_back(std::get<int64_t>((*c)->row()[0]));
        s = (*c)->Next();
      }
      ASSERT_OK(s);
      std::vector<int64_t> want{0, 3, 4, 5, 6, 7, 8, 9};
      if (mode == ReadMode::kExclusiveSkipLocked) want.erase(want.begin() + 1);  // 3 is shared
      EXPECT_EQ(ids, want) << "index " << index;
    }
    auto held = worker->Get(t_, {int64_t{1}}, mode);
    ASSERT_TRUE(held.ok()) << held.status().ToString();
    EXPECT_FALSE(held->has_value());
    ASSERT_OK(worker->Commit());
  }
  // What the skipping reader locked, it holds: a writer with no wait fails.
  auto worker = db_->Begin(GetParam());
  ASSERT_TRUE(worker->Get(t_, {int64_t{5}}, ReadMode::kExclusiveSkipLocked).ok());
  auto writer = db_->Begin(GetParam());
  writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
  EXPECT_TRUE(writer->Update(t_, R(5, ""), R(5, "x")).IsTimedOut());
  ASSERT_OK(writer->Rollback());
  ASSERT_OK(worker->Commit());
  ASSERT_OK(shared->Commit());
  ASSERT_OK(holder->Commit());
}

// A long reader sees one state while writers commit many versions; once
// it ends, purge drops every old version.
TEST_P(IsolationTest, LongSnapshotWhileWritersGoOnThenPurge) {
  auto reader = db_->Begin(Isolation::kRepeatableRead);
  EXPECT_EQ(Count(reader.get()), 10u);
  for (int round = 1; round <= 50; ++round) {
    auto w = db_->Begin(GetParam());
    for (int i = 0; i < 10; ++i) {
      ASSERT_OK(w->Update(t_, R(i, ""), R(i, "v" + std::to_string(round), round)));
    }
    ASSERT_OK(w->Insert(t_, R(1000 + round, "x")));
    ASSERT_OK(w->Commit());
  }
  for (int i = 0; i < 10; ++i) EXPECT_EQ(V(reader.get(), i), "v0");
  EXPECT_EQ(Count(reader.get()), 10u);
  EXPECT_EQ(test::ScanAll(reader.get(), t_, 1).size(), 10u);  // by k: old entries
  EXPECT_GT(db_->Stats().version_keys, 0u);
  ASSERT_OK(reader->Commit());
  for (int i = 0; i < 500 && db_->Stats().version_keys > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(db_->Stats().version_keys, 0u);
}

// A transaction of many keys in two indexes (purged in batches per store,
// VersionStore::kPurgeBatch): its versions stay while an older snapshot
// needs them, and all go once it ends.
TEST_P(IsolationTest, ALargeTransactionsVersionsArePurgedWhole) {
  auto reader = db_->Begin(Isolation::kRepeatableRead);
  EXPECT_EQ(Count(reader.get()), 10u);
  auto w = db_->Begin(GetParam());
  for (int i = 0; i < 300; ++i) ASSERT_OK(w->Insert(t_, R(2000 + i, "many", i)));
  for (int i = 0; i < 10; ++i) ASSERT_OK(w->Update(t_, R(i, ""), R(i, "changed", 7)));
  ASSERT_OK(w->Commit());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a purge pass may run
  EXPECT_EQ(Count(reader.get()), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(V(reader.get(), i), "v0");
  EXPECT_GT(db_->Stats().version_keys, 300u);
  ASSERT_OK(reader->Commit());
  for (int i = 0; i < 500 && db_->Stats().version_keys > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(db_->Stats().version_keys, 0u);
  auto after = db_->Begin(GetParam());
  EXPECT_EQ(Count(after.get()), 310u);
  EXPECT_EQ(V(after.get(), 3), "changed");
  ASSERT_OK(after->Commit());
}

// Cursor::ReleaseCurrentLocks (MariaDB's unlock_row for a row that does
// not match): the locks reading the current row took go, those the
// transaction held before stay.
TEST_P(IsolationTest, ReleasingTheCurrentRowKeepsLocksHeldBefore) {
  auto reader = db_->Begin(GetParam());
  ASSERT_OK(reader->Update(t_, R(2, "v0"), R(2, "mine")));  // held before the scan
  auto c = reader->OpenCursor(t_, 0, ReadMode::kExclusive);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{1}}));
  ASSERT_TRUE((*c)->Valid());
  (*c)->ReleaseCurrentLocks();  // row 1: locked by this read only
  ASSERT_OK((*c)->Next());
  ASSERT_TRUE((*c)->Valid());
  (*c)->ReleaseCurrentLocks();  // row 2: changed by the reader
  ASSERT_OK((*c)->Next());
  ASSERT_TRUE((*c)->Valid());  // row 3 stays locked
  auto writer = db_->Begin(GetParam());
  writer->SetLockWaitTimeout(std::chrono::milliseconds(0));
  ASSERT_OK(writer->Update(t_, R(1, "v0"), R(1, "free")));
  Status held = writer->Update(t_, R(2, "v0"), R(2, "no"));
  EXPECT_TRUE(held.IsTimedOut()) << held.ToString();
  Status read = writer->Update(t_, R(3, "v0"), R(3, "no"));
  EXPECT_TRUE(read.IsTimedOut()) << read.ToString();
  ASSERT_OK(writer->Rollback());
  ASSERT_OK(reader->Rollback());
}

// An Update or Delete of a row the transaction has just read with a lock
// takes that read's bytes instead of reading the tree again (the usual
// UPDATE: a locking read, then the change). Those bytes are the row's old
// value in the change's undo, so they must be its newest version: not once
// the transaction changed the row itself, nor once it gave the read's lock
// up and another transaction changed the row. (The checks read with a
// lock, that is the tree: a read of the snapshot would take the version a
// rollback hands over for the tree's value.)
TEST_P(IsolationTest, ChangesAfterALockingReadUndoToTheNewestVersion) {
  auto txn = db_->Begin(GetParam());
  EXPECT_EQ(V(txn.get(), 1, ReadMode::kExclusive), "v0");
  ASSERT_OK(txn->Update(t_, R(1, "v0"), R(1, "a")));
  const uint64_t after_a = txn->Savepoint();
  ASSERT_OK(txn->Update(t_, R(1, "a"), R(1, "b")));
  ASSERT_OK(txn->RollbackTo(after_a));
  EXPECT_EQ(V(txn.get(), 1, ReadMode::kShared), "a");
  // The read's bytes, taken by a Delete: its undo puts the row back whole.
  EXPECT_EQ(V(txn.get(), 2, ReadMode::kShared), "v0");
  const uint64_t before_delete = txn->Savepoint();
  ASSERT_OK(txn->Delete(t_, R(2, "v0")));
  EXPECT_EQ(V(txn.get(), 2, ReadMode::kShared), "<none>");
  ASSERT_OK(txn->RollbackTo(before_delete));
  EXPECT_EQ(V(txn.get(), 2, ReadMode::kShared), "v0");
  // Read, then changed back by a rollback (no Update or Delete in between
  // that would take the read's bytes).
  const uint64_t before_five = txn->Savepoint();
  ASSERT_OK(txn->Update(t_, R(5, "v0"), R(5, "five")));
  EXPECT_EQ(V(txn.get(), 5, ReadMode::kExclusive), "five");
  ASSERT_OK(txn->RollbackTo(before_five));
  const uint64_t after_undo = txn->Savepoint();
  ASSERT_OK(txn->Update(t_, R(5, "v0"), R(5, "again")));
  ASSERT_OK(txn->RollbackTo(after_undo));
  EXPECT_EQ(V(txn.get(), 5, ReadMode::kShared), "v0");
  // Read one row, change another: the read's bytes are not the other's.
  ASSERT_OK(txn->Update(t_, R(6, "v0"), R(6, "six")));
  EXPECT_EQ(V(txn.get(), 6, ReadMode::kExclusive), "six");
  const uint64_t before_seven = txn->Savepoint();
  ASSERT_OK(txn->Update(t_, R(7, "v0"), R(7, "seven")));
  ASSERT_OK(txn->RollbackTo(before_seven));
  EXPECT_EQ(V(txn.get(), 7, ReadMode::kShared), "v0");
  ASSERT_OK(txn->Commit());

  // The lock given up after the read (MariaDB's unlock_row): the row may
  // change before the next lock on it.
  auto reader = db_->Begin(GetParam());
  {
    auto c = reader->OpenCursor(t_, 0, ReadMode::kExclusive);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{3}}));
    ASSERT_TRUE((*c)->Valid());
    EXPECT_EQ(std::get<std::string>((*c)->row()[3]), "v0");
    (*c)->ReleaseCurrentLocks();
  }
  auto other = db_->Begin(GetParam());
  ASSERT_OK(other->Update(t_, R(3, "v0"), R(3, "theirs")));
  ASSERT_OK(other->Commit());
  ASSERT_OK(reader->Update(t_, R(3, "v0"), R(3, "mine")));
  ASSERT_OK(reader->Rollback());
  auto check = db_->Begin(GetParam());
  EXPECT_EQ(V(check.get(), 1, ReadMode::kShared), "a");
  EXPECT_EQ(V(check.get(), 2, ReadMode::kShared), "v0");
  EXPECT_EQ(V(check.get(), 3, ReadMode::kShared), "theirs");
  EXPECT_EQ(V(check.get(), 5, ReadMode::kShared), "v0");
  EXPECT_EQ(V(check.get(), 6, ReadMode::kShared), "six");
  EXPECT_EQ(V(check.get(), 7, ReadMode::kShared), "v0");
  ASSERT_OK(check->Commit());
}

// Cursor::SetSemiConsistent (an UPDATE at READ COMMITTED): a row another
// transaction holds is read unlocked in its committed version; if wanted,
// Next() reads it again, now waiting; if not, the scan goes on past it.
TEST_P(IsolationTest, SemiConsistentReadsPassHeldRowsUnlessWanted) {
  auto holder = db_->Begin(GetParam());
  ASSERT_OK(holder->Update(t_, R(2, "v0"), R(2, "uncommitted")));
  ASSERT_OK(holder->Insert(t_, R(20, "never committed")));
  auto reader = db_->Begin(GetParam());
  reader->SetLockWaitTimeout(std::chrono::milliseconds(0));
  auto c = reader->OpenCursor(t_, 0, ReadMode::kExclusive);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  (*c)->SetSemiConsistent(true);
  if (!rc()) {
    // Where ranges are locked (REPEATABLE READ) it reads as any locking read.
    Status waited = (*c)->Seek(SeekOp::kGE, {int64_t{2}});
    EXPECT_TRUE(waited.IsTimedOut()) << waited.ToString();
    ASSERT_OK(holder->Rollback());
    ASSERT_OK(reader->Rollback());
    return;
  }
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{2}}));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_TRUE((*c)->WasSemiConsistent());
  EXPECT_EQ(std::get<std::string>((*c)->row()[3]), "v0");  // the committed version
  (*c)->ReleaseCurrentLocks();                             // not wanted
  ASSERT_OK((*c)->Next());
  ASSERT_TRUE((*c)->Valid());
  EXPECT_EQ(std::get<int64_t>((*c)->row()[0]), 3);
  EXPECT_FALSE((*c)->WasSemiConsistent());              // free: locked as usual
  for (int i = 0; i < 6; ++i) ASSERT_OK((*c)->Next());  // 4 .. 9
  ASSERT_OK((*c)->Next());
  EXPECT_FALSE((*c)->Valid());  // 20: inserted, committed by no one
  // Wanted: read again, waiting for the holder, forward or backward.
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{2}}));
  ASSERT_TRUE((*c)->WasSemiConsistent());
  Status again = (*c)->Next();
  EXPECT_TRUE(again.IsTimedOut()) << again.ToString();
  ASSERT_OK((*c)->Seek(SeekOp::kLE, {int64_t{2}}));
  ASSERT_TRUE((*c)->WasSemiConsistent());
  again = (*c)->Prev();
  EXPECT_TRUE(again.IsTimedOut()) << again.ToString();
  ASSERT_OK(holder->Rollback());
  ASSERT_OK(reader->Rollback());
}

INSTANTIATE_TEST_SUITE_P(Levels, IsolationTest,
                         ::testing::Values(Isolation::kReadCommitted, Isolation::kRepeatableRead),
                         [](const auto& info) {
                           return info.param == Isolation::kReadCommitted ? "ReadCommitted"
                                                                          : "RepeatableRead";
                         });

// Money moves between accounts with locking reads, retried on deadlock;
// consistent readers must always see the same total.
TEST(IsolationBank, SnapshotsAlwaysSeeTheSameTotal) {
  test::ScratchDir dir;
  auto db = Database::Open(test::SmallOptions(dir.path()));
  ASSERT_TRUE(db.ok());
  auto t = (*db)->CreateTable(test::SampleTable());
  ASSERT_TRUE(t.ok());
  constexpr int kAccounts = 20;
  {
    auto txn = (*db)->Begin();
    for (int i = 0; i < kAccounts; ++i) {
      ASSERT_OK(txn->Insert(*t, SampleRow(i, 100, std::nullopt, "")));
    }
    ASSERT_OK(txn->Commit());
  }
  const uint64_t seed = test::TestSeed();
  std::atomic<bool> done{false};
  std::atomic<int> checks{0}, deadlocks{0};
  std::thread auditor([&] {
    while (!done.load()) {
      auto txn = (*db)->Begin(Isolation::kRepeatableRead);
      uint64_t total = 0;
      for (auto& row : test::ScanAll(txn.get(), *t)) total += std::get<uint64_t>(row[1]);
      ASSERT_EQ(total, 100u * kAccounts);
      ASSERT_OK(txn->Commit());
      ++checks;
    }
  });
  std::vector<std::thread> movers;
  for (int m = 0; m < 3; ++m) {
    movers.emplace_back([&, m] {
      std::mt19937_64 rng(seed + m);
      for (int i = 0; i < 200; ++i) {
        const int64_t from = static_cast<int64_t>(rng() % kAccounts);
        const int64_t to = static_cast<int64_t>(rng() % kAccounts);
        if (from == to) continue;
        auto txn = (*db)->Begin(m % 2 ? Isolation::kReadCommitted : Isolation::kRepeatableRead);
        auto a = txn->Get(*t, {from}, ReadMode::kExclusive);
        auto b = a.ok() ? txn->Get(*t, {to}, ReadMode::kExclusive) : a;
        if (!a.ok() || !b.ok()) {
          ASSERT_TRUE(a.status().IsDeadlock() || b.status().IsDeadlock());
          ++deadlocks;
          continue;  // rolled back already
        }
        Row ra = **a, rb = **b;
        const uint64_t amount = rng() % 10;
        if (std::get<uint64_t>(ra[1]) < amount) {
          ASSERT_OK(txn->Rollback());
          continue;
        }
        Row na = ra, nb = rb;
        na[1] = std::get<uint64_t>(ra[1]) - amount;
        nb[1] = std::get<uint64_t>(rb[1]) + amount;
        ASSERT_OK(txn->Update(*t, ra, na));
        ASSERT_OK(txn->Update(*t, rb, nb));
        ASSERT_OK(txn->Commit());
      }
    });
  }
  for (auto& th : movers) th.join();
  done = true;
  auditor.join();
  EXPECT_GT(checks.load(), 0);
}

}  // namespace
}  // namespace subito
