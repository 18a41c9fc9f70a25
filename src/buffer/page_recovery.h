// Page recovery after a crash: repairs torn pages from the double-write
// area (D3), then brings every page-edit record from the log's checkpoint
// to its pages (P3), in one of two ways:
//   eager  each record is applied now to the pages it names, which are read
//          from their files one at a time;
//   lazy   each record's pages are noted in the pool's pending-redo index
//          (pending_redo.h) and the records are applied when a page is next
//          loaded, or by the pool's drain; the open does not wait for page
//          reads.
// The checkpoint is held for the whole time (lazy: until the index is
// empty): until redo has finished, the flush list does not yet know every
// page that needs writing, so moving the checkpoint could drop log records
// still needed.
#pragma once

#include <cstdint>
#include <functional>

#include "buffer/buffer_pool.h"
#include "buffer/double_write.h"

namespace subito::buffer {

struct PageRecoveryStats {
  uint32_t pages_repaired = 0;  // from the double-write area
  uint64_t records_redone = 0;  // page-edit records read (applied where needed, or indexed)
};

// `dwb` may be null. Every space must be added to the pool first.
// Records that edit spaces for which `dropped` returns true are skipped.
// `each`, if given, sees every record of the pass (the log is read once for
// redo and analysis).
using RecordFn = std::function<Status(const log::LogRecordView&)>;
Result<PageRecoveryStats> RecoverPages(BufferPool* pool, DoubleWrite* dwb,
                                       const std::function<bool(uint32_t)>& dropped = nullptr,
                                       bool lazy = false, const RecordFn& each = nullptr);

}  // namespace subito::buffer
