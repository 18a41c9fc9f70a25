#include "pmem/prefaulter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>

#include "pmem/numa.h"
#include "util/thread_name.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace subito::pmem {
namespace {
constexpr size_t kChunk = 1 << 20;
}

Prefaulter::Prefaulter(int numa_node, std::function<uint64_t()> consumed, uint64_t lead)
    : numa_node_(numa_node),
      consumed_(std::move(consumed)),
      lead_(lead),
      thread_([this] { Run(); }) {}

Prefaulter::~Prefaulter() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Prefaulter::AddAll(const std::vector<Region>& regions) {
  std::vector<std::vector<Range>> per_region;
  for (Region g : regions) {
    if (g.start > g.size) g.start = 0;
    std::vector<Range>& chunks = per_region.emplace_back();
    for (size_t off = g.start; off < g.size; off += kChunk) {
      chunks.push_back({g.base + off, std::min(kChunk, g.size - off)});
    }
    for (size_t off = 0; off < g.start; off += kChunk) {
      chunks.push_back({g.base + off, std::min(kChunk, g.start - off)});
    }
  }
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0;; ++i) {
      bool any = false;
      for (const std::vector<Range>& chunks : per_region) {
        if (i < chunks.size()) {
          queue_.push_back(chunks[i]);
          any = true;
        }
      }
      if (!any) break;
    }
  }
  cv_.notify_all();
}

void Prefaulter::WaitIdle() {
  std::unique_lock lock(mu_);
  hurry_ = true;
  cv_.notify_all();
  cv_.wait(lock, [this] { return stop_ || (queue_.empty() && !busy_); });
}

void Prefaulter::Run() {
  NameThisThread("subito_prefault");
  PinCurrentThreadToNode(numa_node_);
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    if (consumed_ && !hurry_ && populated_.load(std::memory_order_relaxed) >= consumed_() + lead_) {
      cv_.wait_for(lock, std::chrono::milliseconds(20));  // far enough ahead for now
      continue;
    }
    Range r = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    Populate(r.begin, r.length);
    populated_.fetch_add(r.length, std::memory_order_relaxed);
    lock.lock();
    busy_ = false;
    if (queue_.empty()) cv_.notify_all();
  }
}

void Prefaulter::Populate(uint8_t* begin, size_t length) {
  static const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t misalign = reinterpret_cast<uintptr_t>(begin) % page;
  if (::madvise(begin - misalign, length + misalign, MADV_POPULATE_WRITE) == 0) return;
  // Older kernels: a locked or-with-zero faults the page in for writing
  // without changing its bytes, even if a writer stores to it concurrently.
  for (size_t off = 0; off < length; off += page) {
    __atomic_fetch_or(begin + off, static_cast<uint8_t>(0), __ATOMIC_RELAXED);
  }
}

}  // namespace subito::pmem
