// PageLogStore: where the buffer pool may keep a page's small changes
// instead of writing the page (NV-PPL's per-page logs). The pool sees only
// this interface; ppl/ implements it on the PM tier (ppl/ppl_region.h), so
// the layers stay in order (buffer/ before ppl/).
//
// Entries of a page hold the page's part of redo records (buffer/mtr.h edit
// bytes without space and page ids), each tagged with the LSN the page has
// once it is applied. Reading a page from its file applies the entries whose
// LSN is past the image's page LSN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "subito/status.h"
#include "util/coding.h"

namespace subito::buffer {

class PageLogStore {
 public:
  virtual ~PageLogStore() = default;
  // Bytes the page's entries use (entry headers included); 0: none.
  virtual uint32_t Used(uint32_t space, uint32_t page_no) const = 0;
  // The most bytes one page's entries may use.
  virtual uint32_t Capacity() const = 0;
  // Bytes an entry of n edit bytes uses.
  virtual uint32_t EntrySize(size_t n) const = 0;
  virtual Status ForEachEntry(
      uint32_t space, uint32_t page_no,
      const std::function<Status(uint64_t end_lsn, const uint8_t* edits, size_t n)>& fn) const = 0;
  // Durable on return; NoSpace when there is no room (write the page).
  virtual Status Append(uint32_t space, uint32_t page_no, uint64_t end_lsn, const uint8_t* edits,
                        size_t n) = 0;
  // Only once an image holding every entry is durable in the page's file.
  // Returns whether the page had entries.
  virtual bool Free(uint32_t space, uint32_t page_no) = 0;
  virtual void FreeSpace(uint32_t space) = 0;
  // Pages that have entries, as (space, page number): all, or at most n.
  virtual std::vector<std::pair<uint32_t, uint32_t>> LoggedPages(size_t n = SIZE_MAX) const = 0;
  // Pages that may have entries at once, and those that have now.
  virtual uint64_t PageCapacity() const = 0;
  virtual uint64_t PagesUsed() const = 0;
};

// Applies page-log edit bytes (buffer/mtr.h's edits without space and page
// ids: u16 offset, u16 kind and length, [u16 source], literal bytes) to a
// page of `page_size` bytes. Corruption if they do not parse or fit.
Status ApplyPageEdits(uint8_t* page, uint32_t page_size, const uint8_t* edits, size_t n);

// Applies one entry that ends at `end` to the page if `end` is in
// (*lsn, upto] (else it is in the page already, or after what is wanted),
// and sets the page LSN and *lsn to `end`. Corruption names the page.
Status ApplyEntryIfNewer(uint8_t* page, uint32_t page_size, uint32_t space, uint32_t page_no,
                         uint64_t end, const uint8_t* edits, size_t n, uint64_t* lsn,
                         uint64_t upto = UINT64_MAX);
// The same for each of the page's entries in the store, in order.
Status ApplyStoredEntries(const PageLogStore& store, uint8_t* page, uint32_t page_size,
                          uint32_t space, uint32_t page_no, uint64_t* lsn,
                          uint64_t upto = UINT64_MAX);

// Entries kept in memory (the pool's pending ones, a recipe's), one after
// another: u64 end_lsn, u32 n, then n edit bytes. Calls fn(end, entry,
// edits, n) for each, `entry` pointing at its header.
template <typename Fn>
void ForEachPendingEntry(const std::vector<uint8_t>& pending, Fn&& fn) {
  for (size_t off = 0; off < pending.size();) {
    const uint8_t* e = pending.data() + off;
    const uint64_t end = DecodeFixed64(e);
    const uint32_t n = DecodeFixed32(e + 8);
    fn(end, e, e + 12, n);
    off += 12 + size_t{n};
  }
}

}  // namespace subito::buffer
