#include "buffer/page_recovery.h"

#include "buffer/mtr.h"

namespace subito::buffer {

Result<PageRecoveryStats> RecoverPages(BufferPool* pool, DoubleWrite* dwb,
                                       const std::function<bool(uint32_t)>& dropped) {
  PageRecoveryStats stats;
  pool->HoldCheckpoint();
  Status st;
  if (dwb) {
    Result<uint32_t> repaired = dwb->Repair([pool](uint32_t id) { return pool->Space(id); });
    if (repaired.ok()) {
      stats.pages_repaired = *repaired;
    } else {
      st = repaired.status();
    }
  }
  if (st.ok()) {
    st = pool->log()->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
      if (r.type != kRecordPageEdits) return Status::OK();
      ++stats.records_redone;
      return RedoPageEdits(pool, r, dropped);
    });
  }
  pool->ReleaseCheckpoint();
  if (!st.ok()) return st;
  return stats;
}

}  // namespace subito::buffer
