// Page recovery after a crash: repairs torn pages from the double-write
// area (D3), then applies every page-edit record from the log's checkpoint
// to its pages (P3). The checkpoint is held for the whole time: until redo
// has finished, the flush list does not yet know every page that needs
// writing, so moving the checkpoint could drop log records still needed.
#pragma once

#include <cstdint>
#include <functional>

#include "buffer/buffer_pool.h"
#include "buffer/double_write.h"

namespace subito::buffer {

struct PageRecoveryStats {
  uint32_t pages_repaired = 0;  // from the double-write area
  uint64_t records_redone = 0;  // page-edit records read (applied where needed)
};

// `dwb` may be null. Every space must be added to the pool first.
// Records that edit spaces for which `dropped` returns true are skipped.
Result<PageRecoveryStats> RecoverPages(BufferPool* pool, DoubleWrite* dwb,
                                       const std::function<bool(uint32_t)>& dropped = nullptr);

}  // namespace subito::buffer
