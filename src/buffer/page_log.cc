#include "buffer/page_log.h"

#include <cstring>

#include "buffer/mtr.h"
#include "page/page_format.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::buffer {

Status ApplyPageEdits(uint8_t* page, uint32_t page_size, const uint8_t* edits, size_t n) {
  for (size_t off = 0; off < n;) {
    if (n - off < 4) return Status::Corruption("page-log entry: truncated edit header");
    const uint8_t* h = edits + off;
    const uint16_t at = DecodeFixed16(h), raw = DecodeFixed16(h + 2);
    uint16_t kind = raw & kEditKindMask, len = raw & static_cast<uint16_t>(~kEditKindMask);
    if ((raw & kEditZeroFill) == 0) {  // a literal: 15 bits of length
      kind = 0;
      len = raw;
    }
    const size_t head = kind == kEditMove ? 6 : 4;
    const size_t follows = kind == 0 ? len : 0;
    if (head > n - off || follows > n - off - head) {
      return Status::Corruption("page-log entry: truncated edit");
    }
    const uint16_t from = kind == kEditMove ? DecodeFixed16(h + 4) : 0;
    if (uint32_t{at} + len > page_size || uint32_t{from} + len > page_size) {
      return Status::Corruption(
          StrFormat("page-log entry: edit of %u bytes at %u does not fit a page", len, at));
    }
    if (kind == 0) {
      std::memcpy(page + at, h + head, len);
    } else if (kind == kEditZeroFill) {
      std::memset(page + at, 0, len);
    } else {
      std::memmove(page + at, page + from, len);
    }
    off += head + follows;
  }
  return Status::OK();
}

}  // namespace subito::buffer

namespace subito::buffer {

Status ApplyEntryIfNewer(uint8_t* page, uint32_t page_size, uint32_t space, uint32_t page_no,
                         uint64_t end, const uint8_t* edits, size_t n, uint64_t* lsn,
                         uint64_t upto) {
  if (end <= *lsn || end > upto) return Status::OK();
  Status st = ApplyPageEdits(page, page_size, edits, n);
  if (!st.ok()) {
    return Status::Corruption(
        StrFormat("page %u of space %u: %s", page_no, space, st.message().c_str()));
  }
  page::SetPageLsn(page, end);
  *lsn = end;
  return Status::OK();
}

Status ApplyStoredEntries(const PageLogStore& store, uint8_t* page, uint32_t page_size,
                          uint32_t space, uint32_t page_no, uint64_t* lsn, uint64_t upto) {
  if (store.Used(space, page_no) == 0) return Status::OK();
  return store.ForEachEntry(space, page_no, [&](uint64_t end, const uint8_t* edits, size_t n) {
    return ApplyEntryIfNewer(page, page_size, space, page_no, end, edits, n, lsn, upto);
  });
}

}  // namespace subito::buffer
