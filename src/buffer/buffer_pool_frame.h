// BufferPool::Frame: one page frame's state, shared by the pool's source
// files (buffer_pool.cc, buffer_pool_versions.cc). Not part of the API.
#pragma once

#include <atomic>
#include <shared_mutex>
#include <vector>

#include "buffer/buffer_pool.h"

namespace subito::buffer {

struct BufferPool::Frame {
  std::shared_mutex latch;
  uint8_t* data = nullptr;
  // Guarded by mu_, except as T1-T3 say: pins and referenced also change
  // on the shard path, and loading is read there.
  PageId id;
  bool in_use = false;
  std::atomic<bool> loading{false};
  std::atomic<bool> referenced{false};
  std::atomic<int> pins{0};
  Status load_error;
  bool dirty = false;
  log::Lsn oldest_lsn = 0;  // first-dirtying LSN while dirty
  // A write of this frame is in flight. At most one at a time: two flushes
  // overlapping could write an older copy after a newer one was written and
  // marked clean, and a later read would see the older one.
  bool flushing = false;
  std::atomic<bool> verified{false};  // see PageHandle::verified
  // NV-PPL (options_.page_log set). Changed by Mtrs under the exclusive
  // latch, and by the frame's one flush (flushing) under the shared latch.
  // Changes not yet in the page log, oldest first, as u64 end_lsn, u32 n,
  // then n edit bytes; those up to log_done_lsn are durable already (in the
  // page log or the file) and are dropped when next seen.
  std::vector<uint8_t> log_pending;
  // Page-log bytes of the page's changes since its file image: in the page
  // log and pending. Past the threshold, log_off.
  uint32_t log_bytes = 0;
  // The page's next write goes to its file: its changes outgrew the
  // threshold, or its file holds no image of it yet, or an eager recovery
  // changed it (lazy redo notes its records' edits: docs/formats/ppl.md).
  bool log_off = true;
  std::atomic<log::Lsn> log_done_lsn{0};
  // A write of the page failed: its file (or the double-write area, or the
  // writer's retry copy) may hold an image newer than the one its page-log
  // entries would build on. No append until a write of it succeeds.
  std::atomic<bool> log_blocked{false};
};

}  // namespace subito::buffer
