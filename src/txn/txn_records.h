// Transaction records in the redo log (type range kRecordTxnFirst..Last).
//
//   kRecordTxnUndo    u64 txn, u32 space, u8 had_before, u32 key_length,
//                     key bytes, then the value before the change: none
//                     (had_before 0), its bytes (1), or the reference to
//                     its overflow chain (2), which the change retired
//                     (btree.h C1-C4) and undo restores. Appended BEFORE the
//                     page edits it undoes, so any log prefix holding the
//                     edits holds the undo. had_before 3, with no key and
//                     no value: the index was empty and pristine
//                     (BTree::Pristine) when its transaction began a bulk
//                     insert into it (engine/bulk_insert.cc); undo empties
//                     it again (BTree::ResetToEmpty), whatever that
//                     transaction wrote to it since.
//   kRecordTxnCommit  u64 txn. A transaction is committed iff this record
//                     is durable.
//   kRecordTxnAbort   u64 txn. Appended after its rollback's page edits.
//   kRecordTxnUndoReset  u64 txn, u64 lsn: the transaction's undo records
//                     before `lsn` are superseded by copies written from
//                     `lsn` on (relocation, below).
//   kRecordTxnUndoFile  u64 txn, u64 count, u64 bytes: the anchor of an
//                     undo file (txn/undo_file.h): the transaction's undo
//                     list is the file's first `count` entries, then its
//                     undo records after this one.
//   kRecordTxnUndoCut  u64 txn, u64 count: the transaction's undo list is
//                     its first `count` entries; the entries after them
//                     were applied by a rollback to a savepoint (their
//                     compensation lies before this record) and are dead:
//                     recovery does not apply them again. Written after
//                     the rollback, when count is at least the newest
//                     anchor's, before the transaction gives up the
//                     locks of keys the rollback left it no change of
//                     (below: "Statement rollback").
//   kRecordTxnPrepare u64 txn, u32 xid length, xid bytes (at most
//                     kMaxXidBytes): the transaction is prepared (two-phase
//                     commit, XA) under that name. Appended once its undo
//                     is logged, made durable before Prepare returns; no
//                     undo record of the transaction follows it.
//
// Undo is logical and idempotent: "make key hold `before` (or be absent)".
// The writer holds the key's exclusive lock from before the undo record
// until its commit or abort record, or until a cut record makes the entry
// dead, so no other change to the key can lie between the record and the
// end of its life; applying a transaction's live undo records newest to
// oldest restores every key it touched, however much of it was already
// applied (a rollback or a recovery cut short). A chain named by an undo record stays retired
// or in its leaf until the transaction's end record is durable: a chain
// taken out of a leaf, even by undo, is retired, never freed, and only the
// purge after the end releases the transaction's retired chains.
//
// Statement rollback: every rollback to a savepoint that takes entries back
// appends a cut record, so that the list recovery finds (anchor, records,
// cuts) stays the transaction's own; then it releases the locks of the
// inserts it took back of keys the transaction had not locked before them
// (InnoDB's implicit locks go with the records a rollback removes).
// Another transaction may then change such a key and commit. Applied again
// by recovery, the dead undo entry would undo that change; the cut keeps
// recovery from it. Its LSN precedes every record of the other
// transaction's change of the key, so any log prefix holding that change
// holds the cut (the log recovers a prefix, and a page is written only once
// the log is durable to its LSN). A rollback that cannot append its cut, or
// whose list reaches into the undo file below the newest anchor, keeps the
// locks, and so do the later ones until a relocation or an anchor writes
// the list anew (the records after the last cut hold dead entries then).
//
// Relocation: a transaction that has been open while much log was written
// would hold the checkpoint back (its undo records must stay readable). It
// writes its current undo list again at the log's end (copies), then a
// kRecordTxnUndoReset naming the first copy, waits until that is durable,
// and only then lets the checkpoint pass its older records. A crash before
// the reset is durable finds the whole old list (the checkpoint had not
// moved) plus a prefix of copies: applied newest first, the old list still
// restores every key. After it, recovery drops the older records. No copy
// is written once the commit or abort record is being appended: copies
// behind the end record would survive it when the checkpoint passes it.
//
// Prepared transactions (P1): a transaction with a durable prepare record
// and no end record is neither committed nor a loser: recovery keeps it,
// with its undo (in its undo file), its key locks and its versions, until
// it is told to commit or roll back. Whenever its checkpoint pin moves
// (relocation, an anchor, recovery's anchors), a copy of its prepare record
// is appended after the record the pin moves to and made durable with it,
// so the checkpoint never passes the last prepare record of a transaction
// still prepared.
//
// Spilling: a transaction whose undo in the log would pass 1/16 of the log
// (which relocation and recovery's rollback must fit in), or that has an
// undo file already, writes the undo it has in the log to its undo file
// instead (txn/undo_file.h), then an anchor record naming the file's
// entries, waits until that is durable and moves its pin to it. Its size is
// then bounded by the data directory's disk, as InnoDB's undo is.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "log/format.h"
#include "subito/status.h"

namespace subito::txn {

inline constexpr uint16_t kRecordTxnUndo = log::kRecordTxnFirst + 1;
inline constexpr uint16_t kRecordTxnCommit = log::kRecordTxnFirst + 2;
inline constexpr uint16_t kRecordTxnAbort = log::kRecordTxnFirst + 3;
inline constexpr uint16_t kRecordTxnUndoReset = log::kRecordTxnFirst + 4;
inline constexpr uint16_t kRecordTxnUndoFile = log::kRecordTxnFirst + 5;
inline constexpr uint16_t kRecordTxnPrepare = log::kRecordTxnFirst + 6;
inline constexpr uint16_t kRecordTxnUnprepare = log::kRecordTxnFirst + 7;
inline constexpr uint16_t kRecordTxnUndoCut = log::kRecordTxnFirst + 8;
inline constexpr uint32_t kMaxXidBytes = 1024;
inline constexpr uint32_t kUndoHeaderSize = 17;

struct UndoRecord {
  uint64_t txn = 0;
  uint32_t space = 0;
  std::string key;
  std::optional<std::string> before;
  bool before_chain = false;  // before is a chain reference
  bool empties = false;       // had_before 3: undo empties the index
};

// Rollbacks apply undo in chunks whose compensation fits in the quarter of
// the log kept free for them: a chunk stops once the entries it applied
// weigh RollbackChunkBytes (their encoded size; an entry that empties an
// index adds a root image and a header page).
inline uint64_t RollbackChunkBytes(uint64_t log_capacity) {
  return std::max<uint64_t>(log_capacity / 64, 4096);
}
inline uint64_t RollbackWeight(std::string_view key, const std::optional<std::string>& before,
                               bool empties, uint32_t page_size) {
  return kUndoHeaderSize + key.size() + (before ? before->size() : 0) +
         (empties ? 2 * uint64_t{page_size} : 0);
}

std::string EncodeUndo(uint64_t txn, uint32_t space, std::string_view key,
                       const std::optional<std::string>& before, bool before_chain = false,
                       bool empties = false);
Result<UndoRecord> DecodeUndo(const uint8_t* payload, uint32_t length);
std::string EncodeTxnEnd(uint64_t txn);  // commit, abort and unprepare
Result<uint64_t> DecodeTxnEnd(const uint8_t* payload, uint32_t length);
// kRecordTxnUndoReset (value: the first copy's LSN) and kRecordTxnUndoCut
// (value: the count of entries kept). `record` names it in errors.
std::string EncodeTxnValue(uint64_t txn, uint64_t value);
Result<std::pair<uint64_t, uint64_t>> DecodeTxnValue(const uint8_t* payload, uint32_t length,
                                                     const char* record);
std::string EncodePrepare(uint64_t txn, std::string_view xid);
Result<std::pair<uint64_t, std::string>> DecodePrepare(const uint8_t* payload, uint32_t length);

}  // namespace subito::txn
