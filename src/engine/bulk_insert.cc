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
//       The claim is made first, then the users counted; Use counts first,
//       then reads the claim (both seq_cst), so a transaction that starts
//       using the table meanwhile is either counted here or waits.
//   I2. Before any row goes in, one undo record per index (had_before 3,
//       txn/txn_records.h) is in the transaction's undo list, in the log
//       before any page the load writes (WAL): a rollback past it, at run
//       time or by recovery, makes every index pristine and empty again
//       (BTree::ResetToEmpty), whatever the load and this transaction's
//       later statements wrote to it. The pages they used stay in the
//       table's files unreachable (mariadb.md, Limits).
//   I3. From I1 until this transaction ends, it is the table's bulk writer
//       (TableImpl::bulk_writer): other transactions' writes and locking
//       reads wait for its end (AwaitBulk); a consistent read whose view
//       does not see the writer (running, or committed after the snapshot)
//       sees the table empty (HiddenByBulk), which is what the table held
//       for it: its rows carry no versions. A committed writer stays the
//       table's bulk writer (older snapshots may still read); an aborted one
//       gives way to the writer before it once its rollback emptied the
//       table.
//   I4. Rows reach the trees by the loader's Finish (secondary indexes
//       built from sorted runs only then): any other use of the table by
//       this transaction finishes the loader first (Use), so does a commit;
//       a rollback past I2's records abandons it before emptying the trees.
#include <thread>

#include "engine/transaction_impl.h"
#include "util/strings.h"

namespace subito::engine {

namespace {

// What BulkInsert returns: a handle on the loader its transaction keeps
// (so that a commit or any other use of the table finishes it, I4).
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
  Result<TableImpl*> used = Use(table, /*writes=*/true);
  if (!used.ok()) return used.status();
  TableImpl* t = *used;
  auto busy = [&](const std::string& why) {
    return Status::Busy("table " + t->def().name + " " + why + ": rows go in one by one");
  };
  if (t->bulk_loading.load()) return busy("is being filled by a bulk load");
  auto mine = std::find_if(bulk_.begin(), bulk_.end(), [&](const Bulk& b) { return b.table == t; });
  std::shared_ptr<txn::TxnState> previous;
  {
    std::lock_guard lock(t->bulk_mu);  // I1: the claim first
    previous = t->bulk_writer;
    if (previous != state_) {
      if (previous && previous->end_ts.load() == 0) return busy("is bulk-filled by another");
      t->bulk_writer = state_;
      t->has_bulk_writer.store(true);
    }
  }
  auto refuse = [&](Status st) {
    if (mine == bulk_.end()) {  // else it stays this transaction's (an earlier statement's claim)
      std::lock_guard lock(t->bulk_mu);
      t->bulk_writer = previous;
    }
    return st;
  };
  if (t->users.load() > 1) return refuse(busy("is used by another transaction"));
  for (const std::unique_ptr<IndexImpl>& ix : t->indexes) {
    Result<bool> pristine = ix->tree->Pristine();
    if (!pristine.ok()) return refuse(pristine.status());
    if (!*pristine) return refuse(busy("is not empty, or has freed pages"));
    if (ix->versions->keys() != 0) return refuse(busy("has row versions a snapshot may read"));
  }
  // Its rows will have no versions: a snapshot moved to pages as of an LSN
  // (version_store.h V6) older than this is refused the table.
  t->loaded_ts.store(db_->txns().Now());
  if (mine == bulk_.end()) {
    bulk_.push_back({t, previous, nullptr});
    mine = bulk_.end() - 1;
  }
  if (mine->loader) return busy("is being filled by this transaction already");
  // I2: the marks, before any row.
  SUBITO_RETURN_IF_ERROR(db_->Writable());
  for (const std::unique_ptr<IndexImpl>& ix : t->indexes) {
    const std::string rec = txn::EncodeUndo(state_->id, ix->space(), "", std::nullopt, false, true);
    SUBITO_RETURN_IF_ERROR(db_->pool()->LogFreeCheck());
    std::lock_guard lock(mu_);
    Undo mark{ix.get(), std::string(), std::nullopt, false, 0, /*empties=*/true};
    SUBITO_RETURN_IF_ERROR(PushUndo(ix.get(), std::move(mark), rec));
  }
  mine->loader = NewBulkLoader(db_, t, /*transactional=*/true);
  db_->bulk_inserts.fetch_add(1, std::memory_order_relaxed);
  return std::unique_ptr<BulkLoader>(std::make_unique<TxnBulkLoader>(this, alive_, t));
}

Status TransactionImpl::BulkAdd(TableImpl* t, const Row& row) {
  SUBITO_RETURN_IF_ERROR(Usable());
  for (Bulk& b : bulk_) {
    if (b.table == t && b.loader) return b.loader->Add(row);
  }
  return Status::InvalidArgument("the bulk insert into " + t->def().name +
                                 " has ended (finished, or rolled back)");
}

Status TransactionImpl::FinishBulkOf(TableImpl* t) {
  for (Bulk& b : bulk_) {
    if (b.table != t || !b.loader) continue;
    std::unique_ptr<BulkLoader> loader = std::move(b.loader);
    return loader->Finish();
  }
  return Status::OK();
}

void TransactionImpl::AbandonBulkOf(const IndexImpl* ix) {
  for (Bulk& b : bulk_) {
    for (const std::unique_ptr<IndexImpl>& i : b.table->indexes) {
      if (i.get() == ix) b.loader.reset();
    }
  }
}

Status TransactionImpl::FinishAllBulk(bool commit) {
  Status st;
  for (Bulk& b : bulk_) {
    std::unique_ptr<BulkLoader> loader = std::move(b.loader);
    if (commit && st.ok() && loader) st = loader->Finish();
  }
  return st;
}

void TransactionImpl::EndBulk(bool committed) {
  for (Bulk& b : bulk_) {
    {
      std::lock_guard lock(b.table->bulk_mu);
      if (!committed && b.table->bulk_writer == state_) b.table->bulk_writer = b.previous;
    }
    b.table->bulk_cv.notify_all();
  }
  bulk_.clear();
}

Status TransactionImpl::AwaitBulk(TableImpl* t) {
  if (!t->has_bulk_writer.load(std::memory_order_acquire)) return Status::OK();
  const bool forever = lock_timeout_ >= std::chrono::hours(24 * 365);
  const auto deadline = std::chrono::steady_clock::now() + lock_timeout_;
  std::unique_lock lock(t->bulk_mu);
  for (;;) {
    const std::shared_ptr<txn::TxnState>& w = t->bulk_writer;
    if (!w || w == state_ || w->end_ts.load() != 0) return Status::OK();
    if (interrupted_ && interrupted_()) {
      return Status::Interrupted(StrFormat("wait of transaction %llu for table %s interrupted",
                                           static_cast<unsigned long long>(state_->id),
                                           t->def().name.c_str()));
    }
    if (!forever && std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut(
          StrFormat("lock wait timeout (%lld ms): table %s is bulk-filled by transaction %llu",
                    static_cast<long long>(lock_timeout_.count()), t->def().name.c_str(),
                    static_cast<unsigned long long>(w->id)));
    }
    // In slices: an interruption (KILL) is seen within one.
    t->bulk_cv.wait_for(lock, std::chrono::milliseconds(100));
  }
}

bool TransactionImpl::HiddenByBulk(TableImpl* t, const txn::ReadView& view) {
  const std::shared_ptr<txn::TxnState> w = t->BulkWriter();
  return w && !view.Sees(*w);
}

}  // namespace subito::engine
