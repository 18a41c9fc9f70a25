// Power cut at random instants of a concurrent workload over the whole
// storage stack: the log and the double-write area on the tracked PM tier,
// the page files on a tracked file system (writes not fsync'd are dropped,
// or, in the "sectors" variant, kept sector by sector at random). After
// double-write repair and redo, every page holds exactly the changes whose
// log records are in the recovered log, and every acknowledged change is.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "buffer/buffer_pool.h"
#include "buffer/mtr.h"
#include "buffer/page_recovery.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::buffer {
namespace {

constexpr uint32_t kPs = 4096;
constexpr uint32_t kSlotsUsed = 16;
// Slots spread over every 512-byte sector of a page, so a torn page write
// (sector by sector) shows.
constexpr uint32_t SlotOffset(uint32_t slot) {
  return 64 + slot * 248;
}

struct Change {
  log::Lsn end;
  uint32_t page, slot;
  uint64_t value;
  uint64_t acked_at;  // clock time when acknowledged, or UINT64_MAX
};

struct Param {
  bool sectors;   // keep a random subset of unsynced sectors (torn writes)
  bool file_dwb;  // double-write area in a file (classic) instead of on PM
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << (p.sectors ? "sectors" : "synced") << ", double-write " << (p.file_dwb ? "file" : "PM");
}
class StorageCrash : public ::testing::TestWithParam<Param> {};

TEST_P(StorageCrash, RecoveryFindsExactlyTheLoggedChanges) {
  const uint64_t seed = test::TestSeed();
  auto clock = std::make_shared<CrashClock>();
  pmem::TrackingPersistence pm(clock);
  TrackingFileSystem fs(clock);
  test::ScratchDir dir;
  const std::string space_name = "t.sbt";

  std::unique_ptr<BufferPool> pool;
  log::LogOptions lo = test::SmallLog(dir.Sub("log"), log::LogWriteMode::kNf, 2);
  lo.file_size = 4096 + 64 * 1024;
  lo.persistence = &pm;
  lo.on_log_full = [&] {
    if (pool) pool->OnLogFull();
  };
  auto log = log::RedoLog::Open(lo);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto dwb = GetParam().file_dwb ? DoubleWrite::OpenFile(&fs, "dwb", kPs, 8)
                                 : DoubleWrite::OpenPm(dir.Sub("dwb"), kPs, 8, &pm);
  ASSERT_TRUE(dwb.ok()) << dwb.status().ToString();
  auto space = page::SpaceFile::Create(&fs, space_name, 1, kPs, "t");
  ASSERT_TRUE(space.ok());
  BufferPoolOptions po;
  po.capacity_bytes = 12 * kPs;  // far fewer frames than pages: constant eviction
  po.page_size = kPs;
  po.flush_batch = 8;
  po.cleaner_interval_ms = 2;
  auto p = BufferPool::Create(po, log->get(), dwb->get());
  ASSERT_TRUE(p.ok());
  pool = std::move(*p);
  ASSERT_TRUE(pool->AddSpace(space->get()).ok());

  const uint64_t start_time = clock->Now();
  std::mutex mu;
  std::vector<Change> changes;
  std::vector<uint32_t> pages;
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(pool->LogFreeCheck().ok());
    auto h = pool->Allocate(1);
    ASSERT_TRUE(h.ok());
    std::vector<uint8_t> hdr(kPs);
    page::InitPage(hdr.data(), kPs, page::kPageTest, 1, h->id().page_no);
    Mtr mtr(pool.get());
    mtr.Write(*h, 0, hdr.data(), page::kPageHeaderSize);
    ASSERT_TRUE(mtr.Commit().ok());
    pages.push_back(h->id().page_no);
  }
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(seed + t);
      for (uint32_t i = 0; i < 1500; ++i) {
        ASSERT_TRUE(pool->LogFreeCheck().ok());
        const uint32_t pg = pages[rng() % pages.size()];
        const uint32_t slot = static_cast<uint32_t>(rng() % kSlotsUsed);
        const uint64_t value = (uint64_t{t + 1} << 32) | (i + 1);
        auto h = pool->Fetch({1, pg}, Latch::kExclusive);
        ASSERT_TRUE(h.ok()) << h.status().ToString();
        uint8_t b[8];
        EncodeFixed64(b, value);
        Mtr mtr(pool.get());
        mtr.Write(*h, SlotOffset(slot), b, 8);
        auto r = mtr.Commit();
        ASSERT_TRUE(r.ok());
        h->Release();
        uint64_t acked = UINT64_MAX;
        if (rng() % 3 == 0) {  // a "transaction commit": wait until durable
          ASSERT_TRUE(pool->log()->WaitDurable(r->end).ok());
          acked = clock->Now();
        }
        std::lock_guard lock(mu);
        changes.push_back({r->end, pg, slot, value, acked});
      }
    });
  }
  for (auto& th : threads) th.join();
  const uint64_t end_time = clock->Now();
  EXPECT_GT(pool->stats().pages_written, 50u);
  EXPECT_GT(pool->stats().checkpoints, 0u);
  EXPECT_GT(log->get()->reserved_lsn(), log::kFirstLsn + log->get()->capacity())
      << "the run should wrap the log";
  pool.reset();
  dwb->reset();
  space->reset();
  log->reset();

  std::mt19937_64 rng(seed);
  const std::vector<uint64_t> times =
      test::CutTimes(start_time, end_time, fs.TimesAfterWrites(), 24, rng);
  for (uint64_t at : times) {
    SCOPED_TRACE(::testing::Message() << "power cut at clock " << at << " (seed " << seed << ")");
    // Lay the images out as files and recover from them.
    const std::string c = dir.Sub("crash");
    test::WriteCrashImage(c, pm.ImageAtTime(at, GetParam().sectors ? &rng : nullptr),
                          fs.ImageAtTime(at, rng(), GetParam().sectors));
    log::LogOptions ro = test::SmallLog(c + "/log", log::LogWriteMode::kNf, 2);
    ro.file_size = lo.file_size;
    auto rlog = log::RedoLog::Open(ro);
    ASSERT_TRUE(rlog.ok()) << rlog.status().ToString();
    auto rdwb = GetParam().file_dwb ? DoubleWrite::OpenFile(PosixFileSystem(), c + "/dwb", kPs, 8)
                                    : DoubleWrite::OpenPm(c + "/dwb", kPs, 8);
    ASSERT_TRUE(rdwb.ok()) << rdwb.status().ToString();
    auto rspace = page::SpaceFile::Open(PosixFileSystem(), c + "/" + space_name);
    ASSERT_TRUE(rspace.ok()) << rspace.status().ToString();
    po.cleaner_threads = 1;  // cleaners run during recovery, as they would for real
    po.capacity_bytes = 16 * kPs;
    auto rpool = BufferPool::Create(po, rlog->get(), rdwb->get());
    ASSERT_TRUE(rpool.ok());
    ASSERT_TRUE((*rpool)->AddSpace(rspace->get()).ok());
    auto recovered = RecoverPages(rpool->get(), rdwb->get());
    ASSERT_TRUE(recovered.ok()) << recovered.status().ToString();

    const log::Lsn end = (*rlog)->recovered().end_lsn;
    std::map<std::pair<uint32_t, uint32_t>, std::pair<log::Lsn, uint64_t>> expect;
    for (const Change& ch : changes) {
      if (ch.acked_at <= at) {
        ASSERT_LE(ch.end, end) << "acknowledged change lost (page " << ch.page << ")";
      }
      auto& e = expect[{ch.page, ch.slot}];
      if (ch.end <= end && ch.end >= e.first) e = {ch.end, ch.value};
    }
    for (auto& [key, e] : expect) {
      auto h = (*rpool)->Fetch({1, key.first}, Latch::kShared);
      if (!h.ok() && h.status().code() == Status::Code::kNotFound) {
        ASSERT_EQ(e.second, 0u) << "page " << key.first << " missing";
        continue;
      }
      ASSERT_TRUE(h.ok()) << h.status().ToString();
      ASSERT_EQ(DecodeFixed64(h->data() + SlotOffset(key.second)), e.second)
          << "page " << key.first << " slot " << key.second;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Images, StorageCrash,
                         ::testing::Values(Param{false, false}, Param{true, false},
                                           Param{false, true}, Param{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.sectors ? "sectors" : "synced") +
                                  (info.param.file_dwb ? "_file_dwb" : "_pm_dwb");
                         });

}  // namespace
}  // namespace subito::buffer
