// TableImpl (engine/engine_impl.h): one table's definition, counters,
// sizes and auto-increment counter.
#include <chrono>

#include "engine/engine_impl.h"
#include "engine/row_codec.h"

namespace subito::engine {

TableImpl::TableImpl(DatabaseImpl* database, CatalogTable c) : db(database), cat(std::move(c)) {
  RebuildDef();
}

void TableImpl::RebuildDef() {
  def_ = cat.def;
  def_.indexes.clear();
  for (size_t i = 1; i < indexes.size(); ++i) def_.indexes.push_back(indexes[i]->cat.def);
  for (auto& ix : indexes) ix->key_columns = KeyColumns(def_, ix->number);
}

namespace {
uint64_t Since(uint64_t now, uint64_t base) {
  return now > base ? now - base : 0;
}
}  // namespace

TableStats TableImpl::Stats() const {
  TableStats s;
  s.name = def_.name;
  s.dir = db->TableDir(def_);
  s.page_size = db->options().page_size;
  std::lock_guard lock(io_mu_);
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - io_since_).count();
  s.rows_read = Since(rows_read.value(), rows_base_[0]);
  s.rows_inserted = Since(rows_inserted.load(std::memory_order_relaxed), rows_base_[1]);
  s.rows_updated = Since(rows_updated.load(std::memory_order_relaxed), rows_base_[2]);
  s.rows_deleted = Since(rows_deleted.load(std::memory_order_relaxed), rows_base_[3]);
  for (const auto& ix : indexes) {
    IndexStats is;
    is.name = ix->cat.def.name;
    is.path = ix->path;
    is.rows_read = Since(ix->rows_read.value(), ix->rows_read_base);
    is.pages_at_start = ix->pages_base;
    if (ix->tree) {
      Result<uint64_t> n = ix->tree->entries();
      if (n.ok()) is.entries = *n;
    }
    if (ix->file) {
      const page::SpaceIoStats io = ix->file->stats();
      const page::SpaceIoStats& b = ix->io_base;
      is.pages = ix->file->page_count();
      is.file_bytes_read = Since(io.bytes_read, b.bytes_read);
      is.file_bytes_written = Since(io.bytes_written, b.bytes_written);
      is.file_pages_read = Since(io.pages_read, b.pages_read);
      is.file_pages_written = Since(io.pages_written, b.pages_written);
      is.redo_bytes = Since(io.redo_bytes, b.redo_bytes);
      is.double_write_bytes = Since(io.double_write_bytes, b.double_write_bytes);
      is.ppl_bytes = Since(io.ppl_bytes, b.ppl_bytes);
      is.ppl_appends = Since(io.ppl_appends, b.ppl_appends);
      is.buffer_hits = Since(io.buffer_hits, b.buffer_hits);
      is.buffer_misses = Since(io.buffer_misses, b.buffer_misses);
    }
    s.indexes.push_back(std::move(is));
  }
  if (!s.indexes.empty()) s.rows = s.indexes[0].entries;
  return s;
}

void TableImpl::ResetIoStats() {
  std::lock_guard lock(io_mu_);
  io_since_ = std::chrono::steady_clock::now();
  rows_base_[0] = rows_read.value();
  rows_base_[1] = rows_inserted.load(std::memory_order_relaxed);
  rows_base_[2] = rows_updated.load(std::memory_order_relaxed);
  rows_base_[3] = rows_deleted.load(std::memory_order_relaxed);
  for (auto& ix : indexes) {
    ix->rows_read_base = ix->rows_read.value();
    if (ix->file) {
      ix->io_base = ix->file->stats();
      ix->pages_base = ix->file->page_count();
    }
  }
}

Table::Size TableImpl::Sizes() const {
  Size s;
  for (size_t i = 0; i < indexes.size(); ++i) {
    const IndexImpl& ix = *indexes[i];
    const uint64_t pages = ix.file ? ix.file->page_count() : 0;
    s.pages += pages;
    if (i != 0) continue;
    s.primary_pages = pages;
    if (ix.tree) {
      Result<uint64_t> n = ix.tree->entries();
      if (n.ok()) s.rows = *n;
    }
  }
  return s;
}

Status TableImpl::Recount() {
  for (const auto& ix : indexes) {
    if (ix->tree) SUBITO_RETURN_IF_ERROR(ix->tree->Recount());
  }
  return Status::OK();
}

Result<uint64_t> TableImpl::LoadAutoIncrement() {
  btree::BTree::Cursor c(indexes[0]->tree.get());
  SUBITO_RETURN_IF_ERROR(c.Seek(btree::SeekMode::kLast));
  if (!c.Valid()) return uint64_t{1};
  Result<Row> row = DecodeRow(def_, c.value());
  if (!row.ok()) return row.status();
  const Value& v = (*row)[static_cast<size_t>(def_.auto_increment_column)];
  if (std::holds_alternative<int64_t>(v)) {
    return std::get<int64_t>(v) < 0 ? uint64_t{1} : static_cast<uint64_t>(std::get<int64_t>(v)) + 1;
  }
  return std::get<uint64_t>(v) + 1;
}

Result<uint64_t> TableImpl::NextAutoIncrement() {
  if (def_.auto_increment_column < 0) {
    return Status::InvalidArgument("table " + def_.name + " has no auto-increment column");
  }
  std::lock_guard lock(autoinc_mu_);
  if (!autoinc_loaded_) {
    Result<uint64_t> next = LoadAutoIncrement();
    if (!next.ok()) return next.status();
    autoinc_next_ = std::max({autoinc_next_, *next, def_.auto_increment_start});
    autoinc_loaded_ = true;
  }
  return autoinc_next_++;
}

void TableImpl::SawAutoIncrement(const Row& row) {
  if (def_.auto_increment_column < 0) return;
  const Value& v = row[static_cast<size_t>(def_.auto_increment_column)];
  uint64_t next = 0;
  if (std::holds_alternative<int64_t>(v) && std::get<int64_t>(v) >= 0) {
    next = static_cast<uint64_t>(std::get<int64_t>(v)) + 1;
  } else if (std::holds_alternative<uint64_t>(v)) {
    next = std::get<uint64_t>(v) + 1;
  }
  std::lock_guard lock(autoinc_mu_);
  autoinc_next_ = std::max(autoinc_next_, next);
}

}  // namespace subito::engine
