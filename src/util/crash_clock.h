// CrashClock: one order for the events of several crash trackers (the PM
// tier's flushes and fences, the page files' writes and syncs), so a test
// can cut power at one instant across all of them. Trackers record their
// events under `mu` and stamp them with `next++`.
#pragma once

#include <cstdint>
#include <mutex>

namespace subito {

struct CrashClock {
  std::mutex mu;
  uint64_t next = 0;  // guarded by mu
  uint64_t Now() {
    std::lock_guard lock(mu);
    return next;
  }
};

}  // namespace subito
