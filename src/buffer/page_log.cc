#include "buffer/page_log.h"

#include <cstring>

#include "buffer/mtr.h"
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
