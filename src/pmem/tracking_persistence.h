// TrackingPersistence: a Persistence for tests that records every flushed
// cache line (with its content at flush time) and every fence, per thread, and
// rebuilds the bytes a power cut at any point would have left.
//
// Crash model (matches x86 ADR): a line is durable once it was flushed and the
// flushing thread then fenced. Lines only stored, or flushed but not yet
// fenced, are lost -- or, when a random generator is passed, each such flushed
// line survives with probability 1/2 (the hardware may have written it back).
// When two flushes of one line become durable, the later flush wins.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "pmem/persistence.h"
#include "util/crash_clock.h"

namespace subito::pmem {

class TrackingPersistence final : public Persistence {
 public:
  static constexpr size_t kLineSize = 64;
  using Image = std::map<std::string, std::vector<uint8_t>>;

  // With a clock shared with other trackers, events of all of them share
  // one order (ImageAtTime).
  explicit TrackingPersistence(std::shared_ptr<CrashClock> clock = std::make_shared<CrashClock>())
      : clock_(std::move(clock)) {}
  TrackingPersistence(const TrackingPersistence&) = delete;
  TrackingPersistence& operator=(const TrackingPersistence&) = delete;

  void CopyNoDrain(void* dst, const void* src, size_t n) override;
  void FillNoDrain(void* dst, uint8_t byte, size_t n) override;
  void Flush(const void* addr, size_t n) override;
  void Drain() override;
  void OnMap(const std::string& name, const void* base, size_t size) override;
  void OnUnmap(const void* base) override;
  const char* Name() const override { return "tracking (test)"; }

  // Number of events (flushed lines and fences) recorded so far. A crash
  // "at k" keeps the effects of the first k events.
  size_t EventCount() const;
  // Stops recording; later flushes and fences are not part of any image.
  void Freeze();
  size_t FenceCount() const;

  // The image left by a power cut after the first `events` events.
  Image ImageAt(size_t events, std::mt19937_64* rng = nullptr) const;
  // The image left by a power cut when the shared clock read `time`.
  Image ImageAtTime(uint64_t time, std::mt19937_64* rng = nullptr) const;

  // Calls fn(k, image) for every persist point: k = the event count just after
  // each fence, in order, plus the very end. With rng, each image also keeps a
  // random half of the lines flushed but not yet fenced at that moment.
  void ForEachPersistPoint(const std::function<void(size_t, const Image&)>& fn,
                           std::mt19937_64* rng = nullptr) const;

 private:
  struct Region {
    std::string name;
    const uint8_t* base;
    size_t size;
    std::vector<uint8_t> initial;
    bool mapped;
  };
  struct Event {
    uint64_t time;  // clock value
    bool fence;
    uint32_t thread;
    uint32_t region;
    uint64_t offset;  // line-aligned offset in the region
    uint32_t length;  // bytes of the line inside the region
    uint8_t data[kLineSize];
  };
  class Replay;

  void RecordLine(uint32_t region, uint64_t offset, uint32_t length);
  // The image after the first `events` events; the caller holds clock_->mu.
  Image ImageOfFirst(size_t events, std::mt19937_64* rng) const;
  static uint32_t ThreadId();

  std::shared_ptr<CrashClock> clock_;  // its mutex guards everything below
  std::vector<Region> regions_;
  std::vector<Event> events_;
  size_t fences_ = 0;
  bool frozen_ = false;
};

}  // namespace subito::pmem
