// What DatabaseImpl reports: its counters, each table's, its set-up in
// words, and its notes and errors to the host's logs.
#include <cstdio>

#include "engine/engine_impl.h"
#include "util/strings.h"

namespace subito::engine {

std::vector<TableStats> DatabaseImpl::AllTableStats() const {
  std::shared_lock ddl(ddl_mu_);
  std::vector<TableStats> all;
  all.reserve(tables_.size());
  for (const auto& [n, t] : tables_) {
    if (!t->def().temporary) all.push_back(t->Stats());
  }
  return all;
}

void DatabaseImpl::ResetIoStats() {
  std::shared_lock ddl(ddl_mu_);
  for (const auto& [n, t] : tables_) t->ResetIoStats();
}

DatabaseStats DatabaseImpl::Stats() const {
  DatabaseStats s;
  s.commits = commits.value();
  s.rollbacks = rollbacks.value();
  s.prepares = prepares.load();
  {
    std::lock_guard lock(prepared_mu_);
    s.prepared_held = prepared_held_.size();
  }
  s.undo_relocations = relocations.load();
  s.undo_spills = undo_spills.load();
  s.bulk_built_entries = bulk_built_entries.load();
  s.bulk_inserts = bulk_inserts.load();
  s.sort_runs = sort_runs.load();
  const txn::LockStats ls = locks_.stats();
  s.deadlocks = ls.deadlocks;
  s.lock_waits = ls.waits;
  s.lock_timeouts = ls.timeouts;
  s.lock_bytes = ls.memory_bytes;
  s.lock_budget = ls.memory_budget;
  const log::LogStats log_stats = log_->stats();
  s.log_bytes = log_stats.persisted_bytes;
  s.log_record_bytes = log_stats.append_bytes;
  s.log_padding_bytes = log_stats.padding_bytes;
  s.log_durable_lsn = log_->durable_lsn();  // first: never above log_lsn
  s.log_lsn = log_->reserved_lsn();
  const buffer::BufferPoolStats ps = pool_->stats();
  s.double_write_bytes = ps.pages_written * catalog_.page_size;
  s.buffer_hits = ps.hits;
  s.buffer_misses = ps.misses;
  s.read_aheads = ps.read_aheads;
  s.pages_read_ahead = ps.pages_read_ahead;
  s.checkpoints = ps.checkpoints;
  s.checkpoint_age = pool_->CheckpointAge();
  s.recovery_pages_pending = pool_->pending_redo().pages();
  s.recovery_losers_pending = losers_pending_.load();
  s.recovery_pages_redone = pool_->lazy_pages_redone();
  s.recovery_background_seconds = LazyRedoSeconds();
  if (warmer_) {
    const buffer::PoolWarmerStats w = warmer_->stats();
    s.pool_load_listed = w.listed;
    s.pool_load_pages = w.loaded;
    s.pool_dumps = w.dumps;
    s.pool_loading = w.loading;
    s.pool_load_seconds = w.load_seconds;
  }
  s.page_write_failures = ps.write_failures;
  s.ppl_pages_logged = ps.pages_logged;
  s.ppl_bytes = ps.page_log_bytes;
  s.ppl_full = ps.page_log_full;
  s.ppl_pages_delogged = ps.pages_delogged;
  s.ppl_reclaimed = ps.page_log_reclaimed;
  if (ppl_) {
    const ppl::PplStats r = ppl_->stats();
    s.ppl_blocks_used = r.blocks_used;
    s.ppl_blocks = r.blocks;
  }
  s.page_writes_failing = ps.writes_failing;
  s.file_writes_paused = ps.file_writes_paused;
  s.file_write_pauses = ps.file_write_pauses;
  if (writes_stopped_.load() || log_->failed()) {
    s.writes_stopped = true;
    std::lock_guard lock(stop_mu_);
    s.stop_reason = writes_stopped_.load() ? stop_reason_ : "the redo log failed";
  }
  const DescriptorStats fd = fs_->descriptors();
  s.open_files = fd.open;
  s.open_files_limit = fd.limit;
  s.file_closes = fd.closes;
  s.file_reopens = fd.opens;
  s.open_file_waits = fd.waits;
  s.page_files_cached_by_os = fs_->cached_files();
  s.purge_backlog = txns_ ? txns_->purge_backlog() : 0;
  s.version_bytes = static_cast<uint64_t>(std::max<int64_t>(0, version_budget_->bytes.load()));
  s.version_budget = version_budget_->limit;
  s.snapshots_cut = version_budget_->snapshots_cut.load();
  s.snapshots_moved = version_budget_->snapshots_moved.load();
  if (txns_) {
    s.moved_snapshots_open = txns_->moved_snapshots();
    s.snapshot_overlay_bytes = txns_->overlay_bytes();
  }
  if (pool_) {
    const buffer::PageVersions::Stats pv = pool_->versions().stats();
    s.snapshot_pages = pv.images;
    s.snapshot_page_bytes = pv.bytes;
    s.moved_snapshots_cut = pv.epochs_cut;
    s.snapshot_page_recipes = pv.recipes;
    s.snapshot_pages_rebuilt = pv.rebuilt + pv.rebuilt_before_write;
    s.moved_snapshots_unbuildable = pv.epochs_unbuildable;
  }
  s.chain_release_failures = txns_ ? txns_->chain_release_failures() : 0;
  std::shared_lock ddl(ddl_mu_);
  s.page_file_bytes_written = dropped_io_.bytes_written;
  s.page_file_bytes_read = dropped_io_.bytes_read;
  for (const auto& [n, t] : tables_) {
    for (const auto& ix : t->indexes) {
      const page::SpaceIoStats io = ix->file->stats();
      s.page_file_bytes_written += io.bytes_written;
      s.page_file_bytes_read += io.bytes_read;
      s.version_keys += ix->versions->keys();
      s.versions_examined += ix->versions->versions_examined();
      if (ix->tree && ix->tree->garbage_hint()) ++s.garbage_indexes;
    }
  }
  return s;
}

void DatabaseImpl::Note(const std::string& message) const {
  if (options_.info_log) {
    options_.info_log(message);
  } else {
    std::fprintf(stderr, "subito: %s\n", message.c_str());
  }
}

void DatabaseImpl::Report(const std::string& message) const {
  if (options_.error_log) {
    options_.error_log(message);
  } else {
    std::fprintf(stderr, "subito: %s\n", message.c_str());
  }
}

std::string DatabaseImpl::PageFileCaching() const {
  if (!options_.direct_io) return "through the OS page cache (direct_io off)";
  const uint64_t cached = fs_->cached_files();
  if (cached == 0) return "O_DIRECT (the buffer pool is their only cache)";
  return StrFormat(
      "O_DIRECT asked, yet the OS caches %llu of them (a file system in memory, "
      "or one without O_DIRECT)",
      static_cast<unsigned long long>(cached));
}

std::string DatabaseImpl::Describe() const {
  return log_->Describe() + "\ndouble-write: " +
         (options_.double_write_on_pm ? "PM tier, " + options_.pm_dir + "/doublewrite"
                                      : "file " + options_.dir + "/doublewrite") +
         StrFormat("\npages: %u bytes, buffer pool %llu MiB", catalog_.page_size,
                   static_cast<unsigned long long>(options_.buffer_pool_bytes >> 20)) +
         "\npage files: " + PageFileCaching() +
         (ppl_ ? "\n" + ppl_->Describe() + StrFormat(", threshold %u bytes", PplThreshold())
               : std::string("\nper-page logs: off"));
}

}  // namespace subito::engine
