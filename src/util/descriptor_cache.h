// DescriptorCache: at most `limit` file descriptors open at once for the
// files registered with it, as InnoDB's innodb_open_files. A file is
// registered with a way to open it; every operation pins its descriptor
// (opening the file again if it was closed), and opening past the limit
// first closes the least recently used descriptor that nothing pins. When
// every descriptor is pinned, the opener waits for one to be unpinned.
//
// Invariants:
//  D1. At most `limit` descriptors are open (0: no limit), counting those
//      being opened and those being closed.
//  D2. A descriptor written through since its file's last sync is
//      fdatasync'ed before it is closed; if that sync fails, every later
//      Sync of the file reports the error (a write is never acknowledged as
//      durable on a descriptor that was silently dropped, and the kernel
//      reports a writeback error only once).
//  D4. A file is opened again by its path: its path must not change while
//      it is registered (callers close a file before renaming or removing
//      it). An open that fails for want of descriptors in the process
//      (EMFILE, ENFILE) closes an idle descriptor of the cache and retries.
//  D3. A file is opened by one thread at a time and never has two
//      descriptors open in the cache.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <unordered_map>

#include "subito/status.h"

namespace subito {

struct DescriptorStats {
  uint64_t open = 0;    // descriptors open now
  uint64_t limit = 0;   // 0: no limit
  uint64_t opens = 0;   // files opened again after being closed for room
  uint64_t closes = 0;  // descriptors closed to make room
  uint64_t waits = 0;   // opens that waited because every descriptor was pinned
};

class DescriptorCache {
 public:
  // Opens the file: a descriptor, or the reason it cannot be opened.
  using Opener = std::function<Result<int>()>;

  explicit DescriptorCache(size_t limit) : limit_(limit) {}
  DescriptorCache(const DescriptorCache&) = delete;
  DescriptorCache& operator=(const DescriptorCache&) = delete;
  ~DescriptorCache();

  // A new file, not yet open. `open` runs outside the cache's lock.
  uint64_t Register(Opener open);
  // Closes the file's descriptor, if open, without syncing. No operation on
  // the file may be running or start later.
  void Unregister(uint64_t file);
  // Runs op(fd) with the file's descriptor, open and pinned for its
  // duration. `writes`: op writes through the descriptor (D2).
  template <typename Op>
  Status Use(uint64_t file, bool writes, Op&& op) {
    Result<int> fd = Pin(file);
    if (!fd.ok()) return fd.status();
    Status s = op(*fd);
    Unpin(file, writes);
    return s;
  }
  // fdatasync of everything written to the file (D2's deferred error first).
  Status Sync(uint64_t file, const std::string& path);
  DescriptorStats stats() const;

 private:
  struct Entry {
    Opener open;
    int fd = -1;
    int pins = 0;
    bool opening = false, closing = false, ever_opened = false;
    uint64_t writes = 0, synced = 0;  // write operations, those a sync covered
    Status deferred;                  // a sync at close that failed (D2)
    // While open: its node, in idle_ when unpinned and in pinned_ otherwise
    // (moved by splice: no allocation per use).
    std::list<uint64_t>::iterator node;
  };
  Result<int> Pin(uint64_t file);
  void Unpin(uint64_t file, bool writes);
  void Wait(std::unique_lock<std::mutex>& lk) {
    ++waiters_;
    cv_.wait(lk);
    --waiters_;
  }
  // Closes the least recently used idle descriptor; returns with lk held.
  void CloseOldest(std::unique_lock<std::mutex>& lk);

  const size_t limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<uint64_t, Entry> files_;
  std::list<uint64_t> idle_;    // open, unpinned; most recently used first
  std::list<uint64_t> pinned_;  // open, pinned
  int waiters_ = 0;             // threads in Wait
  uint64_t next_id_ = 1;
  DescriptorStats stats_;
};

}  // namespace subito
