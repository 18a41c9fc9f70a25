// kill -9 of a process running concurrent transactions, many times over
// one database: after each restart every acknowledged transaction is
// there, no unacknowledged one, every index agrees with its table, and the
// data of earlier runs is intact. Each run's threads use fresh key ranges,
// so the expected state of every range is known. SUBITO_KILL_ITERATIONS
// sets the number of kills.
#include <gtest/gtest.h>

#include <cstring>

#include "engine_workload.h"
#include "test_util.h"

namespace subito {
namespace {

constexpr int kThreads = 3;

struct Counts {
  std::vector<size_t> started, acked;
};

Counts RunAndKill(const std::string& dir, uint64_t seed, int first_thread, int ms) {
  const std::string bytes = test::RunChildAndKill(
      SUBITO_ENGINE_KILL_CHILD,
      {dir, std::to_string(seed), std::to_string(first_thread), std::to_string(kThreads)}, ms);
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
