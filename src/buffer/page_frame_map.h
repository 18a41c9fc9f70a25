// PageFrameMap: the buffer pool's page table within one shard, page -> frame.
//
// Open addressing in one array (linear probing, deletion by backward shift,
// no tombstones), so that a lookup reads one or two adjacent cache lines
// where a node-based map reads a bucket and then a node elsewhere: every
// page fetch makes one lookup, and in a large pool both of the node map's
// reads missed the caches.
//
// Invariants:
//  M1. Every key sits at its home slot or after it, with no empty slot in
//      between (wrapping at the end): Find may stop at the first empty slot.
//  M2. At most half of the slots are used (the array doubles before), so
//      probe runs stay short and an empty slot always exists.
// Not thread-safe: the pool guards each shard with its mutex (T1-T3).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

#include "buffer/page_id.h"

namespace subito::buffer {

class PageFrameMap {
 public:
  // The page's hash: the pool picks the shard from its top six bits and the
  // map the home slot from the bits just below them.
  static uint64_t Hash(PageId id) { return Mix(Key(id)); }

  std::optional<uint32_t> Find(PageId id) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t key = Key(id);
    for (size_t i = Home(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.frame == kEmpty) return std::nullopt;
      if (s.key == key) return s.frame;
    }
  }
  bool contains(PageId id) const { return Find(id).has_value(); }

  // Maps id to frame, replacing what it mapped to.
  void Put(PageId id, uint32_t frame) {
    if ((count_ + 1) * 2 > slots_.size()) Grow();
    const uint64_t key = Key(id);
    size_t i = Home(key);
    for (; slots_[i].frame != kEmpty; i = (i + 1) & mask_) {
      if (slots_[i].key == key) {
        slots_[i].frame = frame;
        return;
      }
    }
    slots_[i] = {key, frame};
    ++count_;
  }

  // Removes id's entry, if any, and closes the gap it leaves (M1).
  void Erase(PageId id) {
    if (slots_.empty()) return;
    const uint64_t key = Key(id);
    size_t gap = Home(key);
    for (;; gap = (gap + 1) & mask_) {
      if (slots_[gap].frame == kEmpty) return;
      if (slots_[gap].key == key) break;
    }
    // Each later key of the run whose home is not in (gap, i] moves into
    // the gap: it was probed past the gap, so it may sit there.
    for (size_t i = (gap + 1) & mask_; slots_[i].frame != kEmpty; i = (i + 1) & mask_) {
      const size_t home = Home(slots_[i].key);
      const bool home_in_range = gap <= i ? (gap < home && home <= i) : (gap < home || home <= i);
      if (home_in_range) continue;
      slots_[gap] = slots_[i];
      gap = i;
    }
    slots_[gap].frame = kEmpty;
    --count_;
  }

  size_t size() const { return count_; }
  // The longest run of used slots (tests: the hash spreads keys).
  size_t LongestRun() const {
    size_t longest = 0, run = 0;
    for (size_t i = 0; i < 2 * slots_.size(); ++i) {  // twice round: a run may wrap
      run = slots_[i & mask_].frame == kEmpty ? 0 : run + 1;
      longest = std::max(longest, run);
    }
    return std::min(longest, slots_.size());
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  struct Slot {
    uint64_t key = 0;
    uint32_t frame = kEmpty;
  };
  static uint64_t Key(PageId id) { return (uint64_t{id.space} << 32) | id.page_no; }
  static uint64_t Mix(uint64_t key) { return key * 0x9E3779B97F4A7C15ull; }
  // The bits of the hash just below its top six, which pick
  // the pool's shard (every key of one shard has the same top six). High
  // bits of the product depend on every bit of the key; low ones only on
  // the key's low bits (the page number), which would crowd the pages of
  // many small spaces into a few runs.
  size_t Home(uint64_t key) const { return static_cast<size_t>((Mix(key) << 6) >> shift_); }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 16 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    shift_ = 64 - std::countr_zero(slots_.size());
    count_ = 0;
    for (const Slot& s : old) {
      if (s.frame == kEmpty) continue;
      size_t i = Home(s.key);
      while (slots_[i].frame != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
      ++count_;
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int shift_ = 64;  // 64 - log2(slots)
  size_t count_ = 0;
};

}  // namespace subito::buffer
