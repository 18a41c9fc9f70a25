// The embedded API end to end: tables, indexes, transactions, savepoints,
// cursors, DDL, auto-increment, statistics, reopen; and randomized runs
// against a std::map model, single-threaded and concurrent.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "engine_util.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::SampleTable;
using test::ScanAll;

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(); }
  void Open() {
    auto db = Database::Open(test::SmallOptions(dir_.path()));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
  }
  void Reopen() {
    ASSERT_OK(db_->Close());
    db_.reset();
    Open();
  }
  Table* Create(const TableDef& def = SampleTable()) {
    auto t = db_->CreateTable(def);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *t : nullptr;
  }
  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
};

TEST_F(EngineTest, InsertGetUpdateDeleteAndReopen) {
  EXPECT_TRUE(db_->recovery().created);
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(1, 10, "a", "one")));
  ASSERT_OK(txn->Insert(t, SampleRow(2, 20, std::nullopt, "two")));
  ASSERT_OK(txn->Insert(t, SampleRow(3, 10, std::nullopt, std::string(5000, 'x'))));
  ASSERT_OK(txn->Commit());

  txn = db_->Begin();
  auto r = txn->Get(t, {int64_t{1}});
  ASSERT_TRUE(r.ok() && r->has_value());
  EXPECT_EQ(**r, SampleRow(1, 10, "a", "one"));
  ASSERT_OK(txn->Update(t, **r, SampleRow(1, 11, "b", "uno")));
  ASSERT_OK(txn->Delete(t, SampleRow(2, 0, std::nullopt, "")));
  ASSERT_OK(txn->Commit());

  Reopen();
  EXPECT_FALSE(db_->recovery().created);
  t = db_->FindTable("t");
  ASSERT_NE(t, nullptr);
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t),
            (std::vector<Row>{SampleRow(1, 11, "b", "uno"),
                              SampleRow(3, 10, std::nullopt, std::string(5000, 'x'))}));
  // Secondary k: (10, 3) before (11, 1); unique u: NULL (3) before "b" (1).
  auto by_k = ScanAll(txn.get(), t, 1);
  ASSERT_EQ(by_k.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(by_k[0][0]), 3);
  auto by_u = ScanAll(txn.get(), t, 2);
  ASSERT_EQ(by_u.size(), 2u);
  EXPECT_EQ(std::get<int64_t>(by_u[0][0]), 3);
  const TableStats st = t->Stats();
  EXPECT_EQ(st.rows, 2u);
  ASSERT_EQ(st.indexes.size(), 3u);
  EXPECT_EQ(st.indexes[1].entries, 2u);
  EXPECT_GT(st.indexes[0].pages, 1u);
  ASSERT_OK(txn->Commit());
}

TEST_F(EngineTest, RefusesBadInputWithClearErrors) {
  TableDef bad = SampleTable();
  bad.primary_key = {2};  // nullable
  EXPECT_TRUE(db_->CreateTable(bad).status().IsInvalidArgument());
  bad = SampleTable();
  bad.indexes.push_back({"k", {3}, false});
  EXPECT_TRUE(db_->CreateTable(bad).status().IsInvalidArgument());
  bad = SampleTable();
  bad.columns[1].width = 9;
  EXPECT_TRUE(db_->CreateTable(bad).status().IsInvalidArgument());
  bad = SampleTable();
  bad.auto_increment_column = 1;
  EXPECT_TRUE(db_->CreateTable(bad).status().IsInvalidArgument());

  Table* t = Create();
  EXPECT_TRUE(db_->CreateTable(SampleTable()).status().IsAlreadyExists());
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(1, 1, "a", "")));
  EXPECT_TRUE(txn->Insert(t, SampleRow(1, 2, "z", "")).IsAlreadyExists());
  EXPECT_TRUE(txn->Insert(t, SampleRow(2, 2, "a", "")).IsAlreadyExists());
  ASSERT_OK(txn->Insert(t, SampleRow(3, 2, std::nullopt, "")));
  ASSERT_OK(txn->Insert(t, SampleRow(4, 2, std::nullopt, "")));  // NULLs never clash
  EXPECT_TRUE(txn->Insert(t, {int64_t{5}}).IsInvalidArgument());
  EXPECT_TRUE(txn->Insert(t, SampleRow(6, uint64_t{1} << 40, "b", "")).IsInvalidArgument());
  EXPECT_TRUE(
      txn->Insert(t, {int64_t{7}, std::string("x"), Value(), std::string()}).IsInvalidArgument());
  EXPECT_TRUE(txn->Insert(t, {Value(), uint64_t{1}, Value(), std::string()}).IsInvalidArgument());
  EXPECT_TRUE(
      txn->Update(t, SampleRow(9, 0, std::nullopt, ""), SampleRow(9, 0, "q", "")).IsNotFound());
  EXPECT_TRUE(txn->Delete(t, SampleRow(9, 0, std::nullopt, "")).IsNotFound());
  EXPECT_TRUE(txn->Update(t, SampleRow(3, 0, std::nullopt, ""), SampleRow(1, 0, std::nullopt, ""))
                  .IsAlreadyExists());
  EXPECT_TRUE(txn->Get(t, {int64_t{1}, int64_t{2}}).status().IsInvalidArgument());
  EXPECT_TRUE(txn->OpenCursor(t, 3).status().IsInvalidArgument());
  // Failed statements left nothing behind.
  EXPECT_EQ(ScanAll(txn.get(), t).size(), 3u);
  ASSERT_OK(txn->Commit());
  EXPECT_TRUE(txn->Insert(t, SampleRow(8, 0, std::nullopt, "")).IsInvalidArgument());
  EXPECT_TRUE(txn->Commit().IsInvalidArgument());
  Options o = test::SmallOptions(dir_.path());
  o.page_size = 1000;
  EXPECT_TRUE(Database::Open(o).status().IsInvalidArgument());
}

TEST_F(EngineTest, SavepointsAndRollback) {
  Table* t = Create();
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(1, 1, "a", "first")));
  const uint64_t sp = txn->Savepoint();
  ASSERT_OK(txn->Insert(t, SampleRow(2, 2, "b", "second")));
  ASSERT_OK(txn->Update(t, SampleRow(1, 0, std::nullopt, ""), SampleRow(1, 5, "c", "changed")));
  ASSERT_OK(txn->Delete(t, SampleRow(1, 0, std::nullopt, "")));
  ASSERT_OK(txn->RollbackTo(sp));
  EXPECT_EQ(ScanAll(txn.get(), t), (std::vector<Row>{SampleRow(1, 1, "a", "first")}));
  ASSERT_OK(txn->Insert(t, SampleRow(3, 3, "b", "third")));  // "b" is free again
  ASSERT_OK(txn->Commit());

  txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(4, 4, "d", "gone")));
  ASSERT_OK(txn->Delete(t, SampleRow(1, 0, std::nullopt, "")));
  ASSERT_OK(txn->Rollback());
  txn = db_->Begin();
  const std::vector<Row> want{SampleRow(1, 1, "a", "first"), SampleRow(3, 3, "b", "third")};
  EXPECT_EQ(ScanAll(txn.get(), t), want);
  EXPECT_EQ(ScanAll(txn.get(), t, 0, /*backward=*/true), (std::vector<Row>{want[1], want[0]}));
  EXPECT_EQ(ScanAll(txn.get(), t, 2).size(), 2u);
  {
    auto dropped = db_->Begin();
    ASSERT_OK(dropped->Insert(t, SampleRow(9, 9, "z", "")));
  }
  EXPECT_EQ(ScanAll(txn.get(), t).size(), 2u);  // destroyed unended: rolled back
  ASSERT_OK(txn->Commit());
  Reopen();
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), db_->FindTable("t")), want);
}

TEST_F(EngineTest, CursorSeeksOnCompositeKeys) {
  TableDef def;
  def.name = "c";
  def.columns = {{"a", ColumnType::kInt, 2}, {"b", ColumnType::kString}, {"x", ColumnType::kInt}};
  def.primary_key = {0, 1};
  def.indexes = {{"x", {2}, false}};
  Table* t = Create(def);
  auto txn = db_->Begin();
  for (int a = -2; a <= 2; ++a) {
    for (const char* b : {"", "m", "mm", "z"}) {
      ASSERT_OK(txn->Insert(t, {int64_t{a}, std::string(b), int64_t{a * 10}}));
    }
  }
  ASSERT_OK(txn->Commit());
  txn = db_->Begin();
  auto c = txn->OpenCursor(t, 0);
  ASSERT_TRUE(c.ok());
  Cursor& cur = **c;
  auto at = [&](int64_t a, const char* b) {
    return cur.Valid() && std::get<int64_t>(cur.row()[0]) == a &&
           std::get<std::string>(cur.row()[1]) == b;
  };
  ASSERT_OK(cur.Seek(SeekOp::kEq, {int64_t{0}}));
  EXPECT_TRUE(at(0, ""));
  int n = 0;
  while (cur.Valid()) {
    ++n;
    ASSERT_OK(cur.Next());
  }
  EXPECT_EQ(n, 4);  // bounded by the prefix
  ASSERT_OK(cur.Seek(SeekOp::kEqLast, {int64_t{0}}));
  EXPECT_TRUE(at(0, "z"));
  ASSERT_OK(cur.Seek(SeekOp::kGT, {int64_t{0}}));
  EXPECT_TRUE(at(1, ""));
  ASSERT_OK(cur.Seek(SeekOp::kLE, {int64_t{0}}));
  EXPECT_TRUE(at(0, "z"));
  ASSERT_OK(cur.Seek(SeekOp::kLT, {int64_t{0}}));
  EXPECT_TRUE(at(-1, "z"));
  ASSERT_OK(cur.Seek(SeekOp::kGE, {int64_t{0}, std::string("m")}));
  EXPECT_TRUE(at(0, "m"));
  ASSERT_OK(cur.Next());
  EXPECT_TRUE(at(0, "mm"));
  ASSERT_OK(cur.Prev());
  ASSERT_OK(cur.Prev());
  EXPECT_TRUE(at(0, ""));
  ASSERT_OK(cur.Seek(SeekOp::kGT, {int64_t{2}}));
  EXPECT_FALSE(cur.Valid());
  ASSERT_OK(cur.Seek(SeekOp::kLT, {int64_t{-2}}));
  EXPECT_FALSE(cur.Valid());
  ASSERT_OK(cur.Seek(SeekOp::kLast));
  EXPECT_TRUE(at(2, "z"));
  // The secondary index, by prefix.
  auto s = txn->OpenCursor(t, 1);
  ASSERT_TRUE(s.ok());
  ASSERT_OK((*s)->Seek(SeekOp::kEq, {int64_t{-10}}));
  n = 0;
  while ((*s)->Valid()) {
    EXPECT_EQ(std::get<int64_t>((*s)->row()[0]), -1);
    ++n;
    ASSERT_OK((*s)->Next());
  }
  EXPECT_EQ(n, 4);
  EXPECT_TRUE(cur.Seek(SeekOp::kEq, {int64_t{1} << 20}).IsInvalidArgument());
  ASSERT_OK(txn->Commit());
}

// What the MariaDB handler reads per row: single columns in place and the
// entry's encoded key, which a prefix's encoding starts and SeekKey returns
// to; on both kinds of index, for snapshot and locking reads.
TEST_F(EngineTest, CursorReadsColumnsAndKeysInPlace) {
  Table* t = Create();
  auto txn = db_->Begin();
  for (int i = 1; i <= 300; ++i) {
    ASSERT_OK(txn->Insert(
        t, SampleRow(i, i % 7,
                     i % 5 ? std::optional<std::string>("n" + std::to_string(i)) : std::nullopt,
                     std::string(static_cast<size_t>(i % 40), 'v'))));
  }
  ASSERT_OK(txn->Commit());
  for (ReadMode mode : {ReadMode::kSnapshot, ReadMode::kShared}) {
    txn = db_->Begin();
    for (uint32_t index : {0u, 1u}) {
      auto c = txn->OpenCursor(t, index, mode);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      Cursor& cur = **c;
      ASSERT_OK(cur.Seek(SeekOp::kFirst));
      std::string previous;
      int n = 0;
      while (cur.Valid()) {
        const Row row = cur.row();
        for (uint32_t col = 0; col < row.size(); ++col) {
          const Value owned = std::visit(
              [](auto x) -> Value {
                if constexpr (std::is_same_v<decltype(x), std::string_view>) {
                  return std::string(x);
                } else {
                  return x;
                }
              },
              cur.column(col));
          ASSERT_EQ(owned, row[col]) << "column " << col;
        }
        const std::string key(cur.key());
        ASSERT_LT(previous, key);
        previous = key;
        // The entry's own leading values encode as a prefix of its key.
        Row prefix;
        prefix.push_back(row[index == 0 ? 0 : 1]);
        auto encoded = cur.EncodeKey(prefix);
        ASSERT_TRUE(encoded.ok());
        ASSERT_EQ(key.compare(0, encoded->size(), *encoded), 0);
        ++n;
        ASSERT_OK(cur.Next());
      }
      EXPECT_EQ(n, 300) << "index " << index;
      // Back to an entry by its key: GE lands on it, GT after it, LT before.
      ASSERT_OK(cur.Seek(SeekOp::kFirst));
      ASSERT_OK(cur.Next());
      const std::string second(cur.key());
      const Row second_row = cur.row();
      ASSERT_OK(cur.Next());
      const std::string third(cur.key());
      ASSERT_OK(cur.SeekKey(SeekOp::kGE, second));
      ASSERT_TRUE(cur.Valid());
      EXPECT_EQ(cur.key(), second);
      EXPECT_EQ(cur.row(), second_row);
      ASSERT_OK(cur.SeekKey(SeekOp::kGT, second));
      EXPECT_EQ(cur.key(), third);
      ASSERT_OK(cur.SeekKey(SeekOp::kLT, third));
      EXPECT_EQ(cur.key(), second);
      ASSERT_OK(cur.Prev());
      ASSERT_OK(cur.SeekKey(SeekOp::kLT, cur.key()));
      EXPECT_FALSE(cur.Valid());
    }
    ASSERT_OK(txn->Commit());
  }
}

// Keys only (Cursor::SetKeysOnly): a snapshot read of a secondary index
// gives each visible entry's columns (the index's, then the primary key's)
// and NULL elsewhere, without reading rows; it sees the entries of its
// snapshot; locking reads and the primary index still read whole rows.
TEST_F(EngineTest, KeysOnlyCursorsReadEntriesOfTheirSnapshot) {
  Table* t = Create();
  auto txn = db_->Begin();
  for (int i = 1; i <= 400; ++i) {
    ASSERT_OK(txn->Insert(t, SampleRow(-i, static_cast<uint64_t>(i % 9), std::nullopt, "v")));
  }
  ASSERT_OK(txn->Commit());
  auto reader = db_->Begin();
  auto read_k = [&](Transaction* r, ReadMode mode, bool keys_only) {
    std::vector<std::pair<uint64_t, int64_t>> seen;
    auto c = r->OpenCursor(t, 1, mode);
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return seen;
    (*c)->SetKeysOnly(keys_only);
    EXPECT_TRUE((*c)->Seek(SeekOp::kFirst).ok());
    while ((*c)->Valid()) {
      const Row& row = (*c)->row();
      const bool entry_only = keys_only && mode == ReadMode::kSnapshot;
      EXPECT_EQ(std::holds_alternative<std::monostate>(row[3]), entry_only);
      EXPECT_TRUE(std::holds_alternative<std::monostate>((*c)->column(2)));
      EXPECT_EQ(std::get<uint64_t>((*c)->column(1)), std::get<uint64_t>(row[1]));
      seen.emplace_back(std::get<uint64_t>(row[1]), std::get<int64_t>(row[0]));
      EXPECT_TRUE((*c)->Next().ok());
    }
    return seen;
  };
  const auto before = read_k(reader.get(), ReadMode::kSnapshot, false);
  ASSERT_EQ(before.size(), 400u);
  EXPECT_EQ(read_k(reader.get(), ReadMode::kSnapshot, true), before);
  uint64_t rows_read = t->Stats().rows_read;
  read_k(reader.get(), ReadMode::kSnapshot, true);
  EXPECT_EQ(t->Stats().rows_read, rows_read) << "keys only: no row read";
  read_k(reader.get(), ReadMode::kSnapshot, false);
  EXPECT_EQ(t->Stats().rows_read, rows_read + 400) << "a row per entry";
  {  // changes after the reader's snapshot: deleted, key moved, inserted
    auto w = db_->Begin();
    for (int i = 1; i <= 50; ++i) {
      ASSERT_OK(w->Delete(t, SampleRow(-i, static_cast<uint64_t>(i % 9), std::nullopt, "v")));
    }
    ASSERT_OK(w->Update(t, SampleRow(-100, 1, std::nullopt, "v"),
                        SampleRow(-100, 77, std::nullopt, "w")));
    ASSERT_OK(w->Insert(t, SampleRow(5, 3, std::nullopt, "x")));
    ASSERT_OK(w->Commit());
  }
  EXPECT_EQ(read_k(reader.get(), ReadMode::kSnapshot, true), before);
  ASSERT_OK(reader->Commit());
  auto later = db_->Begin();
  const auto after = read_k(later.get(), ReadMode::kSnapshot, false);
  EXPECT_EQ(after.size(), 351u);
  EXPECT_EQ(read_k(later.get(), ReadMode::kSnapshot, true), after);
  EXPECT_EQ(read_k(later.get(), ReadMode::kShared, true), after) << "locking: rows as before";
  ASSERT_OK(later->Commit());
}

TEST_F(EngineTest, DescendingColumnsOrderEveryIndexHighToLowAndSurviveReopen) {
  TableDef def;
  def.name = "d";
  def.columns = {{"id", ColumnType::kInt, 4},
                 {"v", ColumnType::kInt, 4, /*nullable=*/true},
                 {"s", ColumnType::kString}};
  def.columns[0].descending = true;
  def.columns[1].descending = true;
  def.primary_key = {0};
  def.indexes = {{"v", {1}, /*unique=*/true}, {"sv", {2, 1}, false}};
  Table* t = Create(def);
  auto txn = db_->Begin();
  const std::vector<std::pair<int64_t, Value>> rows = {
      {1, int64_t{10}}, {2, Value()}, {3, int64_t{-5}}, {4, Value()}, {5, int64_t{7}}};
  for (const auto& [id, v] : rows) ASSERT_OK(txn->Insert(t, {id, v, std::string("x")}));
  // NULLs never conflict in a unique index, descending or not.
  EXPECT_TRUE(txn->Insert(t, {int64_t{6}, int64_t{7}, std::string("x")}).IsAlreadyExists());
  ASSERT_OK(txn->Commit());
  auto column = [&](uint32_t index, uint32_t col) {
    std::vector<std::string> out;
    auto r = db_->Begin();
    auto c = r->OpenCursor(t, index);
    EXPECT_TRUE(c.ok());
    EXPECT_OK((*c)->Seek(SeekOp::kFirst));
    while ((*c)->Valid()) {
      const Value& v = (*c)->row()[col];
      out.push_back(std::holds_alternative<int64_t>(v) ? std::to_string(std::get<int64_t>(v))
                                                       : "NULL");
      EXPECT_OK((*c)->Next());
    }
    EXPECT_OK(r->Commit());
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(column(0, 0), (V{"5", "4", "3", "2", "1"}));
  EXPECT_EQ(column(1, 1), (V{"10", "7", "-5", "NULL", "NULL"}));
  EXPECT_EQ(column(1, 0), (V{"1", "5", "3", "4", "2"}));  // then the primary key, descending
  EXPECT_EQ(column(2, 1), (V{"10", "7", "-5", "NULL", "NULL"}));
  // Seeks go by index order: kGE 0 on v DESC is the first value <= 0.
  txn = db_->Begin();
  auto c = txn->OpenCursor(t, 1);
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kGE, {int64_t{0}}));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_EQ(std::get<int64_t>((*c)->row()[1]), -5);
  ASSERT_OK((*c)->Seek(SeekOp::kEq, {Value()}));
  ASSERT_TRUE((*c)->Valid());
  EXPECT_EQ(std::get<int64_t>((*c)->row()[0]), 4);
  auto got = txn->Get(t, {int64_t{3}});
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(std::get<int64_t>((**got)[1]), -5);
  ASSERT_OK(txn->Commit());
  Reopen();
  t = db_->FindTable("d");
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(t->def().columns[0].descending);
  EXPECT_FALSE(t->def().columns[2].descending);
  EXPECT_EQ(column(0, 0), (V{"5", "4", "3", "2", "1"}));
  EXPECT_EQ(column(1, 1), (V{"10", "7", "-5", "NULL", "NULL"}));
}

TEST_F(EngineTest, TemporaryTablesWorkUntilTheNextOpenWhichDropsThem) {
  TableDef def = SampleTable();
  def.name = "scratch";
  def.temporary = true;
  def.data_dir = dir_.Sub("tmp");
  Table* t = Create(def);
  Table* kept = Create();
  const Row row = SampleRow(1, 1, std::nullopt, "a");
  auto txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, row));
  ASSERT_OK(txn->Insert(kept, row));
  ASSERT_OK(txn->Commit());
  txn = db_->Begin();
  ASSERT_OK(txn->Insert(t, SampleRow(2, 2, std::nullopt, "b")));
  ASSERT_OK(txn->Rollback());
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t).size(), 1u);
  ASSERT_OK(txn->Commit());
  EXPECT_FALSE(std::filesystem::is_empty(dir_.Sub("tmp")));
  Reopen();  // K6: after a clean close too
  EXPECT_EQ(db_->FindTable("scratch"), nullptr);
  EXPECT_TRUE(std::filesystem::is_empty(dir_.Sub("tmp")));
  kept = db_->FindTable(SampleTable().name);
  ASSERT_NE(kept, nullptr);
  t = Create(def);  // the name is free again
  ASSERT_NE(t, nullptr);
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t).size(), 0u);
  EXPECT_EQ(ScanAll(txn.get(), kept).size(), 1u);
  ASSERT_OK(txn->Commit());
}

// CREATE INDEX on a table larger than its sort memory (1/16 of the 4 MiB
// pool): the keys go through sorted runs and the index is built bottom up;
// it agrees with the rows, across a restart.
TEST_F(EngineTest, CreateIndexSortsThroughRunsAndBuildsTheIndex) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  std::mt19937_64 rng(test::TestSeed());
  std::vector<Row> rows;
  for (int chunk = 0; chunk < 4; ++chunk) {
    auto txn = db_->Begin();
    for (int i = 0; i < 6000; ++i) {
      const int64_t id = chunk * 6000 + i;
      rows.push_back(SampleRow(id, rng() % 1000, std::nullopt, std::to_string(rng() % 5000)));
      ASSERT_OK(txn->Insert(t, rows.back()));
    }
    ASSERT_OK(txn->Commit());
  }
  const DatabaseStats before = db_->Stats();
  ASSERT_OK(db_->CreateIndex("t", {"by_v", {3, 1}, false}));
  const DatabaseStats after = db_->Stats();
  EXPECT_GT(after.sort_runs, before.sort_runs);
  EXPECT_EQ(after.bulk_built_entries - before.bulk_built_entries, rows.size());
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return std::make_tuple(std::get<std::string>(a[3]), std::get<uint64_t>(a[1]),
                           std::get<int64_t>(a[0])) < std::make_tuple(std::get<std::string>(b[3]),
                                                                      std::get<uint64_t>(b[1]),
                                                                      std::get<int64_t>(b[0]));
  });
  for (int pass = 0; pass < 2; ++pass) {
    t = db_->FindTable("t");
    ASSERT_NE(t, nullptr);
    auto txn = db_->Begin();
    EXPECT_EQ(ScanAll(txn.get(), t, 3), rows) << (pass ? "after a restart" : "");
    ASSERT_OK(txn->Commit());
    Reopen();
  }
}

// The page-file byte totals count what dropped tables did too: they never
// go down (benchmarks take differences across copying ALTERs).
TEST_F(EngineTest, PageFileTotalsKeepWhatDroppedTablesDid) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  for (int chunk = 0; chunk < 10; ++chunk) {  // more than the 4 MiB pool holds
    auto txn = db_->Begin();
    for (int i = chunk * 2000; i < (chunk + 1) * 2000; ++i) {
      ASSERT_OK(txn->Insert(t, SampleRow(i, i % 7, std::nullopt, std::string(200, 'x'))));
    }
    ASSERT_OK(txn->Commit());
  }
  const DatabaseStats before = db_->Stats();
  ASSERT_GT(before.page_file_bytes_written, 0u);
  ASSERT_OK(db_->DropTable("t"));
  const DatabaseStats after = db_->Stats();
  EXPECT_GE(after.page_file_bytes_written, before.page_file_bytes_written);
  EXPECT_GE(after.page_file_bytes_read, before.page_file_bytes_read);
}

TEST_F(EngineTest, IndexesAndTablesComeAndGo) {
  Table* t = Create();
  auto txn = db_->Begin();
  for (int i = 0; i < 300; ++i) {
    ASSERT_OK(txn->Insert(t, SampleRow(i, i % 7, "u" + std::to_string(i), std::to_string(i % 3))));
  }
  ASSERT_OK(txn->Commit());
  EXPECT_TRUE(db_->CreateIndex("t", {"by_v", {3}, true}).IsAlreadyExists());  // v repeats
  ASSERT_OK(db_->CreateIndex("t", {"by_v", {3, 1}, false}));
  EXPECT_TRUE(db_->CreateIndex("t", {"by_v", {3}, false}).IsAlreadyExists());
  txn = db_->Begin();
  auto c = txn->OpenCursor(t, 3);
  ASSERT_TRUE(c.ok());
  ASSERT_OK((*c)->Seek(SeekOp::kEq, {std::string("1"), uint64_t{3}}));
  int n = 0;
  while ((*c)->Valid()) {
    ++n;
    ASSERT_OK((*c)->Next());
  }
  EXPECT_EQ(n, 14);                           // i % 3 == 1 and i % 7 == 3 for i < 300
  EXPECT_TRUE(db_->DropTable("t").IsBusy());  // txn uses it
  ASSERT_OK(txn->Commit());
  ASSERT_OK(db_->DropIndex("t", "k"));
  EXPECT_TRUE(db_->DropIndex("t", "PRIMARY").IsInvalidArgument());
  ASSERT_EQ(t->def().indexes.size(), 2u);
  Reopen();
  t = db_->FindTable("t");
  ASSERT_NE(t, nullptr);
  ASSERT_EQ(t->def().indexes.size(), 2u);
  EXPECT_EQ(t->def().indexes[1].name, "by_v");
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t, 2).size(), 300u);
  ASSERT_OK(txn->Commit());
  ASSERT_OK(db_->DropTable("t"));
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  Table* again = Create();  // same name, new spaces
  txn = db_->Begin();
  EXPECT_TRUE(ScanAll(txn.get(), again).empty());
  ASSERT_OK(txn->Commit());
  Reopen();
  EXPECT_EQ(db_->TableNames(), std::vector<std::string>{"t"});
  EXPECT_EQ(test::CountFiles(dir_.Sub("db"), ".sbt"), 3u);  // the dropped table's files are gone
}

TEST_F(EngineTest, TablesLiveInTheirChosenDirectory) {
  TableDef def = SampleTable("placed");
  def.data_dir = dir_.Sub("fast");
  Table* t = Create(def);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(test::CountFiles(dir_.Sub("fast"), ".sbt"), 3u);
}

// (id u64 auto-increment primary key, v string)
TableDef AutoIncrementTable(const std::string& name, uint64_t start = 0) {
  TableDef def;
  def.name = name;
  def.columns = {{"id", ColumnType::kUInt, 8}, {"v", ColumnType::kString}};
  def.primary_key = {0};
  def.auto_increment_column = 0;
  def.auto_increment_start = start;
  return def;
}

TEST_F(EngineTest, AutoIncrementContinuesAfterTheLargestKey) {
  Table* t = Create(AutoIncrementTable("ai"));
  auto txn = db_->Begin();
  for (int i = 0; i < 3; ++i) {
    auto id = t->NextAutoIncrement();
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, uint64_t(i + 1));
    ASSERT_OK(txn->Insert(t, {*id, std::string("x")}));
  }
  ASSERT_OK(txn->Insert(t, {uint64_t{100}, std::string("explicit")}));
  EXPECT_EQ(*t->NextAutoIncrement(), 101u);
  ASSERT_OK(txn->Commit());
  Reopen();
  EXPECT_EQ(*db_->FindTable("ai")->NextAutoIncrement(), 101u);
  EXPECT_TRUE(Create(SampleTable())->NextAutoIncrement().status().IsInvalidArgument());
}

TEST_F(EngineTest, AutoIncrementStartsAtTheTablesStartValue) {
  Table* t = Create(AutoIncrementTable("ai", 1000));
  Create(AutoIncrementTable("untouched", 1000));
  auto txn = db_->Begin();
  EXPECT_EQ(*t->NextAutoIncrement(), 1000u);
  ASSERT_OK(txn->Insert(t, {uint64_t{1000}, std::string("x")}));
  ASSERT_OK(txn->Insert(t, {uint64_t{5}, std::string("explicit, below the start")}));
  EXPECT_EQ(*t->NextAutoIncrement(), 1001u);
  ASSERT_OK(txn->Commit());
  Reopen();
  EXPECT_EQ(db_->FindTable("ai")->def().auto_increment_start, 1000u);
  EXPECT_EQ(*db_->FindTable("ai")->NextAutoIncrement(), 1001u) << "the largest key wins";
  EXPECT_EQ(*db_->FindTable("untouched")->NextAutoIncrement(), 1000u) << "the start is kept";
}

TEST_F(EngineTest, StatisticsCountBytesPerIndex) {
  Table* t = Create();
  auto txn = db_->Begin();
  for (int i = 0; i < 2000; ++i) {
    ASSERT_OK(txn->Insert(t, SampleRow(i, i, std::nullopt, std::string(100, 'v'))));
  }
  ASSERT_OK(txn->Commit());
  // A cold pool (no warm-up, whose loads are not the table's reads): the
  // scan below reads its pages back from the files.
  ASSERT_OK(db_->Close());
  db_.reset();
  Options o = test::SmallOptions(dir_.path());
  o.pool_load_at_open = false;
  auto reopened = Database::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  db_ = std::move(*reopened);
  t = db_->FindTable("t");
  const TableStats s = t->Stats();
  EXPECT_EQ(s.rows, 2000u);
  EXPECT_EQ(s.indexes[2].entries, 2000u);
  const DatabaseStats d = db_->Stats();
  EXPECT_EQ(d.commits, 0u);  // since this Open
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t).size(), 2000u);
  ASSERT_OK(txn->Commit());
  const TableStats after = t->Stats();
  EXPECT_EQ(after.rows_read, 2000u);
  EXPECT_GT(after.indexes[0].file_bytes_read, 200000u);  // read back from its file
  EXPECT_EQ(db_->Stats().commits, 1u);
  // Writes land on the PM tier (log, double-write) and then in the files.
  txn = db_->Begin();
  ASSERT_OK(txn->Update(t, SampleRow(5, 0, std::nullopt, ""), SampleRow(5, 7, "x", "y")));
  ASSERT_OK(txn->Commit());
  EXPECT_GT(t->Stats().indexes[0].redo_bytes, 0u);
  ASSERT_OK(db_->Close());
  EXPECT_GT(t->Stats().indexes[0].file_bytes_written, 0u);
}

// A transaction left open after its first write must not hold the log
// back: its undo is rewritten at the log's end (relocation) while others
// write many times the log's size; it then commits or rolls back intact.
TEST(EngineLog, IdleTransactionsDoNotStallTheLog) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.log_file_size = 4096 + (1 << 20);
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok());
  auto t = (*db)->CreateTable(SampleTable());
  ASSERT_TRUE(t.ok());
  auto idle = (*db)->Begin();
  ASSERT_OK(idle->Insert(*t, SampleRow(-1, 1, "idle", "kept")));
  auto doomed = (*db)->Begin();
  ASSERT_OK(doomed->Insert(*t, SampleRow(-2, 1, "doomed", "gone")));
  // Enough log to go round the 1 MiB log several times: without relocation
  // the idle transactions' undo would stall it.
  for (int round = 0; round < 600 && (*db)->Stats().undo_relocations == 0; ++round) {
    auto txn = (*db)->Begin();
    for (int i = 0; i < 50; ++i) {
      const int64_t id = (round * 50 + i) % 500;
      Status s = txn->Insert(*t, SampleRow(id, i, std::nullopt, std::string(200, 'w')));
      if (s.IsAlreadyExists())
        s = txn->Update(*t, SampleRow(id, 0, std::nullopt, ""),
                        SampleRow(id, i, std::nullopt, "r"));
      ASSERT_OK(s);
    }
    ASSERT_OK(txn->Commit());
  }
  EXPECT_GT((*db)->Stats().undo_relocations, 0u);
  ASSERT_OK(idle->Commit());
  ASSERT_OK(doomed->Rollback());
  auto check = (*db)->Begin();
  EXPECT_TRUE((*check->Get(*t, {int64_t{-1}})).has_value());
  EXPECT_FALSE((*check->Get(*t, {int64_t{-2}})).has_value());
}

// The engine's background threads carry names a profile or `top -H` shows
// (each names itself as it starts: the test waits for them, at most 10 s).
TEST_F(EngineTest, BackgroundThreadsAreNamed) {
  auto names = [] {
    std::multiset<std::string> all;
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      all.insert(name);
    }
    return all;
  };
  const size_t cleaners = test::SmallOptions(dir_.path()).page_cleaners;
  std::multiset<std::string> seen = names();
  for (int i = 0;
       i < 1000 && (seen.count("subito_cleaner") < cleaners || seen.count("subito_purge") < 1);
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    seen = names();
  }
  EXPECT_EQ(seen.count("subito_cleaner"), cleaners);
  EXPECT_EQ(seen.count("subito_purge"), 1u);
}

// Random single-threaded operations against a model, with rollbacks and
// savepoints, checked through every index and after reopening.
TEST_F(EngineTest, RandomOperationsMatchAModel) {
  const uint64_t seed = test::TestSeed();
  std::mt19937_64 rng(seed);
  Table* t = Create();
  std::map<int64_t, Row> model;
  auto check = [&](Transaction* txn) {
    std::vector<Row> want;
    for (auto& [id, row] : model) want.push_back(row);
    ASSERT_EQ(ScanAll(txn, t), want) << "seed " << seed;
    auto by_k = ScanAll(txn, t, 1);
    auto by_u = ScanAll(txn, t, 2);
    ASSERT_EQ(by_k.size(), want.size());
    ASSERT_EQ(by_u.size(), want.size());
    for (size_t i = 1; i < by_k.size(); ++i) {
      ASSERT_LE(std::get<uint64_t>(by_k[i - 1][1]), std::get<uint64_t>(by_k[i][1]));
    }
  };
  for (int round = 0; round < 150; ++round) {
    auto txn = db_->Begin();
    std::map<int64_t, Row> work = model;
    std::map<int64_t, Row> at_sp = work;
    uint64_t sp = txn->Savepoint();
    const int ops = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < ops; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % 400);
      const auto u =
          rng() % 3 ? std::optional<std::string>("u" + std::to_string(rng() % 500)) : std::nullopt;
      const Row row = SampleRow(id, rng() % 50, u, std::string(rng() % 600, 'a' + rng() % 26));
      const bool u_taken = u && std::any_of(work.begin(), work.end(), [&](auto& e) {
                             return e.first != id && e.second[2] == Value(*u);
                           });
      switch (rng() % 5) {
        case 0:
        case 1: {
          Status s = txn->Insert(t, row);
          if (work.count(id) || u_taken) {
            ASSERT_TRUE(s.IsAlreadyExists()) << s.ToString() << " seed " << seed;
          } else {
            ASSERT_OK(s);
            work[id] = row;
          }
          break;
        }
        case 2: {
          Status s = txn->Update(t, row, row);
          if (!work.count(id)) {
            ASSERT_TRUE(s.IsNotFound()) << s.ToString();
          } else if (u_taken) {
            ASSERT_TRUE(s.IsAlreadyExists()) << s.ToString();
          } else {
            ASSERT_OK(s);
            work[id] = row;
          }
          break;
        }
        case 3: {
          Status s = txn->Delete(t, row);
          if (work.erase(id)) {
            ASSERT_OK(s);
          } else {
            ASSERT_TRUE(s.IsNotFound()) << s.ToString();
          }
          break;
        }
        default:
          if (rng() % 2) {
            ASSERT_OK(txn->RollbackTo(sp));
            work = at_sp;
          } else {
            sp = txn->Savepoint();
            at_sp = work;
          }
      }
    }
    if (rng() % 4 == 0) {
      ASSERT_OK(txn->Rollback());
    } else {
      ASSERT_OK(txn->Commit());
      model = work;
    }
    if (round % 25 == 0) {
      auto r = db_->Begin();
      check(r.get());
      ASSERT_OK(r->Commit());
    }
  }
  Reopen();
  t = db_->FindTable("t");
  auto r = db_->Begin();
  check(r.get());
  EXPECT_EQ(t->Stats().rows, model.size());
}

// Threads own disjoint key ranges (so each has its own exact model) while
// snapshot readers scan everything and check that both secondary indexes
// agree with the table within one snapshot.
TEST_F(EngineTest, ConcurrentTransactionsMatchTheirModels) {
  const uint64_t seed = test::TestSeed();
  Table* t = Create();
  constexpr int kThreads = 3;
  std::vector<std::map<int64_t, Row>> models(kThreads);
  std::atomic<bool> done{false};
  std::atomic<int> scans{0};
  std::thread reader([&] {
    while (!done.load()) {
      auto txn = db_->Begin();
      const auto rows = ScanAll(txn.get(), t);
      const auto by_k = ScanAll(txn.get(), t, 1);
      const auto by_u = ScanAll(txn.get(), t, 2);
      ASSERT_EQ(rows.size(), by_k.size());
      size_t non_null_u = 0;
      for (auto& row : rows) non_null_u += !std::holds_alternative<std::monostate>(row[2]);
      ASSERT_EQ(rows.size(), by_u.size());
      ASSERT_LE(non_null_u, rows.size());
      ASSERT_OK(txn->Commit());
      ++scans;
    }
  });
  std::vector<std::thread> writers;
  for (int w = 0; w < kThreads; ++w) {
    writers.emplace_back([&, w] {
      std::mt19937_64 rng(seed + w);
      auto& model = models[w];
      for (int round = 0; round < 150; ++round) {
        auto txn = db_->Begin(round % 2 ? Isolation::kReadCommitted : Isolation::kRepeatableRead);
        auto work = model;
        for (int i = 0; i < 8; ++i) {
          const int64_t id = w * 1000 + static_cast<int64_t>(rng() % 100);
          const std::string u = "w" + std::to_string(w) + "-" + std::to_string(rng() % 200);
          const Row row = SampleRow(id, rng() % 10, u, std::string(rng() % 300, 'q'));
          const bool u_taken = std::any_of(work.begin(), work.end(), [&](auto& e) {
            return e.first != id && e.second[2] == Value(u);
          });
          Status s;
          if (rng() % 3 == 0) {
            s = txn->Delete(t, row);
            if (work.erase(id)) ASSERT_OK(s);
          } else if (work.count(id)) {
            s = txn->Update(t, row, row);
            if (!u_taken) {
              ASSERT_OK(s);
              work[id] = row;
            }
          } else {
            s = txn->Insert(t, row);
            if (!u_taken) {
              ASSERT_OK(s);
              work[id] = row;
            }
          }
        }
        auto got = txn->Get(t, {int64_t{w * 1000 + 7}});
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(got->has_value(), work.count(w * 1000 + 7) > 0);
        if (rng() % 5 == 0) {
          ASSERT_OK(txn->Rollback());
        } else {
          ASSERT_OK(txn->Commit());
          model = work;
        }
      }
    });
  }
  for (auto& th : writers) th.join();
  done = true;
  reader.join();
  EXPECT_GT(scans.load(), 0);
  std::vector<Row> want;
  for (auto& m : models) {
    for (auto& [id, row] : m) want.push_back(row);
  }
  auto txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), t), want) << "seed " << seed;
  ASSERT_OK(txn->Commit());
  Reopen();
  txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), db_->FindTable("t")), want) << "seed " << seed;
}

// A bulk load fills an empty table: every index agrees with the rows,
// duplicates are refused without adding the row, nothing else may use the
// table meanwhile, and the rows are durable once Finish returns (no Close:
// a crash). Rows come in key order (the primary key is built bottom up),
// in key order and then not (the builder finishes, lookups take over), or
// scattered; the non-unique index is built from sorted runs (the 4 MiB
// pool bounds a run to 256 KiB), some values go to overflow chains.
TEST_F(EngineTest, BulkLoadFillsAnEmptyTableAndKeepsItsIndexesRight) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  {
    auto full = Create(SampleTable("full"));
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(full, SampleRow(1, 1, std::nullopt, "x")));
    ASSERT_OK(txn->Commit());
    auto refused = db_->BeginBulkLoad(full);  // not empty
    EXPECT_TRUE(refused.status().IsBusy()) << refused.status().ToString();
    auto reader = db_->Begin();
    ASSERT_TRUE(reader->Get(t, {int64_t{1}}).ok());  // reader now uses t
    EXPECT_TRUE(db_->BeginBulkLoad(t).status().IsBusy());
    ASSERT_OK(reader->Commit());
  }
  constexpr int64_t kRows = 20000;
  enum Order { kAscending, kAscendingThenScattered, kScattered };
  std::map<std::string, std::map<int64_t, Row>> models;
  std::mt19937_64 rng(test::TestSeed());
  for (Order order : {kAscending, kAscendingThenScattered, kScattered}) {
    const std::string name = "t" + std::to_string(order);
    Table* lt = order == kAscending ? t : Create(SampleTable(name));
    ASSERT_NE(lt, nullptr);
    auto loader = db_->BeginBulkLoad(lt);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    EXPECT_TRUE(db_->BeginBulkLoad(lt).status().IsBusy());  // one loader at a time
    auto other = db_->Begin();
    EXPECT_TRUE(other->Insert(lt, SampleRow(-1, 0, std::nullopt, "")).IsBusy());
    EXPECT_TRUE(db_->DropTable(lt->def().name).IsBusy());
    ASSERT_OK(other->Rollback());
    std::map<int64_t, Row>& model = models[lt->def().name];
    const DatabaseStats before = db_->Stats();
    for (int64_t id = 0; id < kRows; ++id) {
      int64_t key = id;
      if (order == kScattered || (order == kAscendingThenScattered && id >= kRows / 2)) {
        key = (id * 7919) % kRows;
      }
      if (model.count(key)) continue;
      std::optional<std::string> u;
      if (key % 3 == 0) u = "u" + std::to_string(key);
      const size_t len = rng() % 100 == 0 ? 3000 + rng() % 5000 : rng() % 200;
      Row row = SampleRow(key, rng() % 50, u, std::string(len, static_cast<char>('a' + key % 26)));
      ASSERT_OK((*loader)->Add(row));
      model[key] = row;
      if (order == kAscending && id == 100) {
        Status dup = (*loader)->Add(row);  // the key just added
        EXPECT_TRUE(dup.IsAlreadyExists()) << dup.ToString();
      }
    }
    Status dup = (*loader)->Add(SampleRow(5, 1, std::nullopt, ""));
    EXPECT_TRUE(dup.IsAlreadyExists()) << dup.ToString();
    dup = (*loader)->Add(SampleRow(kRows + 1000, 1, "u3", ""));
    EXPECT_TRUE(dup.IsAlreadyExists()) << dup.ToString();
    EXPECT_NE(dup.message().find("unique index u"), std::string::npos) << dup.ToString();
    ASSERT_OK((*loader)->Finish());
    loader->reset();
    // Index k was built from sorted runs; the primary key bottom up while
    // its keys ascended (all of them, the first half and a few, the first
    // three).
    const uint64_t built =
        db_->Stats().bulk_built_entries - before.bulk_built_entries - model.size();
    if (order == kAscending) {
      EXPECT_EQ(built, model.size());
    } else if (order == kAscendingThenScattered) {
      EXPECT_GE(built, kRows / 2);
      EXPECT_LT(built, kRows / 2 + 10);
    } else {
      EXPECT_EQ(built, 3u);
    }
    const DatabaseStats after = db_->Stats();
    EXPECT_GT(after.sort_runs, before.sort_runs);
    EXPECT_EQ(test::CountFiles(dir_.Sub("db"), ".run"), 0u) << "a sort run outlived its load";
    other = db_->Begin();
    ASSERT_OK(other->Insert(lt, SampleRow(-1, 0, std::nullopt, "after")));
    ASSERT_OK(other->Commit());
    model[-1] = SampleRow(-1, 0, std::nullopt, "after");
  }
  db_.reset();  // no Close: what Finish made durable must be found by recovery
  Open();
  for (auto& [name, model] : models) {
    SCOPED_TRACE(name);
    t = db_->FindTable(name);
    ASSERT_NE(t, nullptr);
    auto txn = db_->Begin();
    std::vector<Row> want;
    for (auto& [k, r] : model) want.push_back(r);
    EXPECT_EQ(ScanAll(txn.get(), t, 0), want);
    std::vector<Row> by_k = ScanAll(txn.get(), t, 1);
    ASSERT_EQ(by_k.size(), want.size());
    std::sort(want.begin(), want.end(), [](const Row& a, const Row& b) {
      return std::make_pair(std::get<uint64_t>(a[1]), std::get<int64_t>(a[0])) <
             std::make_pair(std::get<uint64_t>(b[1]), std::get<int64_t>(b[0]));
    });
    EXPECT_EQ(by_k, want);
    std::vector<Row> by_u = ScanAll(txn.get(), t, 2);
    ASSERT_EQ(by_u.size(), model.size());  // NULLs are entries too
    auto with_u = [](const Row& r) { return !std::holds_alternative<std::monostate>(r[2]); };
    EXPECT_EQ(std::count_if(by_u.begin(), by_u.end(), with_u),
              std::count_if(want.begin(), want.end(), with_u));
    EXPECT_GT(std::count_if(want.begin(), want.end(), with_u), kRows / 4);
    EXPECT_EQ(t->Stats().rows, model.size());
  }
}

// A load that ends without Finish leaves a table that may lack index
// entries: nothing may use it but DROP, and a restart drops it (K4).
TEST_F(EngineTest, AnUnfinishedBulkLoadLeavesATableOnlyToDrop) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  {
    auto loader = db_->BeginBulkLoad(t);
    ASSERT_TRUE(loader.ok()) << loader.status().ToString();
    for (int64_t id = 0; id < 100; ++id) {
      ASSERT_OK((*loader)->Add(SampleRow(id, id % 5, std::nullopt, "x")));
    }
  }  // no Finish
  auto txn = db_->Begin();
  Status use = txn->Get(t, {int64_t{1}}).status();
  EXPECT_TRUE(use.IsBusy()) << use.ToString();
  EXPECT_NE(use.message().find("incomplete"), std::string::npos) << use.ToString();
  EXPECT_TRUE(db_->BeginBulkLoad(t).status().IsBusy());
  ASSERT_OK(txn->Commit());
  Create(SampleTable("kept"));
  Reopen();
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  EXPECT_NE(db_->FindTable("kept"), nullptr);
  t = Create();  // the name is free again
  ASSERT_NE(t, nullptr);
  {
    auto loader = db_->BeginBulkLoad(t);
    ASSERT_TRUE(loader.ok());
  }
  ASSERT_OK(db_->DropTable("t"));
}

TEST_F(EngineTest, RenameTableKeepsRowsAcrossReopen) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(1, 7, "a", "one")));
    ASSERT_OK(txn->Commit());
  }
  Create(SampleTable("other"));
  EXPECT_TRUE(db_->RenameTable("t", "other").IsAlreadyExists());
  EXPECT_TRUE(db_->RenameTable("missing", "x").IsNotFound());
  {
    auto txn = db_->Begin();
    ASSERT_OK(txn->Insert(t, SampleRow(2, 7, "b", "two")));
    EXPECT_TRUE(db_->RenameTable("t", "renamed").IsBusy());
    ASSERT_OK(txn->Commit());
  }
  ASSERT_OK(db_->RenameTable("t", "renamed"));
  EXPECT_EQ(t->def().name, "renamed");
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  Reopen();
  Table* r = db_->FindTable("renamed");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(db_->FindTable("t"), nullptr);
  auto txn = db_->Begin();
  EXPECT_EQ(ScanAll(txn.get(), r).size(), 2u);
  EXPECT_EQ(ScanAll(txn.get(), r, 1).size(), 2u);
  // The name is free again.
  EXPECT_NE(Create(SampleTable("t")), nullptr);
}

TEST_F(EngineTest, EstimatesFollowTheData) {
  Table* t = Create();
  ASSERT_NE(t, nullptr);
  auto empty = t->EstimateEntriesPerKey(1, 8);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(*empty, (std::vector<double>{1.0, 1.0}));
  constexpr int kRows = 20000;
  for (int base = 0; base < kRows; base += 2000) {
    auto txn = db_->Begin();
    for (int i = base; i < base + 2000; ++i) {
      ASSERT_OK(txn->Insert(t, SampleRow(i, static_cast<uint64_t>(i % 50), std::nullopt, "v")));
    }
    ASSERT_OK(txn->Commit());
  }
  using B = Table::Bound;
  auto range = [&](uint32_t ix, std::optional<B> lo, std::optional<B> hi) {
    auto r = t->EstimateRange(ix, lo, hi);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : 0;
  };
  // Small ranges are exact, bounds inclusive or not.
  EXPECT_EQ(range(0, B{{int64_t{100}}, true}, B{{int64_t{109}}, true}), 10u);
  EXPECT_EQ(range(0, B{{int64_t{100}}, false}, B{{int64_t{109}}, false}), 8u);
  EXPECT_EQ(range(0, B{{int64_t{5}}, true}, B{{int64_t{4}}, true}), 0u);
  EXPECT_EQ(range(1, B{{uint64_t{3}}, true}, B{{uint64_t{3}}, true}) > 0, true);
  // Large ones are interpolated: within a factor of two here.
  const uint64_t half = range(0, B{{int64_t{0}}, true}, B{{int64_t{kRows / 2 - 1}}, true});
  EXPECT_GT(half, kRows / 4u);
  EXPECT_LT(half, kRows * 3u / 4u);
  const uint64_t all = range(0, std::nullopt, std::nullopt);
  EXPECT_GT(all, kRows / 2u);
  EXPECT_LT(all, kRows * 2u);
  const uint64_t one_k = range(1, B{{uint64_t{7}}, true}, B{{uint64_t{7}}, true});
  EXPECT_GT(one_k, kRows / 50u / 2u);
  EXPECT_LT(one_k, kRows / 50u * 2u);
  // Entries per key: k has 50 values (400 rows each); with the primary key
  // appended (a non-unique index's prefixes go on into it, for MariaDB's
  // extended keys) an entry is unique; the primary key is unique.
  auto k = t->EstimateEntriesPerKey(1, 24);
  ASSERT_TRUE(k.ok()) << k.status().ToString();
  ASSERT_EQ(k->size(), 2u);
  EXPECT_GT((*k)[0], 200.0);
  EXPECT_LT((*k)[0], 800.0);
  EXPECT_EQ((*k)[1], 1.0);
  auto pk = t->EstimateEntriesPerKey(0, 8);
  ASSERT_TRUE(pk.ok());
  EXPECT_EQ(*pk, std::vector<double>{1.0});
  EXPECT_TRUE(t->EstimateRange(9, std::nullopt, std::nullopt).status().IsInvalidArgument());
}

}  // namespace
}  // namespace subito
