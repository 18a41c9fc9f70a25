// SHOW STATUS's Subito_* variables and SHOW ENGINE SUBITO STATUS: the
// engine's counters (Database::Stats) as the server shows them.
#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include <mysql/plugin.h>
#include "handler.h"
#include "sql_class.h"
// clang-format on

#include <cstddef>
#include <cstdio>
#include <new>
#include <string>

#include "status_report.h"
#include "subito/database.h"
#include "subito_trx.h"

namespace subito::mariadb {
namespace {

// ---- status variables ----
//
// Each SHOW STATUS gets the values and the array naming them in the
// server's buffer for that call (as the server's key-cache variables do),
// so concurrent callers never share or tear them.

struct Exported {
  ulonglong commits, rollbacks, deadlocks, lock_waits, lock_timeouts;
  ulonglong prepares, prepared_transactions;
  ulonglong log_bytes, log_record_bytes, log_padding_bytes, double_write_bytes, pm_bytes_written;
  ulonglong page_file_bytes_written, page_file_bytes_read, pages_written, pages_read;
  ulonglong buffer_hits, buffer_misses, checkpoints, checkpoint_age, version_keys, undo_relocations,
      undo_spills;
  ulonglong bulk_built_entries, sort_runs, bulk_inserts;
  ulonglong open_files, file_closes, file_reopens, open_file_waits;
  ulonglong page_write_failures, page_writes_failing, writes_stopped;
  ulonglong version_bytes, snapshots_cut, lock_bytes, page_files_cached_by_os;
  ulonglong ppl_pages_logged, ppl_bytes, ppl_full, ppl_blocks_used, ppl_blocks;
  ulonglong ppl_pages_delogged, ppl_reclaimed;
  ulonglong snapshots_moved, moved_snapshots_open, snapshot_pages, snapshot_page_bytes;
  ulonglong moved_snapshots_cut, snapshot_page_recipes, snapshot_pages_rebuilt;
  ulonglong moved_snapshots_unbuildable;
  ulonglong recovery_pages_pending, recovery_pages_redone, recovery_losers_pending;
  ulonglong buffer_pool_load_listed, buffer_pool_load_pages, buffer_pool_loading, buffer_pool_dumps;
  double buffer_hit_ratio, recovery_seconds, recovery_background_seconds, buffer_pool_load_seconds;
};

Exported Collect() {
  Exported e{};
  if (!engine()) return e;
  const DatabaseStats s = engine()->Stats();
  e.commits = s.commits;
  e.rollbacks = s.rollbacks;
  e.prepares = s.prepares;
  e.prepared_transactions = s.prepared_held;
  e.deadlocks = s.deadlocks;
  e.lock_waits = s.lock_waits;
  e.lock_timeouts = s.lock_timeouts;
  e.log_bytes = s.log_bytes;
  e.log_record_bytes = s.log_record_bytes;
  e.log_padding_bytes = s.log_padding_bytes;
  e.double_write_bytes = s.double_write_bytes;
  e.pm_bytes_written = s.log_bytes + (DoubleWriteOnPm() ? s.double_write_bytes : 0) + s.ppl_bytes;
  e.page_file_bytes_written = s.page_file_bytes_written;
  e.page_file_bytes_read = s.page_file_bytes_read;
  e.pages_written = s.page_file_bytes_written / PageSize();
  e.pages_read = s.page_file_bytes_read / PageSize();
  e.buffer_hits = s.buffer_hits;
  e.buffer_misses = s.buffer_misses;
  const ulonglong lookups = s.buffer_hits + s.buffer_misses;
  e.buffer_hit_ratio = lookups ? static_cast<double>(s.buffer_hits) / lookups : 1.0;
  e.checkpoints = s.checkpoints;
  e.checkpoint_age = s.checkpoint_age;
  e.version_keys = s.version_keys;
  e.undo_relocations = s.undo_relocations;
  e.undo_spills = s.undo_spills;
  e.bulk_built_entries = s.bulk_built_entries;
  e.bulk_inserts = s.bulk_inserts;
  e.sort_runs = s.sort_runs;
  e.open_files = s.open_files;
  e.file_closes = s.file_closes;
  e.file_reopens = s.file_reopens;
  e.open_file_waits = s.open_file_waits;
  e.page_write_failures = s.page_write_failures;
  e.page_writes_failing = s.page_writes_failing;
  e.writes_stopped = s.writes_stopped;
  e.version_bytes = s.version_bytes;
  e.snapshots_cut = s.snapshots_cut;
  e.lock_bytes = s.lock_bytes;
  e.page_files_cached_by_os = s.page_files_cached_by_os;
  e.ppl_pages_logged = s.ppl_pages_logged;
  e.ppl_bytes = s.ppl_bytes;
  e.ppl_full = s.ppl_full;
  e.ppl_blocks_used = s.ppl_blocks_used;
  e.ppl_blocks = s.ppl_blocks;
  e.ppl_pages_delogged = s.ppl_pages_delogged;
  e.ppl_reclaimed = s.ppl_reclaimed;
  e.snapshots_moved = s.snapshots_moved;
  e.moved_snapshots_open = s.moved_snapshots_open;
  e.snapshot_pages = s.snapshot_pages;
  e.snapshot_page_bytes = s.snapshot_page_bytes;
  e.moved_snapshots_cut = s.moved_snapshots_cut;
  e.snapshot_page_recipes = s.snapshot_page_recipes;
  e.snapshot_pages_rebuilt = s.snapshot_pages_rebuilt;
  e.moved_snapshots_unbuildable = s.moved_snapshots_unbuildable;
  e.recovery_pages_pending = s.recovery_pages_pending;
  e.recovery_losers_pending = s.recovery_losers_pending;
  e.recovery_pages_redone = s.recovery_pages_redone;
  e.recovery_seconds = engine()->recovery().seconds;
  e.recovery_background_seconds = s.recovery_background_seconds;
  e.buffer_pool_load_listed = s.pool_load_listed;
  e.buffer_pool_load_pages = s.pool_load_pages;
  e.buffer_pool_loading = s.pool_loading;
  e.buffer_pool_load_seconds = s.pool_load_seconds;
  e.buffer_pool_dumps = s.pool_dumps;
  return e;
}

struct StatusVar {
  const char* name;
  size_t offset;  // in Exported
  enum_mysql_show_type type;
};
#define SUBITO_STATUS(name, type) \
  { #name, offsetof(Exported, name), type }
constexpr StatusVar kStatusVars[] = {SUBITO_STATUS(commits, SHOW_ULONGLONG),
                                     SUBITO_STATUS(rollbacks, SHOW_ULONGLONG),
                                     SUBITO_STATUS(prepares, SHOW_ULONGLONG),
                                     SUBITO_STATUS(prepared_transactions, SHOW_ULONGLONG),
                                     SUBITO_STATUS(deadlocks, SHOW_ULONGLONG),
                                     SUBITO_STATUS(lock_waits, SHOW_ULONGLONG),
                                     SUBITO_STATUS(lock_timeouts, SHOW_ULONGLONG),
                                     SUBITO_STATUS(log_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(log_record_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(log_padding_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(double_write_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(pm_bytes_written, SHOW_ULONGLONG),
                                     SUBITO_STATUS(page_file_bytes_written, SHOW_ULONGLONG),
                                     SUBITO_STATUS(page_file_bytes_read, SHOW_ULONGLONG),
                                     SUBITO_STATUS(pages_written, SHOW_ULONGLONG),
                                     SUBITO_STATUS(pages_read, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_hits, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_misses, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_hit_ratio, SHOW_DOUBLE),
                                     SUBITO_STATUS(checkpoints, SHOW_ULONGLONG),
                                     SUBITO_STATUS(checkpoint_age, SHOW_ULONGLONG),
                                     SUBITO_STATUS(version_keys, SHOW_ULONGLONG),
                                     SUBITO_STATUS(undo_relocations, SHOW_ULONGLONG),
                                     SUBITO_STATUS(undo_spills, SHOW_ULONGLONG),
                                     SUBITO_STATUS(bulk_built_entries, SHOW_ULONGLONG),
                                     SUBITO_STATUS(bulk_inserts, SHOW_ULONGLONG),
                                     SUBITO_STATUS(sort_runs, SHOW_ULONGLONG),
                                     SUBITO_STATUS(open_files, SHOW_ULONGLONG),
                                     SUBITO_STATUS(file_closes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(file_reopens, SHOW_ULONGLONG),
                                     SUBITO_STATUS(open_file_waits, SHOW_ULONGLONG),
                                     SUBITO_STATUS(page_write_failures, SHOW_ULONGLONG),
                                     SUBITO_STATUS(page_writes_failing, SHOW_ULONGLONG),
                                     SUBITO_STATUS(writes_stopped, SHOW_ULONGLONG),
                                     SUBITO_STATUS(version_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshots_cut, SHOW_ULONGLONG),
                                     SUBITO_STATUS(lock_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(page_files_cached_by_os, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_pages_logged, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_full, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_blocks_used, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_blocks, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_pages_delogged, SHOW_ULONGLONG),
                                     SUBITO_STATUS(ppl_reclaimed, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshots_moved, SHOW_ULONGLONG),
                                     SUBITO_STATUS(moved_snapshots_open, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshot_pages, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshot_page_bytes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(moved_snapshots_cut, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshot_page_recipes, SHOW_ULONGLONG),
                                     SUBITO_STATUS(snapshot_pages_rebuilt, SHOW_ULONGLONG),
                                     SUBITO_STATUS(moved_snapshots_unbuildable, SHOW_ULONGLONG),
                                     SUBITO_STATUS(recovery_seconds, SHOW_DOUBLE),
                                     SUBITO_STATUS(recovery_pages_pending, SHOW_ULONGLONG),
                                     SUBITO_STATUS(recovery_losers_pending, SHOW_ULONGLONG),
                                     SUBITO_STATUS(recovery_pages_redone, SHOW_ULONGLONG),
                                     SUBITO_STATUS(recovery_background_seconds, SHOW_DOUBLE),
                                     SUBITO_STATUS(buffer_pool_load_listed, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_pool_load_pages, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_pool_loading, SHOW_ULONGLONG),
                                     SUBITO_STATUS(buffer_pool_load_seconds, SHOW_DOUBLE),
                                     SUBITO_STATUS(buffer_pool_dumps, SHOW_ULONGLONG)};
#undef SUBITO_STATUS

int ShowStatus(THD*, SHOW_VAR* var, void* buff, struct system_status_var*, enum enum_var_type) {
  constexpr size_t n = sizeof(kStatusVars) / sizeof(kStatusVars[0]);
  static_assert(sizeof(Exported) % alignof(SHOW_VAR) == 0);
  static_assert(sizeof(Exported) + (n + 1) * sizeof(SHOW_VAR) <= SHOW_VAR_FUNC_BUFF_SIZE);
  auto* values = new (buff) Exported(Collect());
  auto* vars = reinterpret_cast<SHOW_VAR*>(static_cast<char*>(buff) + sizeof(Exported));
  for (size_t i = 0; i < n; ++i) {
    vars[i] = {kStatusVars[i].name, reinterpret_cast<char*>(values) + kStatusVars[i].offset,
               kStatusVars[i].type};
  }
  vars[n] = {NullS, NullS, SHOW_LONG};
  var->type = SHOW_ARRAY;
  var->value = reinterpret_cast<char*>(vars);
  return 0;
}

// A group of two counters apart from the rest (whose values fill the
// server's buffer for a SHOW_FUNC): Subito_<group>_<name>.
int ShowTwo(SHOW_VAR* var, void* buff, const char* name0, ulonglong value0, const char* name1,
            ulonglong value1) {
  auto* values = new (buff) ulonglong[2]{value0, value1};
  auto* vars = reinterpret_cast<SHOW_VAR*>(static_cast<char*>(buff) + 2 * sizeof(ulonglong));
  vars[0] = {name0, reinterpret_cast<char*>(&values[0]), SHOW_ULONGLONG};
  vars[1] = {name1, reinterpret_cast<char*>(&values[1]), SHOW_ULONGLONG};
  vars[2] = {NullS, NullS, SHOW_LONG};
  var->type = SHOW_ARRAY;
  var->value = reinterpret_cast<char*>(vars);
  return 0;
}

// Subito_backup_*: whether a backup pauses file writes now
// (Database::PauseFileWrites), and pauses since the start.
int ShowBackupStatus(THD*, SHOW_VAR* var, void* buff, struct system_status_var*,
                     enum enum_var_type) {
  DatabaseStats s;
  if (engine()) s = engine()->Stats();
  return ShowTwo(var, buff, "file_writes_paused", s.file_writes_paused, "pauses",
                 s.file_write_pauses);
}

// Subito_lsn_*: the log's end and how far it is durable (InnoDB's
// Innodb_lsn_current and Innodb_lsn_flushed; they differ for a moment
// after commits made with subito_flush_log_at_trx_commit=0).
int ShowLsnStatus(THD*, SHOW_VAR* var, void* buff, struct system_status_var*, enum enum_var_type) {
  DatabaseStats s;
  if (engine()) s = engine()->Stats();
  return ShowTwo(var, buff, "current", s.log_lsn, "flushed", s.log_durable_lsn);
}

// Subito_read_ahead_*: scans' reads of several pages at once
// (BufferPool::ReadAhead) and the pages they loaded.
int ShowReadAheadStatus(THD*, SHOW_VAR* var, void* buff, struct system_status_var*,
                        enum enum_var_type) {
  DatabaseStats s;
  if (engine()) s = engine()->Stats();
  return ShowTwo(var, buff, "reads", s.read_aheads, "pages", s.pages_read_ahead);
}

bool ShowEngineStatusText(THD* thd, stat_print_fn* print) {
  std::string text = engine()->Describe() + "\n";
  const DatabaseStats s = engine()->Stats();
  const RecoveryInfo& r = engine()->recovery();
  char line[512];
  snprintf(line, sizeof line,
           "commits %llu, rollbacks %llu, deadlocks %llu, lock waits %llu, lock timeouts %llu\n"
           "redo bytes persisted %llu (records %llu, padding %llu)\n"
           "double-write bytes %llu; page files: written %llu, read %llu bytes\n"
           "buffer pool: hits %llu, misses %llu; checkpoints %llu, checkpoint age %llu bytes\n"
           "versions kept for snapshots: %llu keys; undo relocations %llu, spills %llu\n"
           "prepares %llu; prepared transactions held %llu (XA RECOVER lists them)\n"
           "last start: %s, %llu redo records, %llu transactions rolled back, %llu kept "
           "prepared, %.3f s\n",
           (unsigned long long)s.commits, (unsigned long long)s.rollbacks,
           (unsigned long long)s.deadlocks, (unsigned long long)s.lock_waits,
           (unsigned long long)s.lock_timeouts, (unsigned long long)s.log_bytes,
           (unsigned long long)s.log_record_bytes, (unsigned long long)s.log_padding_bytes,
           (unsigned long long)s.double_write_bytes, (unsigned long long)s.page_file_bytes_written,
           (unsigned long long)s.page_file_bytes_read, (unsigned long long)s.buffer_hits,
           (unsigned long long)s.buffer_misses, (unsigned long long)s.checkpoints,
           (unsigned long long)s.checkpoint_age, (unsigned long long)s.version_keys,
           (unsigned long long)s.undo_relocations, (unsigned long long)s.undo_spills,
           (unsigned long long)s.prepares, (unsigned long long)s.prepared_held,
           r.created ? "created" : "recovered", (unsigned long long)r.records_redone,
           (unsigned long long)r.transactions_rolled_back,
           (unsigned long long)r.transactions_prepared, r.seconds);
  text += line;
  if (r.lazy_redo && r.pages_pending != 0) {
    if (s.recovery_background_seconds > 0) {
      snprintf(line, sizeof line,
               "lazy redo: %llu page(s) pending at the start, all redone %.3f s after it\n",
               (unsigned long long)r.pages_pending, s.recovery_background_seconds);
    } else {
      snprintf(line, sizeof line,
               "lazy redo: %llu page(s) pending at the start, %llu still pending, %llu redone\n",
               (unsigned long long)r.pages_pending, (unsigned long long)s.recovery_pages_pending,
               (unsigned long long)s.recovery_pages_redone);
    }
    text += line;
  }
  if (s.pool_loading) {
    snprintf(line, sizeof line, "buffer pool load: %llu of %llu listed page(s) loaded so far\n",
             (unsigned long long)s.pool_load_pages, (unsigned long long)s.pool_load_listed);
    text += line;
  } else if (s.pool_load_listed > 0) {
    snprintf(line, sizeof line, "buffer pool load: %llu of %llu listed page(s) loaded in %.3f s\n",
             (unsigned long long)s.pool_load_pages, (unsigned long long)s.pool_load_listed,
             s.pool_load_seconds);
    text += line;
  }
  snprintf(line, sizeof line, "page writes: %llu failed batches%s\n",
           (unsigned long long)s.page_write_failures,
           s.page_writes_failing ? ", FAILING NOW (retried until a write succeeds)" : "");
  text += line;
  snprintf(line, sizeof line,
           "old versions: %llu bytes (budget %llu), snapshots cut %llu; row locks: %llu bytes "
           "(budget %llu)\n",
           (unsigned long long)s.version_bytes, (unsigned long long)s.version_budget,
           (unsigned long long)s.snapshots_cut, (unsigned long long)s.lock_bytes,
           (unsigned long long)s.lock_budget);
  text += line;
  snprintf(line, sizeof line,
           "old snapshots moved to pages as of their moment: %llu (open %llu, cut %llu), "
           "holding %llu page copies and %llu recipes (old page + per-page logs, %llu rebuilt); "
           "with their overlays %llu bytes (%llu of them overlays)\n",
           (unsigned long long)s.snapshots_moved, (unsigned long long)s.moved_snapshots_open,
           (unsigned long long)s.moved_snapshots_cut, (unsigned long long)s.snapshot_pages,
           (unsigned long long)s.snapshot_page_recipes,
           (unsigned long long)s.snapshot_pages_rebuilt, (unsigned long long)s.snapshot_page_bytes,
           (unsigned long long)s.snapshot_overlay_bytes);
  text += line;
  snprintf(line, sizeof line,
           "per-page logs: %llu pages logged (%llu bytes), %llu written for want of room, %llu "
           "de-logged, %llu reclaimed in the background; blocks %llu of %llu in use\n",
           (unsigned long long)s.ppl_pages_logged, (unsigned long long)s.ppl_bytes,
           (unsigned long long)s.ppl_full, (unsigned long long)s.ppl_pages_delogged,
           (unsigned long long)s.ppl_reclaimed, (unsigned long long)s.ppl_blocks_used,
           (unsigned long long)s.ppl_blocks);
  text += line;
  text += s.writes_stopped ? "writes: STOPPED (" + s.stop_reason + "); restart the server\n"
                           : std::string("writes: accepted\n");
  snprintf(line, sizeof line, "file writes: %s; %llu backup pause(s) since start\n",
           s.file_writes_paused ? "PAUSED for a backup (BACKUP STAGE), until BACKUP STAGE END"
                                : "running",
           (unsigned long long)s.file_write_pauses);
  text += line;
  return print(thd, "SUBITO", 6, "", 0, text.data(), text.size());
}

}  // namespace

SHOW_VAR status_variables[] = {
    {"Subito", reinterpret_cast<char*>(&ShowStatus), SHOW_FUNC},
    {"Subito_backup", reinterpret_cast<char*>(&ShowBackupStatus), SHOW_FUNC},
    {"Subito_read_ahead", reinterpret_cast<char*>(&ShowReadAheadStatus), SHOW_FUNC},
    {"Subito_lsn", reinterpret_cast<char*>(&ShowLsnStatus), SHOW_FUNC},
    {NullS, NullS, SHOW_LONG}};

bool ShowEngineStatus(handlerton*, THD* thd, stat_print_fn* print, enum ha_stat_type type) {
  if (type != HA_ENGINE_STATUS || !engine()) return false;
  return GuardOr(thd, "SHOW ENGINE SUBITO STATUS", true,
                 [&] { return ShowEngineStatusText(thd, print); });
}

}  // namespace subito::mariadb
