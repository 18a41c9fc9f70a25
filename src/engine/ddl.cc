// DatabaseImpl's DDL: tables and indexes created, dropped and renamed,
// and bulk loads begun and ended, each a catalog rewrite (K2, K4 in
// engine/catalog.h) around the files it makes or removes.
#include <filesystem>

#include "btree/builder.h"
#include "btree/key_encoding.h"
#include "engine/engine_impl.h"
#include "engine/row_codec.h"
#include "engine/transaction_impl.h"
#include "util/strings.h"

namespace subito::engine {

Result<Table*> DatabaseImpl::CreateTable(const TableDef& def) {
  SUBITO_RETURN_IF_ERROR(ValidateTableDef(def));
  // MariaDB's BACKUP STAGE BLOCK_DDL does not block temporary tables: one
  // made while a backup copies the files would be in the copied log but not
  // in its catalog. It waits for the backup's end (buffer/write_pause.h).
  // Busy if the pause outlasts log_full_timeout_ms.
  buffer::FileWriteScope backup_wait(def.temporary ? pool_.get() : nullptr);
  SUBITO_RETURN_IF_ERROR(backup_wait.status());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  if (tables_.count(def.name)) return Status::AlreadyExists("table " + def.name + " exists");
  const std::string dir = TableDir(def);
  if (!options_.file_system) SUBITO_RETURN_IF_ERROR(CreatePrivateDirectories(dir));
  CatalogTable ct;
  ct.id = catalog_.next_table_id++;
  ct.state = DefState::kCreating;
  ct.def = def;
  ct.def.indexes.clear();
  ct.indexes.push_back(
      {IndexDef{"PRIMARY", def.primary_key, true}, catalog_.next_space_id++, DefState::kLive});
  for (const IndexDef& i : def.indexes) {
    ct.indexes.push_back({i, catalog_.next_space_id++, DefState::kLive});
  }
  catalog_.tables.push_back(ct);
  if (Status st = Persist(); !st.ok()) {  // K2: files are recorded before they exist
    catalog_.tables.pop_back();
    return st;
  }

  auto t = std::make_unique<TableImpl>(this, ct);
  Status st;
  for (const CatalogIndex& ci : ct.indexes) {
    st = OpenIndex(t.get(), ci, /*create=*/true);
    if (!st.ok()) break;
  }
  if (st.ok()) st = log_->WaitDurable(log_->reserved_lsn());  // the trees exist after a crash
  if (st.ok()) {
    catalog_.tables.back().state = DefState::kLive;
    st = Persist();
  }
  if (!st.ok()) {
    for (auto& ix : t->indexes) (void)RemoveIndexFiles(ix.get());
    catalog_.tables.pop_back();
    (void)Persist();
    return st;
  }
  t->cat.state = DefState::kLive;
  t->RebuildDef();
  // After its pages exist: a snapshot moved before them is older than this.
  t->created_ts.store(txns_->Now());
  Table* out = t.get();
  tables_.emplace(def.name, std::move(t));
  return out;
}

Status DatabaseImpl::RemoveIndexFiles(IndexImpl* ix) {
  ix->versions->DetachTree();  // waits for a purge releasing its chains
  ix->tree.reset();
  if (ix->file) {
    SUBITO_RETURN_IF_ERROR(pool_->DropSpace(ix->space()));
    const page::SpaceIoStats io = ix->file->stats();  // the totals keep what it did
    dropped_io_.bytes_written += io.bytes_written;
    dropped_io_.bytes_read += io.bytes_read;
    ix->file.reset();
  }
  by_space_.erase(ix->space());
  SUBITO_RETURN_IF_ERROR(fs_->Remove(ix->path));
  return fs_->SyncDirOf(ix->path);
}

Status DatabaseImpl::DropTable(std::string_view name) {
  SUBITO_RETURN_IF_ERROR(AwaitRecoveredLosers());
  bool temporary = false;
  {
    std::shared_lock ddl(ddl_mu_);
    auto it = tables_.find(name);
    temporary = it != tables_.end() && it->second->def().temporary;
  }
  buffer::FileWriteScope backup_wait(temporary ? pool_.get() : nullptr);  // as in CreateTable
  SUBITO_RETURN_IF_ERROR(backup_wait.status());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  auto it = tables_.find(name);
  if (it == tables_.end()) return Status::NotFound("no table " + std::string(name));
  TableImpl* t = it->second.get();
  if (t->users.load() > 0) {
    return Status::Busy("table " + std::string(name) + " is in use by open transactions");
  }
  // By id, never by name: a drop that failed earlier leaves an entry with
  // this name in the catalog until the next Open finishes it.
  CatalogTable* ct = CatalogEntry(t);
  ct->state = DefState::kDropping;
  if (Status st = Persist(); !st.ok()) {
    ct->state = DefState::kLive;
    return st;
  }
  // From here the table is gone whatever fails: the catalog says kDropping,
  // and the next Open finishes the drop (K2).
  t->dropped = true;
  Status st;
  for (auto& ix : t->indexes) {
    Status s = RemoveIndexFiles(ix.get());
    if (st.ok()) st = s;
  }
  if (st.ok()) {
    catalog_.tables.erase(catalog_.tables.begin() + (ct - catalog_.tables.data()));
    st = Persist();
  }
  dropped_tables_.push_back(std::move(it->second));
  tables_.erase(it);
  return st;
}

Status DatabaseImpl::RenameTable(std::string_view from, std::string_view to) {
  SUBITO_RETURN_IF_ERROR(AwaitRecoveredLosers());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  auto it = tables_.find(from);
  if (it == tables_.end()) return Status::NotFound("no table " + std::string(from));
  if (to.empty()) return Status::InvalidArgument("a table needs a name");
  if (tables_.count(to)) return Status::AlreadyExists("table " + std::string(to) + " exists");
  TableImpl* t = it->second.get();
  if (t->users.load() > 0) {
    return Status::Busy("table " + std::string(from) + " is in use by open transactions");
  }
  CatalogTable* ct = CatalogEntry(t);
  ct->def.name = std::string(to);
  if (Status st = Persist(); !st.ok()) {
    ct->def.name = std::string(from);
    return st;
  }
  t->cat.def.name = std::string(to);
  t->RebuildDef();
  auto node = tables_.extract(it);
  node.key() = std::string(to);
  tables_.insert(std::move(node));
  return Status::OK();
}

Status DatabaseImpl::CreateIndex(std::string_view table, const IndexDef& def) {
  SUBITO_RETURN_IF_ERROR(AwaitRecoveredLosers());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  auto it = tables_.find(table);
  if (it == tables_.end()) return Status::NotFound("no table " + std::string(table));
  TableImpl* t = it->second.get();
  SUBITO_RETURN_IF_ERROR(ValidateIndexDef(t->def(), def));
  if (def.name == "PRIMARY") return Status::InvalidArgument("PRIMARY is the primary key's name");
  for (const auto& ix : t->indexes) {
    if (ix->cat.def.name == def.name) return Status::AlreadyExists("index " + def.name + " exists");
  }
  if (t->users.load() > 0) {
    return Status::Busy("table " + std::string(table) + " is in use by open transactions");
  }
  CatalogTable* ct = CatalogEntry(t);
  const CatalogIndex ci{def, catalog_.next_space_id++, DefState::kCreating};
  ct->indexes.push_back(ci);
  if (Status st = Persist(); !st.ok()) {
    ct->indexes.pop_back();
    return st;
  }
  Status st = OpenIndex(t, ci, /*create=*/true);
  IndexImpl* ix = st.ok() ? t->indexes.back().get() : nullptr;
  if (st.ok()) {
    // Backfill from the newest versions: no transaction uses the table.
    TableDef with = t->def();
    with.indexes.push_back(def);
    const uint32_t n = static_cast<uint32_t>(with.indexes.size());
    // A non-unique index is built bottom up from its sorted keys; a unique
    // one row by row, each key checked against those before it.
    std::unique_ptr<ExternalSorter> sorted = def.unique ? nullptr : NewSorter(bulk_sort_bytes());
    btree::BTree::Cursor c(t->indexes[0]->tree.get());
    st = c.Seek(btree::SeekMode::kFirst);
    while (st.ok() && c.Valid()) {
      Result<Row> row = DecodeRow(with, c.value());
      if (!row.ok()) {
        st = row.status();
        break;
      }
      const std::string key = RowKey(with, n, *row);
      if (def.unique && !KeyHasNull(with, n, *row)) {
        const std::string prefix = OwnColumnsKey(with, n, *row);  // a stored row is canonical
        btree::BTree::Cursor dup(ix->tree.get());
        st = dup.Seek(btree::SeekMode::kGE, prefix);
        if (st.ok() && dup.Valid() && dup.key().compare(0, prefix.size(), prefix) == 0) {
          st = Status::AlreadyExists("duplicate key for unique index " + def.name);
          break;
        }
      }
      if (st.ok()) st = sorted ? sorted->Add(key) : ix->tree->Put(key, "");
      if (st.ok()) st = c.Next();
    }
    if (st.ok() && sorted) st = BuildFromSorted(sorted.get(), ix->tree.get());
  }
  if (st.ok()) st = log_->WaitDurable(log_->reserved_lsn());
  if (st.ok()) {
    ct->indexes.back().state = DefState::kLive;
    st = Persist();
  }
  if (!st.ok()) {
    if (ix) {
      (void)RemoveIndexFiles(ix);
      t->indexes.pop_back();
    }
    ct->indexes.pop_back();
    (void)Persist();
    return st;
  }
  ix->cat.state = DefState::kLive;
  ix->created_ts = txns_->Now();
  t->RebuildDef();
  return Status::OK();
}

Status DatabaseImpl::BuildFromSorted(ExternalSorter* sorted, btree::BTree* tree) {
  btree::BTree::Builder builder(tree);
  Status st = sorted->Finish([&](std::string_view key) { return builder.Add(key, ""); });
  if (st.ok()) st = builder.Finish();
  sort_runs.fetch_add(sorted->runs_written(), std::memory_order_relaxed);
  if (st.ok()) bulk_built_entries.fetch_add(builder.added(), std::memory_order_relaxed);
  return st;
}

Status DatabaseImpl::DropIndex(std::string_view table, std::string_view index) {
  SUBITO_RETURN_IF_ERROR(AwaitRecoveredLosers());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  auto it = tables_.find(table);
  if (it == tables_.end()) return Status::NotFound("no table " + std::string(table));
  TableImpl* t = it->second.get();
  if (index == "PRIMARY") return Status::InvalidArgument("the primary key cannot be dropped");
  size_t k = 1;
  while (k < t->indexes.size() && t->indexes[k]->cat.def.name != index) ++k;
  if (k == t->indexes.size()) return Status::NotFound("no index " + std::string(index));
  if (t->users.load() > 0) {
    return Status::Busy("table " + std::string(table) + " is in use by open transactions");
  }
  CatalogTable* ct = CatalogEntry(t);
  ct->indexes[k].state = DefState::kDropping;
  if (Status st = Persist(); !st.ok()) {
    ct->indexes[k].state = DefState::kLive;
    return st;
  }
  // As in DropTable: once recorded, the index is gone from memory whatever
  // fails; the next Open finishes the drop.
  Status st = RemoveIndexFiles(t->indexes[k].get());
  if (st.ok()) {
    ct->indexes.erase(ct->indexes.begin() + static_cast<ptrdiff_t>(k));
    st = Persist();
  }
  t->indexes.erase(t->indexes.begin() + static_cast<ptrdiff_t>(k));
  for (size_t i = 0; i < t->indexes.size(); ++i) t->indexes[i]->number = static_cast<uint32_t>(i);
  t->RebuildDef();
  return st;
}

CatalogTable* DatabaseImpl::CatalogEntry(const TableImpl* t) {
  for (CatalogTable& ct : catalog_.tables) {
    if (ct.id == t->cat.id) return &ct;
  }
  return nullptr;
}

Result<std::unique_ptr<BulkLoader>> DatabaseImpl::BeginBulkLoad(Table* table) {
  SUBITO_RETURN_IF_ERROR(AwaitRecoveredLosers());
  std::unique_lock ddl(ddl_mu_);
  SUBITO_RETURN_IF_ERROR(Writable());
  auto* t = static_cast<TableImpl*>(table);
  CatalogTable* ct = CatalogEntry(t);
  if (t->dropped.load() || ct == nullptr) return Status::NotFound("the table was dropped");
  const std::string name = t->def().name;
  bool expected = false;
  if (!t->bulk_loading.compare_exchange_strong(expected, true)) {
    return Status::Busy("table " + name + " is being loaded, or a load left it incomplete");
  }
  // Flag set first, then the users read (see TransactionImpl::Use).
  t->users.fetch_add(1);
  auto refuse = [&](Status st) {
    t->users.fetch_sub(1);
    t->bulk_loading.store(false);
    return st;
  };
  if (t->users.load() > 1) return refuse(Status::Busy("table " + name + " is in use"));
  Result<bool> empty = t->indexes[0]->tree->Empty();
  if (!empty.ok()) return refuse(empty.status());
  if (!*empty) return refuse(Status::Busy("table " + name + " is not empty"));
  ct->state = DefState::kLoading;  // K4
  if (Status st = Persist(); !st.ok()) {
    ct->state = DefState::kLive;
    return refuse(st);
  }
  t->cat.state = DefState::kLoading;
  return NewBulkLoader(this, t);
}

Status DatabaseImpl::EndBulkLoad(TableImpl* t) {
  std::unique_lock ddl(ddl_mu_);
  CatalogTable* ct = CatalogEntry(t);
  if (ct == nullptr) return Status::NotFound("the table was dropped");
  ct->state = DefState::kLive;
  if (Status st = Persist(); !st.ok()) {
    ct->state = DefState::kLoading;
    return st;
  }
  t->cat.state = DefState::kLive;
  t->loaded_ts.store(txns_->Now());
  t->bulk_loading.store(false);
  return Status::OK();
}

}  // namespace subito::engine
