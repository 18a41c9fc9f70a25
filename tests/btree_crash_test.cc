// Power cut at random instants while a B+-tree grows, splits and shrinks
// (log and double-write on the tracked PM tier, the space file on a tracked
// file system). After recovery the tree, scanned both ways, holds exactly
// the operations whose log records survived, in order: splits are atomic.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include "btree/btree.h"
#include "btree/key_encoding.h"
#include "buffer/page_recovery.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"

namespace subito::btree {
namespace {

constexpr uint32_t kPs = 4096;

struct Op {
  log::Lsn end;  // the log's reserved end right after the op (one writer)
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
  uint64_t acked_at;
};

TEST(BTreeCrash, RecoveredTreesHoldExactlyTheLoggedOperations) {
  const uint64_t seed = test::TestSeed();
  auto clock = std::make_shared<CrashClock>();
  pmem::TrackingPersistence pm(clock);
  TrackingFileSystem fs(clock);
  test::ScratchDir dir;
  std::unique_ptr<buffer::BufferPool> pool;
  log::LogOptions lo = test::SmallLog(dir.Sub("log"), log::LogWriteMode::kNf, 1);
  lo.file_size = 4096 + 256 * 1024;
  lo.persistence = &pm;
  lo.on_log_full = [&] {
    if (pool) pool->OnLogFull();
  };
  auto log = log::RedoLog::Open(lo);
  ASSERT_TRUE(log.ok());
  auto dwb = buffer::DoubleWrite::OpenPm(dir.Sub("dwb"), kPs, 8, &pm);
  ASSERT_TRUE(dwb.ok());
  auto space = page::SpaceFile::Create(&fs, "t.sbt", 1, kPs, "t");
  ASSERT_TRUE(space.ok());
  buffer::BufferPoolOptions po;
  po.capacity_bytes = 24 * kPs;
  po.page_size = kPs;
  po.flush_batch = 8;
  po.cleaner_interval_ms = 2;
  auto p = buffer::BufferPool::Create(po, log->get(), dwb->get());
  ASSERT_TRUE(p.ok());
  pool = std::move(*p);
  ASSERT_TRUE(pool->AddSpace(space->get()).ok());
  auto tree = BTree::Create(pool.get(), 1);
  ASSERT_TRUE(tree.ok());
  ASSERT_TRUE((*log)->WaitDurable((*log)->reserved_lsn()).ok());

  const uint64_t start_time = clock->Now();
  std::vector<Op> ops;
  std::atomic<bool> done{false};
  std::thread reader([&] {  // concurrent scans, as a long read would
    while (!done.load()) {
      BTree::Cursor c(tree->get());
      ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
      for (int i = 0; i < 200 && c.Valid(); ++i) {
        const Status st = c.Next();
        ASSERT_TRUE(st.ok()) << st.ToString();
      }
    }
  });
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 3000; ++i) {
    const std::string key = KeyEncoder().Unsigned(rng() % 800, 4).Release() +
                            std::string(rng() % 3 == 0 ? rng() % 60 : 0, 'k');
    Op op{0, key, std::nullopt, UINT64_MAX};
    if (rng() % 4 == 0) {
      auto d = (*tree)->Delete(key);
      ASSERT_TRUE(d.ok());
      if (!*d) continue;  // nothing logged
    } else {
      // Some values are long enough for overflow chains.
      op.value = std::string(rng() % 10 == 0 ? 2000 + rng() % 8000 : rng() % 150,
                             static_cast<char>('a' + i % 26));
      ASSERT_TRUE((*tree)->Put(key, *op.value).ok());
    }
    op.end = (*log)->reserved_lsn();
    if (rng() % 4 == 0) {
      ASSERT_TRUE((*log)->WaitDurable(op.end).ok());
      op.acked_at = clock->Now();
    }
    ops.push_back(std::move(op));
  }
  done = true;
  reader.join();
  const uint64_t end_time = clock->Now();
  EXPECT_GT(pool->stats().pages_written, 20u);
  tree->reset();
  pool.reset();
  dwb->reset();
  space->reset();
  log->reset();

  const std::vector<uint64_t> times =
      test::CutTimes(start_time, end_time, fs.TimesAfterWrites(), 20, rng);
  for (uint64_t at : times) {
    SCOPED_TRACE(::testing::Message() << "power cut at clock " << at << " (seed " << seed << ")");
    const std::string c = dir.Sub("crash");
    test::WriteCrashImage(c, pm.ImageAtTime(at, &rng), fs.ImageAtTime(at, rng(), true));

    log::LogOptions ro = test::SmallLog(c + "/log", log::LogWriteMode::kNf, 1);
    ro.file_size = lo.file_size;
    auto rlog = log::RedoLog::Open(ro);
    ASSERT_TRUE(rlog.ok()) << rlog.status().ToString();
    auto rdwb = buffer::DoubleWrite::OpenPm(c + "/dwb", kPs, 8);
    ASSERT_TRUE(rdwb.ok());
    auto rspace = page::SpaceFile::Open(PosixFileSystem(), c + "/t.sbt");
    ASSERT_TRUE(rspace.ok()) << rspace.status().ToString();
    po.capacity_bytes = 64 * kPs;
    auto rpool = buffer::BufferPool::Create(po, rlog->get(), rdwb->get());
    ASSERT_TRUE(rpool.ok());
    ASSERT_TRUE((*rpool)->AddSpace(rspace->get()).ok());
    auto rec = buffer::RecoverPages(rpool->get(), rdwb->get());
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    auto rtree = BTree::Open(rpool->get(), 1);
    ASSERT_TRUE(rtree.ok()) << rtree.status().ToString();

    const log::Lsn end = (*rlog)->recovered().end_lsn;
    std::map<std::string, std::string> model;
    for (const Op& op : ops) {
      if (op.acked_at <= at) {
        ASSERT_LE(op.end, end) << "acknowledged operation lost";
      }
      if (op.end > end) break;
      if (op.value) {
        model[op.key] = *op.value;
      } else {
        model.erase(op.key);
      }
    }
    BTree::Cursor cur(rtree->get());
    ASSERT_TRUE(cur.Seek(SeekMode::kFirst).ok());
    for (auto& [k, v] : model) {
      ASSERT_TRUE(cur.Valid()) << "recovered tree is missing keys";
      ASSERT_EQ(cur.key(), k);
      ASSERT_EQ(cur.value(), v);
      ASSERT_TRUE(cur.Next().ok());
    }
    ASSERT_FALSE(cur.Valid()) << "recovered tree has extra keys";
    ASSERT_TRUE(cur.Seek(SeekMode::kLast).ok());
    for (auto it = model.rbegin(); it != model.rend(); ++it) {
      ASSERT_TRUE(cur.Valid());
      ASSERT_EQ(cur.key(), it->first);
      ASSERT_TRUE(cur.Prev().ok());
    }
    ASSERT_FALSE(cur.Valid());
  }
}

}  // namespace
}  // namespace subito::btree
