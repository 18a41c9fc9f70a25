// kill -9 of a process running concurrent transactions, many times over
// one database: after each restart every acknowledged transaction is
// there, no unacknowledged one, every index agrees with its table, and the
// data of earlier runs is intact. Each run's threads use fresh key ranges,
// so the expected state of every range is known. SUBITO_KILL_ITERATIONS
// sets the number of kills.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "engine_workload.h"
#include "test_util.h"

extern char** environ;

namespace subito {
namespace {

constexpr int kThreads = 3;

struct Counts {
  std::vector<size_t> started, acked;
};

Counts RunAndKill(const std::string& dir, uint64_t seed, int first_thread, int ms) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  const std::string s = std::to_string(seed), f = std::to_string(first_thread),
                    n = std::to_string(kThreads);
  const char* argv[] = {
      SUBITO_ENGINE_KILL_CHILD, dir.c_str(), s.c_str(), f.c_str(), n.c_str(), nullptr};
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, SUBITO_ENGINE_KILL_CHILD, &fa, nullptr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  EXPECT_EQ(rc, 0) << "cannot start " << SUBITO_ENGINE_KILL_CHILD;
  std::string bytes;
  char buf[4096];
  auto stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool started = false;
  while (std::chrono::steady_clock::now() < stop_at) {
    pollfd pfd{fds[0], POLLIN, 0};
    if (::poll(&pfd, 1, 1) > 0) {
      const ssize_t got = ::read(fds[0], buf, sizeof buf);
      if (got <= 0) break;  // died on its own: checked below
      bytes.append(buf, static_cast<size_t>(got));
      if (!started) {
        started = true;
        stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
      }
    }
  }
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
      << "child ended on its own, status " << status;
  ssize_t got;
  while ((got = ::read(fds[0], buf, sizeof buf)) > 0) bytes.append(buf, static_cast<size_t>(got));
  ::close(fds[0]);
  Counts c{std::vector<size_t>(kThreads), std::vector<size_t>(kThreads)};
  for (size_t off = 0; off + 8 <= bytes.size(); off += 8) {
    uint32_t rec[2];
    std::memcpy(rec, bytes.data() + off, 8);
    if (rec[0] >= kThreads) continue;
    ++(rec[1] ? c.acked : c.started)[rec[0]];
  }
  return c;
}

TEST(EngineKill, AcknowledgedTransactionsSurviveSigkill) {
  int iterations = 8;
  if (const char* env = std::getenv("SUBITO_KILL_ITERATIONS")) iterations = std::atoi(env);
  const uint64_t seed = test::TestSeed();
  std::mt19937_64 rng(seed);
  test::ScratchDir dir;
  std::vector<std::unique_ptr<test::ThreadWorkload>> plans;
  std::vector<size_t> min_k, max_k;
  size_t total_acked = 0;
  for (int it = 0; it < iterations; ++it) {
    SCOPED_TRACE(::testing::Message() << "kill #" << it << " (seed " << seed << ")");
    const int first = it * kThreads;
    const Counts c = RunAndKill(dir.path(), seed, first, 50 + static_cast<int>(rng() % 400));
    for (int i = 0; i < kThreads; ++i) {
      auto plan = std::make_unique<test::ThreadWorkload>(first + i, seed);
      bool committed = false;
      while (plan->states().size() <= c.started[i]) {
        ASSERT_OK(plan->Next(nullptr, nullptr, &committed, [](uint32_t) {}));
      }
      plans.push_back(std::move(plan));
      min_k.push_back(c.acked[i]);
      max_k.push_back(c.started[i]);
      total_acked += c.acked[i];
    }
    size_t acked_now = 0;
    for (size_t a : c.acked) acked_now += a;
    ASSERT_GT(acked_now, 0u) << "the child acknowledged nothing (stuck in Open or recovery?)";
    auto db = Database::Open(test::SmallOptions(dir.path()));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    std::vector<const test::ThreadWorkload*> all;
    for (auto& p : plans) all.push_back(p.get());
    std::vector<size_t> found(all.size());
    test::CheckRecovered(db->get(), all, min_k, max_k, &found);
    // What recovery settled is what later runs must keep.
    min_k = max_k = found;
  }
  EXPECT_GT(total_acked, 0u);
}

}  // namespace
}  // namespace subito
