// Two-phase commit: Transaction::Prepare, the prepared transactions the
// database holds (recovered by Open, or handed over when their owner went
// away), and the rebuilding of a recovered one's locks and versions; and
// the losers of a crash, rebuilt the same way and rolled back by a
// background thread after Open (Options::background_undo).
//
// A recovered prepared transaction is made again from its undo file
// (recovery/txn_recovery.h moved its whole undo list there): oldest entry
// first, each key's exclusive lock (primary keys, and unique prefixes of
// unique indexes, as its writes took them), its version (the value before
// its first change of the key, so that every snapshot reads past it), the
// chains its undo names (kept retired: btree.h C4), and a bulk insert's
// claim on its table. This runs in Open before any other transaction can
// begin, so nothing reads a key it changed before its version is back, and
// its end, whichever, goes through the ordinary Commit and Rollback.
#include <algorithm>
#include <map>
#include <utility>

#include "engine/row_codec.h"
#include "engine/transaction_impl.h"
#include "util/strings.h"

namespace subito::engine {

TransactionImpl::TransactionImpl(DatabaseImpl* db, recovery::RecoveredPrepared r)
    : db_(db),
      isolation_(Isolation::kRepeatableRead),
      state_(std::make_shared<txn::TxnState>(r.txn)) {
  pinned_ = true;
  pin_token_ = r.pin;
  undo_file_ = std::move(r.file);
  anchored_count_ = undo_file_->count();
  xid_ = std::move(r.xid);
  prepared_.store(r.prepared);
  RegisterOwner();  // last: RelieveLog may look at it from now on
}

Result<uint64_t> TransactionImpl::CopyPrepare(uint64_t end) {
  if (!prepared_.load()) return end;
  const std::string rec = txn::EncodePrepare(state_->id, xid_);
  Result<log::AppendResult> a =
      db_->log()->Append(txn::kRecordTxnPrepare, rec.data(), static_cast<uint32_t>(rec.size()));
  if (!a.ok()) return a.status();
  return a->end;
}

Status TransactionImpl::Prepare(std::string_view xid) {
  SUBITO_RETURN_IF_ERROR(Usable());
  if (prepared_.load()) return Status::InvalidArgument("the transaction is prepared already");
  if (xid.size() > txn::kMaxXidBytes) {
    return Status::InvalidArgument(
        StrFormat("an xid of %zu bytes (at most %u)", xid.size(), txn::kMaxXidBytes));
  }
  // Loads finished now: a prepared transaction writes nothing more. Their
  // rows are all in, or the transaction can only roll back.
  FinishOpenLoads();
  for (const Bulk& b : bulk_) SUBITO_RETURN_IF_ERROR(b.failed);
  SUBITO_RETURN_IF_ERROR(db_->Writable());
  bool logged;
  {
    // Set before the record goes in: a relocation from now on copies it
    // (P1), so the checkpoint never passes the last one.
    std::lock_guard lock(mu_);
    xid_ = std::string(xid);
    prepared_.store(true);
    logged = pinned_;
  }
  if (!logged) return Status::OK();       // wrote nothing: nothing to keep
  Result<uint64_t> end = CopyPrepare(0);  // the first copy is the record
  if (!end.ok()) {
    std::lock_guard lock(mu_);
    // A relocation's copy may be durable: only a rollback (which logs its
    // unprepare first) may end it, never more writes (U2, P1).
    poisoned_ = Status::IOError("prepare failed (" + end.status().ToString() +
                                "): the transaction can only roll back");
    return end.status();
  }
  if (Status d = db_->log()->WaitDurable(*end); !d.ok()) {
    // Prepared or not, only recovery can tell: keep locks and pin.
    FailStop(Status::IOError("prepare outcome unknown (" + d.ToString() +
                             "); restart the database, recovery decides"));
    return poisoned_;
  }
  db_->prepares.fetch_add(1, std::memory_order_relaxed);
  // It reads nothing more: its snapshot would only hold back the purge.
  if (has_snapshot_) {
    db_->txns().CloseSnapshot(read_ts_);
    has_snapshot_ = false;
  }
  return Status::OK();
}

Status TransactionImpl::Unprepare() {
  bool logged;
  {
    std::lock_guard lock(mu_);  // no relocation copies the prepare record after this
    if (!prepared_.load()) return Status::OK();
    prepared_.store(false);
    logged = pinned_;
  }
  if (!logged) return Status::OK();
  const std::string rec = txn::EncodeTxnEnd(state_->id);
  Result<log::AppendResult> a =
      db_->log()->Append(txn::kRecordTxnUnprepare, rec.data(), static_cast<uint32_t>(rec.size()));
  if (!a.ok()) return a.status();
  return db_->log()->WaitDurable(a->end);
}

void TransactionImpl::KeepRetiredFound(const txn::VersionStore* versions,
                                       const std::set<std::string>& found) {
  std::lock_guard lock(mu_);
  std::erase_if(retired_, [&](const txn::TxnSystem::KeyRef& r) {
    return r.first.get() == versions && !found.count(r.second);
  });
}

void TransactionImpl::Abandon() {
  {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  alive_->store(false);
  UnregisterOwner();
}

Status TransactionImpl::Resurrect() {
  std::lock_guard lock(mu_);
  const uint64_t count = undo_file_->count();
  uint64_t position = 0;                  // in the undo list
  std::map<uint32_t, TableImpl*> tables;  // by space
  for (uint64_t first = 0; first < count; first += kReloadEntries) {
    Result<std::vector<txn::UndoRecord>> records =
        undo_file_->Read(first, std::min(count, first + kReloadEntries));
    if (!records.ok()) return records.status();
    for (txn::UndoRecord& r : *records) {
      const uint64_t at = position++;
      // Each space's table and index looked up once, not per entry; a gone
      // space's entries are skipped (nothing to lock or restore there).
      auto [space, added] = tables.try_emplace(r.space, nullptr);
      if (added) {
        if (db_->IsDroppedSpace(r.space)) gone_spaces_.insert(r.space);
        space->second = db_->TableOfSpace(r.space);
      }
      if (gone_spaces_.count(r.space)) continue;
      TableImpl* t = space->second;
      if (t == nullptr) {
        return Status::Corruption(
            StrFormat("undo file %s of %s transaction %llu names space %u, which no table has",
                      undo_file_->path().c_str(), prepared_.load() ? "prepared" : "recovered",
                      static_cast<unsigned long long>(state_->id), r.space));
      }
      IndexImpl*& ix = wrote_spaces_[r.space];
      for (const std::unique_ptr<IndexImpl>& i : t->indexes) {
        if (ix == nullptr && i->space() == r.space) ix = i.get();
      }
      if (used_.insert(t).second) t->users.fetch_add(1);
      if (r.empties) {
        // Its bulk insert's claim (bulk_insert.cc I3): other writers wait
        // for its end, snapshots that do not see it read the table empty.
        SUBITO_RETURN_IF_ERROR(LocksToHold().Lock(state_->id, t->indexes[0]->space(), std::string(),
                                                  txn::LockMode::kExclusive,
                                                  std::chrono::milliseconds(0)));
        std::lock_guard claim(t->bulk_mu);
        t->bulk_running = state_;
        t->bulk_active.store(true);
        t->loaded_ts.store(db_->txns().Now());  // as BulkInsert's claim does
        bulk_.push_back({t, at, nullptr, false, Status::OK(), true});
        continue;
      }
      // The locks its writes took: the primary key, and a unique index's
      // own columns unless one is NULL (KeyHasNull: no lock, no check).
      std::string lock_key = r.key;
      bool locks = ix->number == 0;
      if (ix->number != 0 && t->def().indexes[ix->number - 1].unique) {
        bool has_null = false;
        Result<size_t> n =
            KeyPrefixLength(t->def(), ix->key_columns, r.key,
                            t->def().indexes[ix->number - 1].columns.size(), &has_null);
        if (!n.ok()) return n.status();
        lock_key.resize(*n);
        locks = !has_null;
      }
      if (locks) {
        SUBITO_RETURN_IF_ERROR(LocksToHold().Lock(state_->id, r.space, lock_key,
                                                  txn::LockMode::kExclusive,
                                                  std::chrono::milliseconds(0)));
      }
      if (r.before_chain) retired_.insert({ix->versions, *r.before});
      NoteWrite(ix, r.key, std::move(r.before), r.before_chain);
    }
  }
  return Status::OK();
}

TableImpl* DatabaseImpl::TableOfSpace(uint32_t space) const {
  for (const auto& [name, t] : tables_) {
    for (const std::unique_ptr<IndexImpl>& ix : t->indexes) {
      if (ix->space() == space) return t.get();
    }
  }
  return nullptr;
}

Status DatabaseImpl::ResurrectPrepared(std::vector<recovery::RecoveredPrepared> prepared) {
  std::vector<std::unique_ptr<TransactionImpl>> made;
  Status st;
  for (recovery::RecoveredPrepared& r : prepared) {
    auto t = std::make_unique<TransactionImpl>(this, std::move(r));
    Status s = t->Resurrect();
    made.push_back(std::move(t));
    if (!s.ok()) {
      st = s;
      break;
    }
  }
  if (!st.ok()) {
    for (auto& t : made) t->Abandon();
    return st;
  }
  std::lock_guard lock(prepared_mu_);
  for (auto& t : made) {
    if (!t->prepared()) {
      recovered_losers_.push_back(std::unique_ptr<Transaction>(t.release()));
      continue;
    }
    const std::string xid = t->xid();
    prepared_held_.emplace(xid, std::unique_ptr<Transaction>(t.release()));  // duplicates kept
  }
  losers_pending_.store(recovered_losers_.size());
  return Status::OK();
}

void DatabaseImpl::UndoLoop() {
  if (options_.before_background_undo) options_.before_background_undo();
  const auto start = std::chrono::steady_clock::now();
  uint64_t done = 0;
  for (;;) {
    std::unique_ptr<Transaction> t;
    {
      std::lock_guard lock(prepared_mu_);
      if (recovered_losers_.empty()) break;
      t = std::move(recovered_losers_.back());  // the newest first, as InnoDB's
      recovered_losers_.pop_back();
    }
    const uint64_t id = t->id();
    Status st = t->Rollback();
    if (!st.ok()) {
      // Fail-stop (End): its locks stay, the database takes no more writes
      // and stays in use, and the next start rolls it back again.
      Report(StrFormat("background undo of recovered transaction %llu failed: %s",
                       static_cast<unsigned long long>(id), st.ToString().c_str()));
      std::lock_guard lock(prepared_mu_);
      failed_losers_.push_back(std::move(t));
    } else {
      ++done;
    }
    {
      std::lock_guard lock(prepared_mu_);  // a waiter between its check and its wait misses none
      losers_pending_.fetch_sub(1);
    }
    losers_cv_.notify_all();
  }
  Note(
      StrFormat("background undo finished %.3f s after the open: %llu recovered transaction(s) "
                "rolled back",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                static_cast<unsigned long long>(done)));
}

Status DatabaseImpl::AwaitRecoveredLosers() {
  std::unique_lock lock(prepared_mu_);
  const auto limit = std::chrono::milliseconds(options_.lock_wait_timeout_ms);
  if (losers_cv_.wait_for(lock, limit, [this] { return losers_pending_.load() == 0; })) {
    return Status::OK();
  }
  return Status::TimedOut(StrFormat(
      "waited %u ms for the background rollback of %llu transaction(s) a crash interrupted "
      "(Subito_recovery_losers_pending); try again",
      options_.lock_wait_timeout_ms, static_cast<unsigned long long>(losers_pending_.load())));
}

std::vector<std::string> DatabaseImpl::KeptChains(const txn::VersionStore* versions) const {
  std::vector<std::string> refs;
  std::lock_guard lock(prepared_mu_);
  auto add = [&](const TransactionImpl* t) {
    for (const txn::TxnSystem::KeyRef& r : t->retired()) {
      if (r.first.get() == versions) refs.push_back(r.second);
    }
  };
  for (const auto& [xid, t] : prepared_held_) add(static_cast<const TransactionImpl*>(t.get()));
  for (const auto& t : recovered_losers_) add(static_cast<const TransactionImpl*>(t.get()));
  return refs;
}

std::vector<std::string> DatabaseImpl::PreparedXids() const {
  std::lock_guard lock(prepared_mu_);
  std::vector<std::string> xids;
  for (const auto& [xid, t] : prepared_held_) xids.push_back(xid);
  return xids;
}

Result<std::unique_ptr<Transaction>> DatabaseImpl::TakePrepared(std::string_view xid) {
  std::lock_guard lock(prepared_mu_);
  auto it = prepared_held_.find(xid);
  if (it == prepared_held_.end()) return Status::NotFound("no prepared transaction has that xid");
  std::unique_ptr<Transaction> t = std::move(it->second);
  prepared_held_.erase(it);
  return t;
}

Status DatabaseImpl::KeepPrepared(std::unique_ptr<Transaction>&& txn) {
  auto* t = dynamic_cast<TransactionImpl*>(txn.get());
  if (t == nullptr || !t->prepared()) {
    return Status::InvalidArgument("only a prepared transaction can be kept");
  }
  t->SetInterruptCheck(nullptr);  // its owner's check may outlive nothing
  // One that logged nothing needs no log at the next start: it does not
  // keep a shutdown from counting as clean.
  if (!t->logged()) t->UnregisterOwner();
  std::lock_guard lock(prepared_mu_);
  const std::string xid = t->xid();
  prepared_held_.emplace(xid, std::move(txn));
  return Status::OK();
}

void DatabaseImpl::AbandonPrepared() {
  std::multimap<std::string, std::unique_ptr<Transaction>, std::less<>> held;
  std::vector<std::unique_ptr<Transaction>> losers;
  {
    std::lock_guard lock(prepared_mu_);
    held.swap(prepared_held_);
    losers.swap(recovered_losers_);  // a failed Open's: never rolled back
    losers.insert(losers.end(), std::make_move_iterator(failed_losers_.begin()),
                  std::make_move_iterator(failed_losers_.end()));
    failed_losers_.clear();
    losers_pending_.store(0);
  }
  losers_cv_.notify_all();
  for (auto& [xid, t] : held) static_cast<TransactionImpl*>(t.get())->Abandon();
  for (auto& t : losers) static_cast<TransactionImpl*>(t.get())->Abandon();
}

void DatabaseImpl::KeepRetiredFound(const txn::VersionStore* versions,
                                    const std::set<std::string>& found) {
  std::lock_guard lock(prepared_mu_);
  for (auto& [xid, t] : prepared_held_) {
    static_cast<TransactionImpl*>(t.get())->KeepRetiredFound(versions, found);
  }
  for (auto& t : recovered_losers_) {
    static_cast<TransactionImpl*>(t.get())->KeepRetiredFound(versions, found);
  }
}

}  // namespace subito::engine
