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
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

#include "buffer/double_write.h"
#include "log/redo_log.h"
#include "page/space_file.h"

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

 private:
  log::RedoLog* const log_;
  DoubleWrite* const dwb_;
  std::mutex mu_;
  // After a failure past the double-write step, pages may be written in
  // place without a sync; reusing the slots would break D2. Every later
  // batch fails with the first error (an I/O error on data files is fatal).
  Status failed_;  // guarded by mu_
  std::atomic<uint64_t> pages_{0}, batches_{0};
};

}  // namespace subito::buffer
