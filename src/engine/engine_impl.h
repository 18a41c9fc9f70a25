// The engine behind include/subito/database.h: how tables, indexes,
// transactions and cursors sit on the layers below (docs/architecture.md).
//
// Write path of one key (Transaction::WriteKey), the caller holding the
// key's exclusive lock:
//   1. the transaction's first write pins the checkpoint (its undo records
//      must survive until it ends: recovery/txn_recovery.h);
//   2. an undo record (txn/txn_records.h) is appended;
//   3. the old value is added to the index's VersionStore (V1);
//   4. the B-tree changes (one mini-transaction, one redo record).
// Commit appends a commit record and waits until it is durable, then makes
// the transaction visible to new snapshots, unpins the checkpoint and
// releases the locks.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>

#include "btree/btree.h"
#include "buffer/buffer_pool.h"
#include "buffer/double_write.h"
#include "buffer/pool_warmer.h"
#include "engine/catalog.h"
#include "log/redo_log.h"
#include "page/space_file.h"
#include "ppl/ppl_region.h"
#include "recovery/txn_recovery.h"
#include "subito/database.h"
#include "txn/lock_manager.h"
#include "txn/txn_records.h"
#include "txn/undo_file.h"
#include "txn/version_store.h"
#include "util/external_sorter.h"
#include "util/striped_counter.h"

namespace subito::engine {

class DatabaseImpl;
class TransactionImpl;

// What the database may ask of an open transaction.
class UndoOwner {
 public:
  virtual ~UndoOwner() = default;
  // If the transaction holds the checkpoint back more than `limit` log
  // bytes, rewrites its undo list at the log's end (txn_records.h,
  // relocation). Skipped while the transaction's own thread is inside it.
  // Returns whether it relocated.
  virtual bool RelieveLog(uint64_t limit) = 0;
};

struct IndexImpl {
  uint32_t number = 0;  // 0: primary
  CatalogIndex cat;
  std::vector<uint32_t> key_columns;  // engine/row_codec.h KeyColumns
  std::string path;
  std::unique_ptr<page::SpaceFile> file;
  std::unique_ptr<btree::BTree> tree;
  std::shared_ptr<txn::VersionStore> versions;  // set by OpenIndex
  // Snapshots older than this cannot read the index (it was built later).
  uint64_t created_ts = 0;
  StripedCounter rows_read;  // rows returned through it
  // IndexStats counts from these (under the table's io_mu).
  page::SpaceIoStats io_base;
  uint64_t rows_read_base = 0, pages_base = 0;
  uint32_t space() const { return cat.space_id; }
};

class TableImpl final : public Table {
 public:
  TableImpl(DatabaseImpl* db, CatalogTable cat);
  const TableDef& def() const override { return def_; }
  TableStats Stats() const override;
  Size Sizes() const override;
  Status Recount() override;
  Result<uint64_t> NextAutoIncrement() override;
  Result<uint64_t> EstimateRange(uint32_t index, const std::optional<Bound>& lo,
                                 const std::optional<Bound>& hi) override;
  Result<std::vector<double>> EstimateEntriesPerKey(uint32_t index, uint32_t samples) override;
  // Raises the counter above an inserted value.
  void SawAutoIncrement(const Row& row);
  void RebuildDef();

  DatabaseImpl* const db;
  CatalogTable cat;
  std::vector<std::unique_ptr<IndexImpl>> indexes;  // live ones; [0] primary
  std::atomic<int> users{0};  // transactions that touched the table and have not ended
  // A BulkLoader fills it (and counts in users), or one ended unfinished.
  std::atomic<bool> bulk_loading{false};
  // Transaction::BulkInsert (engine/bulk_insert.cc, I1-I3). Under bulk_mu:
  // a new user's count, and a bulk writer's claim with the checks before
  // it; bulk_running, the transaction filling the table now.
  std::mutex bulk_mu;
  std::shared_ptr<txn::TxnState> bulk_running;
  std::atomic<bool> bulk_active{false};        // bulk_running is set
  std::atomic<uint64_t> bulk_committed_ts{0};  // commit of the last bulk writer
  std::atomic<bool> dropped{false};
  // For snapshots moved to pages as of an LSN (txn/version_store.h V6):
  // one older than created_ts sees the table empty (it was created after
  // it, maybe after its LSN); one older than loaded_ts is refused (a bulk
  // load filled it with rows that have no versions: a snapshot not moved
  // reads them, the pages as of its LSN may not hold them).
  std::atomic<uint64_t> created_ts{0}, loaded_ts{0};
  StripedCounter rows_read;
  std::atomic<uint64_t> rows_inserted{0}, rows_updated{0}, rows_deleted{0};
  // TableStats counts from the values at the last reset (Database::ResetIoStats).
  void ResetIoStats() override;

 private:
  Result<uint64_t> LoadAutoIncrement();
  TableDef def_;
  mutable std::mutex io_mu_;              // the bases below and the indexes' io_base
  uint64_t rows_base_[4] = {0, 0, 0, 0};  // read, inserted, updated, deleted
  std::chrono::steady_clock::time_point io_since_ = std::chrono::steady_clock::now();
  std::mutex autoinc_mu_;
  bool autoinc_loaded_ = false;
  uint64_t autoinc_next_ = 1;
};

class DatabaseImpl final : public Database {
 public:
  ~DatabaseImpl() override;
  static Result<std::unique_ptr<Database>> Open(const Options& options);
  Status Close() override;
  Result<Table*> CreateTable(const TableDef& def) override;
  Status DropTable(std::string_view name) override;
  Status RenameTable(std::string_view from, std::string_view to) override;
  Status CreateIndex(std::string_view table, const IndexDef& def) override;
  Status DropIndex(std::string_view table, std::string_view index) override;
  Table* FindTable(std::string_view name) const override;
  std::vector<std::string> TableNames() const override;
  std::unique_ptr<Transaction> Begin(Isolation isolation) override;
  Result<std::unique_ptr<BulkLoader>> BeginBulkLoad(Table* table) override;
  void WakeLockWaiter(uint64_t txn_id) override { locks_.Wake(txn_id); }
  void SetLockWaitHook(std::function<void(uint64_t, uint64_t)> hook) override {
    locks_.SetWaitHook(std::move(hook));
  }
  void PauseFileWrites() override;
  void SetFlushLogAtCommit(bool on) override {
    flush_log_at_commit_.store(on, std::memory_order_relaxed);
  }
  bool flush_log_at_commit() const { return flush_log_at_commit_.load(std::memory_order_relaxed); }
  // A commit that did not wait for its record, ending at `end`. Until the
  // log is durable past `end`, a crash makes it a loser, so its transaction
  // keeps its checkpoint pin (the checkpoint stays before its undo records)
  // and, with `locks`, its row locks (losers hold disjoint locks:
  // docs/recovery.md). Wakes the flush thread, which makes the log durable
  // and lets go of them (or a writer short of log space, or Close, does).
  void DeferEnd(log::Lsn end, uint64_t pin, uint64_t txn, bool locks);
  void ResumeFileWrites() override;
  DatabaseStats Stats() const override;
  void ResetIoStats() override;
  std::vector<TableStats> AllTableStats() const override;
  const RecoveryInfo& recovery() const override { return recovery_; }
  const Options& options() const override { return options_; }
  // The directory of a table's page files.
  std::string TableDir(const TableDef& def) const;
  std::string Describe() const override;
  // What caches the page files: "O_DIRECT (...)" or the OS page cache.
  std::string PageFileCaching() const;
  // The page-log threshold in effect: ppl_threshold capped at what the
  // region's blocks hold; 0 (nothing appended) with ppl_bytes 0.
  uint32_t PplThreshold() const;

  // Used by transactions.
  log::RedoLog* log() const { return log_.get(); }
  buffer::BufferPool* pool() const { return pool_.get(); }
  txn::LockManager& locks() { return locks_; }
  txn::TxnSystem& txns() { return *txns_; }
  std::chrono::milliseconds lock_timeout() const {
    return std::chrono::milliseconds(options_.lock_wait_timeout_ms);
  }
  StripedCounter commits, rollbacks;
  std::atomic<uint64_t> relocations{0}, undo_spills{0};
  // Undo files (txn/undo_file.h) live in the data directory, O_DIRECT as
  // the page files.
  FileSystem* undo_fs() const { return fs_; }
  const std::string& undo_dir() const { return options_.dir; }
  std::atomic<uint64_t> bulk_built_entries{0}, sort_runs{0}, bulk_inserts{0};  // DatabaseStats
  // Records a bulk-loaded table live (K4).
  Status EndBulkLoad(TableImpl* t);
  // The memory a bulk load or an index creation sorts keys in (beyond it,
  // sorted runs go to files in the data directory: util/external_sorter.h).
  uint64_t bulk_sort_bytes() const { return options_.buffer_pool_bytes / 16; }
  std::unique_ptr<ExternalSorter> NewSorter(uint64_t memory_bytes) const {
    return std::make_unique<ExternalSorter>(fs_, options_.dir, memory_bytes);
  }
  // Builds the (empty) tree of a non-unique index from the keys `sorted`
  // holds (btree/builder.h), and counts them in DatabaseStats.
  Status BuildFromSorted(ExternalSorter* sorted, btree::BTree* tree);
  void Register(UndoOwner* t) {
    std::lock_guard lock(owners_mu_);
    owners_.insert(t);
  }
  void Unregister(UndoOwner* t) {
    std::lock_guard lock(owners_mu_);
    owners_.erase(t);
  }
  // The engine stops accepting writes, for good until a restart (reads go
  // on): a transaction could not finish its rollback or learn its commit's
  // outcome. Reported once in the error log.
  void StopWrites(const Status& why);
  // OK, or ReadOnly with the reason once StopWrites was called.
  // A failed log stops writes too.
  Status Writable() {
    if (!writes_stopped_.load(std::memory_order_acquire)) {
      if (!log_->failed()) return Status::OK();
      StopWrites(log_->error());
    }
    return StoppedStatus();
  }
  void Report(const std::string& message) const;
  void Note(const std::string& message) const;

  // Two-phase commit (prepared.cc).
  std::vector<std::string> PreparedXids() const override;
  Result<std::unique_ptr<Transaction>> TakePrepared(std::string_view xid) override;
  Status KeepPrepared(std::unique_ptr<Transaction>&& txn) override;
  std::atomic<uint64_t> prepares{0};
  // The table one of whose indexes is `space`; null if none.
  TableImpl* TableOfSpace(uint32_t space) const;
  // A space a table had, gone now (dropped, or a temporary table's: K6).
  bool IsDroppedSpace(uint32_t space) const;

  // The pool's log relief: relocates the undo of the first open transaction
  // that holds the checkpoint back by more than a quarter of the log.
  void RelieveLog();

 private:
  explicit DatabaseImpl(const Options& options)
      : options_(options),
        flush_log_at_commit_(options.flush_log_at_commit),
        version_budget_(std::make_shared<txn::VersionBudget>(options.version_store_budget_bytes)) {}
  Status OpenAll();
  Status FinishInterruptedDdl();
  Status OpenIndex(TableImpl* t, const CatalogIndex& ci, bool create);
  Status ApplyUndo(const txn::UndoRecord& u);
  Status RemoveIndexFiles(IndexImpl* ix);
  // Page-file bytes of indexes removed since the start, so that the totals
  // in DatabaseStats never go down (guarded by ddl_mu_).
  page::SpaceIoStats dropped_io_;
  Status Persist();  // writes catalog_
  CatalogTable* CatalogEntry(const TableImpl* t);
  void PurgeLoop();
  // FlushLazyCommits whenever woken (DeferEnd), until StopPurge.
  void FlushLoop();
  void WakeFlusher();
  // Makes the log durable up to the commits that wait for it, then lets go
  // of their pins and locks. false: the log failed; they stay (and so does
  // the checkpoint: writes have stopped).
  bool FlushLazyCommits();
  // Commits that did not wait (DeferEnd), as one group: the end of the
  // newest, the oldest pin of them all (the others are released at once:
  // it covers them), and the transactions whose locks wait.
  struct LazyEnds {
    log::Lsn end = 0;
    std::optional<uint64_t> pin;
    std::vector<uint64_t> lockers;
  };
  // Adds `from` to lazy_ (under lazy_mu_); returns a pin to release.
  std::optional<uint64_t> MergeLazy(LazyEnds&& from);
  std::mutex lazy_mu_;
  LazyEnds lazy_;                          // guarded by lazy_mu_
  std::atomic<bool> lazy_pending_{false};  // lazy_ holds a pin
  std::mutex flush_mu_;
  std::condition_variable flush_cv_;
  bool flush_wanted_ = false;  // guarded by flush_mu_
  std::thread flush_thread_;
  // Frees the garbage chains of every tree that has some (btree.h), until
  // `enough`.
  void CollectGarbage(const std::function<bool()>& enough);
  void StopPurge();

  Status StoppedStatus() const;
  // DDL: waits until the background undo has rolled back every loser (whose
  // keys and table uses would otherwise refuse it), for at most the lock
  // wait timeout (TimedOut).
  Status AwaitRecoveredLosers();
  // Open: recovery's prepared transactions, held again with their locks
  // and versions; the chains their undo names, per index (RecoverChains).
  Status ResurrectPrepared(std::vector<recovery::RecoveredPrepared> prepared);
  std::vector<std::string> KeptChains(const txn::VersionStore* versions) const;
  void KeepRetiredFound(const txn::VersionStore* versions, const std::set<std::string>& found);
  // Close: the held prepared transactions end in memory only (their log
  // records and undo files stay for the next Open).
  void AbandonPrepared();
  mutable std::mutex prepared_mu_;
  // TransactionImpl objects, all prepared.
  std::multimap<std::string, std::unique_ptr<Transaction>, std::less<>> prepared_held_;
  // Background undo (Options::background_undo): the losers Open rebuilt,
  // rolled back newest first by undo_thread_; those whose rollback failed
  // (fail-stop: their locks stay); how many are not rolled back yet (DDL
  // waits for none).
  void UndoLoop();
  std::vector<std::unique_ptr<Transaction>> recovered_losers_;  // TransactionImpl
  std::vector<std::unique_ptr<Transaction>> failed_losers_;
  std::atomic<uint64_t> losers_pending_{0};
  std::condition_variable losers_cv_;  // with prepared_mu_
  std::thread undo_thread_;

  Options options_;
  // Options::flush_log_at_commit as set now.
  std::atomic<bool> flush_log_at_commit_{true};
  const std::shared_ptr<txn::VersionBudget> version_budget_;  // V4
  std::atomic<bool> writes_stopped_{false};
  mutable std::mutex stop_mu_;
  std::string stop_reason_;  // guarded by stop_mu_
  // Declared first: it outlives every file opened through it.
  std::unique_ptr<FileSystem> own_fs_;  // when options_.file_system is unset
  FileSystem* fs_ = nullptr;            // page files (O_DIRECT if options_.direct_io)
  // The catalog and the double-write file: small writes at any offset, so
  // never O_DIRECT.
  FileSystem* meta_fs_ = nullptr;
  std::unique_ptr<log::RedoLog> log_;
  std::unique_ptr<buffer::DoubleWrite> dwb_;
  std::unique_ptr<ppl::PplRegion> ppl_;  // NV-PPL, when options_.ppl_bytes > 0
  std::unique_ptr<buffer::BufferPool> pool_;
  // Lists and loads the pool's pages (Options::pool_load_at_open); null if
  // neither is asked for. Stopped before the pool goes.
  std::unique_ptr<buffer::PoolWarmer> warmer_;
  std::atomic<buffer::BufferPool*> pool_for_log_{nullptr};
  txn::LockManager locks_;
  std::unique_ptr<txn::TxnSystem> txns_;

  mutable std::shared_mutex ddl_mu_;  // catalog_, tables_, by_space_
  Catalog catalog_;
  std::map<std::string, std::unique_ptr<TableImpl>, std::less<>> tables_;
  std::vector<std::unique_ptr<TableImpl>> dropped_tables_;  // Table* stay valid
  std::unordered_map<uint32_t, IndexImpl*> by_space_;
  RecoveryInfo recovery_;
  bool closed_ = false;  // guarded by pause_mu_ (Close, Pause/ResumeFileWrites)
  std::mutex pause_mu_;

  std::mutex owners_mu_;  // held while relieving: owners stay alive
  std::set<UndoOwner*> owners_;

  std::mutex purge_mu_;
  std::condition_variable purge_cv_;
  std::atomic<bool> purge_stopping_{false};  // set first by StopPurge
  bool purge_stop_ = false;
  std::thread purge_thread_;

  // Lazy redo's background drain (buffer/pending_redo.h), from the end of
  // Open; Close waits for it.
  void RedoLoop();
  // Seconds from Open's return until no page had redo pending; 0 while some
  // do (tiny when none was left at the return).
  double LazyRedoSeconds() const;
  std::thread redo_thread_;
  std::atomic<bool> redo_stop_{false};
  std::chrono::steady_clock::time_point opened_at_;
};

Result<std::unique_ptr<Transaction>> NewTransaction(DatabaseImpl* db, Isolation isolation);
// transactional: for Transaction::BulkInsert (bulk_insert.cc): the loader
// does not count as a user of the table, and Finish neither waits for
// durability nor ends a catalog load (the transaction's commit does both).
std::unique_ptr<BulkLoader> NewBulkLoader(DatabaseImpl* db, TableImpl* table,
                                          bool transactional = false);

// The encoded values of unique index `index`'s own columns in `row`
// (canonical, as every caller's is).
std::string UniquePrefix(TableImpl* t, uint32_t index, const Row& row);
// AlreadyExists ("duplicate entry for unique index <name> of <table>") if the
// index holds an entry with the row's unique prefix. The caller makes sure no
// other writer of that prefix is in flight (its exclusive lock, or a bulk
// load's exclusive use of the table), so the tree's newest keys are the truth.
Status CheckUnique(TableImpl* t, uint32_t index, const Row& row);

}  // namespace subito::engine
