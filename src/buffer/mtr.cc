#include "buffer/mtr.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>

#include "page/page_format.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::buffer {

std::vector<Mtr::Spare>& Mtr::Spares() {
  thread_local std::vector<Spare> spares = [] {
    std::vector<Spare> v;
    v.reserve(kSpares);  // ~Mtr's push_back never allocates
    return v;
  }();
  return spares;
}

Mtr::Mtr(BufferPool* pool) : pool_(pool) {
  std::vector<Spare>& spares = Spares();
  if (spares.empty()) return;
  Spare& s = spares.back();
  payload_.swap(s.payload);
  before_bytes_.swap(s.before_bytes);
  edits_.swap(s.edits);
  before_.swap(s.before);
  spares.pop_back();
}

Mtr::~Mtr() {
  Abort();
  // A few small sets per thread (a server has a thread per connection):
  // the buffers of a large record (a page split's, a bulk load's) go.
  constexpr size_t kKeepBytes = 16 << 10;
  std::vector<Spare>& spares = Spares();
  const size_t bytes = payload_.capacity() + before_bytes_.capacity() +
                       edits_.capacity() * sizeof(PageRef) + before_.capacity() * sizeof(Before);
  if (spares.size() >= kSpares || bytes > kKeepBytes) return;
  spares.push_back(
      {std::move(payload_), std::move(before_bytes_), std::move(edits_), std::move(before_)});
}

void Mtr::Write(PageHandle& page, uint32_t offset, const void* src, uint32_t n) {
  Record(page, offset, 0, static_cast<const uint8_t*>(src), 0, n);
}

void Mtr::Zero(PageHandle& page, uint32_t offset, uint32_t n) {
  Record(page, offset, kEditZeroFill, nullptr, 0, n);
}

void Mtr::Move(PageHandle& page, uint32_t offset, uint32_t src, uint32_t n) {
  Record(page, offset, kEditMove, nullptr, src, n);
}

// A zero fill's or a move's length has 14 bits: any run of a page's bytes
// past its header fits (pages are at most 16 KiB).
static_assert(page::kMaxPageSize - 16 <= 0x3fff);

void Mtr::Record(PageHandle& page, uint32_t offset, uint16_t kind, const uint8_t* src,
                 uint32_t from, uint32_t n) {
  // Programmer errors, checked in every build: a write outside the page or
  // without the exclusive latch would corrupt memory or race with readers.
  const uint32_t ps = pool_->page_size();
  if (page.latch() != Latch::kExclusive || uint64_t{offset} + n > ps ||
      n > (kind == 0 ? 0x7fffu : 0x3fffu) || (kind == kEditMove && uint64_t{from} + n > ps)) {
    std::abort();
  }
  uint8_t* data = page.data();
  if (kind == 0 && tail_at_ != kNoTail && page.frame_ == tail_frame_ && offset == tail_end_) {
    const uint32_t len = DecodeFixed16(payload_.data() + tail_at_ + 10);
    if (len + n <= 0x7fffu) {  // the tail edit's Before is before_'s last
      EncodeFixed16(payload_.data() + tail_at_ + 10, static_cast<uint16_t>(len + n));
      before_.back().size += n;
      before_bytes_.insert(before_bytes_.end(), data + offset, data + offset + n);
      std::memcpy(data + offset, src, n);
      payload_.insert(payload_.end(), src, src + n);
      tail_end_ += n;
      return;
    }
  }
  if (before_.empty()) {  // the first edit (a spare set has the room)
    before_.reserve(16);
    before_bytes_.reserve(512);
    payload_.reserve(512);
  }
  before_.push_back({data, offset, n, before_bytes_.size()});
  before_bytes_.insert(before_bytes_.end(), data + offset, data + offset + n);
  uint8_t h[14];
  EncodeFixed32(h, page.id().space);
  EncodeFixed32(h + 4, page.id().page_no);
  EncodeFixed16(h + 8, static_cast<uint16_t>(offset));
  EncodeFixed16(h + 10, static_cast<uint16_t>(n | kind));
  EncodeFixed16(h + 12, static_cast<uint16_t>(from));
  tail_at_ = kind == 0 ? payload_.size() : kNoTail;
  tail_frame_ = page.frame_;
  tail_end_ = offset + n;
  payload_.insert(payload_.end(), h, h + (kind == kEditMove ? 14 : 12));
  if (kind == 0) {
    std::memcpy(data + offset, src, n);
    payload_.insert(payload_.end(), src, src + n);
  } else if (kind == kEditZeroFill) {
    std::memset(data + offset, 0, n);
  } else {
    std::memmove(data + offset, data + from, n);
  }
  if (std::none_of(edits_.begin(), edits_.end(),
                   [&](const PageRef& r) { return r.frame == page.frame_; })) {
    edits_.push_back({page.frame_, data, page.id()});
  }
}

void Mtr::WriteDiff(PageHandle& page, const uint8_t* image) {
  const ByteRange all{0, pool_->page_size()};
  WriteDiff(page, image, &all, 1);
}

void Mtr::WriteDiff(PageHandle& page, const uint8_t* image, const ByteRange* ranges, int n) {
#ifndef NDEBUG
  // The caller's ranges must hold every difference (outside the crc and
  // page_lsn): a change outside them would go unlogged.
  for (uint32_t i = 16, r = 0; i < pool_->page_size(); ++i) {
    while (r < static_cast<uint32_t>(n) && ranges[r].end <= i) ++r;
    const bool inside = r < static_cast<uint32_t>(n) && ranges[r].begin <= i;
    if (!inside && page.data()[i] != image[i]) std::abort();
  }
#endif
  for (int r = 0; r < n; ++r) DiffIn(page, image, ranges[r].begin, ranges[r].end);
}

namespace {

// The index (0-7, in memory order) of the first and the last nonzero byte
// of a nonzero word read by DecodeFixed64 (little-endian: util/coding.h).
uint32_t FirstByte(uint64_t x) {
  return std::countr_zero(x) / 8;
}
uint32_t LastByte(uint64_t x) {
  return 7 - std::countl_zero(x) / 8;
}

// Bytes [0, 4) of a page are its crc (computed at write time), [8, 16) its
// page_lsn (set by Commit): never logged as edits.
bool Unlogged(uint32_t at) {
  return at < 4 || (at >= 8 && at < 16);
}

// The end of the edit that starts at the difference at i of a region
// [0, to) at page offset base (cur: the page's bytes there, want: the new
// ones): the edit extends over short equal gaps (one edit header costs 12
// bytes), so it ends at its last difference before 12 or more equal bytes
// or a byte never logged. A word at a time past the page header: gaps
// inside a word are shorter.
uint32_t EditEnd(const uint8_t* cur, const uint8_t* want, uint32_t base, uint32_t i, uint32_t to) {
  uint32_t end = i + 1, last = i;
  while (end < to && !Unlogged(base + end) && end - last <= 12) {
    if (base + end >= 16 && end + 8 <= to) {
      const uint64_t x = DecodeFixed64(cur + end) ^ DecodeFixed64(want + end);
      if (x != 0) {
        if (end + FirstByte(x) - last > 12) break;
        last = end + LastByte(x);
      }
      end += 8;
      continue;
    }
    if (cur[end] != want[end]) last = end;
    ++end;
  }
  return last + 1;
}

}  // namespace

void Mtr::WriteChanged(PageHandle& page, uint32_t offset, const void* src, uint32_t n) {
  // Past the page header (crc and page_lsn are never logged): every caller
  // writes node bytes.
  if (page.latch() != Latch::kExclusive || offset < 16 ||
      uint64_t{offset} + n > pool_->page_size()) {
    std::abort();
  }
  const uint8_t* cur = page.data() + offset;
  const uint8_t* want = static_cast<const uint8_t*>(src);
  for (uint32_t i = 0; i < n;) {
    while (i + 8 <= n && DecodeFixed64(cur + i) == DecodeFixed64(want + i)) i += 8;
    while (i < n && cur[i] == want[i]) ++i;
    if (i == n) break;
    const uint32_t end = EditEnd(cur, want, offset, i, n);
    Write(page, offset + i, want + i, end - i);
    i = end;
  }
}

void Mtr::DiffIn(PageHandle& page, const uint8_t* image, uint32_t from, uint32_t to) {
  const uint8_t* cur = page.data();
  for (uint32_t i = from; i < to;) {
    if (i % 8 == 0 && i >= 16) {  // equal stretches, a word at a time
      while (i + 32 <= to && ((DecodeFixed64(cur + i) ^ DecodeFixed64(image + i)) |
                              (DecodeFixed64(cur + i + 8) ^ DecodeFixed64(image + i + 8)) |
                              (DecodeFixed64(cur + i + 16) ^ DecodeFixed64(image + i + 16)) |
                              (DecodeFixed64(cur + i + 24) ^ DecodeFixed64(image + i + 24))) == 0) {
        i += 32;
      }
      while (i + 8 <= to && DecodeFixed64(cur + i) == DecodeFixed64(image + i)) i += 8;
      if (i >= to) break;
    }
    if (Unlogged(i) || cur[i] == image[i]) {
      ++i;
      continue;
    }
    const uint32_t end = EditEnd(cur, image, 0, i, to);
    WriteDiffRange(page, image, i, end);
    i = end;
  }
}

// One differing range [begin, end). If a long part of it, starting near its
// beginning, is the current bytes shifted by one u16 slot (either way), that
// part is logged as a move, which goes first: it must read the bytes before the range's other
// edits. Ranges are more than 12 equal bytes apart, so a move's source (its destination shifted by
// 2, never below offset 16) holds only bytes no earlier edit of this range changed.
void Mtr::WriteDiffRange(PageHandle& page, const uint8_t* image, uint32_t begin, uint32_t end) {
  const uint8_t* cur = page.data();
  const uint32_t ps = pool_->page_size();
  uint32_t best_at = 0, best_len = 0;
  int best_shift = 0;
  // A slot inserted or removed shifts the array from (about) where the
  // range starts: runs are looked for from its first few bytes only, which
  // keeps ranges that are no shift (a new page image) cheap.
  constexpr uint32_t kStarts = 8;
  if (end - begin >= kMinMoveEdit) {
    for (int shift : {2, -2}) {
      for (uint32_t at = begin; at < begin + kStarts && at < end; ++at) {
        uint32_t x = at;
        while (x + 8 <= end && int64_t{x} - shift >= 16 && int64_t{x} - shift + 8 <= ps &&
               DecodeFixed64(image + x) == DecodeFixed64(cur + x - shift)) {
          x += 8;
        }
        while (x < end && int64_t{x} - shift >= 16 && int64_t{x} - shift < ps &&
               image[x] == cur[x - shift]) {
          ++x;
        }
        if (x - at > best_len) {
          best_len = x - at;
          best_at = at;
          best_shift = shift;
        }
        if (x - at >= kMinMoveEdit) break;
      }
    }
  }
  if (best_len < kMinMoveEdit) {
    WriteSplittingZeros(page, begin, image + begin, end - begin);
    return;
  }
  Move(page, best_at, static_cast<uint32_t>(int64_t{best_at} - best_shift), best_len);
  if (best_at > begin) WriteSplittingZeros(page, begin, image + begin, best_at - begin);
  const uint32_t tail = best_at + best_len;
  if (tail < end) WriteSplittingZeros(page, tail, image + tail, end - tail);
}

void Mtr::WriteSplittingZeros(PageHandle& page, uint32_t offset, const uint8_t* src, uint32_t n) {
  // Runs of zeros longer than an edit header become zero fills. A run of
  // kMinRun (16) zeros holds a whole zero word at a multiple of 8 from src,
  // so only such words are looked for, then widened to their run.
  constexpr uint32_t kMinRun = 16;
  uint32_t start = 0;  // first byte not yet recorded
  for (uint32_t w = 0; w + 8 <= n;) {
    if (DecodeFixed64(src + w) != 0) {
      w += 8;
      continue;
    }
    uint32_t i = w, j = w + 8;
    while (i > start && src[i - 1] == 0) --i;
    while (j + 8 <= n && DecodeFixed64(src + j) == 0) j += 8;
    while (j < n && src[j] == 0) ++j;
    if (j - i >= kMinRun) {
      if (i > start) Write(page, offset + start, src + start, i - start);
      Zero(page, offset + i, j - i);
      start = j;
    }
    w = (j + 7) / 8 * 8;  // the next run starts past j (a nonzero byte, or the end)
  }
  if (n > start) Write(page, offset + start, src + start, n - start);
}

Result<log::AppendResult> Mtr::Commit() {
  if (edits_.empty()) return Status::InvalidArgument("empty mini-transaction");
  const uint64_t token = pool_->BeginChange();
  Result<log::AppendResult> r = pool_->log()->Append(kRecordPageEdits, payload_.data(),
                                                     static_cast<uint32_t>(payload_.size()));
  if (r.ok()) {
    if (pool_->versions().active()) CaptureVersions(r->end);  // page_versions.h E1
    for (const PageRef& p : edits_) pool_->MarkDirtyFrame(p.frame, p.data, r->start, r->end);
    if (pool_->page_logging()) NotePageLog(r->end);
    if (page::SpaceFile* s = pool_->Space(DecodeFixed32(payload_.data()))) {
      s->CountRedo(r->end - r->start);
    }
    Forget();
  } else {
    Abort();
  }
  pool_->EndChange(token);
  return r;
}

void Mtr::CaptureVersions(log::Lsn end) {
  const uint32_t ps = pool_->page_size();
  PageVersions& versions = pool_->versions();
  for (const PageRef& p : edits_) {
    const log::Lsn before = page::PageLsn(p.data);
    if (!versions.Wants(before)) continue;
    versions.Capture(
        p.id, before, end,
        [&](uint8_t* out) {
          std::memcpy(out, p.data, ps);
          for (auto it = before_.rbegin(); it != before_.rend(); ++it) {
            if (it->data == p.data) {
              std::memcpy(out + it->offset, before_bytes_.data() + it->at, it->size);
            }
          }
        },
        pool_->RecipeFor(p.frame, before));
  }
}

void Mtr::NotePageLog(log::Lsn end) {
  // Each page's edits without their page ids, in a buffer the thread keeps
  // (NotePageLogEdits copies them).
  thread_local std::vector<uint8_t> edits;
  for (const PageRef& page : edits_) {
    if (!pool_->TakesPageLogEdits(page.frame)) continue;
    edits.clear();
    AppendPageLogEdits(payload_.data(), payload_.size(), page.id, &edits);
    pool_->NotePageLogEdits(page.frame, end, edits.data(), edits.size());
  }
}

void Mtr::Abort() {
  for (auto it = before_.rbegin(); it != before_.rend(); ++it) {
    std::memcpy(it->data + it->offset, before_bytes_.data() + it->at, it->size);
  }
  Forget();
}

void Mtr::Forget() {
  tail_at_ = kNoTail;
  edits_.clear();
  payload_.clear();
  before_.clear();
  before_bytes_.clear();
}

Status ParseRedoRecord(const log::LogRecordView& rec, uint32_t page_size,
                       std::vector<PageRedo>* pages) {
  pages->clear();
  for (uint32_t off = 0; off < rec.length;) {
    if (rec.length - off < 12) {
      return Status::Corruption(StrFormat("page-edit record at LSN %llu: truncated edit header",
                                          static_cast<unsigned long long>(rec.lsn)));
    }
    const uint8_t* h = rec.payload + off;
    const PageId id{DecodeFixed32(h), DecodeFixed32(h + 4)};
    const uint16_t at = DecodeFixed16(h + 8), raw = DecodeFixed16(h + 10);
    uint16_t kind = raw & kEditKindMask, n = raw & static_cast<uint16_t>(~kEditKindMask), from = 0;
    if ((raw & kEditZeroFill) == 0) {  // a literal: 15 bits of length
      kind = 0;
      n = raw;
    }
    const uint32_t head = kind == kEditMove ? 14 : 12;
    const uint32_t follows = kind == 0 ? n : 0;
    if (head > rec.length - off || follows > rec.length - off - head) {
      return Status::Corruption(StrFormat("page-edit record at LSN %llu: truncated edit",
                                          static_cast<unsigned long long>(rec.lsn)));
    }
    if (kind == kEditMove) from = DecodeFixed16(h + 12);
    if (uint32_t{at} + n > page_size || uint32_t{from} + n > page_size) {
      return Status::Corruption(
          StrFormat("page-edit record at LSN %llu: edit of %u bytes at %u does not fit a page",
                    static_cast<unsigned long long>(rec.lsn), n, at));
    }
    auto it = std::find_if(pages->begin(), pages->end(), [&](auto& p) { return p.id == id; });
    if (it == pages->end()) it = pages->insert(pages->end(), PageRedo{id, {}});
    it->edits.push_back({at, n, kind, from, h + head});
    off += head + follows;
  }
  return Status::OK();
}

void ApplyRedoEdits(uint8_t* data, const std::vector<RedoEdit>& edits) {
  for (const RedoEdit& e : edits) {
    if (e.kind == 0) {
      std::memcpy(data + e.at, e.bytes, e.n);
    } else if (e.kind == kEditZeroFill) {
      std::memset(data + e.at, 0, e.n);
    } else {
      std::memmove(data + e.at, data + e.from, e.n);
    }
  }
}

void AppendPageLogEdits(const uint8_t* payload, size_t n, PageId id, std::vector<uint8_t>* out) {
  for (size_t off = 0; off < n;) {
    const uint8_t* h = payload + off;
    const uint16_t raw = DecodeFixed16(h + 10);
    const size_t size =
        ((raw & kEditKindMask) == kEditMove ? 14 : 12) + ((raw & kEditZeroFill) == 0 ? raw : 0);
    if (PageId{DecodeFixed32(h), DecodeFixed32(h + 4)} == id) {
      out->insert(out->end(), h + 8, h + size);  // without the page id
    }
    off += size;
  }
}

Status RedoPageEdits(BufferPool* pool, const log::LogRecordView& rec,
                     const std::function<bool(uint32_t)>& dropped) {
  // Parse and check everything first; then each page once, in first-edit
  // order, with all of its edits (P3 decides per page).
  std::vector<PageRedo> pages;
  SUBITO_RETURN_IF_ERROR(ParseRedoRecord(rec, pool->page_size(), &pages));
  for (const PageRedo& p : pages) {
    const PageId id = p.id;
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
    ApplyRedoEdits(page->data(), p.edits);
    page->set_verified(false);
    pool->MarkDirty(*page, rec.lsn, rec.end);
    pool->StopPageLogging(*page);
  }
  return Status::OK();
}

}  // namespace subito::buffer
