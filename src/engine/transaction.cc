// Transactions of the embedded API (transaction_impl.h); their cursors are
// in cursor.cc.
#include <algorithm>
#include <cassert>

#include "engine/row_codec.h"
#include "engine/transaction_impl.h"
#include "subito/interrupt.h"
#include "txn/txn_records.h"
#include "util/strings.h"

namespace subito::engine {

Result<bool> EmptyToMovedSnapshot(const TableImpl& t, uint64_t read_ts) {
  if (read_ts < t.loaded_ts.load()) {
    return Status::SnapshotTooOld("snapshot too old: table " + t.def().name +
                                  " was bulk loaded after this snapshot, whose old pages do not "
                                  "hold those rows; start the transaction again");
  }
  return read_ts < t.created_ts.load();
}

// ---- TransactionImpl ----

Result<TableImpl*> TransactionImpl::Use(Table* table, bool writes) {
  SUBITO_RETURN_IF_ERROR(Usable());
  if (prepared_) return Status::InvalidArgument(kPreparedOnlyEnds);
  auto* t = static_cast<TableImpl*>(table);
  if (t == nullptr || t->dropped.load()) return Status::NotFound("the table was dropped");
  if (!bulk_.empty()) SUBITO_RETURN_IF_ERROR(FinishBulkOf(t));
  if (!used_.count(t)) {
    // Counted first, then the flag read: BeginBulkLoad sets it, then reads
    // the count, so one of the two always sees the other (seq_cst).
    {
      std::lock_guard lock(t->bulk_mu);  // ordered with a bulk insert's claim (I1)
      t->users.fetch_add(1);
    }
    if (t->bulk_loading.load()) {
      t->users.fetch_sub(1);
      return Status::Busy("table " + t->def().name +
                          " is being filled by a bulk load, or one left it incomplete (drop it)");
    }
    used_.insert(t);
  }
  if (writes) SUBITO_RETURN_IF_ERROR(AwaitBulk(t));
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

Status TransactionImpl::LockKey(IndexImpl* ix, const std::string& key, ReadMode mode,
                                bool* granted_new) {
  const bool shared = mode == ReadMode::kShared || mode == ReadMode::kSharedSkipLocked;
  return LocksToHold().Lock(
      state_->id, ix->space(), key, shared ? txn::LockMode::kShared : txn::LockMode::kExclusive,
      SkipsLocked(mode) ? std::chrono::milliseconds(0) : lock_timeout_, interrupted_, granted_new);
}

Status TransactionImpl::WriteKey(IndexImpl* ix, const std::string& key,
                                 std::optional<std::string> after,
                                 std::optional<std::string> before, uint32_t fresh_lock_length,
                                 bool* pushed) {
  ForgetLockedRead();
  SUBITO_RETURN_IF_ERROR(db_->Writable());
  if (prepared_) return Status::InvalidArgument(kPreparedOnlyEnds);
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
  RegisterOwner();  // before mu_: RelieveLog takes the owners' mutex, then mu_
  std::unique_lock lock(mu_);
  SUBITO_RETURN_IF_ERROR(
      PushUndo(ix, {ix, key, before, before_chain, 0, false, fresh_lock_length}, rec));
  if (pushed != nullptr) *pushed = true;
  NoteWrite(ix, key, std::move(before), before_chain);
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

void TransactionImpl::NoteWrite(IndexImpl* ix, const std::string& key,
                                std::optional<std::string> before, bool before_chain) {
  // Purge visits each key once (again only after a savepoint rollback).
  if (ix->versions->Add(key, state_, std::move(before), before_chain)) {
    if (written_.empty()) written_.reserve(8);
    written_.push_back({ix->versions, key});
  } else {
    ++rewrites_[{ix->space(), key}];
  }
}

Status TransactionImpl::PushUndo(IndexImpl* ix, Undo u, const std::string& rec) {
  log::RedoLog* log = db_->log();
  if (!pinned_) {
    pin_token_ = db_->pool()->BeginChange();
    pinned_ = true;
  }
  SUBITO_RETURN_IF_ERROR(RelocateIfOld(log->capacity() / 4));
  // Past 1/16 of the log, the undo goes to the undo file; so does it
  // before a new entry would take a position a rollback freed below the
  // newest anchor (U2).
  // While a backup pauses file writes the checkpoint is held anyway: the
  // undo stays in the log (but in U2's case, which waits for the backup's
  // end); a rollback near a full log waits for that end too
  // (RollbackTo, BufferPool::AwaitRoomWhilePaused).
  const uint64_t span = log::RecordSpan(rec.size());
  const bool spill =
      undo_bytes_ + span > log->capacity() / 16 && !db_->pool()->file_writes_paused();
  if (spill || (undo_file_ && ListSize() < anchored_count_)) {
    SUBITO_RETURN_IF_ERROR(ReAnchor());
  }
  Result<log::AppendResult> a =
      log->Append(txn::kRecordTxnUndo, rec.data(), static_cast<uint32_t>(rec.size()));
  if (!a.ok()) return a.status();
  ix->file->CountRedo(a->end - a->start);
  u.logged = span;
  if (undo_.empty()) undo_.reserve(8);  // one allocation for a small transaction's list
  undo_.push_back(std::move(u));
  undo_bytes_ += span;
  return Status::OK();
}

Status TransactionImpl::RelocateIfOld(uint64_t limit, bool wait) {
  log::RedoLog* log = db_->log();
  if (!pinned_ || log->reserved_lsn() - pin_token_ <= limit) return Status::OK();
  // A held checkpoint (a backup's pause) gains nothing from a moved pin.
  if (db_->pool()->file_writes_paused()) return Status::OK();
  // A long list is cheaper to append to the undo file than to copy.
  if (undo_file_ || undo_bytes_ > log->capacity() / 64) return ReAnchor(wait);
  const uint64_t new_pin = db_->pool()->BeginChange();
  Status st;
  for (const Undo& u : undo_) {
    const std::string rec =
        txn::EncodeUndo(state_->id, u.index->space(), u.key, u.before, u.before_chain, u.empties);
    Result<log::AppendResult> a =
        log->Append(txn::kRecordTxnUndo, rec.data(), static_cast<uint32_t>(rec.size()));
    if (!a.ok()) {
      st = a.status();
      break;
    }
    u.index->file->CountRedo(a->end - a->start);
  }
  if (st.ok()) {
    const std::string rec = txn::EncodeTxnValue(state_->id, new_pin);
    Result<log::AppendResult> a =
        log->Append(txn::kRecordTxnUndoReset, rec.data(), static_cast<uint32_t>(rec.size()));
    Result<uint64_t> end = a.ok() ? CopyPrepare(a->end) : Result<uint64_t>(a.status());
    st = end.ok() ? log->WaitDurable(*end) : end.status();
  }
  if (!st.ok()) {
    db_->pool()->EndChange(new_pin);  // the old pin stays: nothing was superseded
    return st;
  }
  db_->pool()->EndChange(pin_token_);
  pin_token_ = new_pin;
  log_list_exact_ = true;
  db_->relocations.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status TransactionImpl::ReAnchor(bool wait) {
  // Undo files stay as they are while a backup copies them.
  buffer::FileWriteScope file_write(db_->pool(), wait);
  SUBITO_RETURN_IF_ERROR(file_write.status());
  if (!undo_file_) {
    Result<std::unique_ptr<txn::UndoFile>> f =
        txn::UndoFile::Create(db_->undo_fs(), db_->undo_dir(), state_->id);
    if (!f.ok()) return f.status();
    undo_file_ = std::move(*f);
  }
  std::vector<std::string> payloads;
  payloads.reserve(undo_.size());
  for (const Undo& u : undo_) {
    wrote_spaces_[u.index->space()] = u.index;  // for Reload
    payloads.push_back(
        txn::EncodeUndo(state_->id, u.index->space(), u.key, u.before, u.before_chain, u.empties));
  }
  const uint64_t new_pin = db_->pool()->BeginChange();
  Status st = undo_file_->Append(payloads);  // U1
  // A pause waiting for this write must not wait for the anchor's log
  // space too (the cleaners that free it are paused by then).
  file_write.End();
  if (!st.ok()) {
    db_->pool()->EndChange(new_pin);
    return st;
  }
  // undo_ is in the file now; until the anchor is durable the old pin keeps
  // its records in the log readable, so either one describes the list.
  undo_.clear();
  undo_bytes_ = 0;
  const std::string rec = txn::EncodeUndoAnchor(undo_file_->anchor());
  Result<log::AppendResult> a =
      db_->log()->Append(txn::kRecordTxnUndoFile, rec.data(), static_cast<uint32_t>(rec.size()));
  // Either anchor may be the newest durable one until this one is (U2),
  // once it is in the log, whatever follows.
  if (a.ok()) anchored_count_ = std::max(anchored_count_, undo_file_->count());
  Result<uint64_t> end = a.ok() ? CopyPrepare(a->end) : Result<uint64_t>(a.status());
  if (end.ok()) {
    st = db_->log()->WaitDurable(*end);
    if (st.ok()) anchored_count_ = undo_file_->count();
  } else {
    st = end.status();
  }
  if (!st.ok()) {
    db_->pool()->EndChange(new_pin);
    return st;
  }
  db_->pool()->EndChange(pin_token_);
  pin_token_ = new_pin;
  log_list_exact_ = true;
  db_->undo_spills.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status TransactionImpl::Reload(uint64_t savepoint) {
  const uint64_t end = undo_file_->count();
  const uint64_t first = std::max(savepoint, end - std::min(end, kReloadEntries));
  Result<std::vector<txn::UndoRecord>> records = undo_file_->Read(first, end);
  if (!records.ok()) return records.status();
  std::vector<Undo> loaded;
  loaded.reserve(records->size());
  for (txn::UndoRecord& r : *records) {
    if (gone_spaces_.count(r.space)) continue;
    auto it = wrote_spaces_.find(r.space);
    if (it == wrote_spaces_.end()) {
      return Status::Corruption(
          StrFormat("undo file %s holds an entry of a space %u "
                    "the transaction did not write",
                    undo_file_->path().c_str(), r.space));
    }
    loaded.push_back(
        {it->second, std::move(r.key), std::move(r.before), r.before_chain, 0, r.empties});
  }
  SUBITO_RETURN_IF_ERROR(undo_file_->Truncate(first));
  undo_ = std::move(loaded);
  return Status::OK();
}

// Caller holds mu_.
Status TransactionImpl::ApplyUndo(const Undo& u) {
  ForgetLockedRead();
  buffer::BufferPool::LogFreeExemption exempt;
  btree::BTree* tree = u.index->tree.get();
  if (u.empties) {
    AbandonBulkOf(u.index);  // its builder must not outlive the tree it fills
    SUBITO_RETURN_IF_ERROR(tree->ResetToEmpty());
    // Versions and retired chains of this transaction's later writes there
    // name rows and pages that are gone (I2).
    u.index->versions->DropVersionsOf(state_.get());
    std::erase_if(retired_,
                  [&](const txn::TxnSystem::KeyRef& r) { return r.first == u.index->versions; });
    for (auto it = rewrites_.begin(); it != rewrites_.end();) {
      it = it->first.first == u.index->space() ? rewrites_.erase(it) : std::next(it);
    }
    return Status::OK();
  }
  btree::BTree::ChainMoves moves;
  Status st = !u.before        ? tree->Delete(u.key, &moves).status()
              : u.before_chain ? tree->Restore(u.key, *u.before, &moves)
                               : tree->Put(u.key, *u.before, &moves);
  NoteMoves(u.index, moves);
  return st;
}

Status TransactionImpl::RollBack(uint64_t savepoint, bool whole) {
  if (ended_) return Status::InvalidArgument(kEnded);
  if (savepoint > Position()) {
    return Status::InvalidArgument("savepoint is ahead of the transaction");
  }
  // A prepared transaction rolls back only whole, through End (its
  // unprepare record first).
  if (prepared_) return Status::InvalidArgument(kPreparedOnlyEnds);
  // In chunks: between them this thread waits for log space, which a
  // long rollback may need, and the transaction may be relocated then.
  // A rollback is never interrupted (a KILL must not turn it into a
  // fail-stop), and a wait for log space that fails (pages that cannot be
  // written now, a checkpoint held back) does not stop it: it goes on in
  // the quarter of the log kept for rollbacks (ApplyUndo's exemption); one
  // failed wait is enough, but then this transaction's old pin is moved
  // here (RelieveLog, which would, finds mu_ held nearly all the time).
  // Only a log that stays completely full fails it. While a backup pauses
  // file writes, it waits for the backup's end near a full log instead.
  // A chunk's compensation is bounded in bytes, as UndoLoser's.
  InterruptScope uninterrupted(nullptr, nullptr);
  log::RedoLog* log = db_->log();
  const uint64_t chunk_bytes = txn::RollbackChunkBytes(log->capacity());
  bool wait_for_space = true;
  // HandOver's, made at the first key and ended once every key is back:
  // until then readers take its versions for an active writer's (V3: a
  // reader may have read a key from the tree before the key's undo).
  std::shared_ptr<txn::TxnState> stand_in;
  struct EndStandIn {
    txn::TxnSystem& txns;
    std::shared_ptr<txn::TxnState>& stand_in;
    ~EndStandIn() {
      if (stand_in) txns.End(stand_in, /*committed=*/false, {});
    }
  } end_stand_in{db_->txns(), stand_in};
  KeyLocks insert_locks;
  bool took_back = false;
  while (Position() > savepoint) {
    if (!db_->pool()->AwaitRoomWhilePaused() && wait_for_space &&
        !db_->pool()->LogFreeCheck().ok()) {
      wait_for_space = false;
    }
    std::lock_guard lock(mu_);
    if (!wait_for_space) (void)RelocateIfOld(log->capacity() / 4, /*wait=*/false);
    if (undo_.empty()) SUBITO_RETURN_IF_ERROR(NotExactOnError(Reload(savepoint), took_back));
    uint64_t bytes = 0;
    for (int n = 0; n < 16 && bytes < chunk_bytes && !undo_.empty() && ListSize() > savepoint;
         ++n) {
      const Undo& u = undo_.back();
      bytes += txn::RollbackWeight(u.key, u.before, u.empties, db_->pool()->page_size());
      SUBITO_RETURN_IF_ERROR(NotExactOnError(ApplyUndo(u), took_back));
      took_back = true;
      auto it = rewrites_.empty() ? rewrites_.end() : rewrites_.find({u.index->space(), u.key});
      if (it != rewrites_.end()) {
        if (--it->second == 0) rewrites_.erase(it);
      } else if (!u.empties) {
        if (!whole) {
          if (!stand_in) stand_in = std::make_shared<txn::TxnState>(state_->id);
          u.index->versions->HandOver(u.key, state_.get(), stand_in);
          // The lock was taken for this insert (after the savepoint), so
          // every change of this transaction under it is taken back too.
          if (u.lock_length != 0 && !u.before) {
            insert_locks.emplace_back(u.index->space(), u.key.substr(0, u.lock_length));
          }
        }
      }
      undo_bytes_ -= u.logged;
      undo_.pop_back();
    }
  }
  if (stand_in) {
    db_->txns().End(stand_in, /*committed=*/false, {});
    stand_in.reset();
  }
  if (!whole && took_back) CutUndoList(insert_locks);
  return Status::OK();
}

void TransactionImpl::ReleaseKeyLocks(const KeyLocks& locks) {
  ForgetLockedRead();
  for (const auto& [space, key] : locks) db_->locks().Release(state_->id, space, key);
}

void TransactionImpl::CutUndoList(const KeyLocks& locks) {
  {
    std::lock_guard lock(mu_);
    // The cut keeps the first ListSize() entries of the list recovery
    // finds, so that list must be this one's with the entries taken back at
    // its end (log_list_exact_), and its undo-file part must not be cut
    // (txn_records.h).
    if (!log_list_exact_ || ListSize() < anchored_count_) {
      log_list_exact_ = false;
      return;
    }
    const std::string rec = txn::EncodeTxnValue(state_->id, ListSize());
    Result<log::AppendResult> a =
        db_->log()->Append(txn::kRecordTxnUndoCut, rec.data(), static_cast<uint32_t>(rec.size()));
    if (!a.ok()) {
      log_list_exact_ = false;
      return;
    }
  }
  ReleaseKeyLocks(locks);
}

template <typename Fn>
Status TransactionImpl::Statement(Fn&& fn) {
  SUBITO_RETURN_IF_ERROR(Usable());
  const uint64_t sp = Position();  // loads stay open: a statement adds no row to them
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

std::string UniquePrefix(TableImpl* t, uint32_t index, const Row& row) {
  return OwnColumnsKey(t->def(), index, row);
}

namespace {

// Whether the unique index holds an entry with the row's prefix (its
// newest entries: the prefix's lock orders writers).
Result<bool> UniqueTaken(TableImpl* t, uint32_t index, const Row& row) {
  const std::string prefix = UniquePrefix(t, index, row);
  btree::BTree::Cursor c(t->indexes[index]->tree.get());
  SUBITO_RETURN_IF_ERROR(c.Seek(btree::SeekMode::kGE, prefix));
  return c.Valid() && HasPrefix(c.key(), prefix);
}

Status UniqueDuplicate(const TableDef& def, uint32_t index) {
  return Status::AlreadyExists("duplicate entry for unique index " + def.indexes[index - 1].name +
                               " of " + def.name);
}

}  // namespace

Status CheckUnique(TableImpl* t, uint32_t index, const Row& row) {
  Result<bool> taken = UniqueTaken(t, index, row);
  if (!taken.ok()) return taken.status();
  return *taken ? UniqueDuplicate(t->def(), index) : Status::OK();
}

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
  std::optional<std::string> read = TakeLockedRead(primary, *pk);
#ifndef NDEBUG
  if (read) {
    // The lock held since the read kept the row as it was (locked_read_).
    Result<std::optional<std::string>> tree = LatestOf(primary, *pk);
    assert(tree.ok() && *tree == read);
  }
#endif
  Result<std::optional<std::string>> cur =
      read ? Result<std::optional<std::string>>(std::move(read)) : LatestOf(primary, *pk);
  if (!cur.ok()) return cur.status();
  if (!cur->has_value()) return Status::NotFound("no such row in " + def.name);
  Result<Row> row = DecodeRow(def, **cur);
  if (!row.ok()) return row.status();
  return LockedRow{std::move(*pk), std::move(**cur), std::move(*row)};
}

Result<bool> TransactionImpl::LockToInsert(IndexImpl* ix, const std::string& key,
                                           const std::function<Result<bool>()>& taken, bool* fresh,
                                           bool moves_under_lock) {
  *fresh = false;
  bool fresh_shared = false;
  // Read before the first look (L12): a transaction that put the key there
  // and gave up its lock before this read made its change visible to it.
  const uint64_t releases = moves_under_lock ? db_->locks().releases() : 0;
  Result<bool> there = taken();
  if (!there.ok()) return there;
  const bool free_at_first_look = !*there;
  if (*there && !replaces_duplicates_) {
    SUBITO_RETURN_IF_ERROR(LockKey(ix, key, ReadMode::kShared, &fresh_shared));
    there = taken();
    if (!there.ok() || *there) return there;
  }
  SUBITO_RETURN_IF_ERROR(LockKey(ix, key, ReadMode::kExclusive, fresh));
  *fresh = *fresh || fresh_shared;
  // Free at the first look, and no lock given up since: whoever could have
  // put the key there meanwhile holds it still, and this lock was granted.
  if (free_at_first_look && moves_under_lock && db_->locks().releases() == releases) {
    return false;
  }
  there = taken();
  if (!there.ok()) return there;
  if (*there && *fresh && !replaces_duplicates_) {
    db_->locks().Downgrade(state_->id, ix->space(), key);
  }
  return there;
}

Result<bool> TransactionImpl::LockPrimaryToInsert(IndexImpl* primary, const std::string& pk,
                                                  bool* fresh) {
  *fresh = false;
  SUBITO_RETURN_IF_ERROR(WaitForRanges(primary, pk));
  return LockToInsert(
      primary, pk, [&]() -> Result<bool> { return primary->tree->Contains(pk); }, fresh,
      /*moves_under_lock=*/true);
}

Status TransactionImpl::Insert(Table* table, const Row& input) {
  Result<TableImpl*> t = Use(table, /*writes=*/true);
  if (!t.ok()) return t.status();
  SUBITO_RETURN_IF_ERROR(ChangesSeenBySnapshot(*t));
  Result<Row> row = CanonicalRow((*t)->def(), input);
  if (!row.ok()) return row.status();
  return Statement([&]() -> Status {
    TableImpl* tb = *t;
    const TableDef& def = tb->def();
    IndexImpl* primary = tb->indexes[0].get();
    const std::string pk = RowKey(def, 0, *row);
    // The locks this call takes for the row's free keys: given up at once
    // if the row does not go in (a duplicate, a lock wait that fails), as
    // InnoDB's implicit locks go with the entries its rollback removes; an
    // entry written under one takes it over (Undo::lock_length), and a
    // rollback of the entry gives it up.
    KeyLocks unwritten;
    std::vector<uint32_t> fresh_length(tb->indexes.size(), 0);  // per index
    const auto give_up = [&](Status st) {
      ReleaseKeyLocks(unwritten);
      return st;
    };
    bool fresh = false;
    Result<bool> dup = LockPrimaryToInsert(primary, pk, &fresh);
    if (!dup.ok()) return dup.status();
    if (*dup) return Status::AlreadyExists("duplicate primary key in " + def.name);
    if (fresh) {
      unwritten.emplace_back(primary->space(), pk);
      fresh_length[0] = static_cast<uint32_t>(pk.size());
    }
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique || KeyHasNull(def, i, *row)) continue;
      IndexImpl* ix = tb->indexes[i].get();
      const std::string prefix = UniquePrefix(tb, i, *row);
      bool fresh_prefix = false;
      dup = LockToInsert(
          ix, prefix, [&] { return UniqueTaken(tb, i, *row); }, &fresh_prefix);
      if (!dup.ok()) return give_up(dup.status());
      if (*dup) return give_up(UniqueDuplicate(def, i));
      if (!fresh_prefix) continue;
      unwritten.emplace_back(ix->space(), prefix);
      fresh_length[i] = static_cast<uint32_t>(prefix.size());
    }
    for (uint32_t i = 0; i < tb->indexes.size(); ++i) {
      IndexImpl* ix = tb->indexes[i].get();
      bool pushed = false;
      Status st = i == 0 ? WriteKey(primary, pk, EncodeRow(def, *row), std::nullopt,
                                    fresh_length[0], &pushed)
                         : WriteKey(ix, RowKey(def, i, *row), std::string(), std::nullopt,
                                    fresh_length[i], &pushed);
      if (pushed && fresh_length[i] != 0) {
        std::erase_if(unwritten, [&](const auto& l) { return l.first == ix->space(); });
      }
      if (!st.ok()) return give_up(st);
    }
    tb->SawAutoIncrement(*row);
    tb->rows_inserted.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

Status TransactionImpl::Delete(Table* table, const Row& input) {
  Result<TableImpl*> t = Use(table, /*writes=*/true);
  if (!t.ok()) return t.status();
  SUBITO_RETURN_IF_ERROR(ChangesSeenBySnapshot(*t));
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
  Result<TableImpl*> t = Use(table, /*writes=*/true);
  if (!t.ok()) return t.status();
  SUBITO_RETURN_IF_ERROR(ChangesSeenBySnapshot(*t));
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
    // The locks of new keys, as Insert's (given up if a check fails).
    bool fresh_pk = false;
    KeyLocks fresh_locks;
    std::vector<uint32_t> fresh_prefix(tb->indexes.size(), 0);
    const auto give_up = [&](Status st) {
      ReleaseKeyLocks(fresh_locks);
      return st;
    };
    if (pk_changes) {
      Result<bool> dup = LockPrimaryToInsert(primary, new_pk, &fresh_pk);
      if (!dup.ok()) return dup.status();
      if (*dup) return Status::AlreadyExists("duplicate primary key in " + def.name);
      if (fresh_pk) fresh_locks.emplace_back(primary->space(), new_pk);
    }
    std::vector<uint32_t> changed;
    for (uint32_t i = 1; i < tb->indexes.size(); ++i) {
      if (SameRowKey(def, i, old, *row)) continue;
      changed.push_back(i);
      if (!def.indexes[i - 1].unique) continue;
      IndexImpl* ix = tb->indexes[i].get();
      const bool old_null = KeyHasNull(def, i, old), new_null = KeyHasNull(def, i, *row);
      if (!old_null) {
        Status locked = LockKey(ix, UniquePrefix(tb, i, old), ReadMode::kExclusive);
        if (!locked.ok()) return give_up(locked);
      }
      if (!new_null && (old_null || UniquePrefix(tb, i, old) != UniquePrefix(tb, i, *row))) {
        const std::string prefix = UniquePrefix(tb, i, *row);
        bool fresh = false;
        Result<bool> dup = LockToInsert(
            ix, prefix, [&] { return UniqueTaken(tb, i, *row); }, &fresh);
        if (!dup.ok()) return give_up(dup.status());
        if (*dup) return give_up(UniqueDuplicate(def, i));
        if (!fresh) continue;
        fresh_prefix[i] = static_cast<uint32_t>(prefix.size());
        fresh_locks.emplace_back(ix->space(), prefix);
      }
    }
    std::string bytes = EncodeRow(def, *row);
    if (pk_changes) {
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, old_pk, std::nullopt, std::move(cur->bytes)));
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, new_pk, std::move(bytes), std::nullopt,
                                      fresh_pk ? static_cast<uint32_t>(new_pk.size()) : 0));
    } else {
      SUBITO_RETURN_IF_ERROR(WriteKey(primary, new_pk, std::move(bytes), std::move(cur->bytes)));
    }
    for (uint32_t i : changed) {
      IndexImpl* ix = tb->indexes[i].get();
      SUBITO_RETURN_IF_ERROR(WriteKey(ix, RowKey(def, i, old), std::nullopt, std::string()));
      SUBITO_RETURN_IF_ERROR(
          WriteKey(ix, RowKey(def, i, *row), std::string(), std::nullopt, fresh_prefix[i]));
    }
    tb->SawAutoIncrement(*row);
    tb->rows_updated.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  });
}

Result<std::optional<std::string>> TransactionImpl::ReadRowBytes(
    TableImpl* t, const std::string& pk, ReadMode mode, const txn::ReadView& view,
    std::shared_ptr<const txn::AsOfSnapshot> as_of, bool* granted_new) {
  IndexImpl* primary = t->indexes[0].get();
  Result<std::optional<std::string>> bytes = std::optional<std::string>();
  if (mode == ReadMode::kSnapshot) {
    bytes = SnapshotValue(t, primary, pk, view, std::move(as_of));
  } else {
    Status locked = LockKey(primary, pk, mode, granted_new);
    if (SkipsLocked(mode) && locked.IsTimedOut()) return std::optional<std::string>();
    SUBITO_RETURN_IF_ERROR(locked);
    bytes = primary->tree->Get(pk);
    if (bytes.ok() && bytes->has_value()) {
      NoteLockedRead(primary, pk, **bytes);
    } else {
      ForgetLockedRead();
    }
  }
  if (bytes.ok() && bytes->has_value()) CountRead(&t->rows_read);
  return bytes;
}

Result<std::optional<std::string>> TransactionImpl::NewestCommittedRow(TableImpl* t,
                                                                       const std::string& pk) {
  const uint64_t read_ts = db_->txns().OpenSnapshot();
  Result<std::optional<std::string>> bytes =
      SnapshotValue(t, t->indexes[0].get(), pk, txn::ReadView{read_ts, state_.get()}, nullptr);
  db_->txns().CloseSnapshot(read_ts);
  if (bytes.ok() && bytes->has_value()) CountRead(&t->rows_read);
  return bytes;
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
  Result<TableImpl*> t = Use(table, mode != ReadMode::kSnapshot);
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
  if (mode == ReadMode::kSnapshot && HiddenByBulk(*t, view)) {
    if (own) CloseStatementSnapshot(view.read_ts);
    return std::optional<Row>();
  }
  Result<std::optional<std::string>> bytes = ReadRowBytes(*t, *pk, mode, view);
  if (own) CloseStatementSnapshot(view.read_ts);
  if (!bytes.ok()) return Victim(bytes.status());
  if (!bytes->has_value()) return std::optional<Row>();
  CountRead(&(*t)->indexes[0]->rows_read);
  Result<Row> row = DecodeRow((*t)->def(), **bytes);
  if (!row.ok()) return row.status();
  return std::optional<Row>(std::move(*row));
}

Result<std::unique_ptr<Cursor>> TransactionImpl::OpenCursor(Table* table, uint32_t index,
                                                            ReadMode mode) {
  Result<TableImpl*> t = Use(table, mode != ReadMode::kSnapshot);
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
    return Status::TableChanged("index " + ix->cat.def.name +
                                " was created after this snapshot: retry the transaction");
  }
  const bool locks_ranges = isolation_ == Isolation::kRepeatableRead &&
                            (mode == ReadMode::kShared || mode == ReadMode::kExclusive);
  const bool hidden = mode == ReadMode::kSnapshot && HiddenByBulk(*t, view);
  std::unique_ptr<Cursor> c =
      NewCursor(this, alive_, &db_->txns(), *t, ix, mode, view, own, locks_ranges);
  if (hidden) return HideRows(std::move(c));
  return c;
}

bool TransactionImpl::LazyCommitAllowed() {
  if (prepared_.load() || db_->flush_log_at_commit() || !bulk_.empty()) return false;
  // Its undo file goes at the end, and recovery needs it for a loser.
  std::lock_guard lock(mu_);
  return undo_file_ == nullptr;
}

Status TransactionImpl::End(bool commit) {
  if (ended_) return Status::InvalidArgument(kEnded);
  ForgetLockedRead();
  if (commit && !poisoned_.ok()) return poisoned_;
  Status st;
  if (!bulk_.empty()) {
    st = FinishAllBulk(commit);
    if (!st.ok()) commit = false;  // rows not all in: roll back below
  }
  // Once an undo record is logged, the end must be too: recovery would
  // otherwise take the transaction for a loser.
  // A commit that does not wait for its record (flush_log_at_commit off):
  // its end LSN; its pin stays until the log is durable past it.
  log::Lsn lazy_end = 0;
  if (commit && pinned_) {
    SetEndLogging(true);
    const std::string rec = txn::EncodeTxnEnd(state_->id);
    Result<log::AppendResult> a =
        db_->log()->Append(txn::kRecordTxnCommit, rec.data(), static_cast<uint32_t>(rec.size()));
    if (!a.ok() && prepared_.load()) {
      // The coordinator decided to commit: a prepared transaction never
      // turns into a rollback. It stays prepared; recovery hands it back.
      FailStop(Status::IOError("commit of a prepared transaction failed (" + a.status().ToString() +
                               "); restart the database, it stays prepared"));
      return poisoned_;
    }
    if (!a.ok()) {
      st = a.status();
      commit = false;  // never in the log: roll back below
      SetEndLogging(false);
    } else if (LazyCommitAllowed()) {
      lazy_end = a->end;
    } else if (Status d = db_->log()->WaitDurable(a->end); !d.ok()) {
      // The record may or may not become durable: only recovery can tell.
      // Fail-stop: keep locks and pin, so nothing builds on these keys.
      FailStop(Status::IOError("commit outcome unknown (" + d.ToString() +
                               "); restart the database, recovery decides"));
      return poisoned_;
    }
  }
  if (!commit) {
    Status r = Unprepare();
    if (r.ok()) r = RollBack(0, /*whole=*/true);
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
                               "); restart the database, recovery finishes it (or hands it back "
                               "prepared, if its unprepare record did not last)"));
      return poisoned_;
    }
  }
  // A transaction that changed nothing publishes no end: no version or bulk
  // load refers to its state, and snapshots see the same. (Written keys and
  // retired chains imply pinned_; they are named for the reader.)
  if (pinned_ || !written_.empty() || !retired_.empty() || !bulk_.empty()) {
    db_->txns().End(state_, commit, std::move(written_), {retired_.begin(), retired_.end()});
  }
  if (!bulk_.empty()) EndBulk(commit);
  std::unique_ptr<txn::UndoFile> spent;  // its end record is durable: not needed
  {
    // Under mu_: a relocation (RelieveLog) may have moved the pin until now.
    // A lazy commit's pin keeps the checkpoint before its undo records
    // until its commit record is durable: a crash before makes it a loser.
    std::lock_guard lock(mu_);
    if (pinned_ && lazy_end != 0) {
      db_->DeferEnd(lazy_end, pin_token_, state_->id, may_hold_locks_);
    } else if (pinned_) {
      db_->pool()->EndChange(pin_token_);
    }
    pinned_ = false;
    ended_ = true;
    spent = std::move(undo_file_);
  }
  if (spent) (void)db_->undo_fs()->Remove(spent->path());
  UnregisterOwner();
  if (may_hold_locks_ && lazy_end == 0) db_->locks().ReleaseAll(state_->id);
  if (has_snapshot_) db_->txns().CloseSnapshot(read_ts_);
  FlushReadCounts();  // while the tables are in use: none of their indexes is gone
  for (TableImpl* t : used_) t->users.fetch_sub(1);
  alive_->store(false);
  (commit ? db_->commits : db_->rollbacks).Add();
  return st;
}

void TransactionImpl::CountReadInNewSlot(StripedCounter* counter) {
  PendingReads& slot = pending_reads_[next_pending_read_++ % pending_reads_.size()];
  FlushPending(slot);
  slot.counter = counter;
  slot.n = 1;
}

void TransactionImpl::FlushReadCounts() {
  for (PendingReads& p : pending_reads_) FlushPending(p);
}

Status TransactionImpl::Commit() {
  return End(true);
}
Status TransactionImpl::Rollback() {
  return End(false);
}

Result<std::unique_ptr<Transaction>> NewTransaction(DatabaseImpl* db, Isolation isolation) {
  return std::unique_ptr<Transaction>(new TransactionImpl(db, isolation));
}

}  // namespace subito::engine
