// Crash recovery of a database, in three steps:
//
//   pages     buffer/page_recovery.h: torn pages repaired from the
//             double-write area, then every page-edit record from the
//             checkpoint redone where the page is older (ARIES redo,
//             "repeating history", losers' changes included);
//   analysis  in the same pass over the records: a transaction with undo
//             records and no commit or abort record is a loser; the pass
//             keeps each open transaction's undo trail (its anchor and the
//             LSNs of its undo records after it), so the losers' undo
//             records are then read by LSN, not by a second pass;
//   undo      the losers' undo records, newest first (txn/txn_records.h:
//             logical and idempotent), each applied as an ordinary logged
//             change; then one abort record per loser, made durable.
//
// A loser with a prepare record (txn_records.h P1) is not undone: its undo
// goes to its undo file, anchored, with a copy of its prepare record after
// each anchor, and Recover hands it back (RecoveredPrepared) with its pin,
// for the engine to rebuild its locks and versions.
//
// Undo goes through undo files (txn/undo_file.h): first every loser's undo
// records in the log are appended to its file (created if it had none) and
// anchored, so that all losers' pins sit at the log's end; then each loser
// is undone from its file's end in chunks, and after each chunk every loser
// still pending is anchored again (its count now smaller for the one being
// undone) and the pins move there: the checkpoint can pass the compensation
// already done, so a loser of any size is undone in a log of any size.
//
// While a transaction runs, the checkpoint never passes its first record
// (engine/, BufferPool::PinCheckpoint), so every loser's undo records are at
// or after it. Here the checkpoint is held from before page redo until each
// loser's first needed record is pinned; losers are rolled back oldest
// first, each pin kept until that loser's abort record is durable. A crash during any step is
// recovered the same way: redo is idempotent (page LSNs), applied undo is in the log as page edits,
// and applying all of a loser's undo again gives the same keys.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "buffer/buffer_pool.h"
#include "buffer/double_write.h"
#include "buffer/page_recovery.h"
#include "txn/txn_records.h"
#include "txn/undo_file.h"

namespace subito::recovery {

// A transaction recovery hands back instead of ending it: a prepared one,
// or (with keep_losers) a loser to be rolled back after the open. Its whole
// undo list is the file's entries; `pin` holds the checkpoint at or before
// its newest anchor (and prepare record) (the owner ends it with
// BufferPool::EndChange).
struct RecoveredPrepared {
  uint64_t txn = 0;
  bool prepared = true;  // false: a loser, not yet rolled back
  std::string xid;       // prepared ones' only
  std::unique_ptr<txn::UndoFile> file;
  uint64_t pin = 0;
};

struct RecoveryStats {
  buffer::PageRecoveryStats pages;
  uint64_t committed = 0;    // commit records read
  uint64_t aborted = 0;      // abort records read
  uint64_t losers = 0;       // rolled back here
  uint64_t losers_kept = 0;  // handed back to be rolled back (keep_losers)
  uint64_t undo_applied = 0;
  uint64_t losers_with_undo_files = 0;  // anchored before the crash
  uint64_t undo_file_entries = 0;       // applied (or, kept, to apply) entries those files held
  uint64_t max_txn = 0;                 // largest id seen (new ids start above it)
  // Seconds spent on the pass over the log (page redo or its index, and the
  // analysis), on reading the losers' undo records, and on undoing them.
  double pass_seconds = 0, collect_seconds = 0, undo_seconds = 0;
  std::vector<RecoveredPrepared> prepared;
};

using ApplyUndo = std::function<Status(const txn::UndoRecord&)>;
using IsDropped = std::function<bool(uint32_t space)>;

// Where the undo files are (the data directory).
struct UndoFiles {
  FileSystem* fs = nullptr;
  std::string dir;
};

// Every live space must be open in the pool. With `lazy_redo`, page redo is
// left to page loads (buffer/page_recovery.h): undo's page fetches redo the
// pages they read first. `apply` is called for each
// undo record of a loser once the pages are recovered; `dropped` spaces'
// records are skipped. The losers' undo files are removed once their abort
// records are durable. With `keep_losers`, no loser is undone here: each is
// handed back like a prepared one (anchored in its undo file, pinned), for
// the engine to rebuild and roll back after the open.
Result<RecoveryStats> Recover(buffer::BufferPool* pool, buffer::DoubleWrite* dwb,
                              const ApplyUndo& apply, const IsDropped& dropped,
                              const UndoFiles& files, bool lazy_redo = false,
                              bool keep_losers = false);

}  // namespace subito::recovery
