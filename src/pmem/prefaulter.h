// Prefaulter: a background thread that maps in the pages of PM regions ahead
// of the writers, so no page fault (and, on tmpfs, no page allocation) lands
// on a commit. Contents are never changed: pages are populated with
// madvise(MADV_POPULATE_WRITE), or touched with an atomic or-with-zero where
// the kernel lacks it.
//
// Paced (a `consumed` function and a lead): it stays at most `lead` bytes
// ahead of what the writers have consumed, in queue order, so a large log
// mapped afresh (a restart) is not populated all at once on one of the
// cores the engine needs. WaitIdle lifts the pacing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace subito::pmem {

class Prefaulter {
 public:
  struct Region {
    uint8_t* base;
    size_t size;
    size_t start;  // where its writer starts: [start, size) first, then [0, start)
  };
  // consumed: bytes of the queue, in its order, that writers have passed
  // (null: no pacing).
  explicit Prefaulter(int numa_node = -1, std::function<uint64_t()> consumed = nullptr,
                      uint64_t lead = 0);
  ~Prefaulter();
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  // Queues [base + start, base + size) and then [base, base + start): the
  // order in which a writer starting at `start` will reach them.
  void Add(uint8_t* base, size_t size, size_t start) { AddAll({{base, size, start}}); }
  // Several regions written at once (log streams): their chunks queued in
  // turn, each region's in its writer's order.
  void AddAll(const std::vector<Region>& regions);
  // Blocks until every queued range is populated (tests, benchmarks).
  void WaitIdle();
  uint64_t PopulatedBytes() const { return populated_.load(std::memory_order_relaxed); }

 private:
  struct Range {
    uint8_t* begin;
    size_t length;
  };
  void Run();
  static void Populate(uint8_t* begin, size_t length);

  const int numa_node_;
  const std::function<uint64_t()> consumed_;
  const uint64_t lead_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Range> queue_;  // guarded by mu_
  bool busy_ = false;        // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  bool hurry_ = false;       // guarded by mu_: WaitIdle lifts the pacing
  std::atomic<uint64_t> populated_{0};
  std::thread thread_;
};

}  // namespace subito::pmem
