// DatabaseImpl: open (catalog, PM tier, logs, recovery), the background
// loops (lazy redo, purge), close, the table map and the stop on a fault.
// DDL is in ddl.cc, the counters and descriptions in database_stats.cc.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "btree/builder.h"
#include "btree/key_encoding.h"
#include "engine/engine_impl.h"
#include "engine/row_codec.h"
#include "engine/transaction_impl.h"
#include "recovery/txn_recovery.h"
#include "util/strings.h"
#include "util/thread_name.h"

namespace subito {

Result<std::unique_ptr<Database>> Database::Open(const Options& options) {
  return engine::DatabaseImpl::Open(options);
}

namespace engine {
namespace {

std::string DefaultPmDir(const std::string& dir) {
  std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  for (char& c : abs) {
    if (c == '/') c = '_';
  }
  return "/dev/shm/subito/" + abs;
}

// The PM tier holds the redo log and the double-write area: another user
// who can write to its directory (or to one above it) could replace them.
// Missing directories are created 0700. The directory and every one above
// it must belong to this user or root and be writable by no one else,
// except sticky directories of root's (/dev/shm, /tmp), where others can
// create entries but not replace ours.
Status PreparePrivateDir(const std::string& dir) {
  const std::filesystem::path path = std::filesystem::absolute(dir).lexically_normal();
  SUBITO_RETURN_IF_ERROR(CreatePrivateDirectories(dir));
  const uid_t me = ::geteuid();
  for (std::filesystem::path d = path;; d = d.parent_path()) {
    struct stat st {};
    if (::lstat(d.c_str(), &st) != 0) {
      return StatusFromErrno(errno, "cannot stat", d.string());
    }
    if (S_ISLNK(st.st_mode)) {
      if (d == path) {
        return Status::InvalidArgument("PM directory " + d.string() +
                                       " is a symbolic link: name the directory itself");
      }
      // A link above it: it and what it points to must pass the same test.
      if (st.st_uid != me && st.st_uid != 0) {
        return Status::InvalidArgument(StrFormat(
            "PM directory %s: the link %s belongs to user %u, not to this server's user %u",
            path.c_str(), d.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(me)));
      }
      if (::stat(d.c_str(), &st) != 0) {
        return StatusFromErrno(errno, "cannot stat", d.string());
      }
    }
    if (st.st_uid != me && st.st_uid != 0) {
      return Status::InvalidArgument(StrFormat(
          "PM directory %s: %s belongs to user %u, not to this server's user %u; "
          "refusing to keep the redo log there (set subito_pm_dir to a directory of yours)",
          path.c_str(), d.c_str(), static_cast<unsigned>(st.st_uid), static_cast<unsigned>(me)));
    }
    const bool sticky_root = (st.st_mode & S_ISVTX) != 0 && st.st_uid == 0;
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && !(sticky_root && d != path)) {
      return Status::InvalidArgument(
          StrFormat("PM directory %s: %s is writable by other users (mode %04o); refusing to keep "
                    "the redo log there (chmod go-w, or set subito_pm_dir elsewhere)",
                    path.c_str(), d.c_str(), static_cast<unsigned>(st.st_mode & 07777)));
    }
    if (d == d.parent_path()) break;
  }
  return Status::OK();
}

}  // namespace

// ---- DatabaseImpl: open, recovery, close ----

Result<std::unique_ptr<Database>> DatabaseImpl::Open(const Options& options) {
  if (options.dir.empty()) return Status::InvalidArgument("Options.dir is empty");
  const uint32_t ps = options.page_size;
  if (ps != 4096 && ps != 8192 && ps != 16384) {
    return Status::InvalidArgument(StrFormat("page_size %u: use 4096, 8192 or 16384", ps));
  }
  if (options.double_write_pages < 4 || options.double_write_pages > 4096) {
    return Status::InvalidArgument("double_write_pages must be 4..4096");
  }
  std::unique_ptr<DatabaseImpl> db(new DatabaseImpl(options));
  if (db->options_.pm_dir.empty()) db->options_.pm_dir = DefaultPmDir(options.dir);
  const auto start = std::chrono::steady_clock::now();
  Status st = db->OpenAll();
  if (!st.ok()) {
    db->closed_ = true;  // nothing to flush: the state on disk is what recovery left
    return st;
  }
  db->recovery_.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // What recovery read and redid is not the tables' own work.
  db->ResetIoStats();
  return std::unique_ptr<Database>(std::move(db));
}

Status DatabaseImpl::OpenAll() {
  auto since = std::chrono::steady_clock::now();
  auto phase = [this, &since](const char* name) {
    const auto now = std::chrono::steady_clock::now();
    recovery_.phases.emplace_back(name, std::chrono::duration<double>(now - since).count());
    since = now;
  };
  locks_.SetMemoryBudget(options_.lock_memory_budget_bytes);
  if (!options_.file_system) {
    own_fs_ = NewPosixFileSystem(options_.direct_io, options_.max_open_files);
  }
  fs_ = options_.file_system ? options_.file_system : own_fs_.get();
  meta_fs_ = options_.meta_file_system ? options_.meta_file_system
             : options_.file_system    ? options_.file_system
                                       : PosixFileSystem(false);
  if (!options_.file_system) SUBITO_RETURN_IF_ERROR(CreatePrivateDirectories(options_.dir));
  SUBITO_RETURN_IF_ERROR(PreparePrivateDir(options_.pm_dir));

  Result<std::optional<Catalog>> cat = ReadCatalog(meta_fs_, options_.dir);
  if (!cat.ok()) return cat.status();
  if (*cat) {
    catalog_ = std::move(**cat);
  } else {
    if (!options_.create_if_missing) {
      return Status::NotFound("no Subito database in " + options_.dir);
    }
    catalog_.page_size = options_.page_size;
    recovery_.created = true;
    SUBITO_RETURN_IF_ERROR(WriteCatalog(meta_fs_, options_.dir, catalog_));
  }
  const uint32_t ps = catalog_.page_size;
  options_.page_size = ps;  // a database keeps the page size it was created with

  log::LogOptions lo;
  lo.dir = options_.pm_dir + "/log";
  Result<log::LogWriteMode> mode = log::ParseLogWriteMode(options_.log_write_mode);
  if (!mode.ok()) return mode.status();
  lo.write_mode = *mode;
  lo.streams = options_.log_streams;
  lo.file_size = options_.log_file_size;
  lo.buffer_size = options_.log_buffer_size;
  lo.write_ahead_size = options_.log_write_ahead_size;
  lo.persistence = options_.persistence;
  lo.file_system = options_.log_file_system;
  lo.full_timeout_ms = options_.log_full_timeout_ms;
  lo.defer_prefault = true;  // after recovery (end of OpenAll)
  lo.on_log_full = [this] {
    if (buffer::BufferPool* p = pool_for_log_.load()) p->OnLogFull();
  };
  if (recovery_.created && PosixFileSystem()->Exists(lo.dir + "/log.0")) {
    return Status::InvalidArgument("PM directory " + options_.pm_dir + " holds a log, but " +
                                   options_.dir + " holds no database: refusing to mix them");
  }
  if (catalog_.in_use && !PosixFileSystem()->Exists(lo.dir + "/log.0")) {
    return Status::Corruption(
        "the database in " + options_.dir + " was not shut down cleanly, and its PM tier (" +
        options_.pm_dir +
        ") holds no redo log: the log was lost (a reboot clears /dev/shm), "
        "so committed transactions may be missing. Refusing to open; restore from a backup "
        "or point pm_dir at the log");
  }
  lo.expected_salt = catalog_.log_salt;
  // K8. A catalog written before the floor was kept (version 3 or older)
  // has none: a log made for it starts far above any LSN its old logs
  // reached (2^48 bytes of redo). If it was shut down cleanly, its log may
  // be one an earlier start made at the first LSN after the PM tier was
  // cleared, behind its pages: not needed (K3), it is replaced, with the
  // per-page log region it salted (empty after a clean shutdown).
  const bool no_floor = !recovery_.created && catalog_.lsn_floor == 0;
  lo.first_lsn = no_floor ? uint64_t{1} << 48 : catalog_.lsn_floor;
  if (no_floor && !catalog_.in_use && options_.log_file_system == nullptr) {
    lo.replace = true;
    std::error_code ec;
    std::filesystem::remove(options_.pm_dir + "/ppl", ec);
  }
  // K5: the salt of a log about to be made reaches the catalog first (under
  // the log's lock, so a start that loses the race for it writes nothing):
  // no failure or power cut leaves a log every later start refuses, and a
  // catalog naming a log that was never made is harmless (none is there).
  lo.on_create = [this](uint64_t salt) {
    catalog_.log_salt = salt;
    return Persist();
  };
  Result<std::unique_ptr<log::RedoLog>> l = log::RedoLog::Open(lo);
  if (!l.ok()) return l.status();
  log_ = std::move(*l);
  // Under the log's lock: no other process uses this directory.
  if (!options_.file_system) ExternalSorter::RemoveStaleRuns(options_.dir);
  // K3 from here: recovery and the page cleaners may put changes in pages
  // that only this log explains, so a start that fails after this point
  // leaves the database in use (its log needed, or a new one refused).
  if (catalog_.log_salt != log_->salt() || !catalog_.in_use) {  // version 1 names no log
    catalog_.log_salt = log_->salt();
    catalog_.in_use = true;
    SUBITO_RETURN_IF_ERROR(Persist());
  }
  phase("log");

  Result<std::unique_ptr<buffer::DoubleWrite>> d =
      options_.double_write_on_pm
          ? buffer::DoubleWrite::OpenPm(options_.pm_dir + "/doublewrite", ps,
                                        options_.double_write_pages, options_.persistence)
          : buffer::DoubleWrite::OpenFile(meta_fs_, options_.dir + "/doublewrite", ps,
                                          options_.double_write_pages);
  if (!d.ok()) return d.status();
  dwb_ = std::move(*d);
  phase("double-write");

  // A region left by an earlier run is opened whatever the setting: its
  // entries hold changes the checkpoint has passed. With ppl_bytes 0 it is
  // only read (threshold 0: nothing is appended) and emptied at Close; an
  // empty one takes the current size and threshold (or is removed).
  {
    ppl::PplOptions pp;
    pp.path = options_.pm_dir + "/ppl";
    pp.size = options_.ppl_bytes;
    pp.block_size = ppl::PplRegion::BlockSizeFor(options_.ppl_threshold);
    pp.salt = catalog_.log_salt;
    pp.persistence = options_.persistence;
    bool kept = false;
    Result<std::unique_ptr<ppl::PplRegion>> r = ppl::PplRegion::OpenResizing(pp, &kept);
    if (!r.ok()) return r.status();
    ppl_ = std::move(*r);
    if (kept) {
      Report(ppl_->Describe() +
             ": holds pages' entries, so it keeps its size and block size until a clean "
             "shutdown has written them back");
    }
  }
  phase("per-page logs");

  buffer::BufferPoolOptions po;
  po.capacity_bytes = options_.buffer_pool_bytes;
  po.page_size = ps;
  po.flush_batch = std::min<uint32_t>(32, options_.double_write_pages);
  po.cleaner_threads = options_.page_cleaners;
  po.max_checkpoint_age = options_.max_checkpoint_age_bytes;
  po.log_full_timeout_ms = options_.log_full_timeout_ms;
  po.page_version_limit = options_.snapshot_page_budget_bytes;
  po.report = [this](const std::string& m) { Report(m); };
  po.checkpoint_held = true;  // until Recover holds it
  if (ppl_) {
    po.page_log = ppl_.get();
    po.page_log_threshold = PplThreshold();
  }
  Result<std::unique_ptr<buffer::BufferPool>> p =
      buffer::BufferPool::Create(po, log_.get(), dwb_.get());
  if (!p.ok()) return p.status();
  pool_ = std::move(*p);
  pool_for_log_.store(pool_.get());
  pool_->SetLogRelief([this] { RelieveLog(); });

  SUBITO_RETURN_IF_ERROR(FinishInterruptedDdl());
  for (CatalogTable& ct : catalog_.tables) {
    auto t = std::make_unique<TableImpl>(this, ct);
    for (const CatalogIndex& ci : ct.indexes) {
      SUBITO_RETURN_IF_ERROR(OpenIndex(t.get(), ci, /*create=*/false));
    }
    t->RebuildDef();
    tables_.emplace(ct.def.name, std::move(t));
  }

  if (ppl_) {
    // Entries of spaces no table uses any more (a DROP cut short by a crash,
    // finished above) are freed.
    for (const auto& [space, page_no] : ppl_->LoggedPages()) {
      if (pool_->Space(space) == nullptr) ppl_->FreeSpace(space);
    }
  }

  phase("tables");
  Result<recovery::RecoveryStats> rs = recovery::Recover(
      pool_.get(), dwb_.get(), [this](const txn::UndoRecord& u) { return ApplyUndo(u); },
      [this](uint32_t space) { return IsDroppedSpace(space); }, {fs_, options_.dir},
      options_.lazy_recovery, options_.background_undo);
  // A failed recovery keeps the pool's start hold: until the pool is gone
  // its cleaners neither write nor move the checkpoint past redo not done.
  if (!rs.ok()) return rs.status();
  recovery_.phases.emplace_back("pass over the log", rs->pass_seconds);
  recovery_.phases.emplace_back("losers' undo collected", rs->collect_seconds);
  recovery_.phases.emplace_back("losers undone", rs->undo_seconds);
  since = std::chrono::steady_clock::now();
  // Every loser is undone: the undo files left are those of transactions
  // whose end was durable before they were removed, and of those kept
  // prepared.
  if (!options_.file_system) {
    std::vector<std::string> keep;
    for (const recovery::RecoveredPrepared& p : rs->prepared) keep.push_back(p.file->path());
    txn::UndoFile::RemoveAll(options_.dir, keep);
  }
  recovery_.pages_repaired = rs->pages.pages_repaired;
  recovery_.records_redone = rs->pages.records_redone;
  recovery_.lazy_redo = options_.lazy_recovery;
  recovery_.transactions_rolled_back = rs->losers + rs->losers_kept;
  recovery_.losers_in_background = rs->losers_kept;
  recovery_.transactions_prepared = rs->prepared.size() - rs->losers_kept;
  recovery_.undo_applied = rs->undo_applied;
  recovery_.losers_with_undo_files = rs->losers_with_undo_files;
  recovery_.undo_file_entries = rs->undo_file_entries;
  for (auto& [name, t] : tables_) {
    for (auto& ix : t->indexes) {
      if (!ix->tree) {
        Result<std::unique_ptr<btree::BTree>> tree = btree::BTree::Open(pool_.get(), ix->space());
        if (!tree.ok()) return tree.status();
        ix->tree = std::move(*tree);
      }
      ix->versions->AttachTree(ix->tree.get());
    }
  }
  phase("trees");
  txns_ = std::make_unique<txn::TxnSystem>(rs->max_txn + 1, version_budget_);
  // Before any transaction can begin: their keys locked, their versions back.
  SUBITO_RETURN_IF_ERROR(ResurrectPrepared(std::move(rs->prepared)));
  phase("losers and prepared rebuilt");
  for (auto& [name, t] : tables_) {
    for (auto& ix : t->indexes) {
      // No snapshot survives, every loser is undone: chains still retired
      // or half built are garbage (btree.h C4), freed by the purge thread,
      // but for those a prepared transaction's undo names.
      std::set<std::string> found;
      SUBITO_RETURN_IF_ERROR(ix->tree->RecoverChains(KeptChains(ix->versions.get()), &found));
      KeepRetiredFound(ix->versions.get(), found);
    }
  }
  if (options_.snapshot_page_budget_bytes != 0) txns_->EnableAsOf(pool_.get());
  phase("chains");
  recovery_.pages_pending = pool_->pending_redo().pages();  // before the purge reads any
  purge_thread_ = std::thread([this] {
    NameThisThread("subito_purge");
    PurgeLoop();
  });
  flush_thread_ = std::thread([this] {
    NameThisThread("subito_flush");
    FlushLoop();
  });
  opened_at_ = std::chrono::steady_clock::now();
  if (!pool_->lazy_redo_done() && options_.background_redo) {
    redo_thread_ = std::thread([this] {
      NameThisThread("subito_redo");
      RedoLoop();
    });
  }
  if (losers_pending_.load() > 0) {
    undo_thread_ = std::thread([this] {
      NameThisThread("subito_undo");
      UndoLoop();
    });
  }
  if (options_.pool_load_at_open || options_.pool_dump) {
    buffer::PoolWarmerOptions wo;
    wo.path = options_.dir + "/pool_pages";
    wo.load = options_.pool_load_at_open;
    wo.dump_interval_seconds = options_.pool_dump ? options_.pool_dump_interval_seconds : 0;
    wo.note = [this](const std::string& m) { Note(m); };
    warmer_ = std::make_unique<buffer::PoolWarmer>(pool_.get(), meta_fs_, std::move(wo));
    warmer_->Start();
  }
  log_->StartPrefault();
  return Status::OK();
}

void DatabaseImpl::RedoLoop() {
  uint64_t drained = 0;
  bool reported = false;
  for (int wait_ms = 10;; wait_ms = std::min(wait_ms * 2, 1000)) {
    Result<uint64_t> r = pool_->DrainPendingRedo(0);
    if (r.ok()) {
      drained += *r;
      break;
    }
    // A page that cannot be read now (no free frame, an I/O error): the
    // pages left get their records when read; the checkpoint stays held
    // until every one has them, and Close does not mark a shutdown clean
    // before. Try again, less and less often.
    if (!reported) {
      Report(StrFormat("background redo: %llu page(s) still pending, trying again: %s",
                       static_cast<unsigned long long>(pool_->pending_redo().pages()),
                       r.status().ToString().c_str()));
      reported = true;
    }
    for (int slept = 0; slept < wait_ms; slept += 10) {
      if (redo_stop_.load()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  Note(StrFormat(
      "background redo finished %.3f s after the open: of %llu page(s) left with redo, %llu "
      "were read by the background thread, the others by queries",
      LazyRedoSeconds(), static_cast<unsigned long long>(recovery_.pages_pending),
      static_cast<unsigned long long>(drained)));
}

double DatabaseImpl::LazyRedoSeconds() const {
  if (!pool_->lazy_redo_done()) return 0;
  const auto done = pool_->lazy_redo_done_at();
  return std::max(1e-6, std::chrono::duration<double>(done - opened_at_).count());
}

// K2: entries whose DDL did not finish lose their files and leave; K6:
// temporary tables too (before recovery: their pages are never redone, and
// undo of their rows finds no table).
Status DatabaseImpl::FinishInterruptedDdl() {
  bool changed = false;
  for (auto t = catalog_.tables.begin(); t != catalog_.tables.end();) {
    const std::string dir = TableDir(t->def);
    for (auto i = t->indexes.begin(); i != t->indexes.end();) {
      if (t->state == DefState::kLive && i->state == DefState::kLive && !t->def.temporary) {
        ++i;
        continue;
      }
      SUBITO_RETURN_IF_ERROR(fs_->Remove(SpacePath(dir, t->id, i->def.name, i->space_id)));
      SUBITO_RETURN_IF_ERROR(fs_->Remove(SpacePath(dir, t->id, i->def.name, i->space_id) + ".tmp"));
      i = t->indexes.erase(i);
      changed = true;
    }
    if (t->state != DefState::kLive || t->indexes.empty()) {
      t = catalog_.tables.erase(t);
      changed = true;
    } else {
      ++t;
    }
  }
  return changed ? Persist() : Status::OK();
}

std::string DatabaseImpl::TableDir(const TableDef& def) const {
  return def.data_dir.empty() ? options_.dir : def.data_dir;
}

Status DatabaseImpl::Persist() {
  return WriteCatalog(meta_fs_, options_.dir, catalog_);
}

Status DatabaseImpl::OpenIndex(TableImpl* t, const CatalogIndex& ci, bool create) {
  auto ix = std::make_unique<IndexImpl>();
  ix->versions = std::make_shared<txn::VersionStore>(version_budget_);
  ix->number = static_cast<uint32_t>(t->indexes.size());
  ix->cat = ci;
  ix->path = SpacePath(TableDir(t->cat.def), t->cat.id, ci.def.name, ci.space_id);
  Result<std::unique_ptr<page::SpaceFile>> f =
      create ? page::SpaceFile::Create(fs_, ix->path, ci.space_id, catalog_.page_size,
                                       t->cat.def.name + "." + ci.def.name)
             : page::SpaceFile::Open(fs_, ix->path);
  if (!f.ok()) {
    if (!create && !fs_->Exists(ix->path)) {
      return Status::Corruption("the catalog names " + ix->path + ", which is missing");
    }
    return f.status();
  }
  ix->file = std::move(*f);
  ix->pages_base = ix->file->page_count();
  if (ix->file->space_id() != ci.space_id) {
    return Status::Corruption(StrFormat("%s holds space %u, the catalog expects %u",
                                        ix->path.c_str(), ix->file->space_id(), ci.space_id));
  }
  SUBITO_RETURN_IF_ERROR(pool_->AddSpace(ix->file.get()));
  if (create) {
    Result<std::unique_ptr<btree::BTree>> tree = btree::BTree::Create(pool_.get(), ci.space_id);
    if (!tree.ok()) {
      (void)pool_->DropSpace(ci.space_id);  // its file goes with ix: no fetch may find it
      return tree.status();
    }
    ix->tree = std::move(*tree);
    ix->versions->AttachTree(ix->tree.get());
  }
  by_space_[ci.space_id] = ix.get();
  t->indexes.push_back(std::move(ix));
  return Status::OK();
}

bool DatabaseImpl::IsDroppedSpace(uint32_t space) const {
  return space < catalog_.next_space_id && by_space_.count(space) == 0;
}

Status DatabaseImpl::ApplyUndo(const txn::UndoRecord& u) {
  auto it = by_space_.find(u.space);
  if (it == by_space_.end()) {
    return Status::Corruption(StrFormat("undo record names unknown space %u", u.space));
  }
  IndexImpl* ix = it->second;
  if (!ix->tree) {
    Result<std::unique_ptr<btree::BTree>> tree = btree::BTree::Open(pool_.get(), ix->space());
    if (!tree.ok()) return tree.status();
    ix->tree = std::move(*tree);
  }
  // Chains taken out of leaves are retired, not freed: an older undo record
  // of the same loser may restore them (btree.h C3); RecoverChains frees
  // what stays retired.
  if (u.empties) return ix->tree->ResetToEmpty();  // a bulk insert's mark
  btree::BTree::ChainMoves moves;
  if (!u.before) return ix->tree->Delete(u.key, &moves).status();
  if (u.before_chain) return ix->tree->Restore(u.key, *u.before, &moves);
  return ix->tree->Put(u.key, *u.before, &moves);
}

void DatabaseImpl::RelieveLog() {
  // Commits that did not wait hold the checkpoint until they are durable.
  (void)FlushLazyCommits();
  // One relocation per call: each needs log space, and the caller checks
  // again whether the checkpoint could move.
  std::lock_guard lock(owners_mu_);
  for (UndoOwner* t : owners_) {
    if (t->RelieveLog(log_->capacity() / 4)) return;
  }
}

void DatabaseImpl::CollectGarbage(const std::function<bool()>& enough) {
  std::vector<std::shared_ptr<txn::VersionStore>> work;
  {
    std::shared_lock ddl(ddl_mu_);
    for (const auto& [n, t] : tables_) {
      for (const auto& ix : t->indexes) {
        if (ix->tree && ix->tree->garbage_hint()) work.push_back(ix->versions);
      }
    }
  }
  for (const auto& store : work) {
    if (enough()) return;
    (void)store->CollectGarbage(enough);  // a failure is retried next time
  }
}

void DatabaseImpl::StopPurge() {
  purge_stopping_.store(true);
  {
    std::lock_guard lock(purge_mu_);
    purge_stop_ = true;
  }
  purge_cv_.notify_all();
  if (purge_thread_.joinable()) purge_thread_.join();
  WakeFlusher();
  if (flush_thread_.joinable()) flush_thread_.join();
}

std::optional<uint64_t> DatabaseImpl::MergeLazy(LazyEnds&& from) {
  lazy_.end = std::max(lazy_.end, from.end);
  lazy_.lockers.insert(lazy_.lockers.end(), from.lockers.begin(), from.lockers.end());
  lazy_pending_.store(true, std::memory_order_release);
  if (!lazy_.pin || (from.pin && *from.pin < *lazy_.pin)) std::swap(lazy_.pin, from.pin);
  return from.pin;  // the newer of the two, if both had one
}

void DatabaseImpl::DeferEnd(log::Lsn end, uint64_t pin, uint64_t txn, bool locks) {
  LazyEnds one{end, pin, {}};
  if (locks) one.lockers.push_back(txn);
  std::optional<uint64_t> release;
  {
    std::lock_guard lock(lazy_mu_);
    release = MergeLazy(std::move(one));
  }
  if (release) pool_->EndChange(*release);
  WakeFlusher();
}

bool DatabaseImpl::FlushLazyCommits() {
  if (!lazy_pending_.load(std::memory_order_acquire)) return true;
  LazyEnds group;
  {
    std::lock_guard lock(lazy_mu_);
    group = std::move(lazy_);
    lazy_ = LazyEnds{};
    lazy_pending_.store(false, std::memory_order_release);
  }
  if (!group.pin) return true;
  // Up to the group's end: an append below it still filling finishes soon
  // (it cannot wait for log space: the group's own records, later, found
  // it). A failed log fails every write from then on (Writable): the
  // group stays, its pin holding the checkpoint.
  if (!log_->WaitDurable(group.end).ok()) {
    std::optional<uint64_t> release;
    {
      std::lock_guard lock(lazy_mu_);
      release = MergeLazy(std::move(group));
    }
    if (release) pool_->EndChange(*release);
    return false;
  }
  pool_->EndChange(*group.pin);
  for (uint64_t txn : group.lockers) locks_.ReleaseAll(txn);
  return true;
}

void DatabaseImpl::WakeFlusher() {
  {
    std::lock_guard lock(flush_mu_);
    flush_wanted_ = true;
  }
  flush_cv_.notify_one();
}

void DatabaseImpl::FlushLoop() {
  std::unique_lock lock(flush_mu_);
  while (!purge_stopping_.load()) {
    flush_cv_.wait(lock, [&] { return flush_wanted_; });
    flush_wanted_ = false;
    lock.unlock();
    (void)FlushLazyCommits();
    lock.lock();
  }
}

void DatabaseImpl::PurgeLoop() {
  std::unique_lock lock(purge_mu_);
  for (uint64_t round = 0; !purge_stop_; ++round) {
    purge_cv_.wait_for(lock, std::chrono::milliseconds(10));
    lock.unlock();
    // Freeing garbage (gigabytes after a crash, or a long value's old
    // chain) takes turns with purging: at most 200 ms per round, and none
    // once Close has begun (what is left is freed later, or after a start).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    const auto enough = [&] {
      return purge_stopping_.load(std::memory_order_relaxed) ||
             std::chrono::steady_clock::now() > until;
    };
    txns_->Purge(enough);
    if (round % 100 == 0) CollectGarbage(enough);
    lock.lock();
  }
}

void DatabaseImpl::PauseFileWrites() {
  std::lock_guard lock(pause_mu_);
  if (closed_ || pool_ == nullptr || pool_->stats().file_writes_paused) return;
  pool_->PauseFileWrites();
  Note(
      "file writes paused for a backup: the page files, the double-write area, the per-page "
      "log region and undo files stay as they are, and the checkpoint at LSN " +
      std::to_string(log_->checkpoint_lsn()) + ", until the backup ends");
}

void DatabaseImpl::ResumeFileWrites() {
  std::lock_guard lock(pause_mu_);
  if (pool_ == nullptr || !pool_->stats().file_writes_paused) return;
  pool_->ResumeFileWrites();
  Note("file writes resumed after the backup");
}

Status DatabaseImpl::Close() {
  {
    std::lock_guard lock(pause_mu_);  // no backup pauses writes after this
    if (closed_) return Status::OK();
    closed_ = true;
  }
  // The warm-up's load ends before its next read rather than after the
  // losers' rollback and the purge (which may wait for pages it loads).
  if (warmer_) warmer_->RequestStop();
  ResumeFileWrites();
  // The losers are rolled back first: a clean shutdown leaves none.
  if (undo_thread_.joinable()) undo_thread_.join();
  StopPurge();
  (void)FlushLazyCommits();  // their pins go: the checkpoint may pass them
  if (warmer_) {
    warmer_->Stop();
    // A load cut short leaves the list it was loading, the better one.
    if (options_.pool_dump && !warmer_->stats().load_cut_short) {
      if (Status d = warmer_->Dump(); !d.ok()) {
        Report("buffer pool page list not written at shutdown: " + d.ToString());
      }
    }
  }
  // The trees' key counts, kept in memory, go to their headers: exact
  // after a clean shutdown (a statistic: a failure here fails nothing).
  if (!writes_stopped_.load()) {
    std::shared_lock ddl(ddl_mu_);
    for (auto& [n, t] : tables_) {
      for (auto& ix : t->indexes) {
        if (ix->tree) (void)ix->tree->PersistEntries();
      }
    }
  }
  // Every page must hold its redo before the shutdown may count as clean:
  // the next start may find the PM tier, and so the log, gone.
  redo_stop_.store(true);
  if (redo_thread_.joinable()) redo_thread_.join();
  Status redo = pool_ ? pool_->DrainPendingRedo(0).status() : Status::OK();
  if (redo.ok() && pool_ && !pool_->lazy_redo_done()) {
    redo = Status::IOError("pages with pending redo are left");
  }
  // Per-page logs live on the PM tier, which a reboot clears when it is
  // emulated (tmpfs): a clean shutdown writes every page that has them.
  // A page that cannot be read keeps the shutdown from being clean, not the
  // other pages from being written: the next start has less to redo.
  Status st = redo;
  if (pool_ && ppl_) {
    Status w = pool_->WriteLoggedPages();
    if (st.ok()) st = std::move(w);
  }
  if (pool_) {
    Status f = pool_->FlushAll();
    if (st.ok()) st = std::move(f);
  }
  if (log_) {
    Status c = log_->Close();
    if (st.ok()) st = c;
  }
  bool open_transactions;
  {
    std::lock_guard lock(owners_mu_);
    open_transactions = !owners_.empty();
  }
  // With transactions still open, or one whose rollback failed, the log is
  // needed (recovery rolls them back): the database stays marked in use.
  if (st.ok() && catalog_.in_use && !open_transactions && !writes_stopped_.load()) {
    std::unique_lock ddl(ddl_mu_);
    catalog_.in_use = false;                              // K3: a clean shutdown
    if (log_) catalog_.lsn_floor = log_->reserved_lsn();  // K8
    st = Persist();
  }
  // Held prepared transactions are among the open ones above: the next
  // Open recovers them prepared again.
  AbandonPrepared();
  return st;
}

DatabaseImpl::~DatabaseImpl() {
  if (!closed_) (void)Close();
  AbandonPrepared();  // a failed Open's: left for the next one
  StopPurge();        // a failed Open started none, or Close stopped it
  warmer_.reset();
  // Trees before the pool, the pool before the files and the log.
  for (auto& [n, t] : tables_) {
    for (auto& ix : t->indexes) {
      ix->versions->DetachTree();
      ix->tree.reset();
    }
  }
  pool_.reset();
}
Table* DatabaseImpl::FindTable(std::string_view name) const {
  std::shared_lock ddl(ddl_mu_);
  auto it = tables_.find(name);
  return it == tables_.end() ? nullptr : it->second.get();
}

std::vector<std::string> DatabaseImpl::TableNames() const {
  std::shared_lock ddl(ddl_mu_);
  std::vector<std::string> names;
  for (const auto& [n, t] : tables_) names.push_back(n);
  return names;
}

std::unique_ptr<Transaction> DatabaseImpl::Begin(Isolation isolation) {
  return std::move(*NewTransaction(this, isolation));
}

void DatabaseImpl::StopWrites(const Status& why) {
  {
    std::lock_guard lock(stop_mu_);
    if (writes_stopped_.load()) return;
    stop_reason_ = why.ToString();
    writes_stopped_.store(true, std::memory_order_release);
  }
  Report("stopped accepting writes: " + why.ToString() +
         ". Reads go on; restart the server: recovery finishes what was left");
}

Status DatabaseImpl::StoppedStatus() const {
  std::lock_guard lock(stop_mu_);
  return Status::ReadOnly("Subito stopped accepting writes (" + stop_reason_ +
                          "); restart the server");
}

uint32_t DatabaseImpl::PplThreshold() const {
  return options_.ppl_bytes > 0 ? std::min(options_.ppl_threshold, ppl_->Capacity()) : 0;
}

}  // namespace engine
}  // namespace subito
