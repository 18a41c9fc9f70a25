// Cursors of the embedded API over one index, reading through their
// transaction (transaction_impl.h).
#include <type_traits>
#include <variant>
#include <vector>

#include "engine/row_codec.h"
#include "engine/transaction_impl.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

Status VictimOf(TransactionImpl* txn, Status st) {
  if (st.ok()) return st;
  return txn->Victim(std::move(st));
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
  const Row& row() const override {
    if (!row_decoded_) {  // entry_only_ decodes at once
      row_ = row_view_.Decode(table_->def());
      row_decoded_ = true;
    }
    return row_;
  }
  ValueView column(uint32_t c) const override {
    if (!entry_only_) return row_view_.column(table_->def(), c);
    return std::visit(
        [](const auto& v) -> ValueView {
          if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>) {
            return std::string_view(v);
          } else {
            return v;
          }
        },
        row_[c]);
  }
  std::string_view key() const override { return key_; }
  Result<std::string> EncodeKey(const Row& prefix) const override {
    return engine::EncodeKey(table_->def(), index_->key_columns, prefix);
  }
  Status SeekKey(SeekOp op, std::string_view encoded) override;
  void SetKeysOnly(bool keys_only) override { keys_only_ = keys_only; }
  void ReleaseCurrentLocks() override {
    if (!alive_->load()) current_fresh_locks_.clear();  // the transaction ended
    for (const auto& [ix, key] : current_fresh_locks_) txn_->ReleaseKeyLock(ix, key);
    current_fresh_locks_.clear();
    semi_consistent_row_ = false;  // not wanted: no second read
  }
  void SetSemiConsistent(bool on) override { semi_consistent_ = on; }
  bool WasSemiConsistent() const override { return valid_ && semi_consistent_row_; }
  void SetEnd(std::optional<std::string> end, bool inclusive) override {
    end_ = std::move(end);
    end_inclusive_ = inclusive;
  }

 private:
  Status Step(bool forward) {
    if (!valid_) return Status::InvalidArgument("cursor is not positioned");
    if (semi_consistent_row_) {
      // The caller wants the row it read semi-consistently: its key again,
      // in either direction, now waiting for its lock (if the row is still
      // there; the keys after it are read semi-consistently again).
      semi_consistent_row_ = false;
      reread_key_ = key_;
      Status st = Position(forward, key_, /*inclusive=*/true);
      reread_key_.reset();
      return st;
    }
    return Position(forward, key_, /*inclusive=*/false);
  }
  Status PositionOrRollBack(bool forward, const std::optional<std::string>& start, bool inclusive);
  // The first (forward) or last visible entry from `from` on.
  Status Position(bool forward, const std::optional<std::string>& from, bool inclusive);
  // Position, as of the snapshot's epoch once it moved there (V6).
  Status PositionInView(bool forward, const std::optional<std::string>& from, bool inclusive);
  // Whether the snapshot moved to pages as of an LSN (V6); then the tree
  // cursor starts again on those pages.
  bool MoveAsOf();
  // Whether the entry with this key (the tree cursor's when from_tree) is
  // visible; if so, row_view_ holds its row.
  Result<bool> Resolve(const std::string& key, bool from_tree);
  // A locking read's first key past end_ (SetEnd): locked, not returned.
  Status LockEnd(const std::string& key, bool from_tree);
  // A lock wait that timed out or was interrupted (KILL).
  static bool WaitFailed(const Status& st) { return st.IsTimedOut() || st.IsInterrupted(); }
  // st; if it is a failed wait, the ranges of this step are given back,
  // newest first (L11).
  Status GiveBackIfWaitFailed(Status st) {
    if (WaitFailed(st)) {
      for (auto g = step_grants_.rbegin(); g != step_grants_.rend(); ++g) txn_->GiveBackRange(*g);
    }
    return st;
  }
  // row_view_ of an owned row, or of the tree cursor's value, which stays
  // put until the tree cursor moves (the next positioning).
  Status TakeRow(std::string bytes);
  Status ViewTreeRow();
  // Keys only: row_ of the entry's columns, decoded from its key.
  Status TakeEntry(const std::string& key);
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
  std::string bytes_;  // the row, encoded (row_codec.h), unless viewed in place
  RowView row_view_;   // of bytes_ or of tree_cursor_.value()
  mutable Row row_;    // decoded by the first row() at this position
  mutable bool row_decoded_ = false;
  bool keys_only_ = false;  // SetKeysOnly
  // The locks the last Resolve took that the transaction did not hold
  // before (ReleaseCurrentLocks).
  std::vector<std::pair<IndexImpl*, std::string>> current_fresh_locks_;
  bool semi_consistent_ = false;           // SetSemiConsistent
  bool semi_consistent_row_ = false;       // the current row was read so
  std::optional<std::string> reread_key_;  // Step: that row's key, locked now
  std::optional<std::string> end_;         // SetEnd
  bool end_inclusive_ = false;
  bool PastEnd(const std::string& key) const {
    if (!end_) return false;
    if (HasPrefix(key, *end_)) return !end_inclusive_;
    return key > *end_;
  }
  // The ranges one positioning took on its way to the key it resolves
  // next, in order: given back, newest first, if that key's lock fails
  // (L11); emptied once the key's own lock (a secondary entry's that no
  // other transaction changed) stands.
  std::vector<txn::RangeGrant> step_grants_;
  bool entry_only_ = false;  // this position's row_ holds only its entry (TakeEntry)
};

CursorImpl::~CursorImpl() {
  // Its rows count once it is gone (the handler's at each statement's end).
  if (alive_->load()) txn_->FlushReadCounts();
  if (own_snapshot_) txns_->CloseSnapshot(view_.read_ts);
}

Status CursorImpl::Seek(SeekOp op, const Row& key) {
  if (op == SeekOp::kFirst || op == SeekOp::kLast) return SeekKey(op, {});
  Result<std::string> prefix = EncodeKey(key);
  if (!prefix.ok()) {
    valid_ = false;
    return prefix.status();
  }
  return SeekKey(op, *prefix);
}

Status CursorImpl::SeekKey(SeekOp op, std::string_view encoded) {
  valid_ = false;
  bound_.reset();
  if (op == SeekOp::kFirst) return Position(true, std::nullopt, true);
  if (op == SeekOp::kLast) return Position(false, std::nullopt, true);
  std::string prefix(encoded);
  if (op == SeekOp::kEq || op == SeekOp::kEqLast) bound_ = prefix;
  switch (op) {
    case SeekOp::kEq:
    case SeekOp::kGE:
      return Position(true, std::move(prefix), true);
    case SeekOp::kGT: {
      std::optional<std::string> succ = KeySuccessor(std::move(prefix));
      if (!succ) return Status::OK();
      return Position(true, succ, true);
    }
    case SeekOp::kEqLast:
    case SeekOp::kLE: {
      std::optional<std::string> succ = KeySuccessor(std::move(prefix));
      if (!succ) return Position(false, std::nullopt, true);
      return Position(false, succ, false);
    }
    case SeekOp::kLT:
      return Position(false, std::move(prefix), false);
    default:
      return Status::InvalidArgument("unknown seek operation");
  }
}

Status CursorImpl::Position(bool forward, const std::optional<std::string>& from, bool inclusive) {
  if (!alive_->load()) {
    valid_ = false;
    return Status::InvalidArgument("the cursor's transaction has ended");
  }
  if (mode_ != ReadMode::kSnapshot) {
    return VictimOf(txn_, PositionOrRollBack(forward, from, inclusive));
  }
  if (as_of_ && txn_->wrote()) {  // its own changes are not in the old pages
    as_of_.reset();
    tree_cursor_.Reset();
  }
  if (!as_of_) MoveAsOf();  // it may have moved since the last call
  Status st = PositionInView(forward, from, inclusive);
  // It moved during this call: the versions it read may be gone.
  if (st.IsSnapshotTooOld() && !as_of_ && MoveAsOf()) {
    st = PositionInView(forward, from, inclusive);
  }
  return st;
}

bool CursorImpl::MoveAsOf() {
  as_of_ = txn_->AsOf(view_);
  if (!as_of_) return false;
  tree_cursor_.Reset();
  return true;
}

Status CursorImpl::PositionInView(bool forward, const std::optional<std::string>& from,
                                  bool inclusive) {
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
  Status st = VictimOf(txn_, PositionOrRollBack(forward, from, inclusive));
  if (st.ok()) {
    // Also when nothing was found: a key the purge took for a cut snapshot
    // is missed without any Visible call (V4).
    st = as_of_ ? as_of_->Check() : index_->versions->CheckSnapshot(view_);
    if (!st.ok()) valid_ = false;
  }
  return st;
}

Status CursorImpl::PositionOrRollBack(bool forward, const std::optional<std::string>& start,
                                      bool inclusive) {
  valid_ = false;
  // Where this round starts: `start`, then the last key passed over.
  std::optional<std::string> passed;
  const std::optional<std::string>* at = &start;
  using btree::SeekMode;
  // How far this call's ranges reach (locks_ranges_): none yet; the index's
  // end (an empty inner value); or up to and including a key.
  std::optional<std::optional<std::string>> locked_to;
  step_grants_.clear();
  for (;;) {
    // The tree's candidate (read first: V1), then the version store's.
    const bool continue_tree =
        (*at) && !inclusive && tree_cursor_.Valid() && tree_cursor_.key() == *(*at);
    if (continue_tree) {
      SUBITO_RETURN_IF_ERROR(forward ? tree_cursor_.Next() : tree_cursor_.Prev());
    } else if (!(*at)) {
      SUBITO_RETURN_IF_ERROR(tree_cursor_.Seek(forward ? SeekMode::kFirst : SeekMode::kLast));
    } else {
      const SeekMode m = forward ? (inclusive ? SeekMode::kGE : SeekMode::kGT)
                                 : (inclusive ? SeekMode::kLE : SeekMode::kLT);
      SUBITO_RETURN_IF_ERROR(tree_cursor_.Seek(m, *(*at)));
    }
    std::optional<std::string> candidate;
    if (tree_cursor_.Valid()) candidate = tree_cursor_.key();
    std::optional<std::string> other;
    if (as_of_) {
      other = (*at) ? index_->versions->NeighborAsOf(*as_of_, std::string_view(*(*at)), forward,
                                                     inclusive)
                    : index_->versions->NeighborAsOf(*as_of_, std::nullopt, forward, true);
    } else {
      other = (*at) ? index_->versions->Neighbor(std::string_view(*(*at)), forward, inclusive)
                    : index_->versions->Neighbor(std::nullopt, forward, true);
    }
    bool from_tree = candidate.has_value();
    if (other && (!candidate || (forward ? *other < *candidate : *other > *candidate))) {
      candidate = std::move(other);
      from_tree = false;
    }
    if (locks_ranges_ && !RangeLocked(forward, locked_to, candidate)) {
      // The exact key of an inclusive seek needs only its key lock (Resolve).
      if (!(candidate && (*at) && inclusive && *candidate == *(*at))) {
        txn::KeyRange r;
        (forward ? r.lo : r.hi) = (*at);
        (forward ? r.lo_inclusive : r.hi_inclusive) = inclusive;
        (forward ? r.hi : r.lo) = candidate;
        // A key past a prefix seek's bound ends the range without being in
        // it (InnoDB's gap lock before the first key that does not match).
        if (candidate && bound_ && !HasPrefix(*candidate, *bound_)) {
          (forward ? r.hi_inclusive : r.lo_inclusive) = false;
        }
        step_grants_.push_back(txn_->LockRange(index_, std::move(r)));
        locked_to = candidate;
        continue;  // L8: a key added before the range was locked is in the tree now
      }
    }
    if (!candidate) return Status::OK();
    if (bound_ && !HasPrefix(*candidate, *bound_)) return Status::OK();
    if (forward && mode_ != ReadMode::kSnapshot && PastEnd(*candidate)) {
      return LockEnd(*candidate, from_tree);
    }
    Result<bool> found = Resolve(*candidate, from_tree);
    if (!found.ok() || !*found) current_fresh_locks_.clear();  // only a read row's
    if (!found.ok()) return GiveBackIfWaitFailed(found.status());
    step_grants_.clear();
    if (*found) {
      txn_->CountRead(&index_->rows_read);
      key_ = std::move(*candidate);
      valid_ = true;
      return Status::OK();
    }
    passed = std::move(candidate);
    at = &passed;
    inclusive = false;
  }
}

Status CursorImpl::LockEnd(const std::string& key, bool from_tree) {
  Status st;
  const bool shared = mode_ == ReadMode::kShared || mode_ == ReadMode::kSharedSkipLocked;
  if (index_->number != 0 && shared) {
    bool fresh = false;
    st = txn_->LockKey(index_, key, mode_, &fresh);
    if (SkipsLocked(mode_) && st.IsTimedOut()) st = Status::OK();
    // Asked once the entry is locked, as Resolve does: another
    // transaction's uncommitted change of the entry is its implicit lock in
    // InnoDB, which the read waits for (through the row, in Resolve); when
    // that wait fails or is skipped the read keeps nothing of the entry.
    if (st.ok() && index_->versions->ChangedByActiveOther(key, txn_->state())) {
      Result<bool> resolved = Resolve(key, from_tree);
      st = resolved.status();
      const bool kept_nothing = WaitFailed(st) || (st.ok() && !*resolved && SkipsLocked(mode_));
      if (fresh && kept_nothing) txn_->ReleaseKeyLock(index_, key);
    }
  } else {
    st = Resolve(key, from_tree).status();
  }
  valid_ = false;
  // At READ COMMITTED the row past a primary key range is not kept: InnoDB
  // returns it, and the server, finding it out of range, unlocks it.
  if (!locks_ranges_ && st.ok()) ReleaseCurrentLocks();
  current_fresh_locks_.clear();
  return GiveBackIfWaitFailed(st);
}

bool CursorImpl::RangeLocked(bool forward,
                             const std::optional<std::optional<std::string>>& locked_to,
                             const std::optional<std::string>& candidate) {
  if (!locked_to) return false;
  if (!*locked_to) return true;  // to the index's end
  if (!candidate) return false;
  return forward ? *candidate <= **locked_to : *candidate >= **locked_to;
}

Status CursorImpl::TakeRow(std::string bytes) {
  bytes_ = std::move(bytes);
  row_decoded_ = false;
  entry_only_ = false;
  return row_view_.Parse(table_->def(), bytes_);
}

Status CursorImpl::ViewTreeRow() {
  row_decoded_ = false;
  entry_only_ = false;
  return row_view_.Parse(table_->def(), tree_cursor_.value());
}

Status CursorImpl::TakeEntry(const std::string& key) {
  const TableDef& def = table_->def();
  row_.assign(def.columns.size(), Value());
  Result<size_t> n =
      DecodeKeyParts(def, index_->key_columns, key, index_->key_columns.size(), nullptr, &row_);
  if (!n.ok()) return n.status();
  if (*n != key.size()) {
    return Status::Corruption(StrFormat("index %s of %s: an entry with bytes past its columns",
                                        index_->cat.def.name.c_str(), def.name.c_str()));
  }
  row_decoded_ = true;
  entry_only_ = true;
  return Status::OK();
}

Result<bool> CursorImpl::Resolve(const std::string& key, bool from_tree) {
  const TableDef& def = table_->def();
  current_fresh_locks_.clear();
  semi_consistent_row_ = false;
  bool row_fresh = false;
  if (index_->number == 0 && from_tree && mode_ == ReadMode::kSnapshot && !as_of_) {
    // A row no transaction has changed since the snapshot's oldest
    // (the common case): read in place, not copied.
    Result<bool> plain = index_->versions->SeesTreeValue(key, view_);
    if (!plain.ok()) return plain.status();
    if (*plain) {
      txn_->CountRead(&table_->rows_read);
      SUBITO_RETURN_IF_ERROR(ViewTreeRow());
      return true;
    }
  }
  // A locking read passes over a key whose versions are all of inserts
  // taken back (InnoDB's rollback removes such records): no committed row
  // has it, so there is no row to lock or wait for. It is read again after
  // the versions (a writer adds its version first, V1). At REPEATABLE READ
  // the key itself is held as a range (an exact seek locked none), so no
  // other transaction inserts it before this one ends (L7).
  if (!from_tree && mode_ != ReadMode::kSnapshot && index_->versions->AbortedInsertsOnly(key)) {
    Result<std::optional<std::string>> now = index_->tree->Get(key);
    if (!now.ok()) return now.status();
    if (!now->has_value()) {
      if (locks_ranges_) txn_->LockRange(index_, txn::KeyRange{key, key, true, true});
      return false;
    }
  }
  std::optional<std::string> tree_value;
  if (from_tree) tree_value = tree_cursor_.value();
  // Semi-consistent: a row another transaction holds is read, unlocked, in
  // its newest committed version. Not a search of one whole key (InnoDB's
  // unique search waits).
  if (index_->number == 0 && semi_consistent_ && !locks_ranges_ && mode_ == ReadMode::kExclusive &&
      !(reread_key_ && key == *reread_key_) && !(bound_ && key == *bound_)) {
    Status tried = txn_->LockKey(index_, key, ReadMode::kExclusiveSkipLocked, &row_fresh);
    if (tried.IsTimedOut()) {
      Result<std::optional<std::string>> committed = txn_->NewestCommittedRow(table_, key);
      if (!committed.ok()) return committed.status();
      if (!committed->has_value()) return false;  // an insert no one committed
      SUBITO_RETURN_IF_ERROR(TakeRow(std::move(**committed)));
      semi_consistent_row_ = true;
      return true;
    }
    SUBITO_RETURN_IF_ERROR(tried);
    if (row_fresh) current_fresh_locks_.emplace_back(index_, key);
    // Held now: read below as any locking read (its lock is no longer new).
  }
  if (index_->number == 0) {
    Result<std::optional<std::string>> bytes =
        mode_ != ReadMode::kSnapshot
            ? txn_->ReadRowBytes(table_, key, mode_, view_, nullptr, &row_fresh)
        : as_of_ ? index_->versions->VisibleAsOf(*as_of_, key, std::move(tree_value))
                 : index_->versions->Visible(key, std::move(tree_value), view_);
    if (!bytes.ok()) return bytes.status();
    if (row_fresh) current_fresh_locks_.emplace_back(index_, key);
    if (!bytes->has_value()) return false;
    if (mode_ == ReadMode::kSnapshot) txn_->CountRead(&table_->rows_read);
    SUBITO_RETURN_IF_ERROR(TakeRow(std::move(**bytes)));
    return true;
  }
  // A secondary entry in a snapshot: its own versions say whether it is
  // visible.
  auto visible_entry = [&]() -> Result<bool> {
    Result<std::optional<std::string>> entry =
        as_of_ ? index_->versions->VisibleAsOf(*as_of_, key, std::move(tree_value))
               : index_->versions->Visible(key, std::move(tree_value), view_);
    if (!entry.ok()) return entry.status();
    return entry->has_value();
  };
  if (mode_ == ReadMode::kSnapshot && keys_only_) {
    Result<bool> visible = visible_entry();
    if (!visible.ok() || !*visible) return visible;
    SUBITO_RETURN_IF_ERROR(TakeEntry(key));
    return true;
  }
  // Its key ends with the primary key.
  const size_t own_parts = def.indexes[index_->number - 1].columns.size();
  Result<size_t> split = KeyPrefixLength(def, index_->key_columns, key, own_parts);
  if (!split.ok()) return split.status();
  const std::string pk = key.substr(*split);
  if (mode_ == ReadMode::kSnapshot) {
    Result<bool> visible = visible_entry();
    if (!visible.ok() || !*visible) return visible;
    Result<std::optional<std::string>> row = txn_->ReadRowBytes(table_, pk, mode_, view_, as_of_);
    if (!row.ok()) return row.status();
    if (!row->has_value()) {
      return Status::Corruption(StrFormat("index %s of %s: an entry for a missing row",
                                          index_->cat.def.name.c_str(), def.name.c_str()));
    }
    SUBITO_RETURN_IF_ERROR(TakeRow(std::move(**row)));
    return true;
  }
  bool entry_fresh = false;
  Status locked = txn_->LockKey(index_, key, mode_, &entry_fresh);
  if (SkipsLocked(mode_) && locked.IsTimedOut()) return false;
  SUBITO_RETURN_IF_ERROR(locked);
  // Another transaction's uncommitted change of this very entry (an insert,
  // a delete, a key change) is, in InnoDB, an implicit lock on the
  // secondary record that the read's request waits for: when that wait
  // (here, the wait for the row) fails or is skipped, the read keeps
  // nothing, neither the entry's new lock nor the ranges on its way (L11).
  // Otherwise the entry's own lock stands, as InnoDB's granted next-key
  // lock on the secondary record, and a failed wait for the row keeps both.
  // The tree is read before the versions (V1): a writer adds its version
  // before it changes the tree, so an entry found missing was either
  // removed by a commit or has its writer's version by then.
  Result<std::optional<std::string>> entry = index_->tree->Get(key);
  if (!entry.ok()) return entry.status();
  const bool entry_changed_by_other = index_->versions->ChangedByActiveOther(key, txn_->state());
  const auto keep_nothing = [&]() {
    if (entry_changed_by_other && entry_fresh) txn_->ReleaseKeyLock(index_, key);
  };
  const auto failed = [&](Status st) {
    if (WaitFailed(st)) keep_nothing();
    return st;
  };
  if (!entry->has_value()) {
    // An entry missing from the tree may be another transaction's
    // uncommitted delete or key change, which its rollback would put back
    // into the range this read locked: wait for it through the row's lock.
    // A removal that committed stays removed; one whose rollback just ended
    // is back in the tree for the second look.
    if (entry_changed_by_other) {
      locked = txn_->LockKey(table_->indexes[0].get(), pk, mode_, &row_fresh);
      if (SkipsLocked(mode_) && locked.IsTimedOut()) {
        keep_nothing();
        return false;
      }
      SUBITO_RETURN_IF_ERROR(failed(locked));
    }
    entry = index_->tree->Get(key);
    if (!entry.ok()) return entry.status();
    if (!entry->has_value()) return false;
  }
  if (!entry_changed_by_other) step_grants_.clear();
  Result<std::optional<std::string>> row =
      txn_->ReadRowBytes(table_, pk, mode_, view_, nullptr, &row_fresh);
  if (!row.ok()) return failed(row.status());
  if (!row->has_value()) {
    // Skipped (SKIP LOCKED) or gone: nothing of this entry is read.
    if (SkipsLocked(mode_)) keep_nothing();
    return false;
  }
  SUBITO_RETURN_IF_ERROR(TakeRow(std::move(**row)));
  row_ = row_view_.Decode(def);
  row_decoded_ = true;
  return RowKey(def, index_->number, row_) == key;  // false: moved on
}

}  // namespace

std::unique_ptr<Cursor> NewCursor(TransactionImpl* txn, std::shared_ptr<std::atomic<bool>> alive,
                                  txn::TxnSystem* txns, TableImpl* table, IndexImpl* index,
                                  ReadMode mode, txn::ReadView view, bool own_snapshot,
                                  bool locks_ranges) {
  return std::unique_ptr<Cursor>(new CursorImpl(txn, std::move(alive), txns, table, index, mode,
                                                view, own_snapshot, locks_ranges));
}

}  // namespace subito::engine
