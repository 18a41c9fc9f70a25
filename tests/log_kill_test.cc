// kill -9 under load, many times: every acknowledged commit is found after
// reopening, every recovered byte is what was written, and the log stays
// usable run after run. SUBITO_KILL_ITERATIONS sets the kills per case.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <map>

#include "log/redo_log.h"
#include "test_util.h"
#include "util/coding.h"

extern char** environ;

namespace subito::log {
namespace {

using Param = test::LogCase;

class KillTest : public ::testing::TestWithParam<Param> {};

struct Ack {
  uint32_t thread, seq;
  Lsn start, end;
};

// Runs the child for ~`ms` after its first ack, kills it with SIGKILL, and
// returns every ack it had written.
std::vector<Ack> RunAndKill(const std::string& dir, const Param& p, int ms) {
  std::string streams = std::to_string(p.streams);
  const std::string bytes =
      test::RunChildAndKill(SUBITO_KILL_CHILD, {dir, LogWriteModeName(p.mode), streams, "3"}, ms);
  std::vector<Ack> acks;
  for (size_t off = 0; off + 24 <= bytes.size(); off += 24) {
    const char* a = bytes.data() + off;
    acks.push_back(
        {DecodeFixed32(a), DecodeFixed32(a + 4), DecodeFixed64(a + 8), DecodeFixed64(a + 16)});
  }
  return acks;
}

TEST_P(KillTest, AcknowledgedCommitsSurviveSigkill) {
  int iterations = 10;
  if (const char* env = std::getenv("SUBITO_KILL_ITERATIONS")) iterations = std::atoi(env);
  std::mt19937_64 rng(test::TestSeed());
  test::ScratchDir dir;
  uint64_t total_acks = 0;  // acknowledged and still in the log's range, so checked
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE(::testing::Message() << "kill #" << it);
    std::vector<Ack> acks =
        RunAndKill(dir.Sub("log"), GetParam(), 2 + static_cast<int>(rng() % 150));
    ASSERT_FALSE(acks.empty()) << "child acknowledged nothing";

    LogOptions o;
    o.dir = dir.Sub("log");
    o.write_mode = GetParam().mode;
    o.streams = GetParam().streams;
    o.file_size = 4096 + 256 * 1024;
    o.buffer_size = 128 * 1024;
    auto log = RedoLog::Open(o);
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    const LogState& st = (*log)->recovered();
    std::map<Lsn, std::pair<uint32_t, uint32_t>> found;
    Status each = (*log)->ForEachRecoveredRecord([&](const LogRecordView& r) {
      if (r.length < 8) return Status::Corruption("short record");
      uint32_t t = DecodeFixed32(r.payload), seq = DecodeFixed32(r.payload + 4);
      for (uint32_t i = 8; i < r.length; ++i) {
        if (r.payload[i] != static_cast<uint8_t>(t * 31 + seq * 17 + i)) {
          return Status::Corruption("payload byte differs");
        }
      }
      found[r.lsn] = {t, seq};
      return Status::OK();
    });
    ASSERT_TRUE(each.ok()) << each.ToString();
    for (const Ack& a : acks) {
      if (a.start < st.checkpoint_lsn) continue;  // checkpointed away, legitimately
      ++total_acks;
      auto f = found.find(a.start);
      ASSERT_NE(f, found.end()) << "acknowledged commit lost: thread " << a.thread << " seq "
                                << a.seq << " LSN " << a.start << " (recovered end " << st.end_lsn
                                << ")";
      EXPECT_EQ(f->second, std::make_pair(a.thread, a.seq));
    }
    ASSERT_TRUE((*log)->Close().ok());
  }
  std::cerr << "[ kill ] " << iterations << " kills, " << total_acks
            << " acknowledged commits found\n";
}

INSTANTIATE_TEST_SUITE_P(Modes, KillTest, ::testing::ValuesIn(test::AllLogCases()),
                         [](const auto& info) { return test::LogCaseName(info.param); });

}  // namespace
}  // namespace subito::log
