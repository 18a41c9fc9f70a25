// Subito's embedded API: a database of tables, each with a clustered primary
// key and secondary indexes, read and written by ACID transactions.
//
//   auto db = subito::Database::Open({.dir = "/data/shop"});
//   subito::TableDef def{.name = "item",
//                        .columns = {{"id", subito::ColumnType::kInt, 8},
//                                    {"name", subito::ColumnType::kString}},
//                        .primary_key = {0},
//                        .indexes = {{"by_name", {1}, /*unique=*/true}}};
//   subito::Table* item = *(*db)->CreateTable(def);
//   auto txn = (*db)->Begin();
//   Status s = txn->Insert(item, {int64_t{1}, std::string("pen")});
//   s = txn->Commit();  // returns once the commit is durable
//
// Values: NULL (std::monostate), signed or unsigned integers of 1..8 bytes,
// and byte strings (ordered by memcmp: binary collation; a MariaDB plugin
// passes sort keys for other collations as extra columns or as the key).
//
// Thread safety: a Database and its Tables may be used from any thread; a
// Transaction and its Cursors by one thread at a time. DDL (create/drop of
// tables and indexes) must not race with transactions using the same table.
//
// Lifetimes: end (commit or roll back) transactions before closing the
// Database; one still open at Close is rolled back by recovery at the next
// Open. An ended Transaction object may outlive the Database. A Cursor
// reports InvalidArgument once its transaction has ended, and must not
// outlive the Transaction object.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "subito/status.h"

namespace subito {

class FileSystem;  // util/file_io.h (tests inject a crash-tracking one)
namespace pmem {
class Persistence;
}

enum class ColumnType : uint8_t { kInt = 1, kUInt = 2, kString = 3 };

struct Column {
  std::string name;
  ColumnType type = ColumnType::kInt;
  uint8_t width = 8;  // integers: bytes, 1..8
  bool nullable = false;
  uint32_t max_length = 65535;  // strings: bytes
  // Every index orders this column's values high to low, NULLs last (a
  // descending key part, KEY (a DESC)).
  bool descending = false;
};

struct IndexDef {
  std::string name;
  std::vector<uint32_t> columns;  // column numbers, in key order
  bool unique = false;            // NULLs never conflict (as in MariaDB)
};

struct TableDef {
  std::string name;
  std::vector<Column> columns;
  std::vector<uint32_t> primary_key;  // column numbers, none nullable
  std::vector<IndexDef> indexes;      // secondary
  std::string data_dir;               // empty: the database's directory
  // A column whose value NextAutoIncrement() hands out; it must be an
  // integer and the primary key's first column. -1: none.
  int auto_increment_column = -1;
  // The lowest value an auto-increment counter hands out (CREATE TABLE ...
  // AUTO_INCREMENT=N); the largest stored value + 1 wins when higher.
  // Kept in the catalog, for the engine's counter and for the plugin's.
  uint64_t auto_increment_start = 0;
  // A temporary table lives until the database closes or crashes: the next
  // Open drops it without recovering it (catalog invariant K6). Transactions
  // use it as any other table.
  bool temporary = false;
};

using Value = std::variant<std::monostate, int64_t, uint64_t, std::string>;
// A value read in place (Cursor::column): a string is a view of bytes owned
// by whoever handed it out.
using ValueView = std::variant<std::monostate, int64_t, uint64_t, std::string_view>;
using Row = std::vector<Value>;

enum class Isolation { kReadCommitted, kRepeatableRead };

// How a read treats other transactions' writes.
enum class ReadMode {
  kSnapshot,   // consistent read of the transaction's snapshot (no locks)
  kShared,     // newest committed version, shared lock (LOCK IN SHARE MODE)
  kExclusive,  // newest committed version, exclusive lock (FOR UPDATE)
  // As kShared and kExclusive, except that a row another transaction has
  // locked is passed over (absent to this read) instead of waited for
  // (SKIP LOCKED).
  kSharedSkipLocked,
  kExclusiveSkipLocked,
};

struct Options {
  std::string dir;                         // data directory: catalog, default table directory
  std::string pm_dir = "/dev/shm/subito";  // PM tier: redo log, double-write area
  bool create_if_missing = true;
  uint32_t page_size = 16384;  // 4096, 8192 or 16384; fixed at creation
  uint64_t buffer_pool_bytes = 128ull << 20;
  uint32_t page_cleaners = 1;
  // Redo since the checkpoint past which the page cleaners write the oldest
  // dirty pages (to their per-page logs where those take them), whatever the
  // pool's dirty share, so that the pass over the log after a crash stays
  // short however large the log is. 0: only log pressure (half the log) and
  // the dirty share make them write.
  uint64_t max_checkpoint_age_bytes = 32ull << 20;
  std::string log_write_mode = "nf";  // "nf" or "classic"
  uint32_t log_streams = 1;
  uint64_t log_file_size = 64ull << 20;  // per stream
  uint64_t log_buffer_size = 8ull << 20;
  uint32_t log_write_ahead_size = 512;  // padding unit of a log write, power of two
  bool double_write_on_pm = true;       // false: a file in `dir` (classic)
  uint32_t double_write_pages = 64;
  // NV-PPL (docs/formats/ppl.md): bytes of the per-page log region on the
  // PM tier (pm_dir/ppl); 0: off. A dirty page whose changes since it was
  // last written take at most ppl_threshold bytes of page-log entries is not
  // written: its changes go to the region, durably, and the page is clean.
  // The region's blocks hold ppl_threshold bytes after a 64-byte header
  // (rounded up to a multiple of 64, at least 128); a region that
  // holds nothing at Open takes a new size or threshold. The server's
  // default is 256 MiB (subito_ppl_size); embedded, 0 (off).
  uint64_t ppl_bytes = 0;
  uint32_t ppl_threshold = 1024;
  uint32_t lock_wait_timeout_ms = 50000;
  // A commit returns once its commit record is durable (InnoDB's
  // innodb_flush_log_at_trx_commit=1). false (=0): it returns once the
  // record is in the log buffer, and a background thread makes the log
  // durable right after (one write for the commits that came meanwhile).
  // A crash before loses such commits, never part of one: the transaction
  // is a loser, rolled back, because until its record is durable it keeps
  // its checkpoint pin (its undo records stay in the log) and its row locks
  // (no other loser shares its keys); later commits lie after it in the
  // log. A prepared transaction's prepare and commit, and the commit of one
  // with a bulk insert or an undo file, stay durable at return.
  // Database::SetFlushLogAtCommit changes it at any time.
  bool flush_log_at_commit = true;
  // After a crash, Open does not read the pages redo needs: it notes where
  // each page's records are in the log and returns; a page gets its records
  // when first read, and a background thread reads the rest
  // (docs/recovery.md, lazy redo). false: every page is redone before Open
  // returns.
  bool lazy_recovery = true;
  // With lazy_recovery, a background thread reads the pages still pending
  // after Open. false (tests): they get their redo only when read, and at
  // Close.
  bool background_redo = true;
  // After a crash, Open does not roll the losers back: it rebuilds each one
  // as a transaction (its keys locked, the values before its changes kept
  // for every reader, as a prepared transaction's are) and returns; a
  // background thread rolls them back, and DDL waits for it. false: they
  // are rolled back before Open returns.
  bool background_undo = true;
  // Tests: runs in the background-undo thread before its first rollback.
  std::function<void()> before_background_undo;
  // Page-file descriptors open at once, at most (InnoDB's
  // innodb_open_files): past it the least recently used one is closed, and
  // opened again when next needed. 0: no limit.
  uint32_t max_open_files = 300;
  // Page files are read and written with O_DIRECT, so the buffer pool is
  // their only cache (InnoDB's innodb_flush_method=O_DIRECT). Files the OS
  // caches all the same (tmpfs, a file system without O_DIRECT) are counted
  // in DatabaseStats::page_files_cached_by_os. false: the OS caches them.
  bool direct_io = true;
  // Buffer pool warm-up (InnoDB's buffer pool dump and load): the pages in
  // the pool are listed in dir/pool_pages at a clean Close and every
  // pool_dump_interval_seconds (0: at Close only); after Open a background
  // thread loads the listed pages back into free frames, in file order,
  // many pages per read. A missing or damaged list loads nothing (the error
  // log says why); Open never fails because of it. pool_dump = false: no
  // list is written.
  bool pool_load_at_open = true;
  bool pool_dump = true;
  uint32_t pool_dump_interval_seconds = 60;
  // A write waiting for log space gives up with Busy once the checkpoint
  // has not moved for this long (pages that cannot be written, a
  // transaction open since before the checkpoint).
  uint32_t log_full_timeout_ms = 60000;
  // DRAM for old row versions kept for open snapshots. Past it the purge
  // cuts the oldest snapshot, whose later reads fail with SnapshotTooOld,
  // so memory stays bounded under a snapshot left open. 0: no limit.
  uint64_t version_store_budget_bytes = 1ull << 30;
  // DRAM for pages as of an earlier moment, kept for snapshots over the
  // version budget: such a snapshot (of a transaction that has not written)
  // moves to reading the pages as they were, with one page copy per page
  // changed since, however often, instead of a row version per change.
  // Past this budget the oldest moved snapshot is cut (SnapshotTooOld).
  // 0: snapshots over the version budget are cut at once.
  uint64_t snapshot_page_budget_bytes = 256ull << 20;
  // DRAM for row locks (about 320 bytes plus twice the key per lock): past
  // it, a statement that would take one more lock fails with TooManyLocks
  // (InnoDB's "lock table full"). 0: no limit.
  uint64_t lock_memory_budget_bytes = 1ull << 30;
  // Messages for the server's error log: page writes failing (a full disk)
  // and succeeding again, the engine stopping writes. Default: stderr.
  std::function<void(const std::string&)> error_log;
  // Notes for the error log that report no fault (background redo
  // finished). Default: stderr.
  std::function<void(const std::string&)> info_log;
  // Tests only: where page files and PM bytes go, and what the classic
  // log's pwrites and fdatasyncs go through (its files are in pm_dir).
  FileSystem* file_system = nullptr;
  pmem::Persistence* persistence = nullptr;
  FileSystem* log_file_system = nullptr;
  // Tests only: the catalog's and the double-write file's (default:
  // file_system if set, else POSIX without O_DIRECT).
  FileSystem* meta_file_system = nullptr;
};

// What one index did since the counting started: at Open, when the index
// was created, or at the last Database::ResetIoStats. Bytes are attributed
// to the index whose pages they concern: its page file's reads and writes,
// redo records of its page changes and of its rows' undo, double-write
// copies of its pages (on the PM tier, or in a file with
// Options::double_write_on_pm = false), and per-page log entries (NV-PPL)
// written instead of its pages.
struct IndexStats {
  std::string name;
  std::string path;      // its page file
  uint64_t entries = 0;  // keys in the index's tree now (newest versions)
  uint64_t pages = 0;    // pages in its file now
  uint64_t pages_at_start = 0;
  uint64_t rows_read = 0;  // rows returned through this index (cursors; by key: primary)
  uint64_t file_bytes_read = 0, file_bytes_written = 0;
  uint64_t file_pages_read = 0, file_pages_written = 0;
  uint64_t redo_bytes = 0, double_write_bytes = 0, ppl_bytes = 0, ppl_appends = 0;
  uint64_t buffer_hits = 0, buffer_misses = 0;
};

struct TableStats {
  std::string name;
  std::string dir;         // where its page files are
  uint32_t page_size = 0;  // the database's (Options::page_size as created)
  uint64_t rows = 0;       // entries of the primary key now
  // Since the counting started (the table's Open or creation, or the last
  // ResetIoStats), which was `seconds` ago.
  uint64_t rows_read = 0, rows_inserted = 0, rows_updated = 0, rows_deleted = 0;
  double seconds = 0;
  std::vector<IndexStats> indexes;  // [0] is the primary key
};

struct DatabaseStats {
  uint64_t commits = 0, rollbacks = 0, deadlocks = 0, lock_waits = 0, lock_timeouts = 0;
  // Transaction::Prepare calls that logged a prepare record, and the
  // prepared transactions the database holds now (PreparedXids).
  uint64_t prepares = 0, prepared_held = 0;
  uint64_t log_bytes = 0;          // redo bytes persisted (padding included)
  uint64_t log_record_bytes = 0;   // redo records appended (headers included)
  uint64_t log_padding_bytes = 0;  // zeros written to pad partial blocks
  // The log's end (records appended) and how far it is durable (InnoDB's
  // Innodb_lsn_current and Innodb_lsn_flushed); they differ for a moment
  // after commits made without flush_log_at_commit.
  uint64_t log_lsn = 0, log_durable_lsn = 0;
  // Page copies to the double-write area: on the PM tier, or in a file with
  // Options::double_write_on_pm = false. Every page write makes one.
  uint64_t double_write_bytes = 0;
  uint64_t page_file_bytes_written = 0;
  uint64_t page_file_bytes_read = 0;
  uint64_t buffer_hits = 0, buffer_misses = 0, checkpoints = 0;
  // Scans' read-ahead: reads of several pages at once, and the pages they
  // brought into the pool (counted in page_file_bytes_read, not as misses).
  uint64_t read_aheads = 0, pages_read_ahead = 0;
  // Bytes of redo since the checkpoint: what a crash now would make the
  // next open read (Options::max_checkpoint_age_bytes bounds it).
  uint64_t checkpoint_age = 0;
  // Lazy redo after a crash: pages whose records are not applied yet, pages
  // redone since Open, and the seconds from Open's return until none was
  // left (0 while some are).
  uint64_t recovery_pages_pending = 0, recovery_pages_redone = 0;
  // Losers of the last start not yet rolled back (Options::background_undo).
  uint64_t recovery_losers_pending = 0;
  double recovery_background_seconds = 0;
  // Buffer pool warm-up (Options::pool_load_at_open): pages the page list
  // named (of tables still there), pages loaded back so far, whether the
  // load runs now, the seconds it took once done; page lists written.
  uint64_t pool_load_listed = 0, pool_load_pages = 0, pool_dumps = 0;
  bool pool_loading = false;
  double pool_load_seconds = 0;
  uint64_t version_keys = 0;  // keys with old versions kept for snapshots
  // Bytes those versions hold, their budget, snapshots cut to stay within it,
  // and versions examined by snapshot reads (each finds its version by
  // binary search: a hot row's long history costs a read log n).
  uint64_t version_bytes = 0, version_budget = 0, snapshots_cut = 0, versions_examined = 0;
  // Snapshots moved to pages as of an earlier moment instead of being cut
  // (since the start; open now), the page copies they hold and their bytes,
  // the bytes of their overlays (values of keys changed by writers they do
  // not see), and moved snapshots cut over snapshot_page_budget_bytes.
  uint64_t snapshots_moved = 0, moved_snapshots_open = 0, snapshot_pages = 0,
           snapshot_page_bytes = 0, snapshot_overlay_bytes = 0, moved_snapshots_cut = 0;
  // Pages of moved snapshots not copied but kept as a recipe (their file
  // image plus per-page log entries rebuild them: NV-PPL's multi-versioning),
  // held now; and such pages rebuilt since the start, for a reader or before
  // their page was written.
  uint64_t snapshot_page_recipes = 0, snapshot_pages_rebuilt = 0;
  // Moved snapshots cut because a page they needed could not be rebuilt
  // before it was written (a damaged file image: the error log says which).
  uint64_t moved_snapshots_unbuildable = 0;
  // Bytes row locks hold now (by the count above), and their budget.
  uint64_t lock_bytes = 0, lock_budget = 0;
  uint64_t purge_backlog = 0;    // ended transactions whose versions and chains wait for purge
  uint64_t garbage_indexes = 0;  // indexes with overflow pages waiting to be freed
  // Retired overflow chains the purge failed to release or free (freed at
  // the next start instead).
  uint64_t chain_release_failures = 0;
  uint64_t undo_relocations = 0;  // undo lists rewritten so the checkpoint could pass
  uint64_t undo_spills = 0;       // undo written to a transaction's undo file
  // Bulk loads and index builds: entries written by bottom-up tree builds
  // (btree/builder.h) rather than one by one, and sorted runs written to
  // files because the keys to sort exceeded their memory.
  uint64_t bulk_built_entries = 0, sort_runs = 0;
  uint64_t bulk_inserts = 0;  // tables filled by Transaction::BulkInsert
  // Descriptors of page files, the catalog and a double-write file
  // (Options::max_open_files): open now, the limit (0: none), closed to
  // make room, opened again after that, opens that waited for a free one.
  uint64_t open_files = 0, open_files_limit = 0, file_closes = 0, file_reopens = 0;
  uint64_t open_file_waits = 0;
  // Page files open now that the OS caches although Options::direct_io
  // asked for O_DIRECT: their file system keeps files in memory (tmpfs) or
  // refused O_DIRECT. 0 with direct_io: the buffer pool is their only cache.
  uint64_t page_files_cached_by_os = 0;
  // NV-PPL: pages whose changes went to the per-page log region instead of
  // their file, the bytes of those entries, pages written because the
  // region had no room for them, and the region's blocks in use / in all.
  uint64_t ppl_pages_logged = 0, ppl_bytes = 0, ppl_full = 0;
  uint64_t ppl_blocks_used = 0, ppl_blocks = 0;
  // Pages written after having entries (their blocks freed: de-PPLized),
  // and those the background cleaner read back to be written so.
  uint64_t ppl_pages_delogged = 0, ppl_reclaimed = 0;
  // Page-write batches that failed (a full disk, an I/O error; retried until
  // one succeeds), and whether the last one failed.
  uint64_t page_write_failures = 0;
  bool page_writes_failing = false;
  // PauseFileWrites: in effect now, and pauses since Open.
  bool file_writes_paused = false;
  uint64_t file_write_pauses = 0;
  // The engine stopped accepting writes (a rollback that could not finish,
  // a commit whose outcome is unknown, a log that failed): every write fails
  // with ReadOnly and the reason; reads go on; a restart recovers.
  bool writes_stopped = false;
  std::string stop_reason;
};

// What Open found and did.
struct RecoveryInfo {
  bool created = false;
  uint32_t pages_repaired = 0;
  uint64_t records_redone = 0;
  // Losers found, rolled back by Open or, with Options::background_undo,
  // after it by a background thread (losers_in_background of them).
  uint64_t transactions_rolled_back = 0;
  uint64_t losers_in_background = 0;
  uint64_t transactions_prepared = 0;  // kept prepared (Database::PreparedXids)
  uint64_t undo_applied = 0;
  // Losers whose undo had gone to an undo file before the crash, and the
  // entries written there before it (applied by Open, or by the background
  // undo after it).
  uint64_t losers_with_undo_files = 0;
  uint64_t undo_file_entries = 0;
  // Lazy redo: the pages whose records were left for their next read, when
  // Open returned (DatabaseStats says how many are left).
  bool lazy_redo = false;
  uint64_t pages_pending = 0;
  double seconds = 0;
  // Where those seconds went, step by step in the order the open takes
  // them (for the error log and the restart benchmark).
  std::vector<std::pair<std::string, double>> phases;
};

class Table;
class Transaction;
class Cursor;
class BulkLoader;

class Database {
 public:
  // Opens (or creates) the database in options.dir and recovers it. A damaged
  // catalog, log or page is refused with Corruption naming the file.
  static Result<std::unique_ptr<Database>> Open(const Options& options);
  virtual ~Database() = default;  // closes, as Close() would

  // Writes every page and shuts the log down cleanly.
  virtual Status Close() = 0;

  virtual Result<Table*> CreateTable(const TableDef& def) = 0;
  virtual Status DropTable(std::string_view name) = 0;
  // One catalog rewrite (page files are named by the table's id). The Table*
  // stays valid. No transaction may use the table meanwhile.
  virtual Status RenameTable(std::string_view from, std::string_view to) = 0;
  // Builds the index from the table's rows. No transaction may use the
  // table meanwhile.
  virtual Status CreateIndex(std::string_view table, const IndexDef& def) = 0;
  virtual Status DropIndex(std::string_view table, std::string_view index) = 0;
  virtual Table* FindTable(std::string_view name) const = 0;
  virtual std::vector<std::string> TableNames() const = 0;

  virtual std::unique_ptr<Transaction> Begin(Isolation isolation = Isolation::kRepeatableRead) = 0;
  // Prepared transactions the database holds: those recovered by Open, and
  // those handed over by KeepPrepared. Their locks stay held and their
  // changes invisible to others until TakePrepared's caller ends them.
  virtual std::vector<std::string> PreparedXids() const = 0;
  // The held prepared transaction of that xid, now the caller's to Commit
  // or Rollback; NotFound if none.
  virtual Result<std::unique_ptr<Transaction>> TakePrepared(std::string_view xid) = 0;
  // Holds a prepared transaction whose owner goes away (a client that
  // disconnects after XA PREPARE). InvalidArgument if it is not prepared
  // (`txn` is then left to the caller). Transactions prepared under one
  // xid are all held; TakePrepared hands them out one by one.
  virtual Status KeepPrepared(std::unique_ptr<Transaction>&& txn) = 0;
  // Fills an empty table that nothing else uses yet (a copy made by ALTER
  // TABLE, CREATE TABLE ... SELECT); see BulkLoader. Busy if
  // the table holds rows or a transaction uses it: fill it with a
  // transaction then.
  virtual Result<std::unique_ptr<BulkLoader>> BeginBulkLoad(Table* table) = 0;

  // Makes the lock wait of transaction `txn_id` (Transaction::id()), if it
  // waits, call its interrupt check again. Any thread; a transaction that
  // has ended or does not wait is left alone.
  virtual void WakeLockWaiter(uint64_t txn_id) = 0;
  // Called on the waiting thread before a transaction waits for a row lock,
  // once for each transaction holding it, under the lock manager's mutex
  // (each one named still holds the lock): it must not call into the
  // engine. A server's commit-order check for parallel replication. Set it
  // before any transaction begins.
  virtual void SetLockWaitHook(std::function<void(uint64_t waiter, uint64_t holder)> hook) = 0;
  // Backups (MariaDB's BACKUP STAGE; docs/mariadb.md, "Replication and
  // backups"). From PauseFileWrites' return until ResumeFileWrites (or
  // Close), the engine changes none of its files but the redo log: no page,
  // double-write copy, per-page log entry or undo file is written, and the
  // log's checkpoint stays where it was. Work goes on in memory and in the
  // log. A copy of `dir`, then of `pm_dir` with its `log` directory last,
  // made meanwhile while no transaction commits, opens as after a crash at
  // the moment the log was copied: every transaction committed before has
  // its changes, the others are rolled back, prepared ones stay prepared.
  // A writer that needs a page written meanwhile (every free frame dirty, the
  // log 3/4 full) or an undo file to grow waits for the resume, up to
  // Options::log_full_timeout_ms, then fails with Busy.
  virtual void PauseFileWrites() = 0;
  // Options::flush_log_at_commit from now on (commits already waiting still
  // wait).
  virtual void SetFlushLogAtCommit(bool on) = 0;
  virtual void ResumeFileWrites() = 0;
  virtual DatabaseStats Stats() const = 0;
  // Every table's TableStats and IndexStats counters start again from zero
  // now (DatabaseStats' totals do not).
  virtual void ResetIoStats() = 0;
  // Table::Stats of every table but temporary ones, by name, taken while no
  // DDL changes the set.
  virtual std::vector<TableStats> AllTableStats() const = 0;
  virtual const RecoveryInfo& recovery() const = 0;
  // The options in effect (pm_dir resolved when it was left empty).
  virtual const Options& options() const = 0;
  // One line per tier: what backs the log and the double-write area.
  virtual std::string Describe() const = 0;
};

class Table {
 public:
  virtual ~Table() = default;
  virtual const TableDef& def() const = 0;
  virtual TableStats Stats() const = 0;
  // This table's TableStats counters start again from zero now (as
  // Database::ResetIoStats does for all): for a table that replaces another
  // one, such as the copy an ALTER TABLE made.
  virtual void ResetIoStats() = 0;
  // What a query optimizer asks at each statement, without Stats()' copies:
  // the primary index's entries and pages, and the pages of all indexes.
  struct Size {
    uint64_t rows = 0, primary_pages = 0, pages = 0;
  };
  virtual Size Sizes() const = 0;
  // Counts every index's entries again (ANALYZE TABLE): Size::rows is a
  // statistic that a crash may leave off by a few percent (BTree::entries).
  virtual Status Recount() = 0;
  // The next value for the auto-increment column (above every value stored
  // or handed out since Open). Not transactional, like InnoDB's.
  virtual Result<uint64_t> NextAutoIncrement() = 0;

  // Estimates for a query optimizer. They read index entries as they are
  // (no snapshot, no locks), so uncommitted changes count.
  //
  // Entries of index `index` (0: primary) between two key prefixes (as for
  // Cursor::Seek); an absent bound is open. Exact up to a few dozen
  // entries, then interpolated from the tree's shape.
  struct Bound {
    Row prefix;
    bool inclusive = true;
  };
  virtual Result<uint64_t> EstimateRange(uint32_t index, const std::optional<Bound>& lo,
                                         const std::optional<Bound>& hi) = 0;
  // For each j in 1..(the index's own columns; for a non-unique secondary
  // index, every column of its entries, the primary key's included): entries
  // per distinct value of the first j columns, from `samples` random
  // entries.
  virtual Result<std::vector<double>> EstimateEntriesPerKey(uint32_t index,
                                                            uint32_t samples = 24) = 0;
};

// Rows go straight into the table's trees, logged as page changes only: no
// undo, no locks, no versions. Entries of non-unique secondary indexes are
// gathered and added in key order (a sorted build) when the gathered bytes
// pass a bound and by Finish. Until the loader ends, transactions cannot use
// the table (Busy) and DDL on it waits (Busy).
//
// Not atomic: a crash or an error leaves the rows added so far, which is
// what a table being filled by a statement that then fails may hold; the
// server drops such a table. Finish makes every added row durable.
class BulkLoader {
 public:
  virtual ~BulkLoader() = default;  // ends the load as it stands
  // AlreadyExists on a duplicate primary or unique key (the row is not
  // added), naming the index as Transaction::Insert does.
  virtual Status Add(const Row& row) = 0;
  virtual Status Finish() = 0;
};

class Transaction {
 public:
  virtual ~Transaction() = default;  // rolls back if neither ended
  // AlreadyExists on a duplicate primary or unique key. The duplicate key
  // stays locked: shared, or exclusive once SetReplacesDuplicates(true).
  virtual Status Insert(Table* table, const Row& row) = 0;
  // Whether this transaction's inserts and updates replace or update the
  // rows they meet as duplicates (REPLACE, INSERT ... ON DUPLICATE KEY
  // UPDATE): a duplicate key is then locked exclusively, else shared (as
  // InnoDB's trx->duplicates decides), unless held before. Off at first.
  virtual void SetReplacesDuplicates(bool replaces) = 0;
  // Replaces the row whose primary key `old_row` names (NotFound if none)
  // by new_row; the primary key may change.
  virtual Status Update(Table* table, const Row& old_row, const Row& new_row) = 0;
  // Deletes the row whose primary key `row` names. NotFound if none.
  virtual Status Delete(Table* table, const Row& row) = 0;
  // Fills `table` through the returned loader (its Add, then Finish at the
  // statement's end) without row locks, undo per row or versions, as InnoDB
  // fills an empty table with unique_checks=0 and foreign_key_checks=0. The
  // table must be empty, never have freed a page, and be used by no other
  // transaction; else Busy, and rows go in by Insert. Until this transaction
  // ends, other transactions' writes and locking reads of the table wait for
  // its end (lock wait timeout, interruption), and their consistent reads
  // see the table empty, as do later ones whose snapshot does not see this
  // transaction's commit. A rollback past this call (of a statement, of the
  // transaction, or by recovery) empties the table again. Any other use of
  // the table by this transaction finishes the loader first.
  virtual Result<std::unique_ptr<BulkLoader>> BulkInsert(Table* table) = 0;
  // The row with this primary key (key: the key columns' values in key
  // order), or nullopt.
  virtual Result<std::optional<Row>> Get(Table* table, const Row& key,
                                         ReadMode mode = ReadMode::kSnapshot) = 0;
  // index 0 is the primary key, 1.. the secondary indexes in def order.
  virtual Result<std::unique_ptr<Cursor>> OpenCursor(Table* table, uint32_t index,
                                                     ReadMode mode = ReadMode::kSnapshot) = 0;

  // Statement rollback: RollbackTo(Savepoint()) undoes what came after. Its
  // locks stay held, as InnoDB's explicit locks, except those of the
  // inserts it takes back that no change before the savepoint needed (as
  // InnoDB's implicit locks go with the records).
  // A bulk insert's open load is finished first (BulkInsert: its later rows
  // go in one by one, so that a rollback to the savepoint is exact).
  virtual uint64_t Savepoint() const = 0;
  virtual Status RollbackTo(uint64_t savepoint) = 0;

  // Returns once the commit record is durable. A failed commit rolls back.
  virtual Status Commit() = 0;
  virtual Status Rollback() = 0;
  // Two-phase commit (XA, the binary log's): returns once the transaction
  // is durably prepared under `xid` (at most 1024 bytes, any bytes), after
  // which it only commits or rolls back, whatever happens: a crash or a
  // Close leaves it prepared, holding its locks, and the next Open lists
  // it (Database::PreparedXids). A transaction that wrote nothing is
  // prepared without a log record and does not outlive a crash (InnoDB's
  // read-only XA likewise). A failed prepare leaves it to roll back.
  virtual Status Prepare(std::string_view xid) = 0;
  virtual bool prepared() const = 0;
  // REPEATABLE READ: fixes the snapshot now rather than at the first read
  // (START TRANSACTION WITH CONSISTENT SNAPSHOT). No effect otherwise.
  virtual void TakeSnapshot() = 0;
  // The longest a later lock wait of this transaction lasts before it fails
  // with TimedOut (Options::lock_wait_timeout_ms until set; 0: fail at once
  // rather than wait, as NOWAIT does).
  virtual void SetLockWaitTimeout(std::chrono::milliseconds timeout) = 0;
  // Called before and during each lock wait of this transaction: once it
  // returns true, the request fails with Interrupted instead of waiting (a
  // killed statement). It runs under the lock manager's mutex and must only
  // read a flag. Database::WakeLockWaiter makes a waiter call it again.
  virtual void SetInterruptCheck(std::function<bool()> interrupted) = 0;
  // Starts a statement: from now until the next StartStatement (or the
  // end), READ COMMITTED reads share one snapshot, taken at the first read,
  // as InnoDB's statement read view. Until the first call, every READ
  // COMMITTED Get and cursor takes its own. No effect at REPEATABLE READ.
  virtual void StartStatement() = 0;
  virtual uint64_t id() const = 0;
  // Whether ending the transaction logs a record (it logged a change, or a
  // bulk insert is still open): only then may Commit or Rollback wait, for
  // log space or the log's durability. Asked by the transaction's own
  // thread, as its other calls are.
  virtual bool EndLogs() const = 0;
};

enum class SeekOp {
  kFirst,
  kLast,
  kEq,      // first key with this prefix; Next/Prev stay inside the prefix
  kEqLast,  // last key with this prefix; likewise bounded
  kGE,      // first key >= prefix
  kGT,      // first key after every key with this prefix
  kLE,      // last key <= prefix (keys with the prefix included)
  kLT,      // last key before every key with this prefix
};

// A position in one index, reading through its transaction's ReadMode.
// Stable under concurrent inserts and deletes (it re-seeks by key).
class Cursor {
 public:
  virtual ~Cursor() = default;
  // `key`: values of a prefix of the index's columns (for a secondary index,
  // its columns then the primary key's).
  virtual Status Seek(SeekOp op, const Row& key = {}) = 0;
  virtual Status Next() = 0;
  virtual Status Prev() = 0;
  virtual bool Valid() const = 0;
  // The whole row (for a secondary index too), decoded on the first call
  // at each position.
  virtual const Row& row() const = 0;
  // Column c of the row without decoding the others; a string's bytes stay
  // valid until the cursor moves.
  virtual ValueView column(uint32_t c) const = 0;
  // The current entry's encoded key, valid until the cursor moves. Keys of
  // the index sort as these bytes (memcmp), and a key prefix's values
  // encode (EncodeKey) as a prefix of the bytes of every key that has them.
  virtual std::string_view key() const = 0;
  // `prefix`: values of a prefix of the index's columns, as for Seek.
  virtual Result<std::string> EncodeKey(const Row& prefix) const = 0;
  // Seek with an encoded prefix (from key() or EncodeKey).
  virtual Status SeekKey(SeekOp op, std::string_view encoded) = 0;
  // Keys only (an index-only read): a snapshot read of a secondary index
  // then reads its entries, not their rows. At each position row() and
  // column() hold the entry's columns (the index's, then the primary key's)
  // and NULL in every other column. Locking reads and the primary index
  // read rows as before. Takes effect from the next positioning.
  virtual void SetKeysOnly(bool keys_only) = 0;
  // The end of a forward range read (an encoded prefix, as from EncodeKey;
  // `inclusive`: keys with that prefix are in the range), or none. A
  // forward locking read that meets the first key past it locks that key
  // as the range's end and stops there: through a secondary index in
  // shared mode the entry alone, not its row (InnoDB's next-key lock on
  // the secondary record past a range), unless another transaction's
  // uncommitted change is on the entry (then its row is waited for), else
  // the entry and its row. The cursor is then not positioned.
  // Reads of the snapshot ignore it. Takes effect from the next
  // positioning.
  virtual void SetEnd(std::optional<std::string> end, bool inclusive) = 0;
  // Gives up the lock that reading the current row took and the
  // transaction did not hold before, through the primary index only: the
  // row did not match the statement's condition (MariaDB's unlock_row;
  // InnoDB's row_unlock at READ COMMITTED, where no range is locked, and
  // only for a clustered index read). Nothing for a read of the snapshot
  // or through a secondary index (its locks protect rows another cursor of
  // the statement may have found held already).
  virtual void ReleaseCurrentLocks() = 0;
  // Semi-consistent reads (MariaDB's try_semi_consistent_read; InnoDB's at
  // READ COMMITTED, for UPDATE): an exclusive read of the primary index,
  // other than of one whole key, that meets a row another transaction
  // holds takes no lock and gives the row's newest committed version (a row
  // none committed is passed over), and WasSemiConsistent() says so. If the
  // caller then wants that row, Next() or Prev() reads its key again,
  // waiting for its lock; ReleaseCurrentLocks() tells it the row is not
  // wanted. Only where no range is locked (READ COMMITTED).
  virtual void SetSemiConsistent(bool on) = 0;
  virtual bool WasSemiConsistent() const = 0;
};

}  // namespace subito
