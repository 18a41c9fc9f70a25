// Commits without flushing the log (Options::flush_log_at_commit = false,
// the server's subito_flush_log_at_trx_commit=0): a commit returns while
// its record is not yet durable, the purge thread makes the log durable
// without another commit, a power cut after that keeps the transaction, and
// switching the setting back makes commits wait again. The PM tier's fences
// are held shut by a gate, so "not yet durable" is certain, not a race.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>

#include "crash_images.h"
#include "engine/engine_impl.h"
#include "engine_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;

// Forwards to `inner`; Drain waits while the gate is shut, so no byte
// becomes durable then (TrackingPersistence counts a line only once drained).
class GatedPersistence : public pmem::Persistence {
 public:
  explicit GatedPersistence(pmem::Persistence* inner) : inner_(inner) {}
  void Shut() {
    std::lock_guard lock(mu_);
    open_ = false;
  }
  void Open() {
    {
      std::lock_guard lock(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }
  void CopyNoDrain(void* dst, const void* src, size_t n) override {
    inner_->CopyNoDrain(dst, src, n);
  }
  void FillNoDrain(void* dst, uint8_t byte, size_t n) override {
    inner_->FillNoDrain(dst, byte, n);
  }
  void Flush(const void* addr, size_t n) override { inner_->Flush(addr, n); }
  void Drain() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return open_; });
    inner_->Drain();
  }
  void OnMap(const std::string& name, const void* base, size_t size) override {
    inner_->OnMap(name, base, size);
  }
  void OnUnmap(const void* base) override { inner_->OnUnmap(base); }
  const char* Name() const override { return "gated"; }

 private:
  pmem::Persistence* const inner_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = true;
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
  log::RedoLog* log() { return static_cast<engine::DatabaseImpl*>(db.get())->log(); }
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
  std::vector<Row> RowsAfterCutNow() {
    const std::string c = CutImage(clock->Now(), "cut");
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
