// BulkLoader (include/subito/database.h): filling a new table without
// transactions.
//
// Invariants while a loader runs:
//   - the table is recorded `loading` in the catalog (K4 in
//     docs/formats/catalog.md: a crash drops it), its bulk_loading flag is
//     set and the loader counts as one of its users, so no transaction
//     reads or writes it and no DDL changes it;
//   - while primary keys ascend (a copy reads its source in key order),
//     rows go to a tree builder (btree/builder.h): no lookup, no descent,
//     one mini-transaction per page; the first key that does not ascend
//     finishes the builder, and the rest are inserted one by one, each
//     looked up first;
//   - every unique-index entry is in its tree as soon as Add returns
//     (duplicates are found by looking them up);
//   - entries of non-unique secondary indexes go to one sorter per index
//     (util/external_sorter.h), and Finish builds each index from its
//     sorted keys;
//   - a row refused (a duplicate, a bad value) changes nothing, and later
//     rows may follow (ALTER IGNORE); any other failure may leave a row in
//     part, so every later call returns it.
// Finish waits until the log holding every page is durable.
#include "btree/builder.h"
#include "engine/engine_impl.h"
#include "engine/row_codec.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

bool EmptyTree(btree::BTree* tree) {
  Result<bool> empty = tree->Empty();
  return empty.ok() && *empty;
}

class BulkLoaderImpl final : public BulkLoader {
 public:
  BulkLoaderImpl(DatabaseImpl* db, TableImpl* t, bool transactional)
      : db_(db), t_(t), transactional_(transactional), sorters_(t->indexes.size()) {
    btree::BTree* primary = t_->indexes[0]->tree.get();
    if (EmptyTree(primary)) primary_ = std::make_unique<btree::BTree::Builder>(primary);
    const TableDef& def = t_->def();
    std::vector<uint32_t> sorted;
    for (uint32_t i = 1; i < t_->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique && EmptyTree(t_->indexes[i]->tree.get())) sorted.push_back(i);
    }
    for (uint32_t i : sorted) sorters_[i] = db_->NewSorter(db_->bulk_sort_bytes() / sorted.size());
  }
  ~BulkLoaderImpl() override { End(); }

  Status Add(const Row& input) override {
    if (ended_) return Status::InvalidArgument("the bulk load has ended");
    if (!error_.ok()) return error_;
    Result<Row> row = CanonicalRow(t_->def(), input);
    if (!row.ok()) return row.status();
    const TableDef& def = t_->def();
    const std::string pk = RowKey(def, 0, *row);
    btree::BTree* primary = t_->indexes[0]->tree.get();
    if (primary_ && primary_->added() > 0 && pk <= primary_->last_key()) {
      if (pk == primary_->last_key()) return Duplicate();
      // Out of order: what is built becomes the tree, the rest goes in by
      // lookups.
      std::unique_ptr<btree::BTree::Builder> done = std::move(primary_);
      SUBITO_RETURN_IF_ERROR(Sticky(done->Finish()));
      db_->bulk_built_entries.fetch_add(done->added(), std::memory_order_relaxed);
    }
    if (!primary_) {
      Result<std::optional<std::string>> cur = primary->Get(pk);
      if (!cur.ok()) return cur.status();
      if (cur->has_value()) return Duplicate();
    }
    for (uint32_t i = 1; i < t_->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique || KeyHasNull(def, i, *row)) continue;
      SUBITO_RETURN_IF_ERROR(CheckUnique(t_, i, *row));  // no writer but this one
    }
    const std::string value = EncodeRow(def, *row);
    SUBITO_RETURN_IF_ERROR(Sticky(primary_ ? primary_->Add(pk, value) : primary->Put(pk, value)));
    for (uint32_t i = 1; i < t_->indexes.size(); ++i) {
      const std::string key = RowKey(def, i, *row);
      SUBITO_RETURN_IF_ERROR(
          Sticky(sorters_[i] ? sorters_[i]->Add(key) : t_->indexes[i]->tree->Put(key, "")));
    }
    t_->SawAutoIncrement(*row);
    t_->rows_inserted.fetch_add(1, std::memory_order_relaxed);
    return Status::OK();
  }

  Status Finish() override {
    if (ended_) return Status::InvalidArgument("the bulk load has ended");
    Status st = error_;
    if (st.ok() && primary_) {
      st = primary_->Finish();
      if (st.ok()) db_->bulk_built_entries.fetch_add(primary_->added(), std::memory_order_relaxed);
    }
    for (uint32_t i = 1; i < sorters_.size() && st.ok(); ++i) {
      if (!sorters_[i]) continue;
      st = db_->BuildFromSorted(sorters_[i].get(), t_->indexes[i]->tree.get());
      sorters_[i].reset();
    }
    if (st.ok() && !transactional_) st = db_->log()->WaitDurable(db_->log()->reserved_lsn());
    if (st.ok() && !transactional_) st = db_->EndBulkLoad(t_);  // K4: live only now
    End();
    return st;
  }

 private:
  Status Sticky(Status st) {
    if (!st.ok() && error_.ok()) error_ = st;
    return st;
  }
  Status Duplicate() const {
    return Status::AlreadyExists("duplicate primary key in " + t_->def().name);
  }

  // Unfinished, the table stays marked loading (unusable until dropped).
  void End() {
    if (ended_) return;
    ended_ = true;
    if (!transactional_) t_->users.fetch_sub(1);
  }

  DatabaseImpl* const db_;
  TableImpl* const t_;
  const bool transactional_;
  std::unique_ptr<btree::BTree::Builder> primary_;        // while keys ascend
  std::vector<std::unique_ptr<ExternalSorter>> sorters_;  // by index number
  bool ended_ = false;
  Status error_;  // the first failure that may have left a row in part
};

}  // namespace

std::unique_ptr<BulkLoader> NewBulkLoader(DatabaseImpl* db, TableImpl* t, bool transactional) {
  return std::unique_ptr<BulkLoader>(new BulkLoaderImpl(db, t, transactional));
}

}  // namespace subito::engine
