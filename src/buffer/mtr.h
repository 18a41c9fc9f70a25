// Mtr (mini-transaction): a group of byte edits to one or more exclusively
// latched pages, made atomic by logging them as ONE redo record
// (kRecordPageEdits). A crash leaves either all of a Mtr's edits (the record
// is in the log's valid prefix) or none (it is not, and no page holding
// them reached its file: WAL).
//
// Record payload, repeated per edit:
//   u32 space_id, u32 page_no, u16 offset, u16 kind_length, then
//   kind 0 (top two bits 00): length bytes, written at offset;
//   kind 2 (top bits 10): nothing; length zero bytes at offset;
//   kind 3 (top bits 11): u16 source; length bytes moved (memmove) from
//                         source to offset, as the page is at that point.
// Pages are at most 16 KiB, so 14 bits hold any length a zero fill or a move
// needs, and 15 bits any literal length. Zero fills and moves keep the log
// small for what page changes mostly are: a freed record zeroed, and a slot
// array shifted by one slot when a record is inserted or removed.
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
inline constexpr uint16_t kEditZeroFill = 0x8000;
inline constexpr uint16_t kEditMove = 0xC000;
inline constexpr uint16_t kEditKindMask = 0xC000;

struct ByteRange {
  uint32_t begin, end;
};

class Mtr {
 public:
  explicit Mtr(BufferPool* pool);
  // An Mtr never committed undoes its edits: no page keeps a change that
  // was not logged. (Declare it after the PageHandles it edits, so it is
  // destroyed while they are still latched.)
  ~Mtr();
  Mtr(const Mtr&) = delete;
  Mtr& operator=(const Mtr&) = delete;

  // Writes n bytes at offset of the page (which must stay exclusively
  // latched by the caller until Commit returns) and records the edit.
  void Write(PageHandle& page, uint32_t offset, const void* src, uint32_t n);
  // Zeroes n bytes at offset (logged as a zero-fill edit).
  void Zero(PageHandle& page, uint32_t offset, uint32_t n);
  // memmove of n bytes from src to offset within the page (a move edit).
  void Move(PageHandle& page, uint32_t offset, uint32_t src, uint32_t n);
  // Writes n bytes at offset (16 or more: past the page header) as Write
  // does, logging only the bytes that differ from the page's (two
  // differences at most 12 bytes apart share an edit, as in WriteDiff): a
  // value rewritten with a few bytes changed.
  void WriteChanged(PageHandle& page, uint32_t offset, const void* src, uint32_t n);
  // Makes the page equal to `image` (page-size bytes), logging only the
  // byte ranges that differ (the page header's crc and page_lsn are left
  // alone), with runs of zeros as zero fills and ranges that are the old
  // bytes shifted by one u16 slot as moves. Lets callers build a new page in
  // scratch memory.
  void WriteDiff(PageHandle& page, const uint8_t* image);
  // The same, comparing only inside `ranges` (sorted, each at least 16
  // bytes before the next): the caller knows every byte it changed lies in
  // them. (Checked in debug builds.)
  void WriteDiff(PageHandle& page, const uint8_t* image, const ByteRange* ranges, int n);
  bool empty() const { return edits_.empty(); }
  // The record's payload so far: the bytes Commit will log.
  size_t payload_bytes() const { return payload_.size(); }
  const uint8_t* payload() const { return payload_.data(); }
  // Undoes every edit since the last Commit (in reverse) and forgets them.
  void Abort();
  // Appends the record, stamps every edited page's page_lsn with its end and
  // marks them dirty. Does not wait for durability (a transaction commit
  // does, once, for all its Mtrs). If the record cannot be appended, every
  // edit is undone in the pages: no page ever holds an unlogged change.
  Result<log::AppendResult> Commit();

 private:
  // Diffs [from, to).
  void DiffIn(PageHandle& page, const uint8_t* image, uint32_t from, uint32_t to);
  void WriteDiffRange(PageHandle& page, const uint8_t* image, uint32_t begin, uint32_t end);
  // A move shorter than this costs more than its bytes as a literal edit.
  static constexpr uint32_t kMinMoveEdit = 32;
  void WriteSplittingZeros(PageHandle& page, uint32_t offset, const uint8_t* src, uint32_t n);
  // Applies and records one edit. kind: 0 (src: the bytes), kEditZeroFill,
  // or kEditMove (from: the source offset). A literal that starts where the
  // previous edit, a literal of the same page, ended extends it: a record
  // written field by field is one edit.
  void Record(PageHandle& page, uint32_t offset, uint16_t kind, const uint8_t* src, uint32_t from,
              uint32_t n);
  // What the Mtr keeps of a page: its frame and bytes, which stay put while
  // the caller holds the latch, even if the PageHandle object itself moves.
  struct PageRef {
    uint32_t frame = 0;
    uint8_t* data = nullptr;
    PageId id;
  };
  // With epochs open (page_versions.h): offers each page's image from
  // before this Mtr, before its page_lsn becomes `end`.
  void CaptureVersions(log::Lsn end);
  // With a page log: hands each page its part of the committed record.
  void NotePageLog(log::Lsn end);
  // Empties the record and the old bytes (after Commit, or Abort's restore).
  void Forget();
  // The bytes an edit overwrote: before_bytes_[at, at + size) held
  // data[offset, offset + size).
  struct Before {
    uint8_t* data;
    uint32_t offset, size;
    size_t at;
  };
  BufferPool* const pool_;
  // The last edit, while it is a literal that a next one can extend: its
  // header's offset in payload_ (kNoTail: none), its page and its end.
  static constexpr size_t kNoTail = SIZE_MAX;
  size_t tail_at_ = kNoTail;
  uint32_t tail_frame_ = 0, tail_end_ = 0;
  std::vector<uint8_t> payload_;
  std::vector<PageRef> edits_;  // one per distinct page
  std::vector<Before> before_;  // restored if the record cannot be logged
  // One buffer for every edit's old bytes, not an allocation per edit (a
  // sysbench write transaction makes about 67 edits).
  std::vector<uint8_t> before_bytes_;
  // The vectors of Mtrs that ended on this thread (whichever thread made
  // them), emptied, kept with their capacity for the next ones: a write
  // transaction makes about ten Mtrs, each of which allocated its four
  // vectors anew. At most kSpares sets of at most 16 KiB each.
  static constexpr size_t kSpares = 4;
  struct Spare {
    std::vector<uint8_t> payload, before_bytes;
    std::vector<PageRef> edits;
    std::vector<Before> before;
  };
  static std::vector<Spare>& Spares();
};

// The edits of one kRecordPageEdits record, per page in first-edit order;
// `bytes` point into the record's payload.
struct RedoEdit {
  uint16_t at, n, kind, from;
  const uint8_t* bytes;
};
struct PageRedo {
  PageId id;
  std::vector<RedoEdit> edits;
};
// Bytes that do not parse, or edits that do not fit a page, are Corruption.
Status ParseRedoRecord(const log::LogRecordView& record, uint32_t page_size,
                       std::vector<PageRedo>* pages);
void ApplyRedoEdits(uint8_t* page, const std::vector<RedoEdit>& edits);
// Appends page id's edits from a kRecordPageEdits payload (checked by
// ParseRedoRecord, or built by a Mtr) as a per-page log entry holds them:
// each edit without its page id (page_log.h).
void AppendPageLogEdits(const uint8_t* payload, size_t n, PageId id, std::vector<uint8_t>* out);

// Recovery: applies a kRecordPageEdits record to its pages where their
// page_lsn is older than the record's end (P3). Pages past the end of their
// space are created. Bytes that do not parse are Corruption.
// Edits of spaces for which `dropped` returns true are skipped (a table
// dropped after the record was written).
Status RedoPageEdits(BufferPool* pool, const log::LogRecordView& record,
                     const std::function<bool(uint32_t)>& dropped = nullptr);

}  // namespace subito::buffer
