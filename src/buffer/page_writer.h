// PageWriter: the one path by which page images reach their space files.
// This is the seam where per-page logs (NV-PPL) will later replace small
// page writes: every page write of the engine passes through Write().
//
// Order for a batch (P2, D2):
//   1. the log is made durable up to the batch's highest page_lsn (WAL);
//   2. the images are made durable in the double-write area;
//   3. they are written in place;
//   4. every touched space file is synced.
// Batches are serialized: the double-write slots are reused only after
// step 4 of the previous batch.
//
// Failures (P4). A batch that fails before step 3 wrote nothing in place:
// its pages stay dirty and a later batch writes them. A batch that fails in
// step 3 or 4 (a full disk, an I/O error) may have left pages torn or
// unsynced in place while the double-write area holds their images: those
// slots must not be reused until the same images are written and synced.
// The writer keeps a copy of the batch, and every later Write first writes
// it again and syncs; until that succeeds, every Write fails with its
// error. Writing the whole batch again before the next sync also covers a
// failed fsync (whose pages the kernel may have dropped). So a full disk
// stops page writing only until space is freed.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <vector>

#include "buffer/double_write.h"
#include "log/redo_log.h"
#include "page/space_file.h"
#include "util/aligned_buffer.h"

namespace subito::buffer {

class PageWriter {
 public:
  // dwb may be null (no torn-write protection: tests and benchmarks only).
  PageWriter(log::RedoLog* log, DoubleWrite* dwb) : log_(log), dwb_(dwb) {}

  uint32_t max_batch() const { return dwb_ ? dwb_->slots() : 64; }
  Status Write(const std::vector<PageImage>& batch,
               const std::function<page::SpaceFile*(uint32_t)>& space_of);

  uint64_t pages_written() const { return pages_.load(std::memory_order_relaxed); }
  uint64_t batches() const { return batches_.load(std::memory_order_relaxed); }
  // A space is being dropped: its pages in a failed batch are not written
  // again. Returns once no Write uses the space any more.
  void ForgetSpace(uint32_t space_id);
  // Batches that failed, and whether a failed batch still waits (P4).
  uint64_t failures() const { return failures_.load(std::memory_order_relaxed); }
  bool retry_pending() {
    std::lock_guard lock(mu_);
    return !pending_.empty();
  }

 private:
  struct Owned {
    uint32_t space_id, page_no;
    const uint8_t* data;  // in retry_images_
  };
  // Writes the images in place, then syncs every space touched.
  template <typename Images>
  Status WriteInPlace(const Images& images,
                      const std::function<page::SpaceFile*(uint32_t)>& space_of);

  log::RedoLog* const log_;
  DoubleWrite* const dwb_;
  std::mutex mu_;
  std::vector<Owned> pending_;  // guarded by mu_: the failed batch (P4)
  // Guarded by mu_: room for a failed batch's images, one slot per
  // double-write slot, 4 KiB aligned as O_DIRECT wants. Made before the
  // first batch is written, so keeping a failed batch never needs memory.
  std::optional<AlignedBuffer> retry_images_;
  std::atomic<uint64_t> pages_{0}, batches_{0}, failures_{0};
};

}  // namespace subito::buffer
