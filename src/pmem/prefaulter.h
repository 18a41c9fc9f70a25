// Prefaulter: a background thread that maps in the pages of PM regions ahead
// of the writers, so no page fault (and, on tmpfs, no page allocation) lands
// on a commit. Contents are never changed: pages are populated with
// madvise(MADV_POPULATE_WRITE), or touched with an atomic or-with-zero where
// the kernel lacks it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace subito::pmem {

class Prefaulter {
 public:
  explicit Prefaulter(int numa_node = -1);
  ~Prefaulter();
  Prefaulter(const Prefaulter&) = delete;
  Prefaulter& operator=(const Prefaulter&) = delete;

  // Queues [base + start, base + size) and then [base, base + start): the
  // order in which a writer starting at `start` will reach them.
  void Add(uint8_t* base, size_t size, size_t start);
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
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Range> queue_;  // guarded by mu_
  bool busy_ = false;        // guarded by mu_
  bool stop_ = false;        // guarded by mu_
  std::atomic<uint64_t> populated_{0};
  std::thread thread_;
};

}  // namespace subito::pmem
