// BulkLoader (include/subito/database.h): filling a new table without
// transactions.
//
// Invariants while a loader runs:
//   - the table is recorded `loading` in the catalog (K4 in
//     docs/formats/catalog.md: a crash drops it), its bulk_loading flag is
//     set and the loader counts as one of its users, so no transaction
//     reads or writes it and no DDL changes it;
//   - every primary-key and unique-index entry is in its tree as soon as
//     Add returns (duplicates are found by looking them up);
//   - entries of non-unique secondary indexes are either in their tree or
//     in `pending_`, and Finish (or the size bound, a sixteenth of the
//     buffer pool) sorts and adds them.
// Each tree change is one mini-transaction (page redo), as for any write;
// Finish waits until the log holding them is durable.
#include <algorithm>

#include "engine/engine_impl.h"
#include "engine/row_codec.h"
#include "util/strings.h"

namespace subito::engine {
namespace {

class BulkLoaderImpl final : public BulkLoader {
 public:
  BulkLoaderImpl(DatabaseImpl* db, TableImpl* t) : db_(db), t_(t), pending_(t->indexes.size()) {}
  ~BulkLoaderImpl() override { End(); }

  Status Add(const Row& input) override {
    if (ended_) return Status::InvalidArgument("the bulk load has ended");
    Result<Row> row = CanonicalRow(t_->def(), input);
    if (!row.ok()) return row.status();
    const TableDef& def = t_->def();
    const std::string pk = RowKey(def, 0, *row);
    Result<std::optional<std::string>> cur = t_->indexes[0]->tree->Get(pk);
    if (!cur.ok()) return cur.status();
    if (cur->has_value()) return Status::AlreadyExists("duplicate primary key in " + def.name);
    for (uint32_t i = 1; i < t_->indexes.size(); ++i) {
      if (!def.indexes[i - 1].unique || KeyHasNull(def, i, *row)) continue;
      SUBITO_RETURN_IF_ERROR(CheckUnique(t_, i, *row));  // no writer but this one
    }
    SUBITO_RETURN_IF_ERROR(t_->indexes[0]->tree->Put(pk, EncodeRow(def, *row)));
    for (uint32_t i = 1; i < t_->indexes.size(); ++i) {
      std::string key = RowKey(def, i, *row);
      if (def.indexes[i - 1].unique) {
        SUBITO_RETURN_IF_ERROR(t_->indexes[i]->tree->Put(key, ""));
      } else {
        pending_bytes_ += key.size() + sizeof(std::string);
        pending_[i].push_back(std::move(key));
      }
    }
    t_->SawAutoIncrement(*row);
    t_->rows_inserted.fetch_add(1, std::memory_order_relaxed);
    if (pending_bytes_ > db_->bulk_sort_bytes()) return AddPending();
    return Status::OK();
  }

  Status Finish() override {
    if (ended_) return Status::InvalidArgument("the bulk load has ended");
    Status st = AddPending();
    if (st.ok()) st = db_->log()->WaitDurable(db_->log()->reserved_lsn());
    if (st.ok()) st = db_->EndBulkLoad(t_);  // K4: live only now
    End();
    return st;
  }

 private:
  // Sorted, so that each index's tree grows at one edge.
  Status AddPending() {
    for (uint32_t i = 1; i < pending_.size(); ++i) {
      std::vector<std::string>& keys = pending_[i];
      std::sort(keys.begin(), keys.end());
      for (const std::string& k : keys) SUBITO_RETURN_IF_ERROR(t_->indexes[i]->tree->Put(k, ""));
      keys.clear();
      keys.shrink_to_fit();
    }
    pending_bytes_ = 0;
    return Status::OK();
  }

  // Unfinished, the table stays marked loading (unusable until dropped).
  void End() {
    if (ended_) return;
    ended_ = true;
    t_->users.fetch_sub(1);
  }

  DatabaseImpl* const db_;
  TableImpl* const t_;
  std::vector<std::vector<std::string>> pending_;  // by index number
  size_t pending_bytes_ = 0;
  bool ended_ = false;
};

}  // namespace

std::unique_ptr<BulkLoader> NewBulkLoader(DatabaseImpl* db, TableImpl* t) {
  return std::unique_ptr<BulkLoader>(new BulkLoaderImpl(db, t));
}

}  // namespace subito::engine
