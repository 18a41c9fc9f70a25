// Simulated power loss at every persist point of a concurrent run (tracking
// tier): recovery finds exactly a prefix of what was written, containing
// every commit acknowledged before the cut.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "log/redo_log.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::log {
namespace {

struct Param {
  uint32_t streams;
  bool random_unfenced;  // also keep a random half of flushed-but-unfenced lines
};
void PrintTo(const Param& p, std::ostream* os) {
  *os << p.streams << " stream(s)" << (p.random_unfenced ? ", random unfenced lines" : "");
}

class CrashImages : public ::testing::TestWithParam<Param> {};

struct Ack {
  size_t event;  // tracker events recorded when Commit returned
  Lsn start, end;
};

TEST_P(CrashImages, EveryPersistPointRecoversAPrefixHoldingEveryAck) {
  const uint64_t seed = test::TestSeed();
  test::ScratchDir dir;
  pmem::TrackingPersistence tracker;
  LogOptions o = test::SmallLog(dir.Sub("log"), LogWriteMode::kNf, GetParam().streams);
  o.persistence = &tracker;
  RedoLog* raw = nullptr;
  o.on_log_full = [&] { ASSERT_TRUE(raw->Checkpoint(raw->durable_lsn()).ok()); };

  std::mutex mu;
  std::map<Lsn, std::vector<uint8_t>> truth;
  std::vector<Ack> acks;
  uint64_t capacity = 0;
  {
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    raw = log->get();
    capacity = raw->capacity();
    std::vector<std::thread> threads;
    for (uint32_t t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        std::mt19937_64 rng(seed + t);
        for (uint32_t i = 0; i < 150; ++i) {
          uint32_t len = 16 + static_cast<uint32_t>(rng() % 700);
          auto p = test::Payload((uint64_t{t} << 32) | i, len);
          // Some appends are not waited for: they become durable with a
          // later commit, as a transaction's non-final records do.
          bool wait = rng() % 4 != 0;
          auto r = wait ? raw->Commit(kRecordLogTest, p.data(), len)
                        : raw->Append(kRecordLogTest, p.data(), len);
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          size_t event = tracker.EventCount();
          std::lock_guard lock(mu);
          truth[r->start] = p;
          if (wait) acks.push_back({event, r->start, r->end});
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_GT(raw->stats().checkpoints, 0u) << "the run should wrap the log";
    tracker.Freeze();
    ASSERT_TRUE(raw->Close().ok());
  }
  ASSERT_GT(truth.rbegin()->first, kFirstLsn + capacity) << "the run should wrap the log";

  std::mt19937_64 rng(seed);
  size_t points = 0, reopened = 0;
  std::vector<std::string> names;
  for (uint32_t s = 0; s < GetParam().streams; ++s) names.push_back(LogFiles::StreamPath(o.dir, s));
  tracker.ForEachPersistPoint(
      [&](size_t k, const pmem::TrackingPersistence::Image& image) {
        ++points;
        SCOPED_TRACE(::testing::Message() << "crash after event " << k << " (seed " << seed << ")");
        std::vector<StreamView> views;
        for (const std::string& n : names) {
          const auto& bytes = image.at(n);
          views.push_back({n, bytes.data(), bytes.size()});
        }
        auto st = ScanLog(views);
        ASSERT_TRUE(st.ok()) << st.status().ToString();
        // A prefix: the chain from the checkpoint holds exactly the records
        // appended there, in order, with their bytes.
        Lsn expect = st->checkpoint_lsn;
        Status each = ForEachRecord(views, *st, [&](const LogRecordView& r) {
          EXPECT_EQ(r.lsn, expect);
          auto it = truth.find(r.lsn);
          if (it == truth.end()) return Status::Corruption("record never written");
          EXPECT_EQ(std::vector<uint8_t>(r.payload, r.payload + r.length), it->second);
          expect = r.end;
          return Status::OK();
        });
        ASSERT_TRUE(each.ok()) << each.ToString();
        EXPECT_EQ(expect, st->end_lsn);
        // Every commit acknowledged before the cut survived.
        for (const Ack& a : acks) {
          if (a.event <= k && a.start >= st->checkpoint_lsn) {
            EXPECT_LE(a.end, st->end_lsn) << "lost acknowledged commit at LSN " << a.start;
          }
        }
        // Now and then, open the image for real and write on.
        if (points % 97 == 0) {
          ++reopened;
          std::string copy = dir.Sub("reopen");
          std::filesystem::remove_all(copy);
          std::filesystem::create_directories(copy);
          for (uint32_t s = 0; s < names.size(); ++s) {
            test::WriteFile(LogFiles::StreamPath(copy, s), image.at(names[s]));
          }
          LogOptions ro = test::SmallLog(copy, LogWriteMode::kNf, GetParam().streams);
          // The image may be cut with the log full: its owner checkpoints
          // then, as the run's did (else the commit waits out the timeout).
          RedoLog* reopened_raw = nullptr;
          ro.on_log_full = [&] {
            ASSERT_TRUE(reopened_raw->Checkpoint(reopened_raw->durable_lsn()).ok());
          };
          auto log = RedoLog::Open(ro);
          ASSERT_TRUE(log.ok()) << log.status().ToString();
          reopened_raw = log->get();
          EXPECT_EQ((*log)->recovered().end_lsn, st->end_lsn);
          auto r = (*log)->Commit(kRecordLogTest, "after", 5);
          ASSERT_TRUE(r.ok()) << r.status().ToString();
          EXPECT_EQ(r->start, st->end_lsn);
        }
      },
      GetParam().random_unfenced ? &rng : nullptr);
  EXPECT_GT(points, 200u);
  EXPECT_GT(reopened, 1u);
}

INSTANTIATE_TEST_SUITE_P(Points, CrashImages,
                         ::testing::Values(Param{1, false}, Param{1, true}, Param{3, false},
                                           Param{3, true}),
                         [](const auto& info) {
                           return std::to_string(info.param.streams) + "streams" +
                                  (info.param.random_unfenced ? "_random_unfenced" : "_fenced");
                         });

}  // namespace
}  // namespace subito::log
