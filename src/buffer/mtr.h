// Mtr (mini-transaction): a group of byte edits to one or more exclusively
// latched pages, made atomic by logging them as ONE redo record
// (kRecordPageEdits). A crash leaves either all of a Mtr's edits (the record
// is in the log's valid prefix) or none (it is not, and no page holding
// them reached its file: WAL).
//
// Record payload, repeated per edit:
//   u32 space_id, u32 page_no, u16 offset, u16 length, length bytes
//
// Usage:
//   pool->LogFreeCheck();               // before latching anything
//   auto page = pool->Fetch(id, Latch::kExclusive);
//   Mtr mtr(pool);
//   mtr.Write(*page, offset, bytes, n);  // changes the page and records it
//   mtr.Commit();                       // one log record, pages dirty
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "buffer/buffer_pool.h"
#include "log/format.h"

namespace subito::buffer {

inline constexpr uint16_t kRecordPageEdits = log::kRecordPageFirst;  // 0x0100

class Mtr {
 public:
  explicit Mtr(BufferPool* pool) : pool_(pool) {}
  // An Mtr never committed undoes its edits: no page keeps a change that
  // was not logged. (Declare it after the PageHandles it edits, so it is
  // destroyed while they are still latched.)
  ~Mtr() { Abort(); }
  Mtr(const Mtr&) = delete;
  Mtr& operator=(const Mtr&) = delete;

  // Writes n bytes at offset of the page (which must stay exclusively
  // latched by the caller until Commit returns) and records the edit.
  void Write(PageHandle& page, uint32_t offset, const void* src, uint32_t n);
  // Makes the page equal to `image` (page-size bytes), logging only the
  // byte ranges that differ (the page header's crc and page_lsn are left
  // alone). Lets callers build a new page in scratch memory.
  void WriteDiff(PageHandle& page, const uint8_t* image);
  bool empty() const { return edits_.empty(); }
  // Undoes every edit since the last Commit (in reverse) and forgets them.
  void Abort();
  // Appends the record, stamps every edited page's page_lsn with its end and
  // marks them dirty. Does not wait for durability (a transaction commit
  // does, once, for all its Mtrs). If the record cannot be appended, every
  // edit is undone in the pages: no page ever holds an unlogged change.
  Result<log::AppendResult> Commit();

 private:
  // What the Mtr keeps of a page: its frame and bytes, which stay put while
  // the caller holds the latch, even if the PageHandle object itself moves.
  struct PageRef {
    uint32_t frame;
    uint8_t* data;
  };
  struct Before {
    uint8_t* data;
    uint32_t offset;
    std::vector<uint8_t> bytes;
  };
  BufferPool* const pool_;
  std::vector<uint8_t> payload_;
  std::vector<PageRef> edits_;  // one per distinct page
  std::vector<Before> before_;  // restored if the record cannot be logged
};

// Recovery: applies a kRecordPageEdits record to its pages where their
// page_lsn is older than the record's end (P3). Pages past the end of their
// space are created. Bytes that do not parse are Corruption.
// Edits of spaces for which `dropped` returns true are skipped (a table
// dropped after the record was written).
Status RedoPageEdits(BufferPool* pool, const log::LogRecordView& record,
                     const std::function<bool(uint32_t)>& dropped = nullptr);

}  // namespace subito::buffer
