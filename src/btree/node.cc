#include "btree/node.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "page/page_format.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::btree {

int CompareKeys(std::string_view a, std::string_view b) {
  const size_t n = std::min(a.size(), b.size());
  int c = n ? std::memcmp(a.data(), b.data(), n) : 0;
  if (c != 0) return c;
  return a.size() < b.size() ? -1 : (a.size() > b.size() ? 1 : 0);
}

void NodeView::Store(uint32_t off, const void* src, uint32_t n) {
  if (mtr_ != nullptr) {
    mtr_->Write(*page_, off, src, n);
    return;
  }
  Touch(off, n);
  std::memcpy(p_ + off, src, n);
}

void NodeView::StoreChanged(uint32_t off, const void* src, uint32_t n) {
  if (mtr_ != nullptr) {
    mtr_->WriteChanged(*page_, off, src, n);
    return;
  }
  Store(off, src, n);
}

void NodeView::Clear(uint32_t off, uint32_t n) {
  if (mtr_ != nullptr) {
    mtr_->Zero(*page_, off, n);
    return;
  }
  Touch(off, n);
  std::memset(p_ + off, 0, n);
}

void NodeView::Shift(uint32_t dst, uint32_t src, uint32_t n) {
  if (mtr_ != nullptr) {
    mtr_->Move(*page_, dst, src, n);
    return;
  }
  Touch(dst, n);
  std::memmove(p_ + dst, p_ + src, n);
}

void NodeView::Touch(uint32_t off, uint32_t n) {
  if (touched_all_ || n == 0) return;
  Range r{off, off + n};
  // Merge with every range closer than 16 bytes (repeatedly: a merged range
  // may reach another).
  for (int i = 0; i < nranges_;) {
    if (r.begin <= ranges_[i].end + 16 && ranges_[i].begin <= r.end + 16) {
      r.begin = std::min(r.begin, ranges_[i].begin);
      r.end = std::max(r.end, ranges_[i].end);
      ranges_[i] = ranges_[--nranges_];
      i = 0;
      continue;
    }
    ++i;
  }
  if (nranges_ == kMaxRanges) {
    touched_all_ = true;
    return;
  }
  ranges_[nranges_++] = r;
}

int NodeView::touched(Range* out) const {
  if (touched_all_) {
    out[0] = {0, ps_};
    return 1;
  }
  std::copy(ranges_, ranges_ + nranges_, out);
  std::sort(out, out + nranges_, [](const Range& a, const Range& b) { return a.begin < b.begin; });
  return nranges_;
}

void NodeView::Init(uint32_t space_id, uint32_t page_no, uint16_t level) {
  if (mtr_ != nullptr) {
    std::vector<uint8_t> image(p_, p_ + ps_);
    NodeView(image.data(), ps_).Init(space_id, page_no, level);
    mtr_->WriteDiff(*page_, image.data());
    return;
  }
  Touch(0, ps_);
  page::InitPage(p_, ps_, level == 0 ? page::kPageBtreeLeaf : page::kPageBtreeInternal, space_id,
                 page_no);
  Put16(32, level);
  Put16(34, 0);
  Put16(36, static_cast<uint16_t>(ps_ == 65536 ? 0 : ps_));
  Put16(38, 0);
}

bool NodeView::HeaderPlausible() const {
  const uint8_t type = page::TypeOf(p_);
  const uint32_t heap = heap_start();
  return (type == page::kPageBtreeLeaf || type == page::kPageBtreeInternal) &&
         kNodeHeaderEnd + 2u * count() <= heap && heap <= ps_;
}

Status NodeView::Check(const std::string& where) const {
  auto bad = [&](const std::string& what) {
    return Status::Corruption(where + ": B-tree node " + what);
  };
  const uint32_t n = count(), heap = heap_start();
  if (page::TypeOf(p_) != page::kPageBtreeLeaf && page::TypeOf(p_) != page::kPageBtreeInternal) {
    return bad("has the wrong page type");
  }
  if (kNodeHeaderEnd + 2 * n > heap || heap > ps_) return bad("has an impossible slot count");
  // The byte ranges of the records and of the free chunks: none may
  // overlap another (below).
  struct Span {
    uint32_t begin, end;
    bool chunk;
  };
  thread_local std::vector<Span> spans;
  spans.clear();
  std::string_view last;
  uint32_t live = 0;
  for (uint16_t i = 0; i < n; ++i) {
    const uint32_t off = Slot(i);
    if (off < heap || off + 4 > ps_) return bad(StrFormat("slot %u points outside the heap", i));
    const uint32_t len = 4u + Get16(off) + Get16(off + 2);
    if (off + len > ps_) return bad(StrFormat("record %u runs past the page", i));
    live += len;
    spans.push_back({off, off + len, false});
    if (!leaf() && Get16(off + 2) != 4) return bad(StrFormat("child pointer %u is malformed", i));
    if (i > 0 && CompareKeys(last, Key(i)) >= 0) return bad("keys are out of order");
    last = Key(i);
  }
  // The heap holds exactly the live records plus the garbage.
  if (live > ps_ - heap || Get16(38) != ps_ - heap - live) {
    return bad("heap accounting is inconsistent (bad garbage count)");
  }
  // Free chunks lie in the heap and add up to no more than the garbage.
  uint32_t free_bytes = 0, chunks = 0;
  for (uint32_t f = Get16(52); f != 0; f = Get16(f + 2)) {
    if (f < heap || f + 4 > ps_ || ++chunks > ps_ / 4) return bad("free list is damaged");
    const uint32_t len = Get16(f);
    free_bytes += len;
    if (len < 4 || f + len > ps_ || free_bytes > Get16(38)) return bad("free list is damaged");
    spans.push_back({f, f + len, true});
  }
  // No record overlaps another (Compact slides them as disjoint runs), and
  // no chunk overlaps a record or a chunk (an insert takes a chunk's bytes
  // without looking: TakeFreeChunk); every change keeps both so. Sorted by
  // start, any overlap shows between neighbours.
  std::sort(spans.begin(), spans.end(),
            [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < spans.size(); ++k) {
    if (spans[k].begin >= spans[k - 1].end) continue;
    if (!spans[k].chunk && !spans[k - 1].chunk) {
      return bad(StrFormat("records at %u and %u overlap", spans[k - 1].begin, spans[k].begin));
    }
    return bad("free list is damaged (a chunk overlaps)");
  }
  return Status::OK();
}

uint16_t NodeView::LowerBound(std::string_view key) const {
  uint16_t lo = 0, hi = count();
  while (lo < hi) {
    uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (CompareKeys(Key(mid), key) < 0) {
      lo = static_cast<uint16_t>(mid + 1);
    } else {
      hi = mid;
    }
  }
  return lo;
}

uint16_t NodeView::UpperBound(std::string_view key) const {
  uint16_t lo = 0, hi = count();
  while (lo < hi) {
    uint16_t mid = static_cast<uint16_t>((lo + hi) / 2);
    if (CompareKeys(Key(mid), key) <= 0) {
      lo = static_cast<uint16_t>(mid + 1);
    } else {
      hi = mid;
    }
  }
  return lo;
}

uint32_t NodeView::ChildFor(std::string_view key) const {
  const uint16_t i = UpperBound(key);
  return i == 0 ? leftmost() : Child(static_cast<uint16_t>(i - 1));
}

// The heap holds exactly the live records and the garbage (Check refuses a
// page where it does not, and every change here keeps it so).
uint32_t NodeView::UsedBytes() const {
  return 2u * count() + (ps_ - heap_start() - Get16(38));
}

// Slides the live records up over the garbage, in address order, so that
// each run of adjacent records moves as one block (one move edit on a
// logged view) and records above the first hole stay where they are; only
// the slots that change are logged. A page changed record by record
// compacts with a few hundred bytes of log, not a rewrite of its heap.
void NodeView::Compact() {
  const uint16_t n = count();
  struct Live {
    uint16_t slot, off;
    uint32_t len;
  };
  std::vector<Live> live(n);
  for (uint16_t i = 0; i < n; ++i) {
    const uint16_t off = Slot(i);
    live[i] = {i, off, 4u + Get16(off) + Get16(off + 2)};
  }
  std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.off > b.off; });
  std::vector<uint8_t> slots(2u * n);
  // Records never overlap (Check), so each run ends at or below where the
  // runs above it now start: a run moves only over holes and bytes those
  // runs left. A run, like any move or zero fill within a page, fits one
  // edit (mtr.cc).
  uint32_t top = ps_;  // where the records placed so far start
  for (size_t r = 0; r < live.size();) {
    const uint32_t end = live[r].off + live[r].len;
    size_t last = r;
    while (last + 1 < live.size() && live[last + 1].off + live[last + 1].len == live[last].off) {
      ++last;
    }
    const uint32_t begin = live[last].off, shift = top - end;
    if (shift != 0) Shift(begin + shift, begin, end - begin);
    for (size_t k = r; k <= last; ++k) {
      EncodeFixed16(slots.data() + 2u * live[k].slot, static_cast<uint16_t>(live[k].off + shift));
    }
    top = begin + shift;
    r = last + 1;
  }
  if (n != 0) StoreChanged(kNodeHeaderEnd, slots.data(), 2u * n);
  // What lies below the records now is stale (moved records, free chunks):
  // zeros, as the rest of the gap is.
  const uint32_t old_heap = heap_start();  // below it, zeros already
  if (top > old_heap) Clear(old_heap, top - old_heap);
  uint8_t fields[4];  // heap_start, garbage
  EncodeFixed16(fields, static_cast<uint16_t>(top));
  EncodeFixed16(fields + 2, 0);
  Store(36, fields, 4);
  Put16(52, 0);
}

bool NodeView::Insert(uint16_t i, std::string_view key, std::string_view value) {
  const uint32_t len = 4u + static_cast<uint32_t>(key.size() + value.size());
  const uint16_t n = count();
  uint32_t heap = Get16(36);
  uint32_t free_bytes = heap - (kNodeHeaderEnd + 2u * n);
  uint32_t off = 0;
  if (free_bytes < len + 2) {
    if (free_bytes + Get16(38) < len + 2) return false;
    if (free_bytes >= 2) off = TakeFreeChunk(len);
    if (off == 0) {
      Compact();
      heap = Get16(36);
      if (heap - (kNodeHeaderEnd + 2u * n) < len + 2) return false;
    }
  }
  const bool in_chunk = off != 0;
  if (!in_chunk) off = heap - len;
  // The record, one literal edit however it is stored.
  uint8_t lengths[4];
  EncodeFixed16(lengths, static_cast<uint16_t>(key.size()));
  EncodeFixed16(lengths + 2, static_cast<uint16_t>(value.size()));
  Store(off, lengths, 4);
  if (!key.empty()) Store(off + 4, key.data(), static_cast<uint32_t>(key.size()));
  if (!value.empty()) {
    Store(off + 4 + static_cast<uint32_t>(key.size()), value.data(),
          static_cast<uint32_t>(value.size()));
  }
  InsertSlot(i, n, static_cast<uint16_t>(off));
  // count, heap_start and garbage side by side: one edit.
  uint8_t fields[6];
  EncodeFixed16(fields, static_cast<uint16_t>(n + 1));
  EncodeFixed16(fields + 2, static_cast<uint16_t>(in_chunk ? heap : off));
  EncodeFixed16(fields + 4, static_cast<uint16_t>(Get16(38) - (in_chunk ? len : 0)));
  Store(34, fields, in_chunk ? 6 : 4);
  return true;
}

void NodeView::InsertSlot(uint16_t i, uint16_t n, uint16_t off) {
  const uint32_t at = kNodeHeaderEnd + 2u * i, tail = 2u * (n - i);
  if (tail > kShortSlotTail) {
    Shift(at + 2, at, tail);
    Put16(at, off);
    return;
  }
  uint8_t slots[kShortSlotTail + 2];
  EncodeFixed16(slots, off);
  std::memcpy(slots + 2, p_ + at, tail);
  Store(at, slots, tail + 2);
}

void NodeView::RemoveSlot(uint16_t i, uint16_t n) {
  const uint32_t at = kNodeHeaderEnd + 2u * i, tail = 2u * (n - i - 1);
  if (tail > kShortSlotTail) {
    Shift(at, at + 2, tail);
    Clear(at + tail, 2);
    return;
  }
  uint8_t slots[kShortSlotTail + 2];
  std::memcpy(slots, p_ + at + 2, tail);
  EncodeFixed16(slots + tail, 0);
  Store(at, slots, tail + 2);
}

uint32_t NodeView::TakeFreeChunk(uint32_t len) {
  const uint32_t heap = Get16(36);
  uint32_t link = 52;  // where the current chunk's offset is stored
  for (uint32_t steps = 0; steps < 16; ++steps) {
    const uint32_t f = Get16(link);
    if (f == 0 || f < heap || f + 4 > ps_) return 0;
    const uint32_t size = Get16(f);
    if (size < 4 || f + size > ps_) return 0;
    if (size >= len) {
      uint16_t next = Get16(f + 2);
      if (size - len >= 4) {  // the tail stays free, in the chunk's place
        Put16(f + len, static_cast<uint16_t>(size - len));
        Put16(f + len + 2, next);
        next = static_cast<uint16_t>(f + len);
      }
      Put16(link, next);
      return f;
    }
    link = f + 2;
  }
  return 0;
}

bool NodeView::ReplaceValue(uint16_t i, std::string_view value) {
  const uint16_t off = Slot(i);
  const uint16_t key_len = Get16(off), old_len = Get16(off + 2);
  if (value.size() > old_len) return false;
  const uint32_t at = off + 4u + key_len, n = static_cast<uint32_t>(value.size());
  StoreChanged(at, value.data(), n);
  if (n < old_len) {
    Clear(at + n, old_len - n);
    Put16(off + 2, static_cast<uint16_t>(n));
    Put16(38, static_cast<uint16_t>(Get16(38) + (old_len - n)));
  }
  return true;
}

void NodeView::Remove(uint16_t i) {
  const uint16_t n = count();
  const uint16_t off = Slot(i);
  const uint32_t len = 4u + Get16(off) + Get16(off + 2);
  // The record becomes a free chunk: its length, the list's old head, then
  // zeros (no stale bytes left in the page).
  uint8_t chunk[4];
  EncodeFixed16(chunk, static_cast<uint16_t>(len));
  EncodeFixed16(chunk + 2, Get16(52));
  Store(off, chunk, 4);
  if (len > 4) Clear(off + 4, len - 4);
  Put16(52, off);
  RemoveSlot(i, n);
  uint8_t fields[6];  // count, heap_start (as it is) and garbage: one edit
  EncodeFixed16(fields, static_cast<uint16_t>(n - 1));
  EncodeFixed16(fields + 2, Get16(36));
  EncodeFixed16(fields + 4, static_cast<uint16_t>(Get16(38) + len));
  Store(34, fields, 6);
}

}  // namespace subito::btree
