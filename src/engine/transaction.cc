// Transactions and cursors (engine_impl.h has the write path; the read path
// is below): a consistent read takes the tree's value, then the version
// chain (V1); a locking read locks, then takes the tree's newest value.
#include <algorithm>

#include "engine/engine_impl.h"
#include "engine/row_codec.h"
#include "subito/interrupt.h"
#include "txn/txn_records.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

constexpr const char* kEnded = "the transaction has ended";

bool SkipsLocked(ReadMode mode) {
  return mode == ReadMode::kSharedSkipLocked || mode == ReadMode::kExclusiveSkipLocked;
}

bool HasPrefix(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

// The smallest string above every string that starts with `p`, if any.

class TransactionImpl;
Status VictimOf(TransactionImpl* txn, Status st);

// Whether table t is empty to a snapshot at read_ts that moved to pages as
// of an LSN (TableImpl::created_ts), or refused to it (loaded_ts).
Result<bool> EmptyToMovedSnapshot(const TableImpl& t, uint64_t read_ts) {
  if (read_ts < t.loaded_ts.load()) {
    return Status::SnapshotTooOld("snapshot too old: table " + t.def().name +
                                  " was bulk loaded after this snapshot, whose old pages do not "
                                  "hold those rows; start the transaction again");
  }
  return read_ts < t.created_ts.load();
}

class CursorImpl final : public Cursor {
 public:
  CursorImpl(TransactionImpl* txn, std::shared_ptr<std::atomic<bool>> alive, txn::TxnSystem* txns,
             TableImpl* table, IndexImpl* index, ReadMode mode, txn::ReadView view,
             bool own_snapshot, bool locks_ranges)
      : txn_(txn),
        alive_(std::move(alive)),
        txns_(txns),
        table_(table),
        index_(index),
        mode_(mode),
        view_(view),
        own_snapshot_(own_snapshot),
        locks_ranges_(locks_ranges),
        tree_cursor_(index->tree.get()) {}
  ~CursorImpl() override;
  Status Seek(SeekOp op, const Row& key) override;
  Status Next() override { return Step(true); }
  Status Prev() override { return Step(false); }
  bool Valid() const override { return valid_; }
  const Row& row() const override { return row_; }

 private:
  Status Step(bool forward) {
    if (!valid_) return Status::InvalidArgument("cursor is not positioned");
    return Position(forward, key_, /*inclusive=*/false);
  }
  Status PositionOrRollBack(bool forward, std::optional<std::string> from, bool inclusive);
  // The first (forward) or last visible entry from `from` on.
  Status Position(bool forward, std::optional<std::string> from, bool inclusive);
  // Position, as of the snapshot's epoch once it moved there (V6).
  Status PositionInView(bool forward, std::optional<std::string> from, bool inclusive);
  // Whether the snapshot moved to pages as of an LSN (V6); then the tree
  // cursor starts again on those pages.
  bool MoveAsOf();
  Result<std::optional<Row>> Resolve(const std::string& key, std::optional<std::string> tree_value);
  // Whether this call's locked ranges (locked_to) already cover the way to
  // `candidate` (absent: to the index's end).
  static bool RangeLocked(bool forward, const std::optional<std::optional<std::string>>& locked_to,
                          const std::optional<std::string>& candidate);

  TransactionImpl* const txn_;  // used only while *alive_
  const std::shared_ptr<std::atomic<bool>> alive_;
  txn::TxnSystem* const txns_;
  TableImpl* const table_;
  IndexImpl* const index_;
  const ReadMode mode_;
  const txn::ReadView view_;
  const bool own_snapshot_;  // READ COMMITTED: this statement's snapshot
  // A locking read at REPEATABLE READ: the ranges it steps over are locked
  // (next-key locking, lock_manager.h L6-L8).
  const bool locks_ranges_;
  btree::BTree::Cursor tree_cursor_;
  std::shared_ptr<const txn::AsOfSnapshot> as_of_;  // V6: once the snapshot moved
  std::optional<std::string> bound_;                // kEq, kEqLast: the prefix
  bool valid_ = false;
  std::string key_;
  Row row_;
};

class TransactionImpl final : public Transaction, public UndoOwner {
 public:
  TransactionImpl(DatabaseImpl* db, Isolation isolation)
      : db_(db), isolation_(isolation), state_(db->txns().Begin()) {
    db_->Register(this);
  }
  // An ended transaction no longer touches its database (which may be
  // gone by the time the object is destroyed).
  ~TransactionImpl() override {
    if (!ended_) (void)Rollback();
  }
  bool RelieveLog(uint64_t limit) override {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || ended_ || end_logging_ || !pinned_) return false;
    const uint64_t before = pin_token_;
    (void)RelocateIfOld(limit);
    return pin_token_ != before;
  }
  // Shared with cursors: false once the transaction has ended.
  const std::shared_ptr<std::atomic<bool>>& alive() const { return alive_; }
  Status Insert(Table* table, const Row& row) override;
  Status Update(Table* table, const Row& old_row, const Row& new_row) override;
  Status Delete(Table* table, const Row& row) override;
  Result<std::optional<Row>> Get(Table* table, const Row& key, ReadMode mode) override;
  Result<std::unique_ptr<Cursor>> OpenCursor(Table* table, uint32_t index, ReadMode mode) override;
  uint64_t Savepoint() const override { return undo_.size(); }
  Status RollbackTo(uint64_t savepoint) override;
  Status Commit() override;
  Status Rollback() override;
  uint64_t id() const override { return state_->id; }
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

  // For cursors.
  Status LockKey(IndexImpl* ix, const std::string& key, ReadMode mode);
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
  void LockRange(IndexImpl* ix, txn::KeyRange range) {
    db_->locks().LockRange(state_->id, ix->space(), std::move(range));
  }
  // as_of: the snapshot's moved state, if the caller (a moved cursor)
  // holds it already; else it is looked up.
  Result<std::optional<Row>> ReadRow(TableImpl* t, const std::string& pk, ReadMode mode,
                                     const txn::ReadView& view,
                                     std::shared_ptr<const txn::AsOfSnapshot> as_of = nullptr);
  void CloseStatementSnapshot(uint64_t read_ts) { db_->txns().CloseSnapshot(read_ts); }
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
    bool before_chain;  // before is the reference to a chain the write retired
    uint64_t logged;    // the span of its record in the log
  };
  Result<TableImpl*> Use(Table* table);
  // The snapshot of a consistent read: the transaction's (REPEATABLE READ)
  // or a new one per statement (READ COMMITTED, own=true: close it after).
  txn::ReadView View(bool& own);
  Status WriteKey(IndexImpl* ix, const std::string& key, std::optional<std::string> after,
                  std::optional<std::string> before);
  Status ApplyUndo(const Undo& u);
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
  // Caller holds mu_. See txn_records.h (relocation).
  Status RelocateIfOld(uint64_t limit);
  Status Usable() const {
    if (ended_) return Status::InvalidArgument(kEnded);
    return poisoned_;
  }
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
    db_->Unregister(this);
  }

  DatabaseImpl* const db_;
  const Isolation isolation_;
  std::shared_ptr<txn::TxnState> state_;
  bool ended_ = false;
  // Set (under mu_) before the commit or abort record is appended: from
  // then on the undo list is not relocated. Copies behind the end record
  // would outlive it once the checkpoint passed it, and recovery would take
  // the finished transaction for a loser and undo it.
  bool end_logging_ = false;
  bool has_snapshot_ = false;      // read_ts_: the transaction's (RR) or statement's (RC) snapshot
  bool statement_scoped_ = false;  // StartStatement was called
  std::chrono::milliseconds lock_timeout_ = db_->lock_timeout();
  std::function<bool()> interrupted_;
  uint64_t read_ts_ = 0;
  bool pinned_ = false;
  uint64_t pin_token_ = 0;
  std::vector<Undo> undo_;
  uint64_t undo_bytes_ = 0;
  // Changes per (space, key) still in undo_: when one drops to zero the
  // key is back to its value before this transaction.
  std::map<std::pair<uint32_t, std::string>, int> live_writes_;
  std::vector<txn::TxnSystem::KeyRef> written_;
  // Chains this transaction's changes (and undo) took out of leaves and
  // that are still retired: the purge after its end releases them.
  std::set<txn::TxnSystem::KeyRef> retired_;
  std::set<TableImpl*> used_;
  // Held by this transaction's thread while it changes trees or its undo,
  // and by a thread relieving the log (RelieveLog).
  std::mutex mu_;
  Status poisoned_;  // a failed statement rollback: only Rollback is allowed
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
};

// ---- TransactionImpl ----

Result<TableImpl*> TransactionImpl::Use(Table* table) {
  SUBITO_RETURN_IF_ERROR(Usable());
  auto* t = static_cast<TableImpl*>(table);
  if (t == nullptr || t->dropped.load()) return Status::NotFound("the table was dropped");
  if (used_.count(t)) return t;
  // Counted first, then the flag read: BeginBulkLoad sets the flag, then
  // reads the count, so one of the two always sees the other (seq_cst).
  t->users.fetch_add(1);
  if (t->bulk_loading.load()) {
    t->users.fetch_sub(1);
    return Status::Busy("table " + t->def().name +
                        " is being filled by a bulk load, or one left it incomplete (drop it)");
  }
  used_.insert(t);
  return t;
}

txn::ReadView TransactionImpl::View(bool& own) {
  own = false;
  if (isolation_ == Isolation::kReadCommitted) {
    own = true;
    if (!statement_scoped_) return {db_->txns().OpenSnapshot(), state_.get()};
    if (!has_snapshot_) {  // the statement's, taken at its first read
      read_ts_ = db_->txns().OpenSnapshot();
      has_snapshot_ = true;
    }
    db_->txns().RetainSnapshot(read_ts_);  // the caller's reference
    return {read_ts_, state_.get()};
  }
  if (!has_snapshot_) {
    read_ts_ = db_->txns().OpenSnapshot();
    has_snapshot_ = true;
  }
  return {read_ts_, state_.get()};
}

Status TransactionImpl::LockKey(IndexImpl* ix, const std::string& key, ReadMode mode) {
  const bool shared = mode == ReadMode::kShared || mode == ReadMode::kSharedSkipLocked;
  return db_->locks().Lock(
      state_->id, ix->space(), key, shared ? txn::LockMode::kShared : txn::LockMode::kExclusive,
      SkipsLocked(mode) ? std::chrono::milliseconds(0) : lock_timeout_, interrupted_);
}

Status TransactionImpl::WriteKey(IndexImpl* ix, const std::string& key,
                                 std::optional<std::string> after,
                                 std::optional<std::string> before) {
  SUBITO_RETURN_IF_ERROR(db_->Writable());
  log::RedoLog* log = db_->log();
  btree::BTree* tree = ix->tree.get();
  // A value stored as a chain is retired by the change, not freed: the undo
  // record and the version name the chain instead of holding its bytes.
  bool before_chain = false;
  if (before && tree->MayChain(key.size(), before->size())) {
    Result<std::optional<std::string>> ref = tree->ChainOf(key);
    if (!ref.ok()) return ref.status();
    if (ref->has_value()) {
      before = std::move(**ref);
      before_chain = true;
    }
  }
  const std::string rec = txn::EncodeUndo(state_->id, ix->space(), key, before, before_chain);
  if (undo_bytes_ + log::RecordSpan(rec.size()) > log->capacity() / 16) {
    return Status::Busy(StrFormat(
        "transaction %llu is too large: its undo would exceed %llu KiB (1/16 of the redo log); "
        "commit in smaller pieces or raise log_file_size",
        static_cast<unsigned long long>(state_->id),
        static_cast<unsigned long long>(log->capacity() / 16 >> 10)));
  }
  // A new key waits for other transactions' range locks over it, before it
  // goes into the tree and again once it is there (L7, L8).
  const bool inserts = after && !before;
  if (inserts) {
    SUBITO_RETURN_IF_ERROR(
        db_->locks().WaitForRanges(state_->id, ix->space(), key, lock_timeout_, interrupted_));
  }
  // A value longer than one mini-transaction is written first, holding
  // nothing (its chunks wait for log space, which may relocate this very
  // transaction's undo), and linked below.
  std::optional<btree::BTree::Prepared> prepared;
  if (after && tree->MayChain(key.size(), after->size()) && after->size() > tree->chunk_bytes()) {
    SUBITO_RETURN_IF_ERROR(tree->CheckKey(key));  // before writing the value
    Result<btree::BTree::Prepared> p = tree->Prepare(*after);
    if (!p.ok()) return p.status();
    prepared.emplace(std::move(*p));
  }
  SUBITO_RETURN_IF_ERROR(db_->pool()->LogFreeCheck());  // may relocate this one too
  std::unique_lock lock(mu_);
  if (!pinned_) {
    pin_token_ = db_->pool()->BeginChange();
    pinned_ = true;
  }
  SUBITO_RETURN_IF_ERROR(RelocateIfOld(log->capacity() / 4));
  Result<log::AppendResult> a =
      log->Append(txn::kRecordTxnUndo, rec.data(), static_cast<uint32_t>(rec.size()));
  if (!a.ok()) return a.status();
  ix->file->CountPmBytes(a->end - a->start);
  ix->versions->Add(key, state_, before, before_chain);
  // Purge visits each key once (again only after a savepoint rollback).
  if (++live_writes_[{ix->space(), key}] == 1) written_.push_back({ix->versions, key});
  undo_.push_back({ix, key, std::move(before), before_chain, log::RecordSpan(rec.size())});
  undo_bytes_ += log::RecordSpan(rec.size());
  // Log space was checked above; the change must not wait on the pin this
  // transaction holds.
  buffer::BufferPool::LogFreeExemption exempt;
  btree::BTree::ChainMoves moves;
  const Status st = !after     ? tree->Delete(key, &moves).status()
                    : prepared ? tree->Put(key, std::move(*prepared), &moves)
                               : tree->Put(key, *after, &moves);
  NoteMoves(ix, moves);
  SUBITO_RETURN_IF_ERROR(st);
  if (!inserts) return Status::OK();
  lock.unlock();  // the wait must not keep RelieveLog out
  // A range locked meanwhile whose read missed the key (L8): on failure the
  // statement's rollback takes the key out again.
  return db_->locks().WaitForRanges(state_->id, ix->space(), key, lock_timeout_, interrupted_);
}

Status TransactionImpl::RelocateIfOld(uint64_t limit) {
  log::RedoLog* log = db_->log();
  if (!pinned_ || log->reserved_lsn() - pin_token_ <= limit) return Status::OK();
  const uint64_t new_pin = db_->pool()->BeginChange();
  Status st;
  for (const Undo& u : undo_) {
    const std::string rec =
        txn::EncodeUndo(state_->id, u.index->space(), u.key, u.before, u.before_chain);
    Result<log::AppendResult> a =
        log->Append(txn::kRecordTxnUndo, rec.data(), static_cast<uint32_t>(rec.size()));
    if (!a.ok()) {
      st = a.status();
      break;
    }
    u.index->file->CountPmBytes(a->end - a->start);
  }
  if (st.ok()) {
    const std::string rec = txn::EncodeUndoReset(state_->id, new_pin);
    Result<log::AppendResult> a =
        log->Append(txn::kRecordTxnUndoReset, rec.data(), static_cast<uint32_t>(rec.size()));
    st = a.ok() ? log->WaitDurable(a->end) : a.status();
  }
  if (!st.ok()) {
    db_->pool()->EndChange(new_pin);  // the old pin stays: nothing was superseded
    return st;
  }
  db_->pool()->EndChange(pin_token_);
  pin_token_ = new_pin;
  db_->relocations.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

// Caller holds mu_.
Status TransactionImpl::ApplyUndo(const Undo& u) {
  buffer::BufferPool::LogFreeExemption exempt;
  btree::BTree* tree = u.index->tree.get();
  btree::BTree::ChainMoves moves;
  Status st = !u.before        ? tree->Delete(u.key, &moves).status()
              : u.before_chain ? tree->Restore(u.key, *u.before, &moves)
                               : tree->Put(u.key, *u.before, &moves);
  NoteMoves(u.index, moves);
  return st;
}

Status TransactionImpl::RollbackTo(uint64_t savepoint) {
  if (ended_) return Status::InvalidArgument(kEnded);
  if (savepoint > undo_.size()) {
    return Status::InvalidArgument("savepoint is ahead of the transaction");
  }
  // In chunks: between them this thread waits for log space, which a
  // long rollback may need, and the transaction may be relocated then.
  // A rollback is never interrupted (a KILL must not turn it into a
  // fail-stop), and a wait for log space that fails (pages that cannot be
  // written now, a checkpoint held back) does not stop it: it goes on in
  // the quarter of the log kept for rollbacks (ApplyUndo's exemption).
  // Only a log that stays completely full fails it.
  InterruptScope uninterrupted(nullptr, nullptr);
  while (undo_.size() > savepoint) {
    (void)db_->pool()->LogFreeCheck();
    std::lock_guard lock(mu_);
    for (int n = 0; n < 16 && undo_.size() > savepoint; ++n) {
      const Undo& u = undo_.back();
      SUBITO_RETURN_IF_ERROR(ApplyUndo(u));
      auto it = live_writes_.find({u.index->space(), u.key});
      if (it != live_writes_.end() && --it->second == 0) {
        u.index->versions->MarkUndoneBySelf(u.key, state_.get());
        live_writes_.erase(it);
      }
      undo_bytes_ -= u.logged;
      undo_.pop_back();
    }
  }
  return Status::OK();
}

template <typename Fn>
Status TransactionImpl::Statement(Fn&& fn) {
  SUBITO_RETURN_IF_ERROR(Usable());
  const uint64_t sp = Savepoint();
  Status st = fn();
  if (st.ok()) return st;
  if (st.IsDeadlock()) {
    Status r = Rollback();
    return r.ok() ? st : r;
  }
  Status r = RollbackTo(sp);
  if (!r.ok()) {
    // Half a statement must never be committed.
    poisoned_ = Status::IOError("a failed statement could not be undone (" + r.ToString() +
                                "): the transaction can only roll back");
    return r;
  }
  return st;
}

}  // namespace

std::string UniquePrefix(TableImpl* t, uint32_t index, const Row& row) {
  Row vals;
  for (uint32_t c : t->def().indexes[index - 1].columns) vals.push_back(row[c]);
  return *EncodeKey(t->def(), t->def().indexes[index - 1].columns, vals);
}

Status CheckUnique(TableImpl* t, uint32_t index, const Row& row) {
  const std::string prefix = UniquePrefix(t, index, row);
  btree::BTree::Cursor c(t->indexes[index]->tree.get());
  SUBITO_RETURN_IF_ERROR(c.Seek(btree::SeekMode::kGE, prefix));
  if (c.Valid() && HasPrefix(c.key(), prefix)) {
    return Status::AlreadyExists("duplicate entry for unique index " +
                                 t->def().indexes[index - 1].name + " of " + t->def().name);
  }
  return Status::OK();
}

namespace {

Result<TransactionImpl::LockedRow> TransactionImpl::LockRowToWrite(TableImpl* t, const Row& input,
                                                                   const char* whole_row_error) {
  const TableDef& def = t->def();
  if (input.size() != def.columns.size()) return Status::InvalidArgument(whole_row_error);
  Row key_vals;
  for (uint32_t c : def.primary_key) key_vals.push_back(input[c]);
  Result<std::string> pk = EncodeKey(def, def.primary_key, key_vals);
  if (!pk.ok()) return pk.status();
  IndexImpl* primary = t->indexes[0].get();
  SUBITO_RETURN_IF_ERROR(LockKey(primary, *pk, ReadMode::kExclusive));
  Result<std::optional<std::string>> cur = LatestOf(primary, *pk);
  if (!cur.ok()) return cur.status();
  if (!cur->has_value()) return Status::NotFound("no such row in " + def.name);
  Result<Row> row = DecodeRow(def, **cur);
  if (!row.ok()) return row.status();
  return LockedRow{std::move(*pk), std::move(**cur), std::move(*row)};
}

Status TransactionImpl::Insert(Table* table, const Row& input) {
  Result<TableImpl*> t = Use(table);
  if (!t.ok()) return t.status();
  Result<Row> row = CanonicalRow((*t)->def(), input);
  if (!row.ok()) return row.status();
  return Statement([&]() -> Status {
    TableImpl* tb = *t;
    const TableDef& def = tb->def();
    IndexImpl* primary = tb->indexes[0].get();
    const std::string pk = RowKey(def, 0, *row);
    SUBITO_RETURN_IF_ERROR(WaitForRanges(primary, pk));
    SUBITO_RETURN_IF_ERROR(LockKey(primary, pk, ReadMode::kExclusive));
    Result<std::optional<std::string>> cur = LatestOf(primary, pk);
    if (!cur.ok()) return cur.status();
    if (cur->has_value()) return Status::AlreadyExists("duplicate primary key in " + def.name);
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique || KeyHasNull(def, i, *row)) continue;
      SUBITO_RETURN_IF_ERROR(
          LockKey(tb->indexes[i].get(), UniquePrefix(tb, i, *row), ReadMode::kExclusive));
      SUBITO_RETURN_IF_ERROR(CheckUnique(tb, i, *row));
    }
    SUBITO_RETURN_IF_ERROR(WriteKey(primary, pk, EncodeRow(def, *row), std::nullopt));
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      SUBITO_RETURN_IF_ERROR(
          WriteKey(tb->indexes[i].get(), RowKey(def, i, *row), std::string(), std::nullopt));
    }
    tb->SawAutoIncrement(*row);
    tb->rows_inserted.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

Status TransactionImpl::Delete(Table* table, const Row& input) {
  Result<TableImpl*> t = Use(table);
  if (!t.ok()) return t.status();
  return Statement([&]() -> Status {
    TableImpl* tb = *t;
    const TableDef& def = tb->def();
    Result<LockedRow> cur =
        LockRowToWrite(tb, input, "Delete takes a whole row (its primary key is used)");
    if (!cur.ok()) return cur.status();
    const Row& old = cur->row;
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique || KeyHasNull(def, i, old)) continue;
      SUBITO_RETURN_IF_ERROR(
          LockKey(tb->indexes[i].get(), UniquePrefix(tb, i, old), ReadMode::kExclusive));
    }
    SUBITO_RETURN_IF_ERROR(
        WriteKey(tb->indexes[0].get(), cur->pk, std::nullopt, std::move(cur->bytes)));
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      SUBITO_RETURN_IF_ERROR(
          WriteKey(tb->indexes[i].get(), RowKey(def, i, old), std::nullopt, std::string()));
    }
    tb->rows_deleted.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

Status TransactionImpl::Update(Table* table, const Row& old_input, const Row& new_input) {
  Result<TableImpl*> t = Use(table);
  if (!t.ok()) return t.status();
  Result<Row> row = CanonicalRow((*t)->def(), new_input);
  if (!row.ok()) return row.status();
  return Statement([&]() -> Status {
    TableImpl* tb = *t;
    const TableDef& def = tb->def();
    IndexImpl* primary = tb->indexes[0].get();
    Result<LockedRow> cur =
        LockRowToWrite(tb, old_input, "Update takes the whole old row (its primary key is used)");
    if (!cur.ok()) return cur.status();
    const std::string& old_pk = cur->pk;
    const Row& old = cur->row;
    const std::string new_pk = RowKey(def, 0, *row);
    const bool pk_changes = new_pk != old_pk;
    if (pk_changes) {
      SUBITO_RETURN_IF_ERROR(WaitForRanges(primary, new_pk));
      SUBITO_RETURN_IF_ERROR(LockKey(primary, new_pk, ReadMode::kExclusive));
      Result<std::optional<std::string>> taken = LatestOf(primary, new_pk);
      if (!taken.ok()) return taken.status();
      if (taken->has_value()) return Status::AlreadyExists("duplicate primary key in " + def.name);
    }
    std::vector<uint32_t> changed;
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      if (RowKey(def, i, old) == RowKey(def, i, *row)) continue;
      changed.push_back(i);
      if (!def.indexes[i - 1].unique) continue;
      IndexImpl* ix = tb->indexes[i].get();
      const bool old_null = KeyHasNull(def, i, old), new_null = KeyHasNull(def, i, *row);
      if (!old_null) {
        SUBITO_RETURN_IF_ERROR(LockKey(ix, UniquePrefix(tb, i, old), ReadMode::kExclusive));
      }
      if (!new_null && (old_null || UniquePrefix(tb, i, old) != UniquePrefix(tb, i, *row))) {
        SUBITO_RETURN_IF_ERROR(LockKey(ix, UniquePrefix(tb, i, *row), ReadMode::kExclusive));
        SUBITO_RETURN_IF_ERROR(CheckUnique(tb, i, *row));
      }
    }
    std::string bytes = EncodeRow(def, *row);
    if (pk_changes) {
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, old_pk, std::nullopt, std::move(cur->bytes)));
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, new_pk, std::move(bytes), std::nullopt));
    } else {
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, new_pk, std::move(bytes), std::move(cur->bytes)));
    }
    for (uint32_t i : changed) {
      IndexImpl* ix = tb->indexes[i].get();
      SUBITO_RETURN_IF_ERROR(WriteKey(ix, RowKey(def, i, old), std::nullopt, std::string()));
      SUBITO_RETURN_IF_ERROR(WriteKey(ix, RowKey(def, i, *row), std::string(), std::nullopt));
    }
    tb->SawAutoIncrement(*row);
    tb->rows_updated.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

Result<std::optional<Row>> TransactionImpl::ReadRow(
    TableImpl* t, const std::string& pk, ReadMode mode, const txn::ReadView& view,
    std::shared_ptr<const txn::AsOfSnapshot> as_of) {
  IndexImpl* primary = t->indexes[0].get();
  std::optional<std::string> bytes;
  if (mode == ReadMode::kSnapshot) {
    Result<std::optional<std::string>> visible =
        SnapshotValue(t, primary, pk, view, std::move(as_of));
    if (!visible.ok()) return visible.status();
    bytes = std::move(*visible);
  } else {
    Status locked = LockKey(primary, pk, mode);
    if (SkipsLocked(mode) && locked.IsTimedOut()) return std::optional<Row>();
    SUBITO_RETURN_IF_ERROR(locked);
    Result<std::optional<std::string>> latest = primary->tree->Get(pk);
    if (!latest.ok()) return latest.status();
    bytes = std::move(*latest);
  }
  if (!bytes) return std::optional<Row>();
  Result<Row> row = DecodeRow(t->def(), *bytes);
  if (!row.ok()) return row.status();
  t->rows_read.fetch_add(1, std::memory_order_relaxed);
  return std::optional<Row>(std::move(*row));
}

Result<std::optional<std::string>> TransactionImpl::SnapshotValue(
    TableImpl* t, IndexImpl* ix, const std::string& key, const txn::ReadView& view,
    std::shared_ptr<const txn::AsOfSnapshot> as_of) {
  if (!as_of) as_of = AsOf(view);
  if (!as_of) {
    buffer::ReadAsOf present(nullptr);  // also inside a moved cursor's scope
    Result<std::optional<std::string>> latest = ix->tree->Get(key);  // tree first (V1)
    if (!latest.ok()) return latest.status();
    Result<std::optional<std::string>> visible =
        ix->versions->Visible(key, std::move(*latest), view);
    if (!visible.status().IsSnapshotTooOld()) return visible;
    as_of = AsOf(view);
    if (!as_of) return visible;
  }
  Result<bool> empty = EmptyToMovedSnapshot(*t, view.read_ts);
  if (!empty.ok() || *empty) {
    SUBITO_RETURN_IF_ERROR(as_of->Check());
    if (!empty.ok()) return empty.status();
    return std::optional<std::string>();
  }
  buffer::ReadAsOf scope(as_of->epoch.get());
  Result<std::optional<std::string>> latest = ix->tree->Get(key);
  if (!latest.ok()) return latest.status();
  return ix->versions->VisibleAsOf(*as_of, key, std::move(*latest));
}

Result<std::optional<Row>> TransactionImpl::Get(Table* table, const Row& key, ReadMode mode) {
  Result<TableImpl*> t = Use(table);
  if (!t.ok()) return t.status();
  const TableDef& def = (*t)->def();
  if (key.size() != def.primary_key.size()) {
    return Status::InvalidArgument(
        StrFormat("Get takes the %zu primary key values", def.primary_key.size()));
  }
  Result<std::string> pk = EncodeKey(def, def.primary_key, key);
  if (!pk.ok()) return pk.status();
  bool own = false;
  const txn::ReadView view = mode == ReadMode::kSnapshot ? View(own) : txn::ReadView{};
  Result<std::optional<Row>> r = ReadRow(*t, *pk, mode, view);
  if (own) CloseStatementSnapshot(view.read_ts);
  if (!r.ok()) return Victim(r.status());
  return r;
}

Result<std::unique_ptr<Cursor>> TransactionImpl::OpenCursor(Table* table, uint32_t index,
                                                            ReadMode mode) {
  Result<TableImpl*> t = Use(table);
  if (!t.ok()) return t.status();
  if (index >= (*t)->indexes.size()) {
    return Status::InvalidArgument(
        StrFormat("table %s has no index %u", (*t)->def().name.c_str(), index));
  }
  IndexImpl* ix = (*t)->indexes[index].get();
  bool own = false;
  const txn::ReadView view = mode == ReadMode::kSnapshot ? View(own) : txn::ReadView{};
  if (mode == ReadMode::kSnapshot && ix->created_ts > view.read_ts) {
    if (own) db_->txns().CloseSnapshot(view.read_ts);
    return Status::Busy("index " + ix->cat.def.name +
                        " was created after this snapshot: " + "retry the transaction");
  }
  const bool locks_ranges = isolation_ == Isolation::kRepeatableRead &&
                            (mode == ReadMode::kShared || mode == ReadMode::kExclusive);
  return std::unique_ptr<Cursor>(
      new CursorImpl(this, alive_, &db_->txns(), *t, ix, mode, view, own, locks_ranges));
}

Status TransactionImpl::End(bool commit) {
  if (ended_) return Status::InvalidArgument(kEnded);
  if (commit && !poisoned_.ok()) return poisoned_;
  Status st;
  // Once an undo record is logged, the end must be too: recovery would
  // otherwise take the transaction for a loser.
  if (commit && pinned_) {
    SetEndLogging(true);
    const std::string rec = txn::EncodeTxnEnd(state_->id);
    Result<log::AppendResult> a =
        db_->log()->Append(txn::kRecordTxnCommit, rec.data(), static_cast<uint32_t>(rec.size()));
    if (!a.ok()) {
      st = a.status();
      commit = false;  // never in the log: roll back below
      SetEndLogging(false);
    } else if (Status d = db_->log()->WaitDurable(a->end); !d.ok()) {
      // The record may or may not become durable: only recovery can tell.
      // Fail-stop: keep locks and pin, so nothing builds on these keys.
      FailStop(Status::IOError("commit outcome unknown (" + d.ToString() +
                               "); restart the database, recovery decides"));
      return poisoned_;
    }
  }
  if (!commit) {
    Status r = RollbackTo(0);
    if (r.ok() && pinned_) {
      SetEndLogging(true);
      const std::string rec = txn::EncodeTxnEnd(state_->id);
      Result<log::AppendResult> a =
          db_->log()->Append(txn::kRecordTxnAbort, rec.data(), static_cast<uint32_t>(rec.size()));
      r = a.ok() ? db_->log()->WaitDurable(a->end) : a.status();
    }
    if (!r.ok()) {
      // Fail-stop likewise: recovery finishes the rollback after a restart.
      FailStop(Status::IOError("rollback failed (" + r.ToString() +
                               "); restart the database, recovery finishes it"));
      return poisoned_;
    }
  }
  db_->txns().End(state_, commit, std::move(written_), {retired_.begin(), retired_.end()});
  {
    // Under mu_: a relocation (RelieveLog) may have moved the pin until now.
    std::lock_guard lock(mu_);
    if (pinned_) db_->pool()->EndChange(pin_token_);
    pinned_ = false;
    ended_ = true;
  }
  db_->Unregister(this);
  db_->locks().ReleaseAll(state_->id);
  if (has_snapshot_) db_->txns().CloseSnapshot(read_ts_);
  for (TableImpl* t : used_) t->users.fetch_sub(1);
  alive_->store(false);
  (commit ? db_->commits : db_->rollbacks).fetch_add(1, std::memory_order_relaxed);
  return st;
}

Status TransactionImpl::Commit() {
  return End(true);
}
Status TransactionImpl::Rollback() {
  return End(false);
}

// ---- CursorImpl ----

CursorImpl::~CursorImpl() {
  if (own_snapshot_) txns_->CloseSnapshot(view_.read_ts);
}

Status CursorImpl::Seek(SeekOp op, const Row& key) {
  valid_ = false;
  bound_.reset();
  if (op == SeekOp::kFirst) return Position(true, std::nullopt, true);
  if (op == SeekOp::kLast) return Position(false, std::nullopt, true);
  Result<std::string> prefix = EncodeKey(table_->def(), index_->key_columns, key);
  if (!prefix.ok()) return prefix.status();
  if (op == SeekOp::kEq || op == SeekOp::kEqLast) bound_ = *prefix;
  switch (op) {
    case SeekOp::kEq:
    case SeekOp::kGE:
      return Position(true, *prefix, true);
    case SeekOp::kGT: {
      std::optional<std::string> succ = KeySuccessor(*prefix);
      if (!succ) return Status::OK();
      return Position(true, *succ, true);
    }
    case SeekOp::kEqLast:
    case SeekOp::kLE: {
      std::optional<std::string> succ = KeySuccessor(*prefix);
      if (!succ) return Position(false, std::nullopt, true);
      return Position(false, *succ, false);
    }
    case SeekOp::kLT:
      return Position(false, *prefix, false);
    default:
      return Status::InvalidArgument("unknown seek operation");
  }
}

Status VictimOf(TransactionImpl* txn, Status st) {
  return txn->Victim(std::move(st));
}

Status CursorImpl::Position(bool forward, std::optional<std::string> from, bool inclusive) {
  if (!alive_->load()) {
    valid_ = false;
    return Status::InvalidArgument("the cursor's transaction has ended");
  }
  if (mode_ != ReadMode::kSnapshot) {
    return VictimOf(txn_, PositionOrRollBack(forward, std::move(from), inclusive));
  }
  if (as_of_ && txn_->wrote()) {  // its own changes are not in the old pages
    as_of_.reset();
    tree_cursor_.Reset();
  }
  if (!as_of_) MoveAsOf();  // it may have moved since the last call
  Status st = PositionInView(forward, from, inclusive);
  // It moved during this call: the versions it read may be gone.
  if (st.IsSnapshotTooOld() && !as_of_ && MoveAsOf()) {
    st = PositionInView(forward, std::move(from), inclusive);
  }
  return st;
}

bool CursorImpl::MoveAsOf() {
  as_of_ = txn_->AsOf(view_);
  if (!as_of_) return false;
  tree_cursor_.Reset();
  return true;
}

Status CursorImpl::PositionInView(bool forward, std::optional<std::string> from, bool inclusive) {
  if (as_of_) {
    Result<bool> empty = EmptyToMovedSnapshot(*table_, view_.read_ts);
    if (!empty.ok() || *empty) {
      valid_ = false;
      SUBITO_RETURN_IF_ERROR(as_of_->Check());
      return empty.status();
    }
  }
  std::optional<buffer::ReadAsOf> scope;
  if (as_of_) scope.emplace(as_of_->epoch.get());
  Status st = VictimOf(txn_, PositionOrRollBack(forward, std::move(from), inclusive));
  if (st.ok()) {
    // Also when nothing was found: a key the purge took for a cut snapshot
    // is missed without any Visible call (V4).
    st = as_of_ ? as_of_->Check() : index_->versions->CheckSnapshot(view_);
    if (!st.ok()) valid_ = false;
  }
  return st;
}

Status CursorImpl::PositionOrRollBack(bool forward, std::optional<std::string> from,
                                      bool inclusive) {
  valid_ = false;
  using btree::SeekMode;
  // How far this call's ranges reach (locks_ranges_): none yet; the index's
  // end (an empty inner value); or up to and including a key.
  std::optional<std::optional<std::string>> locked_to;
  for (;;) {
    // The tree's candidate (read first: V1), then the version store's.
    const bool continue_tree =
        from && !inclusive && tree_cursor_.Valid() && tree_cursor_.key() == *from;
    if (continue_tree) {
      SUBITO_RETURN_IF_ERROR(forward ? tree_cursor_.Next() : tree_cursor_.Prev());
    } else if (!from) {
      SUBITO_RETURN_IF_ERROR(tree_cursor_.Seek(forward ? SeekMode::kFirst : SeekMode::kLast));
    } else {
      const SeekMode m = forward ? (inclusive ? SeekMode::kGE : SeekMode::kGT)
                                 : (inclusive ? SeekMode::kLE : SeekMode::kLT);
      SUBITO_RETURN_IF_ERROR(tree_cursor_.Seek(m, *from));
    }
    std::optional<std::string> candidate;
    if (tree_cursor_.Valid()) candidate = tree_cursor_.key();
    std::optional<std::string> other;
    if (as_of_) {
      other = from ? index_->versions->NeighborAsOf(*as_of_, std::string_view(*from), forward,
                                                    inclusive)
                   : index_->versions->NeighborAsOf(*as_of_, std::nullopt, forward, true);
    } else {
      other = from ? index_->versions->Neighbor(std::string_view(*from), forward, inclusive)
                   : index_->versions->Neighbor(std::nullopt, forward, true);
    }
    bool from_tree = candidate.has_value();
    if (other && (!candidate || (forward ? *other < *candidate : *other > *candidate))) {
      candidate = std::move(other);
      from_tree = false;
    }
    if (locks_ranges_ && !RangeLocked(forward, locked_to, candidate)) {
      // The exact key of an inclusive seek needs only its key lock (Resolve).
      if (!(candidate && from && inclusive && *candidate == *from)) {
        txn::KeyRange r;
        (forward ? r.lo : r.hi) = from;
        (forward ? r.lo_inclusive : r.hi_inclusive) = inclusive;
        (forward ? r.hi : r.lo) = candidate;
        // A key past a prefix seek's bound ends the range without being in
        // it (InnoDB's gap lock before the first key that does not match).
        if (candidate && bound_ && !HasPrefix(*candidate, *bound_)) {
          (forward ? r.hi_inclusive : r.lo_inclusive) = false;
        }
        txn_->LockRange(index_, std::move(r));
        locked_to = candidate;
        continue;  // L8: a key added before the range was locked is in the tree now
      }
    }
    if (!candidate) return Status::OK();
    if (bound_ && !HasPrefix(*candidate, *bound_)) return Status::OK();
    std::optional<std::string> tree_value;
    if (from_tree) tree_value = tree_cursor_.value();
    Result<std::optional<Row>> row = Resolve(*candidate, std::move(tree_value));
    if (!row.ok()) return row.status();
    if (row->has_value()) {
      key_ = std::move(*candidate);
      row_ = std::move(**row);
      valid_ = true;
      return Status::OK();
    }
    from = std::move(candidate);
    inclusive = false;
  }
}

bool CursorImpl::RangeLocked(bool forward,
                             const std::optional<std::optional<std::string>>& locked_to,
                             const std::optional<std::string>& candidate) {
  if (!locked_to) return false;
  if (!*locked_to) return true;  // to the index's end
  if (!candidate) return false;
  return forward ? *candidate <= **locked_to : *candidate >= **locked_to;
}

Result<std::optional<Row>> CursorImpl::Resolve(const std::string& key,
                                               std::optional<std::string> tree_value) {
  const TableDef& def = table_->def();
  if (index_->number == 0) {
    if (mode_ == ReadMode::kSnapshot) {
      Result<std::optional<std::string>> bytes =
          as_of_ ? index_->versions->VisibleAsOf(*as_of_, key, std::move(tree_value))
                 : index_->versions->Visible(key, std::move(tree_value), view_);
      if (!bytes.ok()) return bytes.status();
      if (!bytes->has_value()) return std::optional<Row>();
      Result<Row> row = DecodeRow(def, **bytes);
      if (!row.ok()) return row.status();
      table_->rows_read.fetch_add(1, std::memory_order_relaxed);
      return std::optional<Row>(std::move(*row));
    }
    return txn_->ReadRow(table_, key, mode_, view_);
  }
  // A secondary entry: its key ends with the primary key.
  const size_t own_parts = def.indexes[index_->number - 1].columns.size();
  Result<size_t> split = KeyPrefixLength(def, index_->key_columns, key, own_parts);
  if (!split.ok()) return split.status();
  const std::string pk = key.substr(*split);
  if (mode_ == ReadMode::kSnapshot) {
    Result<std::optional<std::string>> entry =
        as_of_ ? index_->versions->VisibleAsOf(*as_of_, key, std::move(tree_value))
               : index_->versions->Visible(key, std::move(tree_value), view_);
    if (!entry.ok()) return entry.status();
    if (!entry->has_value()) return std::optional<Row>();
    Result<std::optional<Row>> row = txn_->ReadRow(table_, pk, mode_, view_, as_of_);
    if (row.ok() && !row->has_value()) {
      return Status::Corruption(StrFormat("index %s of %s: an entry for a missing row",
                                          index_->cat.def.name.c_str(), def.name.c_str()));
    }
    return row;
  }
  Status locked = txn_->LockKey(index_, key, mode_);
  if (SkipsLocked(mode_) && locked.IsTimedOut()) return std::optional<Row>();
  SUBITO_RETURN_IF_ERROR(locked);
  Result<std::optional<std::string>> entry = index_->tree->Get(key);
  if (!entry.ok()) return entry.status();
  if (!entry->has_value()) {
    // An entry missing from the tree may be another transaction's
    // uncommitted delete or key change, which its rollback would put back
    // into the range this read locked: wait for it through the row's lock.
    // A removal that committed stays removed; one whose rollback just ended
    // is back in the tree for the second look.
    if (index_->versions->ChangedByActiveOther(key, txn_->state())) {
      locked = txn_->LockKey(table_->indexes[0].get(), pk, mode_);
      if (SkipsLocked(mode_) && locked.IsTimedOut()) return std::optional<Row>();
      SUBITO_RETURN_IF_ERROR(locked);
    }
    entry = index_->tree->Get(key);
    if (!entry.ok()) return entry.status();
    if (!entry->has_value()) return std::optional<Row>();
  }
  Result<std::optional<Row>> row = txn_->ReadRow(table_, pk, mode_, view_);
  if (!row.ok() || !row->has_value()) return row;
  if (RowKey(def, index_->number, **row) != key) return std::optional<Row>();  // moved on
  return row;
}

}  // namespace

Result<std::unique_ptr<Transaction>> NewTransaction(DatabaseImpl* db, Isolation isolation) {
  return std::unique_ptr<Transaction>(new TransactionImpl(db, isolation));
}

}  // namespace subito::engine
