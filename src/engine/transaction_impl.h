// The transaction behind the embedded API's Transaction (transaction.cc),
// shared with its cursors (cursor.cc): a consistent read takes the tree's
// value, then the version chain (V1); a locking read locks, then takes the
// tree's newest value. engine_impl.h has the tables and indexes it works on.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/engine_impl.h"
#include "recovery/txn_recovery.h"
#include "txn/undo_file.h"

namespace subito::engine {

inline constexpr const char* kEnded = "the transaction has ended";
inline constexpr const char* kPreparedOnlyEnds =
    "the transaction is prepared: it can only commit or roll back";

inline bool SkipsLocked(ReadMode mode) {
  return mode == ReadMode::kSharedSkipLocked || mode == ReadMode::kExclusiveSkipLocked;
}

inline bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// Whether table t is empty to a snapshot at read_ts that moved to pages as
// of an LSN (TableImpl::created_ts), or refused to it (loaded_ts).
Result<bool> EmptyToMovedSnapshot(const TableImpl& t, uint64_t read_ts);

class TransactionImpl final : public Transaction, public UndoOwner {
 public:
  TransactionImpl(DatabaseImpl* db, Isolation isolation)
      : db_(db), isolation_(isolation), state_(db->txns().Begin()) {}
  // A prepared transaction recovery found (prepared.cc): Resurrect, before
  // any other transaction begins, takes its locks and versions again.
  TransactionImpl(DatabaseImpl* db, recovery::RecoveredPrepared r);
  Status Resurrect();
  // An ended transaction no longer touches its database (which may be
  // gone by the time the object is destroyed).
  ~TransactionImpl() override {
    if (!ended_) (void)Rollback();
  }
  Status Prepare(std::string_view xid) override;  // prepared.cc
  bool prepared() const override { return prepared_; }
  const std::string& xid() const { return xid_; }
  // The database closes with this transaction prepared: it ends here, in
  // memory only; its log records and undo file stay for the next Open.
  void Abandon();
  // The chains its undo names (retired, kept by RecoverChains), by index.
  const std::set<txn::TxnSystem::KeyRef>& retired() const { return retired_; }
  // After RecoverChains: of the chains of `versions`' index its undo names,
  // only those the retired list holds (`found`) are its to release; the
  // others are back in their leaves (a statement rollback restored them).
  void KeepRetiredFound(const txn::VersionStore* versions, const std::set<std::string>& found);
  // Whether Prepare logged a record (the transaction wrote).
  bool logged() const { return pinned_; }
  // The database's undo owners (RelieveLog, and a shutdown that finds one
  // open keeps the log) hold the transactions that may have logged undo:
  // each registers before its first undo record, so a transaction that only
  // reads takes none of the owners' mutex.
  void RegisterOwner() {
    if (!owner_registered_) db_->Register(this);
    owner_registered_ = true;
  }
  void UnregisterOwner() {
    if (owner_registered_) db_->Unregister(this);
    owner_registered_ = false;
  }
  bool RelieveLog(uint64_t limit) override {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || ended_ || end_logging_ || !pinned_) return false;
    const uint64_t before = pin_token_;
    (void)RelocateIfOld(limit, /*wait=*/false);
    return pin_token_ != before;
  }
  // Shared with cursors: false once the transaction has ended.
  const std::shared_ptr<std::atomic<bool>>& alive() const { return alive_; }
  Status Insert(Table* table, const Row& row) override;
  Status Update(Table* table, const Row& old_row, const Row& new_row) override;
  Status Delete(Table* table, const Row& row) override;
  Result<std::unique_ptr<BulkLoader>> BulkInsert(Table* table) override;  // bulk_insert.cc
  Result<std::optional<Row>> Get(Table* table, const Row& key, ReadMode mode) override;
  Result<std::unique_ptr<Cursor>> OpenCursor(Table* table, uint32_t index, ReadMode mode) override;
  // Positions in the undo list: the undo file's entries, then undo_.
  // A savepoint is never inside a bulk insert's load (its rows have no
  // undo): an open load is finished first, and its later rows go in one by
  // one (bulk_insert.cc I4).
  uint64_t Savepoint() const override {
    if (!bulk_.empty()) FinishOpenLoads();
    return Position();
  }
  uint64_t Position() const {
    std::lock_guard lock(mu_);  // a relief may move undo_ to the file
    return ListSize();
  }
  // A rollback to a savepoint gives up the locks of the inserts it takes
  // back (Undo::lock_length), after a cut record (txn_records.h).
  Status RollbackTo(uint64_t savepoint) override { return RollBack(savepoint, /*whole=*/false); }
  Status Commit() override;
  Status Rollback() override;
  uint64_t id() const override { return state_->id; }
  // The owner's thread sets both, as End reads them.
  bool EndLogs() const override { return pinned_ || !bulk_.empty(); }
  const txn::TxnState* state() const { return state_.get(); }
  // V6 (txn/version_store.h): the snapshot's pages-as-of state once it
  // moved there; null while it reads row versions, once it was cut, or if
  // this transaction has written (its own changes are not in those pages).
  std::shared_ptr<const txn::AsOfSnapshot> AsOf(const txn::ReadView& view) const {
    if (wrote()) return nullptr;
    return db_->txns().AsOf(view.read_ts);
  }
  bool wrote() const { return !written_.empty(); }
  // A snapshot read of a key of t's index ix: the tree, then its versions
  // (V1), or as of the snapshot's epoch once it moved there (as_of, if the
  // caller holds it), also while this read runs.
  Result<std::optional<std::string>> SnapshotValue(TableImpl* t, IndexImpl* ix,
                                                   const std::string& key,
                                                   const txn::ReadView& view,
                                                   std::shared_ptr<const txn::AsOfSnapshot> as_of);
  void SetLockWaitTimeout(std::chrono::milliseconds timeout) override { lock_timeout_ = timeout; }
  void SetReplacesDuplicates(bool replaces) override { replaces_duplicates_ = replaces; }
  void SetInterruptCheck(std::function<bool()> interrupted) override {
    interrupted_ = std::move(interrupted);
  }
  void StartStatement() override {
    statement_scoped_ = true;
    if (isolation_ == Isolation::kReadCommitted && has_snapshot_) {
      db_->txns().CloseSnapshot(read_ts_);
      has_snapshot_ = false;
    }
  }
  void TakeSnapshot() override {
    bool own = false;
    const txn::ReadView v = View(own);
    if (own) db_->txns().CloseSnapshot(v.read_ts);
  }

  // For cursors. *granted_new (if set): the transaction held no lock on the
  // key before this call took one.
  Status LockKey(IndexImpl* ix, const std::string& key, ReadMode mode, bool* granted_new = nullptr);
  // Gives up the lock on one key (a locking read's that must keep nothing).
  void ReleaseKeyLock(IndexImpl* ix, const std::string& key) {
    ForgetLockedRead();
    db_->locks().Release(state_->id, ix->space(), key);
  }
  // Waits while another transaction's range holds `key` (L7), before the
  // key's own lock is taken: an insert that waits for a range holds no lock
  // the range's owner may ask for next (InnoDB: its lookup finds nothing
  // and its own insert goes in; this one then meets the duplicate).
  // A key the tree holds already needs no wait: its insert is a duplicate
  // (WriteKey checks again for one that goes meanwhile).
  // With no range held, nothing to look up (WriteKey's checks stay).
  Status WaitForRanges(IndexImpl* ix, const std::string& key) {
    if (!db_->locks().AnyRanges()) return Status::OK();
    Result<std::optional<std::string>> present = ix->tree->Get(key);
    if (!present.ok()) return present.status();
    if (present->has_value()) return Status::OK();
    return db_->locks().WaitForRanges(state_->id, ix->space(), key, lock_timeout_, interrupted_);
  }
  txn::RangeGrant LockRange(IndexImpl* ix, txn::KeyRange range) {
    return LocksToHold().LockRange(state_->id, ix->space(), std::move(range));
  }
  void GiveBackRange(const txn::RangeGrant& grant) {
    ForgetLockedRead();
    db_->locks().GiveBackRange(state_->id, grant);
  }
  // One row read through this counter (a table's or an index's
  // rows_read), added to it in batches (pending_reads_).
  void CountRead(StripedCounter* counter) {
    for (PendingReads& p : pending_reads_) {
      if (p.counter == counter) {
        if (++p.n == kReadCountBatch) FlushPending(p);
        return;
      }
    }
    CountReadInNewSlot(counter);
  }
  void FlushReadCounts();
  // as_of: the snapshot's moved state, if the caller (a moved cursor)
  // holds it already; else it is looked up.
  // The row's stored bytes (row_codec.h), counted as read.
  // *granted_new (if set): as LockKey's, for a locking read.
  Result<std::optional<std::string>> ReadRowBytes(
      TableImpl* t, const std::string& pk, ReadMode mode, const txn::ReadView& view,
      std::shared_ptr<const txn::AsOfSnapshot> as_of = nullptr, bool* granted_new = nullptr);
  void CloseStatementSnapshot(uint64_t read_ts) { db_->txns().CloseSnapshot(read_ts); }
  // The row's bytes in the newest committed version (or this transaction's
  // own), taking no lock: a semi-consistent read's.
  Result<std::optional<std::string>> NewestCommittedRow(TableImpl* t, const std::string& pk);
  // A deadlock victim is rolled back whole, as InnoDB does.
  Status Victim(Status st) {
    if (st.IsDeadlock() && !ended_) (void)Rollback();
    return st;
  }

 private:
  struct Undo {
    IndexImpl* index;
    std::string key;
    std::optional<std::string> before;
    bool before_chain;     // before is the reference to a chain the write retired
    uint64_t logged;       // the span of its record in the log
    bool empties = false;  // a bulk insert's mark: undo empties the index
    // An insert under a lock its own statement took: a rollback to a
    // savepoint that takes it back releases the lock on key[0, lock_length)
    // in the index's space (the primary key, or a unique prefix). 0: none
    // (entries read back from the undo file know of no lock).
    uint32_t lock_length = 0;
  };
  // writes: the caller writes or reads with locks, and so waits while
  // another transaction bulk-inserts into the table (bulk_insert.cc). A
  // loader of this transaction's filling the table is finished first.
  Result<TableImpl*> Use(Table* table, bool writes);
  // Caller holds mu_ and has checked log space: pins the checkpoint, makes
  // room in the log (relocation, spilling), then appends `rec`, the record
  // of `u`, and pushes u onto the undo list.
  Status PushUndo(IndexImpl* ix, Undo u, const std::string& rec);
  // Caller holds mu_: adds this transaction's version of `key` in ix
  // (VersionStore::Add) and counts the change, in written_ (for the purge)
  // if it is the key's first, else in rewrites_.
  void NoteWrite(IndexImpl* ix, const std::string& key, std::optional<std::string> before,
                 bool before_chain);
  // bulk_insert.cc.
  struct Bulk {
    TableImpl* table;
    uint64_t marks_at = 0;               // the undo list's size before its marks
    std::unique_ptr<BulkLoader> loader;  // while one fills the table
    bool abandoned = false;              // a rollback went past the marks
    Status failed;                       // rows may be missing: no commit
    bool added = false;                  // a row went in since the marks
  };
  Status AwaitBulk(TableImpl* t);
  // A transaction whose snapshot is older than the table's last bulk
  // insert would not see its own changes there (the table reads empty to
  // it, I3): it may not change the table (TableChanged: retry the
  // transaction, as InnoDB's "table definition has changed").
  Status ChangesSeenBySnapshot(TableImpl* t);
  bool HiddenByBulk(TableImpl* t, const txn::ReadView& view);
  void AbandonBulkOf(const IndexImpl* ix);
  void FinishOpenLoads() const;
  // Finishes b's loader, if open; a failure stays in b.failed (I4), which
  // is what a finished loader answers.
  Status FinishLoad(Bulk& b) const;
  // At the end: loaders finished (commit) or dropped, and the claims ended.
  Status FinishAllBulk(bool commit);
  void EndBulk(bool committed);
  // Mutable: Savepoint() finishes open loads.
  mutable std::vector<Bulk> bulk_;

 public:
  // For the handle BulkInsert returns.
  Status BulkAdd(TableImpl* t, const Row& row);
  Status FinishBulkOf(TableImpl* t);

 private:
  // The snapshot of a consistent read: the transaction's (REPEATABLE READ)
  // or a new one per statement (READ COMMITTED, own=true: close it after).
  txn::ReadView View(bool& own);
  // fresh_lock_length: see Undo::lock_length. *pushed (if set): the
  // change's undo entry is on the list (a later failure leaves it there).
  Status WriteKey(IndexImpl* ix, const std::string& key, std::optional<std::string> after,
                  std::optional<std::string> before, uint32_t fresh_lock_length = 0,
                  bool* pushed = nullptr);
  Status ApplyUndo(const Undo& u);
  // Applies the undo list's entries above `savepoint`, newest first. Not
  // `whole`: keys left with no change of this transaction pass their
  // versions to an aborted stand-in (VersionStore::HandOver), and the list
  // is cut (CutUndoList), which releases the locks of the inserts taken
  // back.
  Status RollBack(uint64_t savepoint, bool whole);
  // Key locks by (space, key).
  using KeyLocks = std::vector<std::pair<uint32_t, std::string>>;
  // After a rollback to a savepoint that took entries back: appends the cut
  // record (txn_records.h) and releases `locks`. Nothing is released, and
  // log_list_exact_ turns false, if recovery's list is not this one's, the
  // list reaches below the newest anchor (the cut could not name it) or the
  // record cannot be appended.
  void CutUndoList(const KeyLocks& locks);
  // A rollback that fails after it took entries back leaves them among the
  // log's records with no cut: st, and log_list_exact_ false then. Caller
  // holds mu_.
  Status NotExactOnError(Status st, bool took_back) {
    if (!st.ok() && took_back) log_list_exact_ = false;
    return st;
  }
  void ReleaseKeyLocks(const KeyLocks& locks);
  // Locks `key` of ix (a primary key or unique prefix) for a row change
  // that puts it there, and returns whether it is taken (`taken` reads
  // that in the tree). A taken key is locked shared, as InnoDB's duplicate
  // check, or exclusive if this transaction replaces duplicates; a free one
  // exclusive. *fresh: this call took the transaction's first lock on it.
  // `moves_under_lock`: the key enters or leaves the tree only while its
  // inserter or remover holds it exclusive, and it holds the lock until it
  // gives it up through the lock manager (true of primary keys: every row
  // change and rollback holds its row's lock to the transaction's end, a
  // savepoint rollback gives its inserts' locks back with Release, and a
  // bulk insert's rows come in only while no other transaction uses the
  // table); then a key found free before the lock and with no lock given
  // up meanwhile (LockManager L12) is free without a second look.
  Result<bool> LockToInsert(IndexImpl* ix, const std::string& key,
                            const std::function<Result<bool>()>& taken, bool* fresh,
                            bool moves_under_lock = false);
  // LockToInsert of a primary key, after the wait for other transactions'
  // ranges over it (L7).
  Result<bool> LockPrimaryToInsert(IndexImpl* primary, const std::string& pk, bool* fresh);
  // Keeps retired_ up to date with what a tree change did with chains.
  void NoteMoves(IndexImpl* ix, const btree::BTree::ChainMoves& moves) {
    for (const std::string& r : moves.restored) retired_.erase({ix->versions, r});
    for (const std::string& r : moves.retired) retired_.insert({ix->versions, r});
  }
  void SetEndLogging(bool on) {
    std::lock_guard lock(mu_);
    end_logging_ = on;
  }
  // Runs one statement: on failure its writes are undone; a deadlock
  // victim is rolled back whole (as InnoDB does).
  template <typename Fn>
  Status Statement(Fn&& fn);
  Result<std::optional<std::string>> LatestOf(IndexImpl* ix, const std::string& key) {
    return ix->tree->Get(key);
  }
  // The row whose primary key the whole row `input` names, locked
  // exclusively and read at its newest version. NotFound if there is none.
  struct LockedRow {
    std::string pk;     // encoded primary key
    std::string bytes;  // stored row
    Row row;            // decoded
  };
  Result<LockedRow> LockRowToWrite(TableImpl* t, const Row& input, const char* whole_row_error);
  Status End(bool commit);
  // Whether a commit may return before its record is durable
  // (Options::flush_log_at_commit off): not once prepared, nor with a bulk
  // insert (whose trees and catalog entry the commit makes live) or an undo
  // file (removed at the end; a loser's recovery reads it).
  bool LazyCommitAllowed();
  // Caller holds mu_. See txn_records.h (relocation, spilling). `wait`:
  // for a backup's pause of file writes to end (ReAnchor).
  Status RelocateIfOld(uint64_t limit, bool wait = true);
  // Caller holds mu_. Writes undo_ to the undo file (created on first use),
  // then the anchor naming all of the file, durable, and moves the pin to
  // it; undo_ is then empty (txn/undo_file.h U1-U3). While a backup pauses
  // file writes it waits for the resume (if `wait`; up to
  // Options::log_full_timeout_ms), else fails with Busy.
  Status ReAnchor(bool wait = true);
  // Caller holds mu_, undo_ is empty: moves up to kReloadEntries of the
  // undo file's last entries above `savepoint` back into undo_.
  Status Reload(uint64_t savepoint);
  static constexpr uint64_t kReloadEntries = 4096;
  uint64_t ListSize() const { return (undo_file_ ? undo_file_->count() : 0) + undo_.size(); }
  Status Usable() const {
    if (ended_) return Status::InvalidArgument(kEnded);
    return poisoned_;
  }
  // After a record that moves the pin, a copy of the prepare record
  // (txn_records.h P1); Prepare appends the first one with it. Returns its
  // end, or `end` if the transaction is not prepared. Callers hold mu_, or
  // are Prepare's own thread, the only one that writes xid_.
  Result<uint64_t> CopyPrepare(uint64_t end);
  // Before the rollback of a prepared transaction: its unprepare record,
  // durable (txn_records.h). OK at once if it is not prepared.
  Status Unprepare();
  // The transaction keeps its locks, snapshot and checkpoint pin (nothing
  // may build on its keys), and the engine stops accepting writes:
  // recovery finishes it after a restart.
  void FailStop(Status st) {
    db_->StopWrites(st);
    {
      std::lock_guard lock(mu_);
      poisoned_ = std::move(st);
      ended_ = true;
    }
    alive_->store(false);
    UnregisterOwner();
  }
  // The row a locking read of this transaction read last (ReadRowBytes),
  // under the lock it still holds. No other transaction changes a key this
  // one holds locked, so those bytes stay the key's newest version until
  // this transaction changes a tree itself (WriteKey, a rollback, a bulk
  // insert) or gives a lock up: each of those forgets it. Update and
  // Delete of that row (LockRowToWrite, the usual UPDATE after its locking
  // read) take the bytes from here instead of descending the tree again.
  struct LockedRead {
    bool valid = false;
    uint32_t space = 0;  // the primary index's (a recreated table has another)
    std::string pk, bytes;
  };
  LockedRead locked_read_;
  void ForgetLockedRead() { locked_read_.valid = false; }
  // Rows past this are not kept (a scan FOR UPDATE of large rows would copy
  // each), nor is a buffer grown past it.
  static constexpr size_t kLockedReadMax = 4096;
  void NoteLockedRead(const IndexImpl* primary, const std::string& pk, const std::string& bytes) {
    if (bytes.size() > kLockedReadMax) {
      ForgetLockedRead();
      return;
    }
    if (locked_read_.bytes.capacity() > kLockedReadMax) std::string().swap(locked_read_.bytes);
    locked_read_.valid = true;
    locked_read_.space = primary->space();
    locked_read_.pk.assign(pk);
    locked_read_.bytes.assign(bytes);
  }
  // The bytes NoteLockedRead kept for this key, moved out (it is
  // forgotten), or nullopt.
  std::optional<std::string> TakeLockedRead(const IndexImpl* primary, const std::string& pk) {
    if (!locked_read_.valid || locked_read_.space != primary->space() || locked_read_.pk != pk) {
      return std::nullopt;
    }
    locked_read_.valid = false;
    return std::move(locked_read_.bytes);
  }

  // The lock manager, for a request that may leave this transaction holding
  // a lock or range: End releases them only if one was made.
  txn::LockManager& LocksToHold() {
    may_hold_locks_ = true;
    return db_->locks();
  }

  DatabaseImpl* const db_;
  const Isolation isolation_;
  std::shared_ptr<txn::TxnState> state_;
  bool ended_ = false;
  bool owner_registered_ = false;  // RegisterOwner
  bool may_hold_locks_ = false;    // LocksToHold
  // Set (under mu_) before the commit or abort record is appended: from
  // then on the undo list is not relocated. Copies behind the end record
  // would outlive it once the checkpoint passed it, and recovery would take
  // the finished transaction for a loser and undo it.
  bool end_logging_ = false;
  bool has_snapshot_ = false;      // read_ts_: the transaction's (RR) or statement's (RC) snapshot
  bool statement_scoped_ = false;  // StartStatement was called
  std::chrono::milliseconds lock_timeout_ = db_->lock_timeout();
  bool replaces_duplicates_ = false;  // SetReplacesDuplicates
  std::function<bool()> interrupted_;
  uint64_t read_ts_ = 0;
  bool pinned_ = false;
  uint64_t pin_token_ = 0;
  // The undo list: the undo file's entries, then undo_ (entry i of undo_
  // is at position file count + i). undo_bytes_: what undo_'s records take
  // in the log (0 for entries reloaded from the file).
  std::vector<Undo> undo_;
  uint64_t undo_bytes_ = 0;
  std::unique_ptr<txn::UndoFile> undo_file_;
  // The count of the newest durable anchor: positions below it are
  // rewritten only with the same entries (U2).
  uint64_t anchored_count_ = 0;
  // Whether the undo list recovery would find (the newest anchor's entries,
  // then the undo records after it and after any undo reset, cut by cut
  // records) is this list: false after a rollback to a savepoint that
  // could not write its cut (its entries stay among the records), true
  // again after a relocation or an anchor, which write the list anew.
  bool log_list_exact_ = true;
  // The indexes of the entries in the undo file, by space (entries
  // reloaded from it name a space); filled as they are written there.
  std::map<uint32_t, IndexImpl*> wrote_spaces_;
  // Resurrected: spaces its undo names whose tables are gone (temporary
  // tables, dropped at Open: K6); their entries are skipped.
  std::set<uint32_t> gone_spaces_;
  // Changes per (space, key) still in undo_ beyond the first, for keys
  // changed more than once: the first change of a key is the one its
  // version store adds writer's version for (VersionStore::Add), so that a
  // key changed once (every key of a load) costs no entry here. A rollback
  // that takes back a key's change with no entry left here takes back its
  // first: the key is back to its value before this transaction.
  struct SpaceKeyHash {
    size_t operator()(const std::pair<uint32_t, std::string>& k) const noexcept {
      return std::hash<std::string_view>{}(k.second) ^ (size_t{k.first} * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<std::pair<uint32_t, std::string>, int, SpaceKeyHash> rewrites_;
  std::vector<txn::TxnSystem::KeyRef> written_;
  // Chains this transaction's changes (and undo) took out of leaves and
  // that are still retired: the purge after its end releases them.
  std::set<txn::TxnSystem::KeyRef> retired_;
  std::set<TableImpl*> used_;
  // Rows this transaction read (its cursors' and lookups'), not yet added
  // to their tables' and indexes' counters: a striped add per row costs a
  // sched_getcpu and a locked add. A counter's rows are added every
  // kReadCountBatch, when its slot is taken for another counter, when a
  // cursor goes, and at the end (End, while the tables are in use, so none
  // of the counters is gone). Only the transaction's own thread reads rows.
  struct PendingReads {
    StripedCounter* counter = nullptr;
    uint32_t n = 0;
  };
  static constexpr uint32_t kReadCountBatch = 64;
  std::array<PendingReads, 4> pending_reads_{};
  uint32_t next_pending_read_ = 0;
  void CountReadInNewSlot(StripedCounter* counter);
  static void FlushPending(PendingReads& p) {
    if (p.n != 0) p.counter->Add(p.n);
    p.n = 0;
  }
  // Held by this transaction's thread while it changes trees or its undo,
  // and by a thread relieving the log (RelieveLog).
  mutable std::mutex mu_;
  Status poisoned_;  // a failed statement rollback: only Rollback is allowed
  // Prepare: from then on the transaction writes nothing but its end.
  std::atomic<bool> prepared_{false};
  std::string xid_;
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
};

// A cursor of txn over index of table (cursor.cc). own_snapshot: view is
// this statement's (READ COMMITTED), closed with the cursor; locks_ranges: a
// locking read at REPEATABLE READ locks the ranges it steps over.
std::unique_ptr<Cursor> NewCursor(TransactionImpl* txn, std::shared_ptr<std::atomic<bool>> alive,
                                  txn::TxnSystem* txns, TableImpl* table, IndexImpl* index,
                                  ReadMode mode, txn::ReadView view, bool own_snapshot,
                                  bool locks_ranges);
// `inner`, showing no row: a table bulk-inserted into by a transaction the
// reader does not see (bulk_insert.cc).
std::unique_ptr<Cursor> HideRows(std::unique_ptr<Cursor> inner);

}  // namespace subito::engine
