#include "buffer/mtr.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "page/page_format.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::buffer {

void Mtr::Write(PageHandle& page, uint32_t offset, const void* src, uint32_t n) {
  // Programmer errors, checked in every build: a write outside the page or
  // without the exclusive latch would corrupt memory or race with readers.
  if (page.latch() != Latch::kExclusive || uint64_t{offset} + n > pool_->page_size()) {
    std::abort();
  }
  before_.push_back({page.data(), offset, {page.data() + offset, page.data() + offset + n}});
  std::memcpy(page.data() + offset, src, n);
  uint8_t h[12];
  EncodeFixed32(h, page.id().space);
  EncodeFixed32(h + 4, page.id().page_no);
  EncodeFixed16(h + 8, static_cast<uint16_t>(offset));
  EncodeFixed16(h + 10, static_cast<uint16_t>(n));
  payload_.insert(payload_.end(), h, h + sizeof h);
  const auto* p = static_cast<const uint8_t*>(src);
  payload_.insert(payload_.end(), p, p + n);
  if (std::none_of(edits_.begin(), edits_.end(),
                   [&](const PageRef& r) { return r.frame == page.frame_; })) {
    edits_.push_back({page.frame_, page.data()});
  }
}

void Mtr::WriteDiff(PageHandle& page, const uint8_t* image) {
  const uint32_t ps = pool_->page_size();
  const uint8_t* cur = page.data();
  // Bytes [0, 4) are the crc (computed at write time), [8, 16) the page_lsn
  // (set by Commit): never logged as edits.
  auto skip = [](uint32_t i) { return i < 4 || (i >= 8 && i < 16); };
  for (uint32_t i = 0; i < ps;) {
    if (skip(i) || cur[i] == image[i]) {
      ++i;
      continue;
    }
    // Extend over short equal gaps: one edit header costs 12 bytes.
    uint32_t end = i + 1, last_diff = i;
    while (end < ps && !skip(end) && end - last_diff <= 12) {
      if (cur[end] != image[end]) last_diff = end;
      ++end;
    }
    Write(page, i, image + i, last_diff + 1 - i);
    i = last_diff + 1;
  }
}

Result<log::AppendResult> Mtr::Commit() {
  if (edits_.empty()) return Status::InvalidArgument("empty mini-transaction");
  const uint64_t token = pool_->BeginChange();
  Result<log::AppendResult> r = pool_->log()->Append(kRecordPageEdits, payload_.data(),
                                                     static_cast<uint32_t>(payload_.size()));
  if (r.ok()) {
    for (const PageRef& p : edits_) pool_->MarkDirtyFrame(p.frame, p.data, r->start, r->end);
    if (page::SpaceFile* s = pool_->Space(DecodeFixed32(payload_.data()))) {
      s->CountPmBytes(r->end - r->start);
    }
    edits_.clear();
    payload_.clear();
    before_.clear();
  } else {
    Abort();
  }
  pool_->EndChange(token);
  return r;
}

void Mtr::Abort() {
  for (auto it = before_.rbegin(); it != before_.rend(); ++it) {
    std::memcpy(it->data + it->offset, it->bytes.data(), it->bytes.size());
  }
  edits_.clear();
  payload_.clear();
  before_.clear();
}

Status RedoPageEdits(BufferPool* pool, const log::LogRecordView& rec,
                     const std::function<bool(uint32_t)>& dropped) {
  const uint32_t ps = pool->page_size();
  struct Edit {
    uint16_t at, n;
    const uint8_t* bytes;
  };
  // Parse and check everything first; then each page once, in first-edit
  // order, with all of its edits (P3 decides per page).
  std::vector<std::pair<PageId, std::vector<Edit>>> pages;
  for (uint32_t off = 0; off < rec.length;) {
    if (rec.length - off < 12) {
      return Status::Corruption(StrFormat("page-edit record at LSN %llu: truncated edit header",
                                          static_cast<unsigned long long>(rec.lsn)));
    }
    const uint8_t* h = rec.payload + off;
    const PageId id{DecodeFixed32(h), DecodeFixed32(h + 4)};
    const uint16_t at = DecodeFixed16(h + 8), n = DecodeFixed16(h + 10);
    if (n > rec.length - off - 12 || uint32_t{at} + n > ps) {
      return Status::Corruption(
          StrFormat("page-edit record at LSN %llu: edit of %u bytes at %u does not fit a page",
                    static_cast<unsigned long long>(rec.lsn), n, at));
    }
    auto it = std::find_if(pages.begin(), pages.end(), [&](auto& p) { return p.first == id; });
    if (it == pages.end()) it = pages.insert(pages.end(), {id, {}});
    it->second.push_back({at, n, h + 12});
    off += 12 + n;
  }
  for (auto& [id, edits] : pages) {
    page::SpaceFile* space = pool->Space(id.space);
    if (space == nullptr && dropped && dropped(id.space)) continue;
    if (space == nullptr) {
      return Status::Corruption(StrFormat("page-edit record at LSN %llu names unknown space %u",
                                          static_cast<unsigned long long>(rec.lsn), id.space));
    }
    SUBITO_RETURN_IF_ERROR(space->EnsurePages(id.page_no + 1));
    Result<PageHandle> page = pool->Fetch(id, Latch::kExclusive);
    if (!page.ok()) return page.status();
    if (page::PageLsn(page->data()) >= rec.end) continue;  // P3: already in the page
    for (const Edit& e : edits) std::memcpy(page->data() + e.at, e.bytes, e.n);
    pool->MarkDirty(*page, rec.lsn, rec.end);
  }
  return Status::OK();
}

}  // namespace subito::buffer
