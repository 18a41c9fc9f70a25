// The plugin: system variables, status variables, SHOW ENGINE SUBITO STATUS,
// and the handlerton (engine start/stop, transactions, savepoints).
#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include <mysql/plugin.h>
#include "handler.h"
#include "log.h"
#include "mysqld.h"
#include "sql_class.h"
#include "table_cache.h"
// clang-format on

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <new>
#include <set>
#include <string>
#include <unordered_map>

#include "ha_subito.h"
#include "information_schema.h"
#include "status_report.h"
#include "subito/database.h"
#include "subito_trx.h"

// The server's, not in a header (InnoDB declares it the same way).
extern "C" int thd_rpl_deadlock_check(MYSQL_THD thd, MYSQL_THD other_thd);
extern "C" int thd_need_wait_reports(const MYSQL_THD thd);

// The server's list of datadir subdirectories that are not databases (MyRocks
// registers #rocksdb the same way).
void ignore_db_dirs_append(const char* dirname);

namespace subito::mariadb {

handlerton* subito_hton = nullptr;

namespace {

std::unique_ptr<Database> g_db;
std::string g_temporary_dir;

// ---- system variables (read-only: the engine takes them at start) ----

char* sv_data_dir = nullptr;
char* sv_pm_dir = nullptr;
ulong sv_log_write_mode = 0;
const char* log_write_mode_names[] = {"nf", "classic", NullS};
TYPELIB log_write_mode_typelib = {2, "log_write_mode", log_write_mode_names, nullptr};
uint sv_log_streams = 1;
ulonglong sv_log_file_size = 256ull << 20;
ulonglong sv_log_buffer_size = 8ull << 20;
ulonglong sv_buffer_pool_size = 128ull << 20;
ulonglong sv_max_checkpoint_age = 32ull << 20;
ulonglong sv_version_store_budget = 1ull << 30;
ulonglong sv_snapshot_page_budget = 256ull << 20;
ulonglong sv_lock_memory_budget = 1ull << 30;
uint sv_write_ahead_size = 512;
uint sv_page_size = 16384;
uint sv_page_cleaners = 1;
my_bool sv_double_write_on_pm = 1;
my_bool sv_direct_io = 1;
my_bool sv_lazy_recovery = 1;
my_bool sv_pool_load_at_startup = 1;
my_bool sv_pool_dump_at_shutdown = 1;
uint sv_pool_dump_interval = 60;
ulonglong sv_ppl_size = 256ull << 20;
uint sv_ppl_threshold = 1024;
uint sv_open_files = 0;
ulong sv_flush_log_at_trx_commit = 1;

MYSQL_SYSVAR_STR(
    data_home_dir, sv_data_dir, PLUGIN_VAR_READONLY | PLUGIN_VAR_NOCMDARG,
    "Directory of Subito's catalog and page files (default: <datadir>/#subito; the # keeps "
    "the server from taking it for a database)",
    nullptr, nullptr, nullptr);
MYSQL_SYSVAR_STR(pm_dir, sv_pm_dir, PLUGIN_VAR_READONLY,
                 "The PM tier: directory of the redo log and the double-write area, on a DAX "
                 "mount or /dev/shm (default: /dev/shm/subito/<data_home_dir>)",
                 nullptr, nullptr, nullptr);
MYSQL_SYSVAR_ENUM(log_write_mode, sv_log_write_mode, PLUGIN_VAR_READONLY,
                  "How commits reach the PM tier: nf (the writer persists straight from the "
                  "log buffer) or classic (pwrite, then a separate fsync thread)",
                  nullptr, nullptr, 0, &log_write_mode_typelib);
MYSQL_SYSVAR_UINT(log_streams, sv_log_streams, PLUGIN_VAR_READONLY,
                  "Redo log streams written in parallel", nullptr, nullptr, 1, 1, 16, 0);
MYSQL_SYSVAR_ULONGLONG(log_file_size, sv_log_file_size, PLUGIN_VAR_READONLY,
                       "Bytes of redo log per stream; one transaction's undo may use 1/16 of it",
                       nullptr, nullptr, 256ull << 20, 4ull << 20, 64ull << 30, 1ull << 20);
MYSQL_SYSVAR_ULONGLONG(log_buffer_size, sv_log_buffer_size, PLUGIN_VAR_READONLY,
                       "Bytes of the log buffer", nullptr, nullptr, 8ull << 20, 1ull << 20,
                       1ull << 30, 1ull << 20);
MYSQL_SYSVAR_UINT(log_write_ahead_size, sv_write_ahead_size, PLUGIN_VAR_READONLY,
                  "Bytes a log write is padded to (NF-log: 512; a power of two, 64-8192)", nullptr,
                  nullptr, 512, 64, 8192, 0);
MYSQL_SYSVAR_ULONGLONG(version_store_budget, sv_version_store_budget, PLUGIN_VAR_READONLY,
                       "DRAM for old row versions kept for open snapshots; past it the oldest "
                       "snapshot moves to pages as of its moment (subito_snapshot_page_budget) "
                       "or, if it cannot, is cut (its reads fail: snapshot too old). 0: no limit",
                       nullptr, nullptr, 1ull << 30, 0, ~0ull >> 1, 0);
MYSQL_SYSVAR_ULONGLONG(snapshot_page_budget, sv_snapshot_page_budget, PLUGIN_VAR_READONLY,
                       "DRAM for copies of pages as they were, for snapshots moved off the "
                       "version store (one copy per page changed since, however often); past "
                       "it the oldest moved snapshot is cut. 0: snapshots are cut, never moved",
                       nullptr, nullptr, 256ull << 20, 0, ~0ull >> 1, 0);
MYSQL_SYSVAR_ULONGLONG(lock_memory_budget, sv_lock_memory_budget, PLUGIN_VAR_READONLY,
                       "DRAM for row locks (about 320 bytes plus twice the key each); past it a "
                       "transaction is rolled back with ER_LOCK_TABLE_FULL. 0: no limit",
                       nullptr, nullptr, 1ull << 30, 0, ~0ull >> 1, 0);
MYSQL_SYSVAR_ULONGLONG(buffer_pool_size, sv_buffer_pool_size, PLUGIN_VAR_READONLY,
                       "Bytes of the buffer pool", nullptr, nullptr, 128ull << 20, 8ull << 20,
                       1ull << 40, 1ull << 20);
MYSQL_SYSVAR_UINT(page_size, sv_page_size, PLUGIN_VAR_READONLY,
                  "Page size of a new Subito database: 4096, 8192 or 16384", nullptr, nullptr,
                  16384, 4096, 16384, 0);
MYSQL_SYSVAR_ULONGLONG(max_checkpoint_age, sv_max_checkpoint_age, PLUGIN_VAR_READONLY,
                       "Bytes of redo since the checkpoint past which the page cleaners write "
                       "the oldest dirty pages, so that the pass over the log after a crash "
                       "stays short whatever the log's size. 0: only when half the log is used",
                       nullptr, nullptr, 32ull << 20, 0, ~0ull >> 1, 1ull << 20);
MYSQL_SYSVAR_UINT(page_cleaners, sv_page_cleaners, PLUGIN_VAR_READONLY,
                  "Threads writing dirty pages", nullptr, nullptr, 1, 1, 16, 0);
MYSQL_SYSVAR_BOOL(double_write_on_pm, sv_double_write_on_pm, PLUGIN_VAR_READONLY,
                  "Keep the double-write area on the PM tier (OFF: a file in data_home_dir)",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_BOOL(lazy_recovery, sv_lazy_recovery, PLUGIN_VAR_READONLY,
                  "After a crash, start serving once each page's redo is located: a page gets "
                  "its redo when first read, and a background thread reads the rest "
                  "(Subito_recovery_pages_pending); the interrupted transactions keep their "
                  "row locks and are rolled back by a background thread "
                  "(Subito_recovery_losers_pending). OFF: all of it before the engine starts",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_BOOL(buffer_pool_load_at_startup, sv_pool_load_at_startup, PLUGIN_VAR_READONLY,
                  "At start-up, load the pages the buffer pool held (the page list "
                  "pool_pages in data_home_dir) back in the background, in file order, many "
                  "pages per read (Subito_buffer_pool_load_pages; innodb_buffer_pool_load_at_"
                  "startup)",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_BOOL(buffer_pool_dump_at_shutdown, sv_pool_dump_at_shutdown, PLUGIN_VAR_READONLY,
                  "Write the page list of the buffer pool at shutdown and every "
                  "subito_buffer_pool_dump_interval seconds (OFF: never)",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_UINT(buffer_pool_dump_interval, sv_pool_dump_interval, PLUGIN_VAR_READONLY,
                  "Seconds between page lists of the buffer pool written while the server "
                  "runs, so that a start after a crash loads a recent one (0: at shutdown only)",
                  nullptr, nullptr, 60, 0, 86400, 0);
MYSQL_SYSVAR_BOOL(direct_io, sv_direct_io, PLUGIN_VAR_READONLY,
                  "Read and write page files with O_DIRECT, so the buffer pool is their only "
                  "cache (as innodb_flush_method=O_DIRECT); OFF: through the OS page cache. "
                  "Files the OS caches all the same (on tmpfs, or a file system without "
                  "O_DIRECT) are counted in Subito_page_files_cached_by_os",
                  nullptr, nullptr, 1);
MYSQL_SYSVAR_ULONGLONG(ppl_size, sv_ppl_size, PLUGIN_VAR_READONLY,
                       "Bytes of the per-page log region on the PM tier (NV-PPL): pages whose "
                       "changes since their last write are small keep them there instead of "
                       "being written. 0: off. A new size takes effect at a start when the "
                       "region holds nothing (after a clean shutdown)",
                       nullptr, nullptr, 256ull << 20, 0, 1ull << 40, 1ull << 20);
MYSQL_SYSVAR_UINT(ppl_threshold, sv_ppl_threshold, PLUGIN_VAR_READONLY,
                  "A page whose changes since its last write take at most this many bytes of "
                  "per-page log entries is not written (NV-PPL); the region's blocks hold this "
                  "after a 64-byte header",
                  nullptr, nullptr, 1024, 64, 4096, 0);
MYSQL_SYSVAR_UINT(open_files, sv_open_files, PLUGIN_VAR_READONLY,
                  "Page-file descriptors Subito keeps open at once, closing the least recently "
                  "used past it (0: as innodb_open_files, 300 or table_open_cache when that is "
                  "larger and below open_files_limit)",
                  nullptr, nullptr, 0, 0, 1u << 30, 0);
// Dynamic, as innodb_flush_log_at_trx_commit, with its values. 2 acts as
// 1: on the PM tier the copy into the log file that would survive the
// server's crash is itself the persist (NF-log), so there is nothing
// cheaper in between. 3 (InnoDB: 1, and a flush at prepare too) is 1: a
// prepare is always durable here.
void UpdateFlushLogAtTrxCommit(THD*, st_mysql_sys_var*, void* var, const void* save) {
  const ulong v = *static_cast<const ulong*>(save);
  *static_cast<ulong*>(var) = v;
  if (g_db) g_db->SetFlushLogAtCommit(v != 0);
}
MYSQL_SYSVAR_ULONG(flush_log_at_trx_commit, sv_flush_log_at_trx_commit, PLUGIN_VAR_OPCMDARG,
                   "1 (2 and 3 alike): a commit returns once its commit record is durable on "
                   "the PM tier. 0: once it is in the log buffer; a background thread makes the "
                   "log durable right after and only then releases the transaction's row locks, "
                   "so a crash loses the commits it had not reached, whole. A prepare (XA, or "
                   "the binary log's two-phase commit) and the commit after it are always durable",
                   nullptr, UpdateFlushLogAtTrxCommit, 1, 0, 3, 0);
// Per session, as innodb_lock_wait_timeout. A statement's waits are also
// bounded by the server's lock_wait_timeout, which NOWAIT and WAIT n set.
MYSQL_THDVAR_UINT(lock_wait_timeout, PLUGIN_VAR_RQCMDARG,
                  "Seconds a row lock request waits before ER_LOCK_WAIT_TIMEOUT (0: fails at "
                  "once); a statement also waits no longer than lock_wait_timeout",
                  nullptr, nullptr, 50, 0, 1073741824, 0);

struct st_mysql_sys_var* system_variables[] = {MYSQL_SYSVAR(data_home_dir),
                                               MYSQL_SYSVAR(pm_dir),
                                               MYSQL_SYSVAR(log_write_mode),
                                               MYSQL_SYSVAR(log_streams),
                                               MYSQL_SYSVAR(log_file_size),
                                               MYSQL_SYSVAR(log_buffer_size),
                                               MYSQL_SYSVAR(buffer_pool_size),
                                               MYSQL_SYSVAR(page_size),
                                               MYSQL_SYSVAR(page_cleaners),
                                               MYSQL_SYSVAR(max_checkpoint_age),
                                               MYSQL_SYSVAR(double_write_on_pm),
                                               MYSQL_SYSVAR(lock_wait_timeout),
                                               MYSQL_SYSVAR(log_write_ahead_size),
                                               MYSQL_SYSVAR(open_files),
                                               MYSQL_SYSVAR(version_store_budget),
                                               MYSQL_SYSVAR(snapshot_page_budget),
                                               MYSQL_SYSVAR(lock_memory_budget),
                                               MYSQL_SYSVAR(direct_io),
                                               MYSQL_SYSVAR(lazy_recovery),
                                               MYSQL_SYSVAR(ppl_size),
                                               MYSQL_SYSVAR(ppl_threshold),
                                               MYSQL_SYSVAR(buffer_pool_load_at_startup),
                                               MYSQL_SYSVAR(buffer_pool_dump_at_shutdown),
                                               MYSQL_SYSVAR(buffer_pool_dump_interval),
                                               MYSQL_SYSVAR(flush_log_at_trx_commit),
                                               nullptr};

// ---- lock waits and parallel replication ----

// Each connection's current transaction id and its THD, for the engine's
// lock wait hook: at most one entry per connection (the previous id goes
// when the next transaction begins, the last at disconnect). Only the
// connections the server may ask about are named: thd_rpl_deadlock_check
// looks at a waiter that needs wait reports (the binary log is open, or a
// parallel replica applies) and at a holder's THD only then, or when the
// holder is a replica's thread. Others skip the global mutex per
// transaction.
std::mutex g_thd_mu;
std::unordered_map<uint64_t, THD*> g_thd_of_txn;

// The connection's new transaction `id` (0: none) replaces `previous` in
// the map, if either is (to be) named.
void NameTransaction(THD* thd, Trx* trx, uint64_t previous, uint64_t id) {
  const bool name = id != 0 && (thd_need_wait_reports(thd) || thd->rgi_slave != nullptr);
  if (!name && !trx->named) return;
  std::lock_guard lock(g_thd_mu);
  if (trx->named) g_thd_of_txn.erase(previous);
  if (name) g_thd_of_txn[id] = thd;
  trx->named = name;
}

// The engine is about to make `waiter` wait for `holder`'s lock (L10): the
// server learns of it, so that parallel replication rolls back (and
// retries) a holder that comes later in commit order than the waiter, and
// the binary log marks a waiter's transaction as one that waited, as with
// InnoDB.
void ReportLockWait(uint64_t waiter, uint64_t holder) {
  std::lock_guard lock(g_thd_mu);  // a THD stays while named here
  auto w = g_thd_of_txn.find(waiter);
  if (w == g_thd_of_txn.end() || !thd_need_wait_reports(w->second)) return;
  auto h = g_thd_of_txn.find(holder);
  // An unnamed holder (held prepared, a bulk load's): the waiter still
  // counts as one that waited.
  THD* other = h == g_thd_of_txn.end() ? nullptr : h->second;
  if (other == w->second) return;
  thd_rpl_deadlock_check(w->second, other);
}

// ---- handlerton ----

bool InTransactionBlock(THD* thd) {
  return thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
}

Trx* FindTrx(THD* thd) {
  return static_cast<Trx*>(thd_get_ha_data(thd, subito_hton));
}

// Whether the connection holds MDL_BACKUP_COMMIT, which BACKUP STAGE
// BLOCK_COMMIT waits for: the engine must not wait for the backup's end
// then (BackupLockScope).
bool HoldsBackupCommitLock(THD* thd) {
  return thd != nullptr &&
         thd->mdl_context.is_lock_owner(MDL_key::BACKUP, "", "", MDL_BACKUP_COMMIT);
}

int Commit(handlerton*, THD* thd, bool all) {
  return Guard(thd, "commit", [&] {
    Trx* trx = FindTrx(thd);
    if (trx == nullptr || !trx->txn) return 0;
    if (all || !InTransactionBlock(thd)) {
      std::unique_ptr<Transaction> txn = std::move(trx->txn);
      // Only a commit that logs can wait for log space a backup holds.
      BackupLockScope backup_lock(txn->EndLogs() && HoldsBackupCommitLock(thd));
      Status st = txn->Commit();
      if (!st.ok()) return ToHaError(thd, st);
    }
    return 0;
  });
}

// An XID as the engine names a prepared transaction: formatID (8 bytes,
// little-endian), gtrid and bqual lengths (1 byte each), then their bytes.
std::string XidBytes(const XID& xid) {
  std::string out(10, '\0');
  if (xid.is_null()) return out;  // formatID -1: no lengths, no data
  const uint64_t format = static_cast<uint64_t>(static_cast<int64_t>(xid.formatID));
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(format >> (8 * i));
  const long gtrid = std::clamp<long>(xid.gtrid_length, 0, MAXGTRIDSIZE);
  const long bqual = std::clamp<long>(xid.bqual_length, 0, MAXBQUALSIZE);
  out[8] = static_cast<char>(gtrid);
  out[9] = static_cast<char>(bqual);
  out.append(xid.data, static_cast<size_t>(gtrid + bqual));
  return out;
}

bool XidFromBytes(const std::string& bytes, XID* xid) {
  if (bytes.size() < 10) return false;
  uint64_t format = 0;
  for (int i = 0; i < 8; ++i) format |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  const size_t gtrid = static_cast<unsigned char>(bytes[8]);
  const size_t bqual = static_cast<unsigned char>(bytes[9]);
  if (gtrid > MAXGTRIDSIZE || bqual > MAXBQUALSIZE || bytes.size() != 10 + gtrid + bqual)
    return false;
  xid->set(static_cast<long>(static_cast<int64_t>(format)), bytes.data() + 10, gtrid,
           bytes.data() + 10 + gtrid, bqual);
  return true;
}

// Two-phase commit: XA PREPARE, and the binary log's (and the server's
// tc.log between engines) prepare of each transaction before its commit.
// With `all` false inside a transaction block it is a statement's end:
// nothing to do. The transaction is durably prepared under the server's
// XID when this returns (Transaction::Prepare).
int Prepare(handlerton*, THD* thd, bool all) {
  return Guard(thd, "prepare", [&] {
    Trx* trx = FindTrx(thd);
    if (trx == nullptr || !trx->txn) return 0;
    if (!all && InTransactionBlock(thd)) return 0;
    MYSQL_XID xid;
    thd_get_xid(thd, &xid);
    Status st = trx->txn->Prepare(XidBytes(*reinterpret_cast<XID*>(&xid)));
    return st.ok() ? 0 : ToHaError(thd, st);
  });
}

// The server's recovery at start-up asks for the prepared transactions in
// batches of `len`, until a batch is short: each held one is returned once
// per such scan.
std::mutex g_recover_mu;
std::set<std::string> g_recover_returned;

int Recover(handlerton*, XID* xids, uint len) {
  if (!g_db) return 0;
  std::lock_guard lock(g_recover_mu);
  uint n = 0;
  for (const std::string& bytes : g_db->PreparedXids()) {
    if (n == len) break;
    if (g_recover_returned.count(bytes) || !XidFromBytes(bytes, &xids[n])) continue;
    g_recover_returned.insert(bytes);
    ++n;
  }
  if (n < len) g_recover_returned.clear();
  return static_cast<int>(n);
}

// The XA return codes (X/Open, as InnoDB's trx0xa.h): the server only
// tells zero from non-zero.
constexpr int kXaNotFound = -4;  // XAER_NOTA
constexpr int kXaFailed = -3;    // XAER_RMERR

int EndByXid(XID* xid, bool commit) noexcept try {
  if (!g_db) return kXaNotFound;
  Result<std::unique_ptr<Transaction>> txn = g_db->TakePrepared(XidBytes(*xid));
  if (!txn.ok()) return kXaNotFound;
  BackupLockScope backup_lock(HoldsBackupCommitLock(current_thd));  // XA ROLLBACK holds it
  Status st = commit ? (*txn)->Commit() : (*txn)->Rollback();
  if (!st.ok()) {
    sql_print_error("Subito: XA %s of a prepared transaction failed: %s",
                    commit ? "COMMIT" : "ROLLBACK", st.ToString().c_str());
    return kXaFailed;
  }
  return 0;
} catch (...) {
  sql_print_error("Subito: XA %s by XID failed with an exception", commit ? "COMMIT" : "ROLLBACK");
  return kXaFailed;
}

int CommitByXid(handlerton*, XID* xid) {
  return EndByXid(xid, true);
}

int RollbackByXid(handlerton*, XID* xid) {
  return EndByXid(xid, false);
}

int Rollback(handlerton*, THD* thd, bool all) {
  return Guard(thd, "rollback", [&] {
    Trx* trx = FindTrx(thd);
    if (trx == nullptr || !trx->txn) return 0;
    // After a failed commit the server rolls back holding the commit lock.
    BackupLockScope backup_lock(HoldsBackupCommitLock(thd));
    if (all || !InTransactionBlock(thd)) {
      std::unique_ptr<Transaction> txn = std::move(trx->txn);
      // A deadlock victim has already ended (InvalidArgument); a rollback
      // that could not finish has stopped the engine's writes, and says so.
      Status st = txn->Rollback();
      if (!st.ok() && !st.IsInvalidArgument()) return ToHaError(thd, st);
      return 0;
    }
    // A prepared transaction has no statement of its own left to undo: it
    // ends only whole (XA COMMIT, XA ROLLBACK, the binary log's decision).
    if (trx->txn->prepared()) return 0;
    Status st = trx->txn->RollbackTo(trx->statement_savepoint);
    if (!st.ok() && trx->txn) {
      // The statement could not be undone: the whole transaction goes, and
      // the server must know (a later COMMIT would report success).
      (void)trx->txn->Rollback();
      trx->txn.reset();
      thd->mark_transaction_to_rollback(true);
      return ToHaError(thd, st);
    }
    return 0;
  });
}

int SavepointSet(handlerton*, THD* thd, void* sv) {
  return Guard(thd, "SAVEPOINT", [&] {
    Trx* trx = GetTrx(thd);
    if (!trx->txn) {
      if (int err = BeginStatement(thd, trx)) return err;
    }
    *static_cast<uint64_t*>(sv) = trx->txn->Savepoint();
    return 0;
  });
}

int SavepointRollback(handlerton*, THD* thd, void* sv) {
  return Guard(thd, "ROLLBACK TO SAVEPOINT", [&] {
    Trx* trx = FindTrx(thd);
    if (trx == nullptr || !trx->txn) return 0;
    Status st = trx->txn->RollbackTo(*static_cast<uint64_t*>(sv));
    return st.ok() ? 0 : ToHaError(thd, st);
  });
}

int SavepointRelease(handlerton*, THD*, void*) {
  return 0;
}

bool SavepointCanReleaseMdl(handlerton*, THD*) {
  // Row locks taken after the savepoint stay held (but those of inserts the
  // rollback takes back), and so do metadata locks.
  return false;
}

// KILL [QUERY]: the server has set thd->killed; a lock wait of the
// connection's transaction sees it now instead of at its timeout.
void KillQuery(handlerton*, THD* thd, enum thd_kill_levels) {
  if (Trx* trx = FindTrx(thd); trx != nullptr && g_db) g_db->WakeLockWaiter(trx->txn_id.load());
}

int CloseConnection(handlerton*, THD* thd) {
  return Guard(thd, "closing a connection", [&] {
    Trx* trx = FindTrx(thd);
    if (trx != nullptr) {
      thd_set_ha_data(thd, subito_hton, nullptr);
      std::unique_ptr<Trx> owned(trx);
      NameTransaction(thd, trx, trx->txn_id.load(), 0);
      // XA PREPARE'd: the transaction outlives its connection (as InnoDB's
      // does), until XA COMMIT or XA ROLLBACK from any connection.
      if (trx->txn && trx->txn->prepared()) {
        Status st = g_db->KeepPrepared(std::move(trx->txn));
        if (!st.ok()) sql_print_error("Subito: %s", st.ToString().c_str());
      }
      if (trx->txn) (void)trx->txn->Rollback();
    }
    return 0;
  });
}

int StartConsistentSnapshot(handlerton*, THD* thd) {
  return Guard(thd, "START TRANSACTION WITH CONSISTENT SNAPSHOT", [&] {
    Trx* trx = GetTrx(thd);
    if (!trx->txn) {
      trans_register_ha(thd, true, subito_hton, 0);
      if (int err = BeginStatement(thd, trx)) return err;
    }
    trx->txn->TakeSnapshot();
    return 0;
  });
}

// BACKUP STAGE START .. END (docs/mariadb.md, "Backups"): meanwhile Subito
// changes none of its files but the redo log (Database::PauseFileWrites).
void PrepareForBackup() {
  try {
    if (g_db) g_db->PauseFileWrites();
  } catch (const std::exception& e) {
    sql_print_error("Subito: cannot pause file writes for the backup: %s", e.what());
  }
}

void EndBackup() {
  try {
    if (g_db) g_db->ResumeFileWrites();
  } catch (const std::exception& e) {
    sql_print_error("Subito: cannot resume file writes after the backup: %s", e.what());
  }
}

handler* CreateHandler(handlerton* hton, TABLE_SHARE* table, MEM_ROOT* mem_root) {
  return new (mem_root) ha_subito(hton, table);
}

int InitEngine(void* p) {
  subito_hton = static_cast<handlerton*>(p);
  Options o;
  o.dir = sv_data_dir && *sv_data_dir ? std::string(sv_data_dir)
                                      : std::string(mysql_real_data_home) + "#subito";
  if (sv_pm_dir && *sv_pm_dir)
    o.pm_dir = sv_pm_dir;
  else
    o.pm_dir.clear();  // the engine's default: /dev/shm/subito/<dir>
  if (sv_page_size != 4096 && sv_page_size != 8192 && sv_page_size != 16384) {
    sql_print_error(
        "Subito: subito_page_size must be 4096, 8192 or 16384, not %u; the engine "
        "is disabled",
        sv_page_size);
    return 1;
  }
  o.page_size = sv_page_size;
  o.buffer_pool_bytes = sv_buffer_pool_size;
  o.page_cleaners = sv_page_cleaners;
  o.max_checkpoint_age_bytes = sv_max_checkpoint_age;
  o.log_write_mode = log_write_mode_names[sv_log_write_mode];
  o.log_streams = sv_log_streams;
  o.log_file_size = sv_log_file_size;
  o.log_buffer_size = sv_log_buffer_size;
  o.log_write_ahead_size = sv_write_ahead_size;
  o.double_write_on_pm = sv_double_write_on_pm;
  o.lock_wait_timeout_ms = THDVAR(nullptr, lock_wait_timeout) * 1000u;
  // innodb_open_files' rule (innodb_init_params): 300, or table_open_cache
  // when that is larger and below open_files_limit; never above the limit.
  if (sv_open_files < 10) {
    sv_open_files = 300;
    if (tc_size > 300 && tc_size < open_files_limit) sv_open_files = static_cast<uint>(tc_size);
  }
  if (sv_open_files > open_files_limit) {
    sql_print_warning(
        "Subito: subito_open_files %u should not be greater than open_files_limit "
        "%lu",
        sv_open_files, open_files_limit);
    if (sv_open_files > tc_size) sv_open_files = static_cast<uint>(tc_size);
  }
  o.max_open_files = sv_open_files;
  o.direct_io = sv_direct_io;
  o.lazy_recovery = sv_lazy_recovery;
  o.background_undo = sv_lazy_recovery;
  o.pool_load_at_open = sv_pool_load_at_startup;
  o.pool_dump = sv_pool_dump_at_shutdown;
  o.pool_dump_interval_seconds = sv_pool_dump_interval;
  o.ppl_bytes = sv_ppl_size;
  o.ppl_threshold = sv_ppl_threshold;
  o.version_store_budget_bytes = sv_version_store_budget;
  o.snapshot_page_budget_bytes = sv_snapshot_page_budget;
  o.lock_memory_budget_bytes = sv_lock_memory_budget;
  o.flush_log_at_commit = sv_flush_log_at_trx_commit != 0;
  o.error_log = [](const std::string& m) { sql_print_error("Subito: %s", m.c_str()); };
  o.info_log = [](const std::string& m) { sql_print_information("Subito: %s", m.c_str()); };
  Result<std::unique_ptr<Database>> db = Database::Open(o);
  if (!db.ok()) {
    sql_print_error("Subito: cannot open the engine in %s: %s; the engine is disabled",
                    o.dir.c_str(), db.status().ToString().c_str());
    return 1;
  }
  g_db = std::move(*db);
  g_db->SetLockWaitHook(ReportLockWait);
  if (g_db->options().page_size != sv_page_size) {
    sql_print_warning(
        "Subito: subito_page_size is %u, but %s was created with %u-byte pages: it keeps "
        "them, and subito_page_size says so",
        sv_page_size, o.dir.c_str(), g_db->options().page_size);
    sv_page_size = g_db->options().page_size;
  }
  g_temporary_dir = o.dir + "/tmp";
  // A directory inside the datadir would look like a database to the server.
  const std::string home(mysql_real_data_home);
  if (o.dir.rfind(home, 0) == 0 && o.dir.find('/', home.size()) == std::string::npos) {
    ignore_db_dirs_append(o.dir.c_str() + home.size());
  }
  const RecoveryInfo& r = g_db->recovery();
  const std::string lazy =
      r.pages_pending ? ", " + std::to_string(r.pages_pending) + " pages left to redo lazily" : "";
  std::string steps;
  for (const auto& [name, seconds] : r.phases) {
    char figure[32];
    std::snprintf(figure, sizeof figure, " %.3f", seconds);
    steps += (steps.empty() ? "" : ", ") + name + figure;
  }
  const std::string background =
      r.losers_in_background
          ? ", " + std::to_string(r.losers_in_background) + " of them left to a background thread"
          : "";
  sql_print_information(
      "Subito: %s %s in %.3f s (%llu redo records, %llu transactions rolled "
      "back%s, %llu kept prepared%s); steps (s): %s; %s",
      r.created ? "created" : "opened", o.dir.c_str(), r.seconds,
      (unsigned long long)r.records_redone, (unsigned long long)r.transactions_rolled_back,
      background.c_str(), (unsigned long long)r.transactions_prepared, lazy.c_str(), steps.c_str(),
      g_db->Describe().c_str());

  handlerton* h = subito_hton;
  h->db_type = DB_TYPE_AUTOASSIGN;
  h->create = CreateHandler;
  // Extended keys: a secondary entry ends with the primary key, which the
  // optimizer may then use as InnoDB's (RowMapper::KeyPrefix).
  h->flags = HTON_CAN_RECREATE | HTON_SUPPORTS_EXTENDED_KEYS;
  h->savepoint_offset = sizeof(uint64_t);
  h->savepoint_set = SavepointSet;
  h->savepoint_rollback = SavepointRollback;
  h->savepoint_rollback_can_release_mdl = SavepointCanReleaseMdl;
  h->savepoint_release = SavepointRelease;
  h->commit = Commit;
  h->rollback = Rollback;
  h->prepare = Prepare;
  h->recover = Recover;
  h->commit_by_xid = CommitByXid;
  h->rollback_by_xid = RollbackByXid;
  h->close_connection = CloseConnection;
  h->kill_query = KillQuery;
  h->start_consistent_snapshot = StartConsistentSnapshot;
  h->show_status = ShowEngineStatus;
  h->prepare_for_backup = PrepareForBackup;
  h->end_backup = EndBackup;
  h->tablefile_extensions = ha_subito_exts;
  h->table_options = subito_table_options;
  return 0;
}

// The server's plugin init: no exception may abort mariadbd here either.
int Init(void* p) {
  try {
    return InitEngine(p);
  } catch (const std::exception& e) {
    sql_print_error("Subito: cannot start: %s; the engine is disabled", e.what());
  } catch (...) {
    sql_print_error("Subito: cannot start (an unknown exception); the engine is disabled");
  }
  return 1;
}

int Deinit(void*) {
  if (g_db) {
    Status st = g_db->Close();
    if (!st.ok()) sql_print_error("Subito: close failed: %s", st.ToString().c_str());
    g_db.reset();
  }
  return 0;
}

thread_local std::string last_error;  // per connection thread

}  // namespace

Database* engine() {
  return g_db.get();
}

uint32_t PageSize() {
  return sv_page_size;
}

bool DoubleWriteOnPm() {
  return sv_double_write_on_pm;
}

const std::string& TemporaryDir() {
  return g_temporary_dir;
}

Trx* GetTrx(THD* thd) {
  Trx* trx = FindTrx(thd);
  if (trx == nullptr) {
    trx = new Trx;
    thd_set_ha_data(thd, subito_hton, trx);
  }
  return trx;
}

int BeginStatement(THD* thd, Trx* trx) {
  if (!trx->txn) {
    const int iso = thd_tx_isolation(thd);
    trx->serializable = iso == ISO_SERIALIZABLE;
    trx->txn = g_db->Begin(iso <= ISO_READ_COMMITTED ? Isolation::kReadCommitted
                                                     : Isolation::kRepeatableRead);
    trx->txn->SetInterruptCheck([thd] { return thd->killed != NOT_KILLED; });
    const uint64_t previous = trx->txn_id.exchange(trx->txn->id());
    NameTransaction(thd, trx, previous, trx->txn->id());
  }
  // Statements of triggers and stored functions belong to the statement
  // that fired them: its savepoint stays (the server does not end them at
  // the engine, so a failure must undo back to the top statement's start).
  if (!thd->in_sub_stmt) {
    trx->statement_savepoint = trx->txn->Savepoint();
    trx->txn->StartStatement();
  }
  trx->txn->SetLockWaitTimeout(std::chrono::seconds(
      std::min<ulong>(THDVAR(thd, lock_wait_timeout), thd->variables.lock_wait_timeout)));
  trans_register_ha(thd, false, subito_hton, 0);
  if (InTransactionBlock(thd)) trans_register_ha(thd, true, subito_hton, 0);
  return 0;
}

const std::string& LastErrorMessage() {
  return last_error;
}

bool Killed(void* thd) {
  return thd != nullptr && thd_kill_level(static_cast<THD*>(thd)) != THD_IS_NOT_KILLED;
}

int ReportException(THD* thd, const char* entry) noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    sql_print_error("Subito: out of memory in %s", entry);
    my_error(ER_OUT_OF_RESOURCES, MYF(0));
    return HA_ERR_OUT_OF_MEM;
  } catch (const std::exception& e) {
    sql_print_error("Subito: %s failed: %s", entry, e.what());
    my_printf_error(ER_INTERNAL_ERROR, "Subito: %s failed: %s", MYF(0), entry, e.what());
  } catch (...) {
    sql_print_error("Subito: %s failed with an unknown exception", entry);
    my_printf_error(ER_INTERNAL_ERROR, "Subito: %s failed", MYF(0), entry);
  }
  (void)thd;
  return HA_ERR_INTERNAL_ERROR;
}

int ToHaError(THD* thd, const Status& st) {
  if (st.ok()) return 0;
  last_error = st.message();
  switch (st.code()) {
    case Status::Code::kNoSpace: {
      // As InnoDB: "The table 't' is full" (which the server also logs); the
      // server goes on, and writes succeed again once space is freed. Which
      // file and why, at most every 10 s.
      static std::atomic<int64_t> last_report{0};
      const int64_t now = static_cast<int64_t>(my_time(0));
      int64_t last = last_report.load();
      if (now - last >= 10 && last_report.compare_exchange_strong(last, now)) {
        sql_print_warning("Subito: %s", st.ToString().c_str());
      }
      return HA_ERR_RECORD_FILE_FULL;
    }
    case Status::Code::kNoMemory:
      return HA_ERR_OUT_OF_MEM;
    case Status::Code::kTooManyLocks:
      // As InnoDB's DB_LOCK_TABLE_FULL: the whole transaction goes, and
      // its locks with it.
      thd->mark_transaction_to_rollback(true);
      return HA_ERR_LOCK_TABLE_FULL;
    case Status::Code::kSnapshotTooOld:
      // No MariaDB code says it: the engine's message, as the statement's error.
      my_printf_error(ER_UNKNOWN_ERROR, "Subito: %s", MYF(0), st.message().c_str());
      return HA_ERR_SUBITO_ENGINE;
    case Status::Code::kReadOnly:
      my_printf_error(ER_OPEN_AS_READONLY, "%s", MYF(0), st.message().c_str());
      return HA_ERR_TABLE_READONLY;
    case Status::Code::kIOError:
      sql_print_error("Subito: %s", st.ToString().c_str());
      return HA_ERR_SUBITO_ENGINE;
    case Status::Code::kAlreadyExists:
      return HA_ERR_FOUND_DUPP_KEY;
    case Status::Code::kDeadlock:
      thd->mark_transaction_to_rollback(true);
      return HA_ERR_LOCK_DEADLOCK;
    case Status::Code::kTimedOut:
      return HA_ERR_LOCK_WAIT_TIMEOUT;
    case Status::Code::kTableChanged:  // an index or a bulk load newer than the snapshot
      return HA_ERR_TABLE_DEF_CHANGED;
    case Status::Code::kInterrupted:  // the server reports the KILL
      return HA_ERR_ABORTED_BY_USER;
    case Status::Code::kNotFound:
      return HA_ERR_KEY_NOT_FOUND;
    case Status::Code::kCorruption:
      sql_print_error("Subito: %s", st.ToString().c_str());
      return HA_ERR_SUBITO_ENGINE;
    case Status::Code::kTooLarge:
      // As InnoDB does for a record it cannot store: ER_TOO_BIG_ROWSIZE with
      // the reason, then HA_ERR_TO_BIG_ROW (the server keeps the first).
      my_printf_error(ER_TOO_BIG_ROWSIZE,
                      "Row size too large for Subito: %s (subito_log_buffer_size and "
                      "subito_buffer_pool_size set the limit)",
                      MYF(0), st.message().c_str());
      return HA_ERR_TO_BIG_ROW;
    default:
      return HA_ERR_SUBITO_ENGINE;
  }
}

}  // namespace subito::mariadb

struct st_mysql_storage_engine subito_storage_engine = {MYSQL_HANDLERTON_INTERFACE_VERSION};
struct st_mysql_information_schema subito_information_schema = {
    MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

maria_declare_plugin(subito){
    MYSQL_STORAGE_ENGINE_PLUGIN,
    &subito_storage_engine,
    "SUBITO",
    "Subito developers",
    "Transactional engine for persistent memory: redo log on PM, per-page logs, crash recovery",
    PLUGIN_LICENSE_GPL,
    subito::mariadb::Init,
    subito::mariadb::Deinit,
    0x0001,
    subito::mariadb::status_variables,
    subito::mariadb::system_variables,
    "0.1",
    MariaDB_PLUGIN_MATURITY_ALPHA},
    {MYSQL_INFORMATION_SCHEMA_PLUGIN,
     &subito_information_schema,
     "SUBITO_TABLE_IO",
     "Subito developers",
     "Subito: reads and writes per table and index, per tier and directory",
     PLUGIN_LICENSE_GPL,
     subito::mariadb::InitTableIoSchema,
     nullptr,
     0x0001,
     nullptr,
     nullptr,
     "0.1",
     MariaDB_PLUGIN_MATURITY_ALPHA},
    {MYSQL_INFORMATION_SCHEMA_PLUGIN,
     &subito_information_schema,
     "SUBITO_FILES",
     "Subito developers",
     "Subito: each index's page file, its directory, size and growth",
     PLUGIN_LICENSE_GPL,
     subito::mariadb::InitFilesSchema,
     nullptr,
     0x0001,
     nullptr,
     nullptr,
     "0.1",
     MariaDB_PLUGIN_MATURITY_ALPHA},
    {MYSQL_INFORMATION_SCHEMA_PLUGIN,
     &subito_information_schema,
     "SUBITO_PLACEMENT_ADVICE",
     "Subito developers",
     "Subito: each table classed by its I/O, and where its files belong",
     PLUGIN_LICENSE_GPL,
     subito::mariadb::InitPlacementSchema,
     nullptr,
     0x0001,
     nullptr,
     nullptr,
     "0.1",
     MariaDB_PLUGIN_MATURITY_ALPHA} maria_declare_plugin_end;
