// Transaction::BulkInsert (include/subito/database.h): a transaction fills
// an empty table as a BulkLoader fills a new one (bulk_load.cc: ascending
// primary keys go to a tree builder, one mini-transaction per page;
// non-unique secondary indexes are built from sorted runs), with no row
// lock, undo record or version per row. InnoDB does the same for an INSERT
// into an empty table with unique_checks=0 and foreign_key_checks=0 (a
// table-level undo record and an exclusive table lock).
//
// Invariants:
//   I1. A table qualifies only while this transaction is its only user and
//       every index is pristine (BTree::Pristine: no key, no free page, no
//       chain) and holds no version: no snapshot anywhere sees a row in it.
//       The checks and the claim are made under TableImpl::bulk_mu, under
//       which a transaction's first use of the table counts it (Use): a
//       transaction that starts using the table meanwhile is either counted
//       by the checks or meets the claim.
//   I2. Before any row goes in, one undo record per index (had_before 3,
//       txn/txn_records.h) is in the transaction's undo list, in the log
//       before any page the load writes (WAL): a rollback past it, at run
//       time or by recovery, makes every index pristine and empty again
//       (BTree::ResetToEmpty; the transaction's versions there go too),
//       whatever the load and this transaction's later statements wrote to
//       it. The pages they used stay in the table's files, unreachable.
//   I3. From the claim until this transaction ends, it is the table's
//       running bulk writer and holds the table's lock (the primary
//       index's empty key, exclusive): other transactions' writes and
//       locking reads wait for it as for a row lock (AwaitBulk: timeout,
//       KILL, deadlock detection). A consistent read whose view does not
//       see the running writer, or that is older than the commit of the
//       last one (bulk_committed_ts), sees the table empty (HiddenByBulk):
//       the table held no row for it, and the rows carry no versions.
//   I4. Rows reach the trees by the loader's Finish (secondary indexes are
//       built from sorted runs only then). Any other use of the table by
//       this transaction finishes the loader first (Use), and the rest of
//       the statement's rows go in one by one; so does a commit, and so does
//       taking a savepoint (rows with no undo never follow a savepoint, so
//       a rollback to it is exact; statements' internal savepoints leave
//       the load open: they add no row to it). A failed Finish leaves rows
//       that cannot be accounted for: the transaction cannot commit until a
//       rollback goes past the marks.
#include <algorithm>

#include "engine/transaction_impl.h"
#include "util/strings.h"

namespace subito::engine {

namespace {

// What BulkInsert returns: a handle on the loader its transaction keeps
// (so that a commit or any other use of the table finishes it, I4). It
// outlives neither its transaction's end nor, safely, the transaction.
class TxnBulkLoader final : public BulkLoader {
 public:
  TxnBulkLoader(TransactionImpl* txn, std::shared_ptr<std::atomic<bool>> alive, TableImpl* t)
      : txn_(txn), alive_(std::move(alive)), t_(t) {}
  Status Add(const Row& row) override {
    SUBITO_RETURN_IF_ERROR(Alive());
    return txn_->BulkAdd(t_, row);
  }
  Status Finish() override {
    SUBITO_RETURN_IF_ERROR(Alive());
    return txn_->FinishBulkOf(t_);
  }

 private:
  Status Alive() const {
    if (alive_->load()) return Status::OK();
    return Status::InvalidArgument("the bulk insert into " + t_->def().name +
                                   " has ended with its transaction");
  }
  TransactionImpl* const txn_;
  const std::shared_ptr<std::atomic<bool>> alive_;
  TableImpl* const t_;
};

// Shows no row; keys still encode as the inner cursor's do.
class HiddenRowsCursor final : public Cursor {
 public:
  explicit HiddenRowsCursor(std::unique_ptr<Cursor> inner) : inner_(std::move(inner)) {}
  Status Seek(SeekOp, const Row&) override { return Status::OK(); }
  Status Next() override { return NotPositioned(); }
  Status Prev() override { return NotPositioned(); }
  bool Valid() const override { return false; }
  const Row& row() const override { return empty_; }
  ValueView column(uint32_t) const override { return ValueView(); }
  std::string_view key() const override { return {}; }
  Result<std::string> EncodeKey(const Row& prefix) const override {
    return inner_->EncodeKey(prefix);
  }
  Status SeekKey(SeekOp, std::string_view) override { return Status::OK(); }
  void SetKeysOnly(bool) override {}
  void SetEnd(std::optional<std::string>, bool) override {}
  void ReleaseCurrentLocks() override {}
  void SetSemiConsistent(bool) override {}
  bool WasSemiConsistent() const override { return false; }

 private:
  static Status NotPositioned() { return Status::InvalidArgument("cursor is not positioned"); }
  std::unique_ptr<Cursor> inner_;
  Row empty_;
};

}  // namespace

std::unique_ptr<Cursor> HideRows(std::unique_ptr<Cursor> inner) {
  return std::make_unique<HiddenRowsCursor>(std::move(inner));
}

Result<std::unique_ptr<BulkLoader>> TransactionImpl::BulkInsert(Table* table) {
  // No wait for another bulk writer (Busy then): the caller's row-by-row
  // inserts wait, and report what ends the wait.
  Result<TableImpl*> used = Use(table, /*writes=*/false);
  if (!used.ok()) return used.status();
  TableImpl* t = *used;
  SUBITO_RETURN_IF_ERROR(ChangesSeenBySnapshot(t));
  auto busy = [&](const std::string& why) {
    return Status::Busy("table " + t->def().name + " " + why + ": rows go in one by one");
  };
  if (t->bulk_loading.load()) return busy("is being filled by a bulk load");
  auto mine = std::find_if(bulk_.begin(), bulk_.end(), [&](const Bulk& b) { return b.table == t; });
  if (mine != bulk_.end() && mine->loader) return busy("is being filled by this transaction");
  {
    // I1: the checks and the claim under bulk_mu, which new users take to
    // be counted.
    std::lock_guard lock(t->bulk_mu);
    if (t->bulk_running && t->bulk_running != state_) return busy("is bulk-filled by another");
    if (t->users.load() > 1) return busy("is used by another transaction");
    for (const std::unique_ptr<IndexImpl>& ix : t->indexes) {
      Result<bool> pristine = ix->tree->Pristine();
      if (!pristine.ok()) return pristine.status();
      if (!*pristine) return busy("is not empty, or has freed pages");
      if (ix->versions->keys() != 0) return busy("has row versions a snapshot may read");
    }
    if (!t->bulk_running) {
      // I3: the table's key, held until this transaction ends, is what
      // other writers wait for (lock waits: timeouts, KILL, deadlocks).
      SUBITO_RETURN_IF_ERROR(LocksToHold().Lock(state_->id, t->indexes[0]->space(), std::string(),
                                                txn::LockMode::kExclusive,
                                                std::chrono::milliseconds(0)));
      t->bulk_running = state_;
      t->bulk_active.store(true);
    }
    // Its rows will have no versions: a snapshot moved to pages as of an
    // LSN (version_store.h V6) older than this is refused the table.
    t->loaded_ts.store(db_->txns().Now());
  }
  if (mine == bulk_.end()) {
    bulk_.push_back(Bulk{t, 0, nullptr, false, Status::OK(), false});
    mine = bulk_.end() - 1;
  }
  // I2: the marks, before any row.
  SUBITO_RETURN_IF_ERROR(db_->Writable());
  mine->marks_at = Position();
  for (const std::unique_ptr<IndexImpl>& ix : t->indexes) {
    const std::string rec = txn::EncodeUndo(state_->id, ix->space(), "", std::nullopt, false, true);
    SUBITO_RETURN_IF_ERROR(db_->pool()->LogFreeCheck());
    RegisterOwner();  // before mu_, as in WriteKey
    std::lock_guard lock(mu_);
    Undo mark{ix.get(), std::string(), std::nullopt, false, 0, /*empties=*/true};
    SUBITO_RETURN_IF_ERROR(PushUndo(ix.get(), std::move(mark), rec));
  }
  mine->loader = NewBulkLoader(db_, t, /*transactional=*/true);
  mine->abandoned = false;
  mine->failed = Status::OK();
  db_->bulk_inserts.fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<BulkLoader>(std::make_unique<TxnBulkLoader>(this, alive_, t));
}

Status TransactionImpl::BulkAdd(TableImpl* t, const Row& row) {
  ForgetLockedRead();
  SUBITO_RETURN_IF_ERROR(Usable());
  for (Bulk& b : bulk_) {
    if (b.table != t) continue;
    SUBITO_RETURN_IF_ERROR(b.failed);
    if (b.abandoned) break;
    // Finished early by another use of the table in the same statement (an
    // INSERT ... SELECT that reads it) or a savepoint: the rest go in one by
    // one.
    Status st = b.loader ? b.loader->Add(row) : Insert(t, row);
    if (st.ok()) b.added = true;
    return st;
  }
  return Status::InvalidArgument("the bulk insert into " + t->def().name +
                                 " has ended (rolled back, or failed)");
}

Status TransactionImpl::FinishLoad(Bulk& b) const {
  if (!b.loader) return b.failed;  // a failure of an earlier Finish, still in force
  std::unique_ptr<BulkLoader> loader = std::move(b.loader);
  Status st = loader->Finish();
  if (!st.ok()) b.failed = st;  // I4: until a rollback past the marks
  return st;
}

Status TransactionImpl::FinishBulkOf(TableImpl* t) {
  for (Bulk& b : bulk_) {
    if (b.table == t) return FinishLoad(b);
  }
  return Status::OK();
}

void TransactionImpl::AbandonBulkOf(const IndexImpl* ix) {
  for (Bulk& b : bulk_) {
    for (const std::unique_ptr<IndexImpl>& i : b.table->indexes) {
      if (i.get() != ix) continue;
      b.loader.reset();
      b.abandoned = true;
      b.added = false;
      b.failed = Status::OK();  // the table is empty again
    }
  }
}

void TransactionImpl::FinishOpenLoads() const {
  for (Bulk& b : bulk_) (void)FinishLoad(b);  // a failure stays in b.failed
}

Status TransactionImpl::FinishAllBulk(bool commit) {
  Status st;
  for (Bulk& b : bulk_) {
    if (!commit) {
      b.loader.reset();
    } else if (Status f = FinishLoad(b); st.ok()) {
      st = f;
    }
  }
  return st;
}

void TransactionImpl::EndBulk(bool committed) {
  for (Bulk& b : bulk_) {
    TableImpl* t = b.table;
    std::lock_guard lock(t->bulk_mu);
    if (t->bulk_running != state_) continue;
    // The commit's timestamp before the claim goes (HiddenByBulk reads them
    // the other way round); a load that added no row hides nothing.
    if (committed && b.added) {
      const uint64_t ts = state_->end_ts.load();
      if (ts > t->bulk_committed_ts.load()) t->bulk_committed_ts.store(ts);
    }
    t->bulk_running.reset();
    t->bulk_active.store(false);
  }
  bulk_.clear();
}

Status TransactionImpl::AwaitBulk(TableImpl* t) {
  if (!t->bulk_active.load()) return Status::OK();  // seq_cst: after Use's count (I1)
  std::shared_ptr<txn::TxnState> w;
  {
    std::lock_guard lock(t->bulk_mu);
    w = t->bulk_running;
  }
  if (!w || w == state_) return Status::OK();
  // Granted once the writer's locks go, at its end.
  return Victim(LocksToHold().Lock(state_->id, t->indexes[0]->space(), std::string(),
                                   txn::LockMode::kShared, lock_timeout_, interrupted_));
}

Status TransactionImpl::ChangesSeenBySnapshot(TableImpl* t) {
  if (!has_snapshot_ || isolation_ == Isolation::kReadCommitted) return Status::OK();
  if (read_ts_ >= t->bulk_committed_ts.load()) return Status::OK();
  return Status::TableChanged("table " + t->def().name +
                              " was bulk-loaded after this transaction's snapshot: retry the "
                              "transaction");
}

bool TransactionImpl::HiddenByBulk(TableImpl* t, const txn::ReadView& view) {
  const bool active = t->bulk_active.load();  // before the commit's timestamp (EndBulk)
  bool hidden = view.read_ts < t->bulk_committed_ts.load();
  if (!hidden && active) {
    std::lock_guard lock(t->bulk_mu);
    hidden = t->bulk_running ? !view.Sees(*t->bulk_running)
                             : view.read_ts < t->bulk_committed_ts.load();  // it ended meanwhile
  }
  // A cut snapshot, or one moved to pages as of an LSN, takes the ordinary
  // path, which refuses it (SnapshotTooOld, loaded_ts). Checked last: most
  // reads of a table once bulk-loaded are not hidden, and pay nothing here.
  return hidden && t->indexes[0]->versions->CheckSnapshot(view).ok() &&
         !db_->txns().AsOf(view.read_ts);
}

}  // namespace subito::engine
