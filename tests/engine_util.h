// Helpers for tests of the embedded API (include/subito/database.h).
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "subito/database.h"

namespace subito::test {

// id INT8 PK, k UINT4 (non-unique index "k"), u STRING NULL (unique index
// "u"), v STRING.
inline TableDef SampleTable(const std::string& name = "t") {
  TableDef def;
  def.name = name;
  def.columns = {{"id", ColumnType::kInt, 8},
                 {"k", ColumnType::kUInt, 4},
                 {"u", ColumnType::kString, 8, /*nullable=*/true, 64},
                 {"v", ColumnType::kString, 8, false, 1u << 30}};
  def.primary_key = {0};
  def.indexes = {{"k", {1}, false}, {"u", {2}, true}};
  return def;
}

inline Row SampleRow(int64_t id, uint64_t k, std::optional<std::string> u, std::string v) {
  Row r{id, k, Value(), std::move(v)};
  if (u) r[2] = *u;
  return r;
}

inline Options SmallOptions(const std::string& dir) {
  Options o;
  o.dir = dir + "/db";
  o.pm_dir = dir + "/pm";
  o.page_size = 4096;
  o.buffer_pool_bytes = 4 << 20;
  o.log_file_size = 4096 + (32 << 20);
  o.log_buffer_size = 1 << 20;
  o.double_write_pages = 16;
  o.lock_wait_timeout_ms = 5000;
  return o;
}

#define ASSERT_OK(expr)                    \
  do {                                     \
    const ::subito::Status _s = (expr);    \
    ASSERT_TRUE(_s.ok()) << _s.ToString(); \
  } while (0)
#define EXPECT_OK(expr)                    \
  do {                                     \
    const ::subito::Status _s = (expr);    \
    EXPECT_TRUE(_s.ok()) << _s.ToString(); \
  } while (0)

// Waits (up to 30 s) until the background undo has rolled back every loser
// of the last start (Options::background_undo); false if it has not.
inline bool AwaitBackgroundUndo(Database* db) {
  for (int i = 0; i < 30000 && db->Stats().recovery_losers_pending > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return db->Stats().recovery_losers_pending == 0;
}

// All rows of index `index`, in its order, read in `txn` (a snapshot read).
inline std::vector<Row> ScanAll(Transaction* txn, Table* t, uint32_t index = 0,
                                bool backward = false) {
  std::vector<Row> rows;
  auto c = txn->OpenCursor(t, index);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  if (!c.ok()) return rows;
  Status s = (*c)->Seek(backward ? SeekOp::kLast : SeekOp::kFirst);
  while (s.ok() && (*c)->Valid()) {
    rows.push_back((*c)->row());
    s = backward ? (*c)->Prev() : (*c)->Next();
  }
  EXPECT_TRUE(s.ok()) << s.ToString();
  return rows;
}

}  // namespace subito::test
