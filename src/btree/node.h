// B+-tree node pages: a slotted page on top of the common page header.
//
//   +32 u16 level        0 = leaf
//   +34 u16 count        records (slots)
//   +36 u16 heap_start   records occupy [heap_start, page_size)
//   +38 u16 garbage      bytes of removed records inside the heap
//   +40 u32 prev         leaf: left sibling page (0: none)
//   +44 u32 next         leaf: right sibling page (0: none)
//   +48 u32 leftmost     internal: child for keys below the first key
//   +52 u16 free_head    first free chunk (0: none)
//   +54 u8[10] reserved
//   +64 u16 slots[count] record offsets, in key order
//   record: u16 key_len, u16 value_len, key, value
//           (internal nodes: value = u32 child page number)
//   free chunk (a removed record): u16 chunk_len, u16 next_free, zeros
//
// A removed record becomes a free chunk, pushed on the free list; an insert
// that does not fit the gap between the slots and the heap takes the first
// chunk big enough (its tail, if 4 bytes or more, goes back on the list)
// before resorting to compaction, which slides the records up over the
// garbage (each run of adjacent records one move). So a
// delete followed by an insert of a same-sized record, the common case,
// changes (and logs) about one record's bytes, not the page's. Free chunks
// are part of the garbage count.
//
// Keys are memcomparable byte strings (key_encoding.h) compared with
// memcmp, shorter-is-smaller on a common prefix. NodeView works on page
// bytes: a scratch copy later logged with Mtr::WriteDiff (splits, merges),
// or the exclusively latched page itself through a Mtr, which logs each
// write as the view makes it (a row change in its leaf: no copy and no
// diff). Reading a damaged node is bounds-checked by Check().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "buffer/mtr.h"
#include "subito/status.h"
#include "util/coding.h"

namespace subito::btree {

inline constexpr uint32_t kNodeHeaderEnd = 64;

int CompareKeys(std::string_view a, std::string_view b);

class NodeView {
 public:
  // A scratch image: the view notes the ranges it writes (touched()).
  NodeView(uint8_t* page, uint32_t page_size) : p_(page), ps_(page_size) {}
  // The page itself, latched exclusively: every write goes through mtr,
  // which applies and logs it (and undoes it if the Mtr is not committed).
  NodeView(buffer::PageHandle* page, uint32_t page_size, buffer::Mtr* mtr)
      : p_(page->data()), ps_(page_size), page_(page), mtr_(mtr) {}

  // Formats an empty node (page header fields included).
  void Init(uint32_t space_id, uint32_t page_no, uint16_t level);
  // Bounds of every slot and record (the page came from disk).
  Status Check(const std::string& where) const;
  // The O(1) part of Check: type, slot count and heap start in bounds. Enough
  // for a page that passed Check since it was read and changed only through
  // this class since (a freed page fails it: its type changed).
  bool HeaderPlausible() const;

  uint16_t level() const { return Get16(32); }
  uint16_t count() const { return Get16(34); }
  // Records occupy [heap_start, page_size); a 64 KiB page's empty heap
  // starts at 0 (65536 does not fit the field).
  uint32_t heap_start() const {
    const uint32_t h = Get16(36);
    return h == 0 && ps_ == 65536 ? ps_ : h;
  }
  bool leaf() const { return level() == 0; }
  // A leaf with no key: as a root, the tree of no key.
  bool empty_leaf() const { return leaf() && count() == 0; }
  uint32_t prev() const { return DecodeFixed32(p_ + 40); }
  uint32_t next() const { return DecodeFixed32(p_ + 44); }
  uint32_t leftmost() const { return DecodeFixed32(p_ + 48); }
  void set_prev(uint32_t v) { Put32(40, v); }
  void set_next(uint32_t v) { Put32(44, v); }
  void set_leftmost(uint32_t v) { Put32(48, v); }

  std::string_view Key(uint16_t i) const {
    const uint16_t off = Slot(i);
    return {reinterpret_cast<const char*>(p_ + off + 4), Get16(off)};
  }
  std::string_view Value(uint16_t i) const {
    const uint16_t off = Slot(i);
    return {reinterpret_cast<const char*>(p_ + off + 4 + Get16(off)), Get16(off + 2)};
  }
  uint32_t Child(uint16_t i) const { return DecodeFixed32(Value(i).data()); }  // internal nodes
  // First slot whose key is >= key (count() if none).
  uint16_t LowerBound(std::string_view key) const;
  // First slot whose key is > key.
  uint16_t UpperBound(std::string_view key) const;
  // The child to follow for `key` in an internal node.
  uint32_t ChildFor(std::string_view key) const;

  // Inserts at slot i; false if the record does not fit even after
  // compaction.
  bool Insert(uint16_t i, std::string_view key, std::string_view value);
  void Remove(uint16_t i);
  // Replaces slot i's value in place if the new one is no longer (the
  // bytes left over become garbage); false otherwise. An update then
  // changes (and logs) only the value's bytes.
  bool ReplaceValue(uint16_t i, std::string_view value);
  uint32_t UsedBytes() const;  // slots + live records
  uint32_t Capacity() const { return ps_ - kNodeHeaderEnd; }

  // The byte ranges this view has written to its scratch image, sorted,
  // each at least 16 bytes from the next (what Mtr::WriteDiff needs to
  // compare; see there).
  using Range = buffer::ByteRange;
  static constexpr int kMaxRanges = 6;
  int touched(Range* out) const;  // count; the whole page if too scattered

 private:
  uint16_t Get16(uint32_t off) const { return DecodeFixed16(p_ + off); }
  // Every write to the page goes through these four: through the Mtr, or
  // noted by Touch.
  void Store(uint32_t off, const void* src, uint32_t n);
  void Clear(uint32_t off, uint32_t n);
  void Shift(uint32_t dst, uint32_t src, uint32_t n);
  // Store, logging only the bytes that change (Mtr::WriteChanged).
  void StoreChanged(uint32_t off, const void* src, uint32_t n);
  void Put16(uint32_t off, uint16_t v) {
    uint8_t b[2];
    EncodeFixed16(b, v);
    Store(off, b, 2);
  }
  void Put32(uint32_t off, uint32_t v) {
    uint8_t b[4];
    EncodeFixed32(b, v);
    Store(off, b, 4);
  }
  void Touch(uint32_t off, uint32_t n);
  uint16_t Slot(uint16_t i) const { return Get16(kNodeHeaderEnd + 2 * i); }
  // Slot i made (pointing at off) or taken out, of n slots, the ones after
  // it shifted by one. A tail of slots this short is rewritten as one
  // literal edit (12 bytes of header, the tail and one slot): a move edit
  // (14) and the slot's own edit (14, or 12 for the zeroed last slot of a
  // removal) cost about as much at this length.
  static constexpr uint32_t kShortSlotTail = 12;
  void InsertSlot(uint16_t i, uint16_t n, uint16_t off);
  void RemoveSlot(uint16_t i, uint16_t n);
  // Packs the records at the page's end, the garbage becoming gap.
  void Compact();
  // Takes a free chunk of at least len bytes off the free list (the caller
  // writes all of [off, off + len) and takes len off the garbage count); 0
  // if none fits among the first few, or a link leaves the heap (the caller
  // compacts, which drops the list). That no chunk overlaps a record is
  // Check's.
  uint32_t TakeFreeChunk(uint32_t len);

  uint8_t* p_;
  uint32_t ps_;
  buffer::PageHandle* page_ = nullptr;
  buffer::Mtr* mtr_ = nullptr;
  Range ranges_[kMaxRanges] = {};
  int nranges_ = 0;
  bool touched_all_ = false;
};

}  // namespace subito::btree
