// Per-table and per-index I/O accounting (Table::Stats, Database::
// AllTableStats, ResetIoStats) and the placement advice built on it
// (include/subito/placement.h).
#include <gtest/gtest.h>

#include <map>

#include "engine_util.h"
#include "subito/placement.h"
#include "test_util.h"

namespace subito {
namespace {

using test::SampleRow;
using test::ScanAll;

Row RowOf(int64_t id, int version = 0) {
  return SampleRow(
      id, static_cast<uint64_t>(id % 50), std::nullopt,
      "value " + std::to_string(id) + "/" + std::to_string(version) + std::string(100, 'v'));
}

void Fill(Database* db, Table* t, int64_t from, int64_t to) {
  for (int64_t id = from; id < to; id += 500) {
    auto txn = db->Begin();
    for (int64_t k = id; k < std::min(to, id + 500); ++k) ASSERT_OK(txn->Insert(t, RowOf(k)));
    ASSERT_OK(txn->Commit());
  }
}

std::map<std::string, TableStats> ByName(const std::vector<TableStats>& all) {
  std::map<std::string, TableStats> m;
  for (const TableStats& s : all) m[s.name] = s;
  return m;
}

class TableIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open(Opts());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    db_ = std::move(*db);
    for (const char* name : {"item", "history", "stock", "unused"}) {
      auto t = db_->CreateTable(test::SampleTable(name));
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      tables_[name] = *t;
    }
    Fill(db_.get(), tables_["item"], 0, kRows);
    Fill(db_.get(), tables_["stock"], 0, kRows);
  }
  // The TPC-C pattern in small: item only read, history only inserted,
  // stock updated in place (five rows for each history row, as new-order
  // updates ten stock rows and payment inserts one history row).
  void Work() {
    for (int i = 0; i < 200; ++i) {
      auto txn = db_->Begin();
      const int64_t id = (i * 7919) % kRows;
      auto got = txn->Get(tables_["item"], {id});
      ASSERT_TRUE(got.ok() && got->has_value());
      for (int64_t s = id; s < id + 5; ++s) {
        ASSERT_OK(txn->Update(tables_["stock"], RowOf(s, version_[s]), RowOf(s, version_[s] + 1)));
        ++version_[s];
      }
      ASSERT_OK(txn->Insert(tables_["history"], RowOf(history_++)));
      ASSERT_OK(txn->Commit());
    }
  }
  Options Opts() const {
    Options o = test::SmallOptions(dir_.path());  // 4 MB pool: pages are read back
    o.ppl_bytes = 4096 + 4000 * 320;
    o.ppl_threshold = 256;
    if (eager_cleaners_) o.max_checkpoint_age_bytes = 16 << 10;
    return o;
  }
  static constexpr int64_t kRows = 20000;  // each table is larger than the pool
  // The cleaners write dirty pages soon after their changes (the redo
  // since the checkpoint passes its bound at once), not only when the pool
  // is too dirty: pages written once then take small changes to their logs.
  bool eager_cleaners_ = false;
  int64_t history_ = 0;
  test::ScratchDir dir_;
  std::unique_ptr<Database> db_;
  std::map<std::string, Table*> tables_;
  std::map<int64_t, int> version_;
};

TEST_F(TableIoTest, CountersFollowKnownStatementsAndStartAgainOnReset) {
  EXPECT_EQ(tables_["item"]->Stats().rows_inserted, uint64_t{kRows});
  db_->ResetIoStats();
  Work();
  // A scan through index k counts there; Get counts on the primary key.
  {
    auto txn = db_->Begin();
    EXPECT_EQ(ScanAll(txn.get(), tables_["item"], 1).size(), size_t{kRows});
    ASSERT_OK(txn->Commit());
  }
  auto all = ByName(db_->AllTableStats());
  ASSERT_EQ(all.size(), 4u);
  const TableStats& item = all["item"];
  EXPECT_EQ(item.rows_inserted, 0u) << "reset";
  EXPECT_EQ(item.rows_updated + item.rows_deleted, 0u);
  EXPECT_EQ(item.rows_read, 200u + kRows);
  EXPECT_EQ(item.indexes[0].rows_read, 200u);
  EXPECT_EQ(item.indexes[1].rows_read, uint64_t{kRows});
  EXPECT_EQ(item.indexes[0].redo_bytes, 0u) << "item was not changed since the reset";
  EXPECT_GT(item.indexes[0].buffer_hits + item.indexes[0].buffer_misses, 0u);
  EXPECT_GT(item.indexes[0].file_pages_read, 0u) << "a 4 MB pool evicts item's pages";
  EXPECT_EQ(item.indexes[0].file_bytes_read, item.indexes[0].file_pages_read * 4096);
  EXPECT_EQ(item.rows, uint64_t{kRows});
  EXPECT_EQ(item.dir, dir_.path() + "/db");
  EXPECT_NE(item.indexes[0].path.find(item.dir), std::string::npos);

  EXPECT_EQ(all["history"].rows_inserted, 200u);
  EXPECT_GT(all["history"].indexes[0].redo_bytes, 0u);
  EXPECT_EQ(all["stock"].rows_updated, 1000u);
  EXPECT_EQ(all["stock"].rows_inserted, 0u);
  EXPECT_GT(all["stock"].indexes[0].redo_bytes, 0u);
  EXPECT_EQ(all["unused"].rows_read + all["unused"].rows_inserted, 0u);
  EXPECT_EQ(all["unused"].indexes[0].buffer_hits + all["unused"].indexes[0].buffer_misses, 0u);
  EXPECT_GT(all["stock"].seconds, 0.0);

  db_->ResetIoStats();
  const TableStats stock = tables_["stock"]->Stats();
  EXPECT_EQ(stock.rows_updated, 0u);
  EXPECT_EQ(stock.indexes[0].redo_bytes, 0u);
  EXPECT_EQ(stock.indexes[0].pages_at_start, stock.indexes[0].pages);
  EXPECT_LT(stock.seconds, all["stock"].seconds);
}

class TableIoEagerTest : public TableIoTest {
 protected:
  void SetUp() override {
    eager_cleaners_ = true;
    TableIoTest::SetUp();
  }
};

// Without a reset, the bytes attributed to indexes add up to the database's
// totals: nothing written on a table's behalf goes uncounted.
TEST_F(TableIoEagerTest, PerIndexBytesAddUpToTheDatabaseTotals) {
  Work();
  ASSERT_OK(db_->Close());
  const DatabaseStats d = db_->Stats();
  uint64_t dwb = 0, ppl = 0, hits = 0, misses = 0, written = 0, read = 0, appends = 0;
  for (const TableStats& t : db_->AllTableStats()) {
    for (const IndexStats& ix : t.indexes) {
      dwb += ix.double_write_bytes;
      ppl += ix.ppl_bytes;
      appends += ix.ppl_appends;
      hits += ix.buffer_hits;
      misses += ix.buffer_misses;
      written += ix.file_bytes_written;
      read += ix.file_bytes_read;
    }
  }
  EXPECT_GT(d.double_write_bytes, 0u);
  EXPECT_EQ(dwb, d.double_write_bytes);
  EXPECT_GT(d.ppl_bytes, 0u) << "small updates of evicted pages go to the page log";
  EXPECT_EQ(ppl, d.ppl_bytes);
  EXPECT_EQ(appends, d.ppl_pages_logged);
  EXPECT_EQ(hits, d.buffer_hits);
  EXPECT_EQ(misses, d.buffer_misses);
  EXPECT_EQ(written, d.page_file_bytes_written);
  EXPECT_EQ(read, d.page_file_bytes_read);
}

TEST_F(TableIoTest, OneTableStartsAgainAlone) {
  db_->ResetIoStats();
  Work();
  tables_["stock"]->ResetIoStats();
  auto all = ByName(db_->AllTableStats());
  EXPECT_EQ(all["stock"].rows_updated, 0u);
  EXPECT_EQ(all["stock"].indexes[0].redo_bytes, 0u);
  EXPECT_EQ(all["stock"].indexes[0].pages_at_start, all["stock"].indexes[0].pages);
  EXPECT_EQ(all["history"].rows_inserted, 200u) << "other tables keep counting";
  EXPECT_EQ(all["item"].rows_read, 200u);
}

TEST_F(TableIoTest, CountingStartsAfterOpen) {
  Work();
  ASSERT_OK(db_->Close());
  db_.reset();
  Options o = Opts();
  o.page_size = 8192;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  db_ = std::move(*db);
  EXPECT_EQ(db_->options().page_size, 4096u);
  for (const TableStats& t : db_->AllTableStats()) {
    EXPECT_EQ(t.rows_read + t.rows_inserted + t.rows_updated + t.rows_deleted, 0u) << t.name;
    EXPECT_EQ(t.page_size, 4096u) << "the database's, as created";
    for (const IndexStats& ix : t.indexes) {
      EXPECT_EQ(ix.buffer_hits + ix.buffer_misses + ix.file_bytes_read + ix.redo_bytes, 0u)
          << t.name << "." << ix.name << ": what opening it read is not the table's work";
    }
  }
}

TEST_F(TableIoTest, AdviceClassesTheTpccPattern) {
  db_->ResetIoStats();
  Work();
  std::map<std::string, PlacementAdvice> advice;
  for (PlacementAdvice& a : AdvisePlacement(db_->AllTableStats())) advice[a.table] = a;
  EXPECT_EQ(advice["item"].kind, TableClass::kReadOnly) << advice["item"].reason;
  EXPECT_EQ(advice["history"].kind, TableClass::kGrowing) << advice["history"].reason;
  EXPECT_GT(advice["history"].growth_bytes, 0);
  EXPECT_EQ(advice["stock"].kind, TableClass::kHotUpdate) << advice["stock"].reason;
  EXPECT_EQ(advice["stock"].write_rank, 1u);
  EXPECT_EQ(advice["stock"].action, "fastest device");
  EXPECT_EQ(advice["unused"].kind, TableClass::kIdle);
  EXPECT_EQ(advice["unused"].action, "keep");
}

TableStats Synthetic(const std::string& name, uint64_t read, uint64_t ins, uint64_t upd,
                     uint64_t del, uint64_t file_read, uint64_t written, uint64_t grown_pages) {
  TableStats t;
  t.name = name;
  t.rows_read = read;
  t.rows_inserted = ins;
  t.rows_updated = upd;
  t.rows_deleted = del;
  t.seconds = 10;
  t.page_size = 4096;
  IndexStats ix;
  ix.pages_at_start = 100;
  ix.pages = 100 + grown_pages;
  ix.file_bytes_read = file_read;
  ix.file_bytes_written = written;
  t.indexes.push_back(ix);
  return t;
}

TEST(Placement, ClassesSharesAndActions) {
  std::vector<TableStats> tables = {
      Synthetic("ro_cached", 500, 0, 0, 0, 0, 0, 0),
      Synthetic("ro_disk", 500, 0, 0, 0, 600, 0, 0),
      Synthetic("log", 0, 1000, 0, 0, 0, 100, 10),
      Synthetic("queue", 100, 1000, 0, 990, 0, 100, 0),  // net growth without new pages
      Synthetic("lookup", 2000, 0, 100, 0, 400, 100, 0),
      Synthetic("hot", 1000, 0, 900, 0, 0, 700, 0),
      Synthetic("none", 0, 0, 0, 0, 0, 0, 0),
      Synthetic("looked_up", 0, 0, 0, 0, 0, 0, 0),
  };
  tables.back().indexes[0].buffer_hits = 50;  // the engine's own lookups only
  const std::vector<PlacementAdvice> a = AdvisePlacement(tables);
  ASSERT_EQ(a.size(), tables.size());
  EXPECT_EQ(a[0].kind, TableClass::kReadOnly);
  EXPECT_EQ(a[0].action, "keep") << "served from the buffer pool";
  EXPECT_EQ(a[1].kind, TableClass::kReadOnly);
  EXPECT_EQ(a[1].action, "separate device");
  EXPECT_DOUBLE_EQ(a[1].read_share, 0.6);
  EXPECT_EQ(a[2].kind, TableClass::kGrowing);
  EXPECT_EQ(a[2].growth_bytes, 10 * 4096);
  EXPECT_DOUBLE_EQ(a[2].growth_bytes_per_second, 4096.0);
  EXPECT_EQ(a[2].action, "room to grow");
  EXPECT_EQ(a[3].kind, TableClass::kGrowing);
  EXPECT_EQ(a[4].kind, TableClass::kReadMostly);
  EXPECT_EQ(a[4].action, "separate device") << "40% of the reads";
  EXPECT_EQ(a[5].kind, TableClass::kHotUpdate);
  EXPECT_EQ(a[5].write_rank, 1u);
  EXPECT_DOUBLE_EQ(a[5].write_share, 0.7);
  EXPECT_EQ(a[5].action, "fastest device");
  EXPECT_EQ(a[6].kind, TableClass::kIdle);
  EXPECT_EQ(a[7].kind, TableClass::kIdle) << "page lookups alone are not use";
  EXPECT_STREQ(TableClassName(a[5].kind), "hot-update");
}

}  // namespace
}  // namespace subito
