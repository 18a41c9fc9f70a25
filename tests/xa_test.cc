// Two-phase commit: a prepared transaction outlives its owner, a Close and
// a power cut, holding its locks and hiding its changes until it is
// committed or rolled back (txn_records.h P1, engine/prepared.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "crash_images.h"
#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;
using test::ScanAll;

constexpr std::chrono::milliseconds kShortWait(50);

std::unique_ptr<Database> OpenOk(const Options& o) {
  auto db = Database::Open(o);
  EXPECT_TRUE(db.ok()) << db.status().ToString();
  return db.ok() ? std::move(*db) : nullptr;
}

// The rows of every index of t, each index's read back to its primary rows
// (id -> v), as one snapshot sees them; the secondary indexes must agree.
std::map<int64_t, std::string> Rows(Database* db, const std::string& table = "t") {
  Table* t = db->FindTable(table);
  std::unique_ptr<Transaction> r = db->Begin();
  std::map<int64_t, std::string> rows;
  for (const Row& row : ScanAll(r.get(), t)) {
    rows[std::get<int64_t>(row[0])] = std::get<std::string>(row[3]);
  }
  EXPECT_EQ(ScanAll(r.get(), t, 1).size(), rows.size()) << "index k disagrees";
  EXPECT_EQ(ScanAll(r.get(), t, 2).size(), rows.size()) << "index u disagrees";
  EXPECT_OK(r->Commit());
  return rows;
}

class Xa : public ::testing::Test {
 protected:
  // A small log: relocations and undo files come soon.
  Options Opts() const {
    Options o = test::SmallOptions(dir.path());
    o.log_file_size = 4096 + (8 << 20);
    return o;
  }
  void SetUp() override {
    db = OpenOk(Opts());
    ASSERT_NE(db, nullptr);
    ASSERT_TRUE(db->CreateTable(SampleTable()).ok());
    std::unique_ptr<Transaction> w = db->Begin();
    for (int64_t id = 1; id <= 10; ++id) {
      ASSERT_OK(
          w->Insert(T(), SampleRow(id, id, "u" + std::to_string(id), "v" + std::to_string(id))));
    }
    ASSERT_OK(w->Commit());
    before = Rows(db.get());
  }
  Table* T() { return db->FindTable("t"); }
  void Reopen() {
    ASSERT_OK(db->Close());
    db.reset();
    db = OpenOk(Opts());
    ASSERT_NE(db, nullptr);
  }
  // Updates row 1, deletes row 2, inserts row 100 (unique u "u100"), then
  // prepares as `xid` and hands the transaction to the database.
  void PrepareChanges(const std::string& xid) {
    std::unique_ptr<Transaction> a = db->Begin();
    ASSERT_OK(a->Update(T(), SampleRow(1, 1, "u1", "v1"), SampleRow(1, 1, "u1", "changed")));
    ASSERT_OK(a->Delete(T(), SampleRow(2, 2, "u2", "v2")));
    ASSERT_OK(a->Insert(T(), SampleRow(100, 100, "u100", "new")));
    ASSERT_OK(a->Prepare(xid));
    EXPECT_TRUE(a->prepared());
    EXPECT_TRUE(a->Insert(T(), SampleRow(101, 1, std::nullopt, "x")).IsInvalidArgument());
    ASSERT_OK(db->KeepPrepared(std::move(a)));
  }
  std::map<int64_t, std::string> After() {
    std::map<int64_t, std::string> m = before;
    m[1] = "changed";
    m.erase(2);
    m[100] = "new";
    return m;
  }
  // Other transactions wait for the prepared one's keys: its updated and
  // inserted primary keys and its unique value.
  void ExpectKeysLocked() {
    std::unique_ptr<Transaction> b = db->Begin();
    b->SetLockWaitTimeout(kShortWait);
    EXPECT_TRUE(
        b->Update(T(), SampleRow(1, 1, "u1", "v1"), SampleRow(1, 1, "u1", "b")).IsTimedOut());
    EXPECT_TRUE(b->Insert(T(), SampleRow(2, 2, "u2", "b")).IsTimedOut());
    EXPECT_TRUE(b->Insert(T(), SampleRow(100, 5, std::nullopt, "b")).IsTimedOut());
    EXPECT_TRUE(b->Insert(T(), SampleRow(200, 5, "u100", "b")).IsTimedOut());
    EXPECT_OK(b->Update(T(), SampleRow(3, 3, "u3", "v3"), SampleRow(3, 3, "u3", "v3")));
    EXPECT_OK(b->Rollback());
  }

  test::ScratchDir dir;
  std::unique_ptr<Database> db;
  std::map<int64_t, std::string> before;
};

TEST_F(Xa, HeldPreparedIsInvisibleLockedAndCommits) {
  PrepareChanges("xid-a");
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"xid-a"});
  EXPECT_EQ(Rows(db.get()), before);
  ExpectKeysLocked();
  auto a = db->TakePrepared("xid-a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE(db->TakePrepared("xid-a").status().IsNotFound());
  ASSERT_OK((*a)->Commit());
  EXPECT_EQ(Rows(db.get()), After());
  Reopen();
  EXPECT_EQ(db->recovery().transactions_prepared, 0u);
  EXPECT_EQ(Rows(db.get()), After());
}

TEST_F(Xa, PreparedSurvivesCloseThenCommits) {
  PrepareChanges("xid-a");
  Reopen();
  EXPECT_EQ(db->recovery().transactions_prepared, 1u);
  EXPECT_EQ(db->recovery().transactions_rolled_back, 0u);
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"xid-a"});
  EXPECT_EQ(Rows(db.get()), before);
  ExpectKeysLocked();
  auto a = db->TakePrepared("xid-a");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_TRUE((*a)->prepared());
  ASSERT_OK((*a)->Commit());
  EXPECT_EQ(Rows(db.get()), After());
  Reopen();
  EXPECT_TRUE(db->PreparedXids().empty());
  EXPECT_EQ(Rows(db.get()), After());
}

TEST_F(Xa, PreparedSurvivesTwoClosesThenRollsBack) {
  PrepareChanges("xid-b");
  Reopen();
  Reopen();  // recovered, held, abandoned at Close, recovered again
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"xid-b"});
  EXPECT_EQ(Rows(db.get()), before);
  auto b = db->TakePrepared("xid-b");
  ASSERT_TRUE(b.ok());
  ASSERT_OK((*b)->Rollback());
  EXPECT_EQ(Rows(db.get()), before);
  std::unique_ptr<Transaction> w = db->Begin();  // the keys are free again
  w->SetLockWaitTimeout(kShortWait);
  ASSERT_OK(w->Insert(T(), SampleRow(100, 100, "u100", "after")));
  ASSERT_OK(w->Commit());
  Reopen();
  EXPECT_TRUE(db->PreparedXids().empty());
  std::map<int64_t, std::string> m = before;
  m[100] = "after";
  EXPECT_EQ(Rows(db.get()), m);
}

TEST_F(Xa, Misuse) {
  std::unique_ptr<Transaction> a = db->Begin();
  EXPECT_TRUE(db->KeepPrepared(std::move(a)).IsInvalidArgument());
  ASSERT_NE(a, nullptr) << "a refused transaction stays its owner's";
  ASSERT_OK(a->Insert(T(), SampleRow(50, 1, std::nullopt, "x")));
  EXPECT_TRUE(a->Prepare(std::string(2000, 'x')).IsInvalidArgument());
  ASSERT_OK(a->Prepare("same"));
  EXPECT_TRUE(a->Prepare("same").IsInvalidArgument());
  EXPECT_TRUE(a->RollbackTo(1).IsInvalidArgument());
  EXPECT_TRUE(a->RollbackTo(0).IsInvalidArgument());  // only whole, through Rollback
  std::unique_ptr<Transaction> b = db->Begin();
  ASSERT_OK(b->Insert(T(), SampleRow(51, 1, std::nullopt, "y")));
  ASSERT_OK(b->Prepare("same"));
  ASSERT_OK(db->KeepPrepared(std::move(a)));
  ASSERT_OK(db->KeepPrepared(std::move(b)));  // one xid, two transactions: both held
  EXPECT_TRUE(db->TakePrepared("other").status().IsNotFound());
  // A prepared transaction that wrote nothing logs nothing: gone at Close.
  std::unique_ptr<Transaction> r = db->Begin();
  ASSERT_OK(r->Prepare("read-only"));
  ASSERT_OK(db->KeepPrepared(std::move(r)));
  Reopen();
  EXPECT_EQ(db->PreparedXids(), (std::vector<std::string>{"same", "same"}));
  std::map<int64_t, std::string> m = Rows(db.get());
  EXPECT_EQ(m.count(50) + m.count(51), 0u);
  for (int i = 0; i < 2; ++i) {
    auto t = db->TakePrepared("same");
    ASSERT_TRUE(t.ok());
    ASSERT_OK((*t)->Commit());
  }
  m = Rows(db.get());
  EXPECT_EQ(m.count(50) + m.count(51), 2u);
}

// A unique index's NULLs take no lock (as at run time): two prepared
// transactions with NULL there both come back.
TEST_F(Xa, TwoPreparedWithNullInAUniqueIndexBothComeBack) {
  for (const char* xid : {"n1", "n2"}) {
    std::unique_ptr<Transaction> a = db->Begin();
    const int64_t id = xid[1] == '1' ? 60 : 61;
    ASSERT_OK(a->Insert(T(), SampleRow(id, 1, std::nullopt, xid)));
    ASSERT_OK(a->Prepare(xid));
    ASSERT_OK(db->KeepPrepared(std::move(a)));
  }
  Reopen();
  EXPECT_EQ(db->PreparedXids(), (std::vector<std::string>{"n1", "n2"}));
  for (const char* xid : {"n1", "n2"}) {
    auto a = db->TakePrepared(xid);
    ASSERT_TRUE(a.ok());
    ASSERT_OK((*a)->Commit());
  }
  std::map<int64_t, std::string> m = Rows(db.get());
  EXPECT_EQ(m[60], "n1");
  EXPECT_EQ(m[61], "n2");
}

// A statement rollback put a long value's chain back in its leaf before
// the prepare; the undo still names it, but the transaction no longer
// retires it. After the restart and the commit, another transaction
// retires that chain (an update of the row, under a snapshot that holds
// the purge back), then rolls back: the chain must still be there for it,
// not freed by the purge of the prepared transaction's end.
TEST_F(Xa, AChainAStatementRollbackRestoredIsNotFreedAfterTheCommit) {
  const std::string long1(20000, 'L');
  std::unique_ptr<Transaction> w = db->Begin();
  ASSERT_OK(w->Update(T(), SampleRow(1, 1, "u1", "v1"), SampleRow(1, 1, "u1", long1)));
  ASSERT_OK(w->Commit());
  std::unique_ptr<Transaction> a = db->Begin();
  const uint64_t sp = a->Savepoint();
  ASSERT_OK(
      a->Update(T(), SampleRow(1, 1, "u1", ""), SampleRow(1, 1, "u1", std::string(30000, 'X'))));
  ASSERT_OK(a->RollbackTo(sp));
  ASSERT_OK(a->Update(T(), SampleRow(2, 2, "u2", ""), SampleRow(2, 2, "u2", "small")));
  ASSERT_OK(a->Prepare("chain"));
  ASSERT_OK(db->KeepPrepared(std::move(a)));
  Reopen();
  std::unique_ptr<Transaction> snapshot = db->Begin();
  snapshot->TakeSnapshot();  // holds back the purge of what commits next
  auto c = db->TakePrepared("chain");
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Commit());
  std::unique_ptr<Transaction> b = db->Begin();
  ASSERT_OK(
      b->Update(T(), SampleRow(1, 1, "u1", ""), SampleRow(1, 1, "u1", std::string(25000, 'B'))));
  ASSERT_OK(snapshot->Commit());
  // The purge (every 10 ms) releases what the commit retired, the garbage
  // collection (about every second) frees it; new long values reuse pages.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  for (int round = 0; round < 3; ++round) {
    std::unique_ptr<Transaction> f = db->Begin();
    for (int64_t id = 300; id < 320; ++id) {
      const Row row = SampleRow(id, 1, std::nullopt, std::string(20000, 'a' + round));
      ASSERT_OK(round == 0 ? f->Insert(T(), row)
                           : f->Update(T(), SampleRow(id, 1, std::nullopt, ""), row));
    }
    ASSERT_OK(f->Commit());
  }
  ASSERT_OK(b->Rollback());
  std::map<int64_t, std::string> m = Rows(db.get());
  EXPECT_TRUE(m[1] == long1) << "row 1's long value changed: its chain was freed and reused";
  EXPECT_EQ(m[2], "small");
}

// A prepared transaction whose undo went to its undo file, with values in
// overflow chains: the chains its undo names stay retired across the
// restart (RecoverChains keeps them), and its rollback restores them.
TEST_F(Xa, LargePreparedTransactionRollsBackAfterRestart) {
  std::unique_ptr<Transaction> w = db->Begin();
  for (int64_t id = 1; id <= 5; ++id) {
    ASSERT_OK(w->Update(T(), SampleRow(id, id, "u" + std::to_string(id), "v" + std::to_string(id)),
                        SampleRow(id, id, "u" + std::to_string(id), std::string(20000, 'a' + id))));
  }
  for (int64_t id = 1000; id < 3000; ++id) {  // values inline in leaves: undo holds them
    ASSERT_OK(w->Insert(T(), SampleRow(id, id % 7, std::nullopt, std::string(500, 'o'))));
  }
  ASSERT_OK(w->Commit());
  before = Rows(db.get());
  std::unique_ptr<Transaction> a = db->Begin();
  for (int64_t id = 1; id <= 5; ++id) {
    ASSERT_OK(a->Update(T(), SampleRow(id, id, "u" + std::to_string(id), ""),
                        SampleRow(id, id, "u" + std::to_string(id), std::string(30000, 'A' + id))));
  }
  for (int64_t id = 1000; id < 3000; ++id) {
    ASSERT_OK(a->Update(T(), SampleRow(id, id % 7, std::nullopt, ""),
                        SampleRow(id, id % 7, std::nullopt, std::string(500, 'r'))));
  }
  ASSERT_OK(a->Prepare("big"));
  EXPECT_GT(db->Stats().undo_spills, 0u)
      << "the undo never went to its file: the test lost its reach";
  ASSERT_OK(db->KeepPrepared(std::move(a)));
  Reopen();
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"big"});
  EXPECT_EQ(Rows(db.get()), before);
  auto b = db->TakePrepared("big");
  ASSERT_TRUE(b.ok());
  ASSERT_OK((*b)->Rollback());
  EXPECT_EQ(Rows(db.get()), before);
  Reopen();
  EXPECT_EQ(Rows(db.get()), before);
}

// While a prepared transaction is held, other writers fill the log many
// times over: its pin moves (relocation or its undo file) and the
// checkpoint passes its first prepare record; the copies keep it prepared.
TEST_F(Xa, PreparedOutlivesTheCheckpointPassingItsRecord) {
  PrepareChanges("xid-c");
  const uint64_t moved_before = db->Stats().undo_relocations + db->Stats().undo_spills;
  const std::string filler(1500, 'f');
  for (int round = 0; round < 40; ++round) {
    std::unique_ptr<Transaction> w = db->Begin();
    for (int64_t i = 0; i < 500; ++i) {
      const int64_t id = 10000 + i;
      const Row row = SampleRow(id, i, std::nullopt, filler + std::to_string(round));
      if (round == 0) {
        ASSERT_OK(w->Insert(T(), row));
      } else {
        ASSERT_OK(w->Update(T(), SampleRow(id, i, std::nullopt, ""), row));
      }
    }
    ASSERT_OK(w->Commit());
  }
  EXPECT_GT(db->Stats().undo_relocations + db->Stats().undo_spills, moved_before)
      << "the prepared transaction's pin never moved: the test lost its reach";
  Reopen();
  EXPECT_EQ(db->PreparedXids(), std::vector<std::string>{"xid-c"});
  std::map<int64_t, std::string> rows = Rows(db.get());
  EXPECT_EQ(rows[1], "v1");
  EXPECT_EQ(rows.count(100), 0u);
  auto c = db->TakePrepared("xid-c");
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Commit());
  rows = Rows(db.get());
  EXPECT_EQ(rows[1], "changed");
  EXPECT_EQ(rows.count(2), 0u);
  EXPECT_EQ(rows[100], "new");
}

// Power cuts anywhere in a run that prepares two transactions, A and B,
// rolls A back, then commits others. In each image: a transaction held
// prepared is whole (its commit makes all of it visible; its rows were
// invisible before); one not held left no trace; B is held in every image
// cut after its Prepare returned; A in every image cut between its
// Prepare's return and the start of its rollback, and in none after its
// rollback ended. A cut during A's rollback must not find A prepared and
// half undone (the unprepare record, txn_records.h).
class XaCuts : public ::testing::Test, public TrackedRun {};

struct Prepared {
  const char* xid;
  int64_t first_update, first_insert;  // 50 updates, 300 inserts
};
constexpr Prepared kA{"cut-a", 1, 500}, kB{"cut-b", 51, 900};

Status WritePrepared(Database* db, const Prepared& p, std::unique_ptr<Transaction>* out) {
  Table* t = db->FindTable("t");
  std::unique_ptr<Transaction> a = db->Begin();
  for (int64_t id = p.first_update; id < p.first_update + 50; ++id) {
    SUBITO_RETURN_IF_ERROR(
        a->Update(t, SampleRow(id, id, std::nullopt, ""), SampleRow(id, id, std::nullopt, "prep")));
  }
  for (int64_t id = p.first_insert; id < p.first_insert + 300; ++id) {
    SUBITO_RETURN_IF_ERROR(a->Insert(t, SampleRow(id, id, std::nullopt, "prep")));
  }
  SUBITO_RETURN_IF_ERROR(a->Prepare(p.xid));
  *out = std::move(a);
  return Status::OK();
}

// `value` for all of p's rows: "base" (and its inserts absent) or "prep".
void ExpectAll(const std::map<int64_t, std::string>& rows, const Prepared& p,
               const std::string& value, int cut) {
  int wrong = 0;
  for (int64_t id = p.first_update; id < p.first_update + 50; ++id) {
    auto it = rows.find(id);
    wrong += it == rows.end() || it->second != value;
  }
  for (int64_t id = p.first_insert; id < p.first_insert + 300; ++id) {
    auto it = rows.find(id);
    wrong += value == "base" ? it != rows.end() : it == rows.end() || it->second != value;
  }
  EXPECT_EQ(wrong, 0) << p.xid << ": rows not all " << value << " in cut " << cut;
}

TEST_F(XaCuts, PowerCutsKeepPreparedWholeAndRollbacksNeverHalfPrepared) {
  uint64_t begun = 0, acked_a = 0, acked_b = 0, rollback_a = 0, rolled_back_a = 0, end = 0;
  {
    auto opened = Database::Open(TrackedOptions(dir.Sub("pm"), &fs, &pm));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<Database> db = std::move(*opened);
    ASSERT_TRUE(db->CreateTable(SampleTable()).ok());
    Table* t = db->FindTable("t");
    std::unique_ptr<Transaction> w = db->Begin();
    for (int64_t id = 1; id <= 100; ++id)
      ASSERT_OK(w->Insert(t, SampleRow(id, id, std::nullopt, "base")));
    ASSERT_OK(w->Commit());
    begun = clock->Now();
    std::unique_ptr<Transaction> a, b;
    ASSERT_OK(WritePrepared(db.get(), kA, &a));
    acked_a = clock->Now();
    ASSERT_OK(WritePrepared(db.get(), kB, &b));
    acked_b = clock->Now();
    ASSERT_OK(db->KeepPrepared(std::move(b)));
    rollback_a = clock->Now();
    ASSERT_OK(a->Rollback());
    rolled_back_a = clock->Now();
    for (int round = 0; round < 30; ++round) {  // checkpoints and relocations
      std::unique_ptr<Transaction> o = db->Begin();
      for (int64_t id = 2000; id < 2100; ++id) {
        const Row row = SampleRow(id, 1, std::nullopt, std::string(800, 'a' + round % 26));
        ASSERT_OK(round == 0 ? o->Insert(t, row)
                             : o->Update(t, SampleRow(id, 1, std::nullopt, ""), row));
      }
      ASSERT_OK(o->Commit());
    }
    end = clock->Now();
  }
  int held[2] = {0, 0}, in_rollback = 0;
  for (int cut = 0; cut < 40; ++cut) {
    // A quarter of the cuts while the two prepare, half during A's
    // rollback, the rest anywhere.
    uint64_t from = begun, to = end;
    if (cut % 4 == 1) to = acked_b + 1;
    if (cut % 4 >= 2) from = rollback_a, to = rolled_back_a + 1;
    const uint64_t at = cut == 0 ? end : from + rng() % std::max<uint64_t>(1, to - from);
    in_rollback += at >= rollback_a && at < rolled_back_a;
    const std::string c = CutImage(at, "cut" + std::to_string(cut));
    FailedImageKeeper keep(c, seed, cut);
    std::unique_ptr<Database> db = OpenOk(PlainOptions(c));
    ASSERT_NE(db, nullptr) << "cut " << cut;
    const std::vector<std::string> xids = db->PreparedXids();
    const std::map<int64_t, std::string> rows = Rows(db.get());
    for (const Prepared* p : {&kA, &kB}) {
      const bool is_held = std::count(xids.begin(), xids.end(), p->xid) == 1;
      ExpectAll(rows, *p, "base", cut);  // held or not, its changes are invisible
      const bool must_be_held = p == &kB ? at >= acked_b : at >= acked_a && at < rollback_a;
      const bool must_be_gone = p == &kA && at >= rolled_back_a;
      EXPECT_TRUE(is_held || !must_be_held) << p->xid << " lost in cut " << cut;
      EXPECT_FALSE(is_held && must_be_gone) << p->xid << " back after its rollback in cut " << cut;
      if (!is_held) continue;
      ++held[p == &kB];
      auto t = db->TakePrepared(p->xid);
      ASSERT_TRUE(t.ok());
      ASSERT_OK((*t)->Commit());
      ExpectAll(Rows(db.get()), *p, "prep", cut);
    }
  }
  EXPECT_GT(held[0], 0);
  EXPECT_GT(held[1], 0);
  EXPECT_GT(in_rollback, 0);
  std::printf("cuts: A held in %d, B in %d, %d cuts during A's rollback\n", held[0], held[1],
              in_rollback);
}

}  // namespace
}  // namespace subito
