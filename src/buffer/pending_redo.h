// PendingRedo: the redo a restart has not applied yet (lazy redo, after
// SOFORT: the engine serves as soon as it knows where each page's redo is).
//
// Built at open by one pass over the recovered log (page_recovery.h): for
// each page, the start LSNs of the page-edit records that name it, in log
// order. The buffer pool applies a page's records when it loads the page
// from its file (after the page's per-page log entries; each record only
// where the page is older, P3) and then drops the page's entry; a background
// drain fetches the pages left. Invariants:
//   R1. While the index holds an entry, the checkpoint stays held
//       (BufferPool::HoldCheckpoint), so every record it names stays in the
//       log, readable by its LSN.
//   R2. No page named by an entry is in the pool without its records
//       applied: the index is installed whole, pages the pool held before
//       (the PPL cleaner may load some) get their records right after, and
//       a load applies a page's records and removes the entry
//       while the frame is still loading (no other thread sees the page
//       before: buffer_pool.h T3) and under its exclusive latch (no cleaner
//       copies a half-redone page).
//   R3. A dropped space loses its entries with its pages (BufferPool::
//       DropSpace), so a space id used again never inherits them.
// A crash at any point recovers again from the same checkpoint: applying a
// record twice is prevented by the page LSN (P3), so redo stays idempotent.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "buffer/page_id.h"
#include "log/format.h"

namespace subito::buffer {

class PendingRedo {
 public:
  // Index building: in an index of its own, which the pool then takes whole
  // (InstallFrom), so that no load ever sees a page's records half listed.
  // Add only appends (records come in log order; one map insert per record
  // was most of the pass's time); InstallFrom sorts them by page, keeping
  // each page's records in log order. Not to be mixed with the other calls
  // before InstallFrom.
  void Add(PageId id, log::Lsn record);
  void InstallFrom(PendingRedo& built);
  // The records still to apply to `id`, oldest first; false when none.
  bool Find(PageId id, std::vector<log::Lsn>* records) const;
  // Drops the entry of `id` if it still lists `records` records.
  void Erase(PageId id, size_t records);
  void DropSpace(uint32_t space);
  // Up to `n` pending pages from `from` on, in (space, page) order: the
  // file order.
  std::vector<PageId> Next(size_t n, PageId from = {0, 0}) const;
  uint64_t pages() const { return pages_.load(std::memory_order_acquire); }
  bool empty() const { return pages() == 0; }

 private:
  struct Less {
    bool operator()(const PageId& a, const PageId& b) const {
      return a.space != b.space ? a.space < b.space : a.page_no < b.page_no;
    }
  };
  mutable std::mutex mu_;
  std::map<PageId, std::vector<log::Lsn>, Less> index_;
  std::vector<std::pair<PageId, log::Lsn>> added_;  // building: Add's, in log order
  std::atomic<uint64_t> pages_{0};                  // index_.size(), read without mu_
};

}  // namespace subito::buffer
