#include "buffer/page_recovery.h"

#include <map>

#include "buffer/mtr.h"
#include "util/strings.h"

namespace subito::buffer {

namespace {

// One pass over the log: every page a record edits gets the record's LSN in
// `index`, and every space grows to the pages its
// records name (allocation must never hand out a page redo will create).
Status IndexRedo(BufferPool* pool, const std::function<bool(uint32_t)>& dropped,
                 const RecordFn& each, PendingRedo* index, PageRecoveryStats* stats) {
  std::map<uint32_t, uint32_t> pages_needed;
  std::vector<PageRedo> pages;
  Status st = pool->log()->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
    if (each) SUBITO_RETURN_IF_ERROR(each(r));
    if (r.type != kRecordPageEdits) return Status::OK();
    ++stats->records_redone;
    SUBITO_RETURN_IF_ERROR(ParseRedoRecord(r, pool->page_size(), &pages));
    for (const PageRedo& p : pages) {
      if (pool->Space(p.id.space) == nullptr) {
        if (dropped && dropped(p.id.space)) continue;
        return Status::Corruption(StrFormat("page-edit record at LSN %llu names unknown space %u",
                                            static_cast<unsigned long long>(r.lsn), p.id.space));
      }
      index->Add(p.id, r.lsn);
      uint32_t& needed = pages_needed[p.id.space];
      needed = std::max(needed, p.id.page_no + 1);
    }
    return Status::OK();
  });
  SUBITO_RETURN_IF_ERROR(st);
  for (const auto& [space, needed] : pages_needed) {
    SUBITO_RETURN_IF_ERROR(pool->Space(space)->EnsurePages(needed));
  }
  return Status::OK();
}

}  // namespace

Result<PageRecoveryStats> RecoverPages(BufferPool* pool, DoubleWrite* dwb,
                                       const std::function<bool(uint32_t)>& dropped, bool lazy,
                                       const RecordFn& each) {
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
  // This hold takes over from the pool's own, which kept the cleaners from
  // writing until the double-write area's copies were back in place (the
  // first batch clears the slots it does not use: D4).
  if (st.ok()) pool->ReleaseStartHold();
  if (st.ok() && lazy) {
    PendingRedo index;
    st = IndexRedo(pool, dropped, each, &index, &stats);
    if (st.ok()) st = pool->StartLazyRedo(&index);
  } else if (st.ok()) {
    st = pool->log()->ForEachRecoveredRecord([&](const log::LogRecordView& r) {
      if (each) SUBITO_RETURN_IF_ERROR(each(r));
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
