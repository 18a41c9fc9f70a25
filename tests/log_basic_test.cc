// The log's behaviour end to end through RedoLog, in both write modes and
// with one and several streams.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "log/log_files.h"
#include "log/log_reader.h"
#include "log/redo_log.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::log {
namespace {

using Param = test::LogCase;

class LogTest : public ::testing::TestWithParam<Param> {
 protected:
  LogOptions Options(uint64_t file_size = 4096 + (4u << 20)) {
    LogOptions o = test::SmallLog(dir_.path(), GetParam().mode, GetParam().streams);
    o.file_size = file_size;
    o.buffer_size = 256 * 1024;
    return o;
  }
  std::unique_ptr<RedoLog> OpenOk(const LogOptions& o) {
    auto log = RedoLog::Open(o);
    EXPECT_TRUE(log.ok()) << log.status().ToString();
    return log.ok() ? std::move(*log) : nullptr;
  }
  struct Rec {
    uint16_t type;
    std::vector<uint8_t> payload;
  };
  std::vector<std::pair<Lsn, Rec>> Recovered(RedoLog& log) {
    std::vector<std::pair<Lsn, Rec>> out;
    Status s = log.ForEachRecoveredRecord([&](const LogRecordView& r) {
      out.push_back({r.lsn, Rec{r.type, {r.payload, r.payload + r.length}}});
      return Status::OK();
    });
    EXPECT_TRUE(s.ok()) << s.ToString();
    return out;
  }

  test::ScratchDir dir_;
};

TEST_P(LogTest, CommittedRecordsComeBackInOrderAfterReopen) {
  std::vector<std::pair<Lsn, Rec>> written;
  {
    auto log = OpenOk(Options());
    ASSERT_TRUE(log);
    EXPECT_EQ(log->recovered().records, 0u);
    for (uint32_t i = 0; i < 600; ++i) {
      uint32_t len = (i * 37) % 3000;
      auto p = test::Payload(i, len);
      auto r = log->Commit(kRecordLogTest, p.data(), len);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_GE(log->durable_lsn(), r->end);
      written.push_back({r->start, Rec{kRecordLogTest, p}});
    }
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = OpenOk(Options());
  ASSERT_TRUE(log);
  EXPECT_TRUE(log->recovered().clean_shutdown);
  auto got = Recovered(*log);
  ASSERT_EQ(got.size(), written.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].first, written[i].first);
    EXPECT_EQ(got[i].second.payload, written[i].second.payload) << "record " << i;
  }
}

TEST_P(LogTest, ConcurrentCommitsAreAllDurableAndOrderedPerThread) {
  constexpr int kThreads = 4, kPerThread = 400;
  {
    auto log = OpenOk(Options());
    ASSERT_TRUE(log);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          uint8_t p[200];
          EncodeFixed32(p, static_cast<uint32_t>(t));
          EncodeFixed32(p + 4, static_cast<uint32_t>(i));
          auto r = log->Commit(kRecordLogTest, p, 8 + static_cast<uint32_t>(i % 192));
          ASSERT_TRUE(r.ok());
          ASSERT_GE(log->durable_lsn(), r->end);
        }
      });
    }
    for (auto& th : threads) th.join();
    auto st = log->stats();
    EXPECT_EQ(st.appends, static_cast<uint64_t>(kThreads * kPerThread));
    EXPECT_GT(st.persisted_bytes, 0u);
    ASSERT_TRUE(log->Close().ok());
  }
  auto log = OpenOk(Options());
  ASSERT_TRUE(log);
  std::vector<int> next(kThreads, 0);
  for (auto& [lsn, rec] : Recovered(*log)) {
    int t = static_cast<int>(DecodeFixed32(rec.payload.data()));
    int i = static_cast<int>(DecodeFixed32(rec.payload.data() + 4));
    ASSERT_LT(t, kThreads);
    EXPECT_EQ(i, next[t]) << "thread " << t;
    next[t] = i + 1;
  }
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(next[t], kPerThread);
}

// Many small group commits racing over several streams: progress must never
// stop (a lost wake-up or a stale durable minimum would hang here). A
// watchdog fails the test instead of letting it hang.
TEST_P(LogTest, ConcurrentCommitsNeverStall) {
  auto log = OpenOk(Options());
  ASSERT_TRUE(log);
  RedoLog* raw = log.get();
  std::atomic<int> done{0};
  std::atomic<uint64_t> commits{0};
  std::vector<std::thread> threads;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      uint8_t p[480] = {};
      while (std::chrono::steady_clock::now() < until) {
        auto r = raw->Commit(kRecordLogTest, p, sizeof p);
        ASSERT_TRUE(r.ok());
        commits.fetch_add(1);
        if (raw->reserved_lsn() - raw->checkpoint_lsn() > raw->capacity() / 2) {
          ASSERT_TRUE(raw->Checkpoint(raw->durable_lsn()).ok());
        }
      }
      done.fetch_add(1);
    });
  }
  uint64_t last = 0;
  int idle = 0;
  while (done.load() < 4) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    uint64_t now = commits.load();
    idle = now == last ? idle + 1 : 0;
    last = now;
    if (idle >= 100) {
      std::fprintf(stderr, "no commit for 10 s: durable %llu reserved %llu\n",
                   static_cast<unsigned long long>(raw->durable_lsn()),
                   static_cast<unsigned long long>(raw->reserved_lsn()));
      std::abort();  // the threads are stuck; nothing else can end the test
    }
  }
  for (auto& th : threads) th.join();
  EXPECT_GT(commits.load(), 1000u);
}

TEST_P(LogTest, WrapsManyLapsWithCheckpointsAndIgnoresStaleLaps) {
  LogOptions o = Options(4096 + 64 * 1024);
  RedoLog* raw = nullptr;
  o.on_log_full = [&] { ASSERT_TRUE(raw->Checkpoint(raw->durable_lsn()).ok()); };
  Lsn last_end = 0;
  std::map<Lsn, std::vector<uint8_t>> by_lsn;
  {
    auto log = OpenOk(o);
    ASSERT_TRUE(log);
    raw = log.get();
    const uint64_t total = 6 * log->capacity();
    for (uint32_t i = 0; log->reserved_lsn() < kFirstLsn + total; ++i) {
      auto p = test::Payload(i, 100 + (i * 131) % 2000);
      auto r = log->Commit(kRecordLogTest, p.data(), static_cast<uint32_t>(p.size()));
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      by_lsn[r->start] = p;
      last_end = r->end;
    }
    EXPECT_GT(log->stats().log_full_waits, 0u);
    EXPECT_GT(log->stats().checkpoints, 3u);
    EXPECT_GT(log->checkpoint_lsn(), kFirstLsn + 4 * log->capacity());
    ASSERT_TRUE(log->Close().ok());
  }
  raw = nullptr;
  auto log = OpenOk(o);
  ASSERT_TRUE(log);
  EXPECT_EQ(log->recovered().end_lsn, last_end);
  auto got = Recovered(*log);
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front().first, log->recovered().checkpoint_lsn);
  for (auto& [lsn, rec] : got) {
    ASSERT_TRUE(by_lsn.count(lsn)) << lsn;
    EXPECT_EQ(rec.payload, by_lsn[lsn]);
  }
  // The next append continues the chain after the old end.
  raw = log.get();
  auto r = log->Commit(kRecordLogTest, "x", 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->start, last_end);
}

TEST_P(LogTest, FullLogMakesAppendsWaitForACheckpoint) {
  auto log = OpenOk(Options(4096 + 64 * 1024));
  ASSERT_TRUE(log);
  std::vector<uint8_t> p(1000, 7);
  while (log->reserved_lsn() + RecordSpan(p.size()) <= kFirstLsn + log->capacity()) {
    ASSERT_TRUE(log->Commit(kRecordLogTest, p.data(), 1000).ok());
  }
  std::atomic<bool> done{false};
  std::thread blocked([&] {
    auto r = log->Commit(kRecordLogTest, p.data(), 1000);
    EXPECT_TRUE(r.ok());
    done = true;
  });
  for (int i = 0; i < 1000 && log->stats().log_full_waits == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(log->stats().log_full_waits, 1u);
  EXPECT_FALSE(done.load());
  ASSERT_TRUE(log->Checkpoint(log->durable_lsn()).ok());
  blocked.join();
  EXPECT_TRUE(done.load());
  ASSERT_TRUE(log->Close().ok());
}

// A buffer larger than the whole log and appends that nobody commits: the
// full log must still make the filled prefix durable so the owner can
// checkpoint.
TEST_P(LogTest, FullLogWithABufferLargerThanTheLogKeepsGoing) {
  LogOptions o = Options(4096 + 64 * 1024);
  o.buffer_size = 1u << 20;
  RedoLog* raw = nullptr;
  o.on_log_full = [&] { ASSERT_TRUE(raw->Checkpoint(raw->durable_lsn()).ok()); };
  auto log = OpenOk(o);
  ASSERT_TRUE(log);
  raw = log.get();
  std::atomic<bool> finished{false};
  std::thread appender([&] {
    std::vector<uint8_t> p(700, 3);
    while (raw->reserved_lsn() < kFirstLsn + 4 * raw->capacity()) {
      ASSERT_TRUE(raw->Append(kRecordLogTest, p.data(), 700).ok());
    }
    finished = true;
  });
  for (int i = 0; i < 2000 && !finished.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!finished.load()) {
    std::fprintf(stderr, "appends stuck on a full log for 20 s\n");
    std::abort();
  }
  appender.join();
  EXPECT_GT(log->stats().log_full_waits, 0u);
}

TEST_P(LogTest, CloseReleasesAnAppendParkedOnAFullLog) {
  auto log = OpenOk(Options(4096 + 64 * 1024));
  ASSERT_TRUE(log);
  std::vector<uint8_t> p(1000, 7);
  while (log->reserved_lsn() + RecordSpan(p.size()) <= kFirstLsn + log->capacity()) {
    ASSERT_TRUE(log->Commit(kRecordLogTest, p.data(), 1000).ok());
  }
  const Lsn durable = log->durable_lsn();
  Status parked;
  std::thread blocked([&] { parked = log->Commit(kRecordLogTest, p.data(), 1000).status(); });
  for (int i = 0; i < 1000 && log->stats().log_full_waits == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(log->stats().log_full_waits, 1u);
  EXPECT_TRUE(log->Close().ok());
  blocked.join();
  EXPECT_EQ(parked.code(), Status::Code::kShutdown) << parked.ToString();
  EXPECT_TRUE(log->Append(kRecordLogTest, "x", 1).status().code() == Status::Code::kShutdown);
  log.reset();
  auto again = OpenOk(Options(4096 + 64 * 1024));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->recovered().end_lsn, durable);
  EXPECT_TRUE(again->recovered().clean_shutdown);
}

TEST_P(LogTest, AppendsWithoutWaitingBecomeDurableAtTheNextCommit) {
  auto log = OpenOk(Options());
  ASSERT_TRUE(log);
  Lsn before = log->durable_lsn();
  std::vector<Lsn> ends;
  for (int i = 0; i < 50; ++i) {
    auto r = log->Append(kRecordLogTest, "abcdef", 6);
    ASSERT_TRUE(r.ok());
    ends.push_back(r->end);
  }
  EXPECT_LT(log->durable_lsn(), ends.back());
  EXPECT_GE(log->durable_lsn(), before);
  ASSERT_TRUE(log->WaitDurable(ends.back()).ok());
  EXPECT_GE(log->durable_lsn(), ends.back());
  EXPECT_TRUE(log->WaitDurable(log->reserved_lsn() + 1).IsInvalidArgument());
}

TEST_P(LogTest, RejectsRecordsThatCannotFitAndTypeZero) {
  auto log = OpenOk(Options(4096 + 64 * 1024));
  ASSERT_TRUE(log);
  std::vector<uint8_t> big(log->max_payload() + 1);
  auto r = log->Append(kRecordLogTest, big.data(), static_cast<uint32_t>(big.size()));
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument());
  EXPECT_NE(r.status().message().find("exceeds"), std::string::npos);
  EXPECT_TRUE(log->Append(kRecordInvalid, "a", 1).status().IsInvalidArgument());
  auto ok = log->Commit(kRecordLogTest, big.data(), log->max_payload());
  EXPECT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_TRUE(log->Checkpoint(log->durable_lsn() + 8).IsInvalidArgument());
}

TEST_P(LogTest, PaddingFollowsTheWriteAheadSize) {
  LogOptions o = Options();
  o.write_ahead_size = 4096;
  auto log = OpenOk(o);
  ASSERT_TRUE(log);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(log->Commit(kRecordLogTest, "0123456789", 10).ok());
  auto st = log->stats();
  EXPECT_GT(st.padding_bytes, 0u);
  if (GetParam().mode == LogWriteMode::kNf) {
    // nf copies only new bytes and never re-zeroes padding: 20 records of 48
    // bytes plus at most one 4 KiB pad per stream.
    EXPECT_LE(st.persisted_bytes, 20u * 48 + 4096u * GetParam().streams);
  } else {
    // classic rewrites whole 4 KiB blocks each time.
    EXPECT_GE(st.persisted_bytes, 20u * 4096);
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, LogTest, ::testing::ValuesIn(test::AllLogCases()),
                         [](const auto& info) { return test::LogCaseName(info.param); });

// A backup reads each stream file at another moment (RedoLog::
// BeginBackupCopy): streams read late hold records far past the gap the one
// read first leaves, beyond I7's reach. The copy's recovery erases them all,
// so none can rejoin the chain once the restored copy writes up to them.
// (One stream file is read at one moment: the cases have four.)
class BackupCopy : public ::testing::TestWithParam<LogWriteMode> {};

TEST_P(BackupCopy, OpensWithNoRecordPastItsEnd) {
  test::ScratchDir dir;
  LogOptions o = test::SmallLog(dir.path() + "/log", GetParam(), 4);
  o.file_size = 4096 + (4u << 20);
  o.buffer_size = 256 * 1024;
  auto opened = RedoLog::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<RedoLog> log = std::move(*opened);
  std::vector<uint8_t> p(1000, 7);
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(log->Commit(kRecordLogTest, p.data(), 1000).ok());
  log->BeginBackupCopy();
  std::vector<std::vector<uint8_t>> copied;
  copied.push_back(test::ReadFile(LogFiles::StreamPath(o.dir, 0)));
  const Lsn first_read_at = log->durable_lsn();
  while (log->durable_lsn() < first_read_at + 6 * o.buffer_size) {
    ASSERT_TRUE(log->Commit(kRecordLogTest, p.data(), 1000).ok());
  }
  for (uint32_t s = 1; s < o.streams; ++s) {
    copied.push_back(test::ReadFile(LogFiles::StreamPath(o.dir, s)));
  }
  log->EndBackupCopy();
  ASSERT_TRUE(log->Close().ok());
  log.reset();

  LogOptions co = o;
  co.dir = dir.path() + "/copy";
  std::filesystem::create_directories(co.dir);
  for (uint32_t s = 0; s < copied.size(); ++s) {
    test::WriteFile(LogFiles::StreamPath(co.dir, s), copied[s]);
  }
  // The copy's end and where the records past it end, as its slot has the
  // scan look, or over the whole lap.
  auto past_end = [&](bool whole_lap) -> std::pair<Lsn, Lsn> {
    std::vector<std::vector<uint8_t>> bytes;
    for (uint32_t s = 0; s < copied.size(); ++s) {
      bytes.push_back(test::ReadFile(LogFiles::StreamPath(co.dir, s)));
    }
    if (whole_lap) test::SetCheckpointReach(bytes[0], 0);
    std::vector<StreamView> views;
    for (uint32_t s = 0; s < bytes.size(); ++s) {
      views.push_back({LogFiles::StreamPath(co.dir, s), bytes[s].data(), bytes[s].size()});
    }
    auto st = ScanLog(views);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (!st.ok()) return {0, 0};
    if (!whole_lap) {
      EXPECT_EQ(st->write_reach, 0u) << "the copy's slot names a reach";
    }
    return {st->end_lsn, st->orphan_end};
  };
  const auto [end, orphans_end] = past_end(false);
  EXPECT_LT(end, first_read_at + 2 * o.buffer_size) << "no gap: the test copied nothing late";
  EXPECT_GT(orphans_end, end + 3 * o.buffer_size) << "no record lay beyond I7's reach";

  auto reopened = RedoLog::Open(co);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  std::unique_ptr<RedoLog> restored = std::move(*reopened);
  EXPECT_EQ(restored->recovered().end_lsn, end);
  ASSERT_TRUE(restored->Commit(kRecordLogTest, p.data(), 1000).ok());
  ASSERT_TRUE(restored->Close().ok());
  restored.reset();
  const auto [end_after, orphans_after] = past_end(true);
  EXPECT_GT(end_after, end);
  EXPECT_EQ(orphans_after, end_after) << "records from before the copy remain past its end";
}

INSTANTIATE_TEST_SUITE_P(Modes, BackupCopy,
                         ::testing::Values(LogWriteMode::kNf, LogWriteMode::kClassic),
                         [](const auto& info) {
                           return std::string(info.param == LogWriteMode::kNf ? "nf" : "classic");
                         });

}  // namespace
}  // namespace subito::log
