// LinkBuf: tracks which reserved ranges of the log buffer have been filled, so
// the writer knows the contiguous filled prefix without any lock (the idea of
// InnoDB 8.0's link_buf).
//
// A thread that finished copying [start, end) calls Complete(start, end): it
// stores `end` in the slot of `start`. Advance() follows the chain of slots
// from the current filled position. Slots hold absolute LSNs, so a stale slot
// from an earlier lap of the ring can never be mistaken for a current one.
//
// Caller guarantees: ranges are kRecordAlign-aligned, never overlap, and a
// range is only reserved once filled() has come within `slots * align` bytes
// of its end (the log buffer's space rule does this).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace subito::log {

class LinkBuf {
 public:
  LinkBuf(uint64_t start, uint64_t slots, uint64_t align)
      : slots_(new std::atomic<uint64_t>[slots]), count_(slots), align_(align), filled_(start) {
    for (uint64_t i = 0; i < slots; ++i) slots_[i].store(0, std::memory_order_relaxed);
  }

  void Complete(uint64_t start, uint64_t end) { Slot(start).store(end, std::memory_order_release); }

  // Moves filled() across every completed range that now touches it, and
  // returns the new value.
  uint64_t Advance() {
    uint64_t f = filled_.load(std::memory_order_acquire);
    for (;;) {
      std::atomic<uint64_t>& slot = Slot(f);
      uint64_t end = slot.load(std::memory_order_acquire);
      if (end <= f || end - f > count_ * align_) return f;  // not (yet) completed
      if (filled_.compare_exchange_weak(f, end, std::memory_order_acq_rel)) {
        // Only the winner clears, and only the value it consumed.
        uint64_t expected = end;
        slot.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
        f = end;
      }
    }
  }

  uint64_t filled() const { return filled_.load(std::memory_order_acquire); }

  // Restarts at `start` (recovery). No range may be in flight.
  void Reset(uint64_t start) {
    for (uint64_t i = 0; i < count_; ++i) slots_[i].store(0, std::memory_order_relaxed);
    filled_.store(start, std::memory_order_release);
  }

 private:
  std::atomic<uint64_t>& Slot(uint64_t lsn) { return slots_[(lsn / align_) % count_]; }

  std::unique_ptr<std::atomic<uint64_t>[]> slots_;
  const uint64_t count_;
  const uint64_t align_;
  std::atomic<uint64_t> filled_;
};

}  // namespace subito::log
