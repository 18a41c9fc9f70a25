// Commits without flushing the log (Options::flush_log_at_commit = false,
// the server's subito_flush_log_at_trx_commit=0): a commit returns while
// its record is not yet durable, and a power cut then finds it whole or not
// at all; the background makes the log durable without another commit, and
// a power cut after that keeps the transaction; switching the setting back
// makes commits wait again. The PM tier's fences are held shut by a gate,
// so "not yet durable" is certain, not a race. Until its record is durable,
// a lazy commit keeps the checkpoint before its undo records, and a
// transaction with an undo file commits durably all the same.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>

#include <pthread.h>

#include "crash_images.h"
#include "engine/engine_impl.h"
#include "engine_util.h"
#include "forwarding_persistence.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;

// Forwards to `inner`; Drain waits while the gate is shut (for every
// thread, or only for the thread so named), so no byte that thread wrote
// becomes durable then (TrackingPersistence counts a line once drained).
class GatedPersistence : public test::ForwardingPersistence {
 public:
  using ForwardingPersistence::ForwardingPersistence;
  void Shut(std::string only_thread = "") {
    std::lock_guard lock(mu_);
    open_ = false;
    only_ = std::move(only_thread);
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void Drain() override {
    char name[16] = {};
    (void)pthread_getname_np(pthread_self(), name, sizeof name);
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_ || (!only_.empty() && only_ != name); });
    inner()->Drain();
  }
  const char* Name() const override { return "gated"; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
  std::string only_;
};

class LazyCommit : public ::testing::Test, public TrackedRun {
 protected:
  void SetUp() override {
    Options o = TrackedOptions(dir.Sub("pm"), &fs, &gate);
    o.flush_log_at_commit = false;
    auto opened = Database::Open(o);
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    db = std::move(*opened);
    auto t = db->CreateTable(SampleTable());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    table = *t;
  }
  void TearDown() override { gate.Open(); }
  engine::DatabaseImpl* impl() { return static_cast<engine::DatabaseImpl*>(db.get()); }
  log::RedoLog* log() { return impl()->log(); }
  // Commits one row in a thread of its own (a commit that waits for the
  // gate must not hang the test).
  std::future<Status> CommitRow(int64_t id) {
    return std::async(std::launch::async, [this, id] {
      auto txn = db->Begin();
      Status s = txn->Insert(table, SampleRow(id, 1, std::nullopt, "v"));
      return s.ok() ? txn->Commit() : s;
    });
  }
  // The database a power cut at the clock's present leaves, recovered.
  std::vector<Row> RowsAfterCutNow(const std::string& name = "cut") {
    const std::string c = CutImage(clock->Now(), name);
    auto rdb = Database::Open(PlainOptions(c));
    EXPECT_TRUE(rdb.ok()) << rdb.status().ToString();
    if (!rdb.ok()) return {};
    auto txn = (*rdb)->Begin();
    return test::ScanAll(txn.get(), (*rdb)->FindTable("t"));
  }

  GatedPersistence gate{&pm};
  std::unique_ptr<Database> db;
  Table* table = nullptr;
};

TEST_F(LazyCommit, ReturnsBeforeTheLogIsDurableWhichFollowsInTheBackground) {
  gate.Shut();
  const log::Lsn before = log()->reserved_lsn();
  std::future<Status> first = CommitRow(1);
  const bool returned = first.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  if (!returned) gate.Open();  // else the future's end would wait for ever
  ASSERT_TRUE(returned) << "a commit without flush waited for the log";
  ASSERT_OK(first.get());
  const log::Lsn committed = log()->reserved_lsn();
  EXPECT_GT(committed, before);
  EXPECT_LE(log()->durable_lsn(), before) << "bytes became durable with the gate shut";
  {  // Visible to others at once, as any commit.
    auto txn = db->Begin();
    auto r = txn->Get(table, {int64_t{1}});
    ASSERT_TRUE(r.ok() && r->has_value());
  }
  {  // A power cut now: the row whole (its record copied, not yet fenced, may
     // survive) or not at all, and the database opens.
    const std::vector<Row> rows = RowsAfterCutNow("early");
    EXPECT_TRUE(rows.empty() || rows == std::vector<Row>{SampleRow(1, 1, std::nullopt, "v")});
  }

  // With nothing else committed, the log becomes durable once fences pass.
  gate.Open();
  for (int i = 0; i < 5000 && log()->durable_lsn() < committed; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GE(log()->durable_lsn(), committed) << "the background did not make the log durable";
  EXPECT_EQ(RowsAfterCutNow(), (std::vector<Row>{SampleRow(1, 1, std::nullopt, "v")}));
}

TEST_F(LazyCommit, SwitchedBackACommitWaitsForTheLogAgain) {
  db->SetFlushLogAtCommit(true);
  gate.Shut();
  std::future<Status> waiting = CommitRow(2);
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "a commit returned before its record was durable";
  gate.Open();
  ASSERT_EQ(waiting.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_OK(waiting.get());
  EXPECT_EQ(RowsAfterCutNow(), (std::vector<Row>{SampleRow(2, 1, std::nullopt, "v")}));

  // And off again: returns with the fences shut.
  db->SetFlushLogAtCommit(false);
  gate.Shut();
  std::future<Status> lazy = CommitRow(3);
  EXPECT_EQ(lazy.wait_for(std::chrono::seconds(20)), std::future_status::ready)
      << "a commit without flush waited for the log";
  gate.Open();
  ASSERT_OK(lazy.get());
}

// The checkpoint may not pass a lazy commit's undo records before its
// commit record is durable: a crash would make it a loser whose undo the
// recovery does not see, keeping the changes before the checkpoint. Here
// the log is durable past the transaction's page edits (another, durable
// commit), its pages are the oldest dirty ones, and the flush thread is
// held: the checkpoint stays at or before its first record.
TEST_F(LazyCommit, TheCheckpointStaysBeforeALazyCommitUntilItIsDurable) {
  auto fill = db->Begin();
  for (int64_t id = 10; id < 200; ++id) {
    ASSERT_OK(fill->Insert(table, SampleRow(id, 1, std::nullopt, std::string(100, 'f'))));
  }
  ASSERT_OK(fill->Commit());
  ASSERT_OK(impl()->pool()->FlushAll());  // no older dirty page bounds the checkpoint
  const log::Lsn first = log()->reserved_lsn();
  auto lazy = db->Begin();
  ASSERT_OK(lazy->Insert(table, SampleRow(5, 1, std::nullopt, "lazy")));
  ASSERT_OK(lazy->Insert(table, SampleRow(300, 1, std::nullopt, "lazy")));
  db->SetFlushLogAtCommit(true);
  auto durable = db->Begin();
  ASSERT_OK(durable->Insert(table, SampleRow(7, 1, std::nullopt, "durable")));
  ASSERT_OK(durable->Commit());
  db->SetFlushLogAtCommit(false);
  gate.Shut("subito_flush");
  ASSERT_OK(lazy->Commit());
  ASSERT_GT(log()->durable_lsn(), first)
      << "the test lost its reach: nothing past the first record";
  ASSERT_LT(log()->durable_lsn(), log()->reserved_lsn()) << "the lazy commit was made durable";
  ASSERT_OK(impl()->pool()->Checkpoint());
  EXPECT_LE(log()->checkpoint_lsn(), first) << "the checkpoint passed an undo record of a "
                                               "commit not yet durable";
  gate.Open();  // the flush goes on; the pin goes with it
  ASSERT_OK(db->Close());
}

// Until its record is durable a lazy commit keeps its row locks: losers
// hold disjoint locks (a later writer of the same row, lost with it, would
// otherwise be undone in the wrong order). The flush thread is held: the
// next writer of the row waits, and gets it once the flush is done.
TEST_F(LazyCommit, ALazyCommitKeepsItsLocksUntilItIsDurable) {
  gate.Shut("subito_flush");
  auto first = db->Begin();
  ASSERT_OK(first->Insert(table, SampleRow(1, 1, std::nullopt, "first")));
  ASSERT_OK(first->Commit());
  const log::Lsn first_end = log()->reserved_lsn();
  ASSERT_LT(log()->durable_lsn(), first_end) << "the lazy commit was made durable";
  std::future<Status> second = std::async(std::launch::async, [&] {
    auto txn = db->Begin();
    Status s = txn->Update(table, SampleRow(1, 1, std::nullopt, "first"),
                           SampleRow(1, 2, std::nullopt, "second"));
    return s.ok() ? txn->Commit() : s;
  });
  const bool waited =
      second.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout;
  gate.Open();
  EXPECT_TRUE(waited) << "the row's lock went before the commit that held it was durable";
  ASSERT_EQ(second.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_OK(second.get());
  EXPECT_GE(log()->durable_lsn(), first_end);
}

// Its undo file is removed at the end, and a loser's recovery reads it: a
// transaction with one commits durably whatever the setting.
TEST_F(LazyCommit, ATransactionWithAnUndoFileCommitsDurably) {
  auto txn = db->Begin();
  for (int64_t id = 0; id < 20000 && db->Stats().undo_spills == 0; ++id) {
    ASSERT_OK(txn->Insert(table, SampleRow(id, 1, std::nullopt, std::string(200, 'u'))));
  }
  ASSERT_GT(db->Stats().undo_spills, 0u) << "no undo file: the test lost its reach";
  gate.Shut();
  std::future<Status> commit = std::async(std::launch::async, [&] { return txn->Commit(); });
  EXPECT_EQ(commit.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "a commit with an undo file returned before its record was durable";
  gate.Open();
  ASSERT_EQ(commit.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  ASSERT_OK(commit.get());
}

// A prepared transaction's prepare is durable at return whatever the
// setting: the coordinator builds on it.
TEST_F(LazyCommit, APrepareStillWaitsForTheLog) {
  auto txn = db->Begin();
  ASSERT_OK(txn->Insert(table, SampleRow(4, 1, std::nullopt, "v")));
  gate.Shut();
  std::future<Status> prepare =
      std::async(std::launch::async, [&] { return txn->Prepare("xid-4"); });
  EXPECT_EQ(prepare.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "a prepare returned before its record was durable";
  gate.Open();
  ASSERT_EQ(prepare.wait_for(std::chrono::seconds(20)), std::future_status::ready);
  ASSERT_OK(prepare.get());
  ASSERT_OK(txn->Commit());
}

}  // namespace
}  // namespace subito
