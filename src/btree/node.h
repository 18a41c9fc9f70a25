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
// before resorting to compaction, which rewrites the whole heap. So a
// delete followed by an insert of a same-sized record, the common case,
// changes (and logs) about one record's bytes, not the page's. Free chunks
// are part of the garbage count.
//
// Keys are memcomparable byte strings (key_encoding.h) compared with
// memcmp, shorter-is-smaller on a common prefix. NodeView works on page
// bytes: a scratch copy later logged with Mtr::WriteDiff, or the latched
// page itself with an EditJournal keeping what it replaced; reading a
// damaged node is bounds-checked by Check().
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

// The bytes a NodeView replaced on a page it edits in place (a leaf change
// under the page's exclusive latch, which no reader sees until it ends).
// Each byte is saved the first time it is about to change, so Restore
// makes the page again what it was at Begin: before the change is logged
// (BTree::Op::PutInPlace: the Mtr then applies and logs the new bytes, and
// can undo them), or when the change is given up. One change at a time.
class EditJournal {
 public:
  void Begin(const uint8_t* page, uint32_t page_size);
  bool active() const { return active_; }
  // Bytes [off, off + n) of the page are about to change.
  void Save(const uint8_t* page, uint32_t off, uint32_t n);
  // Puts every saved byte back and ends the change.
  void Restore(uint8_t* page);

 private:
  using Range = buffer::ByteRange;
  std::vector<uint8_t> old_;  // page-sized; meaningful inside saved_ only
  std::vector<Range> saved_;  // sorted, neither overlapping nor adjacent
  bool active_ = false;
#ifndef NDEBUG
  std::vector<uint8_t> page_at_begin_;  // Restore checks it got the page back
#endif
};

class NodeView {
 public:
  // journal: the view edits the page in place, saving what it replaces.
  NodeView(uint8_t* page, uint32_t page_size, EditJournal* journal = nullptr)
      : p_(page), ps_(page_size), journal_(journal) {}

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
  void set_prev(uint32_t v) {
    Touch(40, 4);
    EncodeFixed32(p_ + 40, v);
  }
  void set_next(uint32_t v) {
    Touch(44, 4);
    EncodeFixed32(p_ + 44, v);
  }
  void set_leftmost(uint32_t v) {
    Touch(48, 4);
    EncodeFixed32(p_ + 48, v);
  }

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

  // The byte ranges this view has written, sorted, each at least 16 bytes
  // from the next (what Mtr::WriteDiff needs to compare; see there). Every
  // write to the page goes through Touch, before the bytes change.
  using Range = buffer::ByteRange;
  static constexpr int kMaxRanges = 6;
  int touched(Range* out) const;  // count; the whole page if too scattered
  // The shift of the slot array an Insert or Remove made, if it was the
  // only one and nothing rewrote the page since (Mtr::WriteDiff's `first`);
  // else a move of no bytes.
  buffer::ByteMove slot_shift() const { return shifts_ == 1 ? shift_ : buffer::ByteMove{}; }

 private:
  uint16_t Get16(uint32_t off) const { return DecodeFixed16(p_ + off); }
  void Put16(uint32_t off, uint16_t v) {
    Touch(off, 2);
    EncodeFixed16(p_ + off, v);
  }
  void Touch(uint32_t off, uint32_t n);
  uint16_t Slot(uint16_t i) const { return Get16(kNodeHeaderEnd + 2 * i); }
  void Compact();
  // Takes a free chunk of at least len bytes off the free list; 0 if none
  // fits (or the list is damaged: the caller compacts, which drops it).
  uint32_t TakeFreeChunk(uint32_t len);
  bool OverlapsLiveRecord(uint32_t off, uint32_t len) const;

  uint8_t* p_;
  uint32_t ps_;
  EditJournal* journal_;
  Range ranges_[kMaxRanges] = {};
  int nranges_ = 0;
  bool touched_all_ = false;
  buffer::ByteMove shift_;
  int shifts_ = 0;  // 2: more than one, or the page was rewritten
  void NoteShift(uint32_t dst, uint32_t src, uint32_t len) {
    shift_ = {dst, src, len};
    shifts_ = shifts_ == 0 ? 1 : 2;
  }
};

}  // namespace subito::btree
