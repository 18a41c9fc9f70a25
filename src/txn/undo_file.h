// UndoFile: the older part of one transaction's undo list, kept in a file of
// the data directory instead of the redo log, so that a transaction's size
// is bounded by the disk, not by the log (docs/formats/undo-file.md).
//
//   "<dir>/undo-<txn>.sbu"
//   block 0 (4 KiB)  "SUBUNDO\0", u32 version (1), u32 zero, u64 txn,
//                    u32 crc32c of bytes [0, 24), zeros
//   from 4096        entries back to back: u32 payload length, u32 crc32c
//                    of (seq, payload), u64 seq (the entry's position, from
//                    0), then the payload: an undo record as the log holds
//                    it (txn_records.h, EncodeUndo)
//
// A kRecordTxnUndoFile record (txn, count, bytes) in the redo log, the
// anchor, says that the transaction's undo list begins with the file's
// first `count` entries, which end at byte `bytes`; its undo records
// before the anchor in the log are among them, those after it follow them.
//
// Invariants:
//  U1. The bytes an anchor names are durable before the anchor is appended
//      (Sync; the file's name too, SyncDirOf, once created).
//  U2. While an anchor of count n may be the newest durable one, the file's
//      entries below n change only to identical bytes: entries are appended
//      at the position the transaction's list has there, and an entry that
//      a rollback took back is rewritten only after an anchor below it is
//      durable (engine/transaction.cc, ReAnchor).
//  U3. The transaction's checkpoint pin is at or before its newest durable
//      anchor, so analysis, which starts at the checkpoint, finds it.
//
// Writes are 4 KiB aligned (O_DIRECT): the first block written is the one
// holding the old end, rewritten with its earlier bytes unchanged, and the
// last keeps the file's bytes after the new end (U2 holds for torn writes).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "txn/txn_records.h"
#include "util/aligned_buffer.h"
#include "util/file_io.h"

namespace subito::txn {

inline constexpr uint32_t kUndoFileVersion = 1;
inline constexpr uint64_t kUndoFileHeaderBytes = 4096;
inline constexpr uint32_t kUndoEntryHeaderBytes = 16;

std::string UndoFilePath(const std::string& dir, uint64_t txn);

// The anchor record's payload.
struct UndoAnchor {
  uint64_t txn = 0;
  uint64_t count = 0;
  uint64_t bytes = 0;
};
std::string EncodeUndoAnchor(const UndoAnchor& a);
Result<UndoAnchor> DecodeUndoAnchor(const uint8_t* payload, uint32_t length);

class UndoFile {
 public:
  // A new, empty file (one left by an earlier transaction of that id is
  // replaced). Nothing is durable until the first Append.
  static Result<std::unique_ptr<UndoFile>> Create(FileSystem* fs, const std::string& dir,
                                                  uint64_t txn);
  // The file an anchor names, every entry below a.count checked (checksum,
  // position, lengths). A mismatch is Corruption naming the file and the
  // offset.
  static Result<std::unique_ptr<UndoFile>> Open(FileSystem* fs, const std::string& dir,
                                                const UndoAnchor& a);

  // Appends payloads as entries count()..count()+n-1 and makes the file
  // durable (U1).
  Status Append(const std::vector<std::string>& payloads);
  // The undo records of entries [first, end), in order, each checked
  // (checksum, position, and that it is this file's transaction's).
  Result<std::vector<UndoRecord>> Read(uint64_t first, uint64_t end);
  // Forgets entries from `count` on: the next Append writes there (U2 is
  // the caller's: an anchor below the old count must be durable first).
  // On failure nothing changed.
  Status Truncate(uint64_t count);

  // Removes every undo file of `dir` but those at the paths `keep` (at
  // open, once recovery is done: only prepared transactions still need
  // theirs). Only for the real file system.
  static void RemoveAll(const std::string& dir, const std::vector<std::string>& keep = {});

  uint64_t count() const { return offsets_.size(); }
  uint64_t bytes() const { return end_; }
  UndoAnchor anchor() const { return {txn_, count(), end_}; }
  const std::string& path() const { return file_->path(); }

 private:
  UndoFile(std::unique_ptr<File> file, uint64_t txn, AlignedBuffer tail)
      : file_(std::move(file)), txn_(txn), tail_(std::move(tail)) {}
  // The block holding byte `end`, as the file has it before `end`, zeros
  // after.
  Result<AlignedBuffer> TailAt(uint64_t end);

  std::unique_ptr<File> file_;
  FileSystem* fs_ = nullptr;
  const uint64_t txn_;
  std::vector<uint64_t> offsets_;  // each entry's offset
  uint64_t end_ = kUndoFileHeaderBytes;
  // The furthest end_ has been: bytes below it may hold entries an anchor
  // names, though a Truncate forgot them.
  uint64_t high_water_ = kUndoFileHeaderBytes;
  bool named_durable_ = false;
  // The 4 KiB block holding end_, as the file has it up to end_, zeros after.
  AlignedBuffer tail_;
};

}  // namespace subito::txn
