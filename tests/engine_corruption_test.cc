// Damaged files under the embedded API: a bit flip in a page, the log or the
// catalog, or a truncated page file, is refused with an error naming what is
// wrong; never a crash, never a wrong row.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "engine_util.h"
#include "test_util.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace subito {
namespace {

namespace fs = std::filesystem;
using test::SampleRow;

void Flip(const std::string& path, uint64_t offset) {
  std::vector<uint8_t> bytes = test::ReadFile(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] ^= 0x10;
  test::WriteFile(path, bytes);
}

class EngineCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Open(test::SmallOptions(dir_.path()));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto t = (*db)->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    auto txn = (*db)->Begin();
    for (int i = 0; i < 3000; ++i) {
      const Row row = SampleRow(i, i % 10, std::nullopt, std::string(40, 'a' + i % 26));
      ASSERT_OK(txn->Insert(*t, row));
      rows_.push_back(row);
    }
    ASSERT_OK(txn->Commit());
    ASSERT_OK((*db)->Close());
    // Rewrite only the last row, so the double-write area holds copies of
    // the last leaf (and the space header) and not of the pages flipped below.
    db = Database::Open(test::SmallOptions(dir_.path()));
    ASSERT_TRUE(db.ok());
    txn = (*db)->Begin();
    Row last = rows_.back();
    last[3] = std::string(40, 'z');
    ASSERT_OK(txn->Update((*db)->FindTable("t"), rows_.back(), last));
    rows_.back() = last;
    ASSERT_OK(txn->Commit());
    ASSERT_OK((*db)->Close());
  }
  std::string PrimaryFile() {
    for (auto& e : fs::directory_iterator(dir_.Sub("db"))) {
      if (e.path().filename().string().find("-PRIMARY-") != std::string::npos) return e.path();
    }
    return "";
  }
  // Reads everything it can; returns the first error. Rows seen before it
  // must be the right ones.
  Status ScanStatus() {
    auto db = Database::Open(test::SmallOptions(dir_.path()));
    if (!db.ok()) return db.status();
    auto txn = (*db)->Begin();
    auto c = txn->OpenCursor((*db)->FindTable("t"), 0);
    if (!c.ok()) return c.status();
    Status s = (*c)->Seek(SeekOp::kFirst);
    size_t n = 0;
    for (; s.ok() && (*c)->Valid(); s = (*c)->Next(), ++n) {
      EXPECT_EQ((*c)->row(), rows_.at(n)) << "a wrong row instead of an error";
    }
    if (s.ok()) {
      EXPECT_EQ(n, rows_.size());
    }
    return s;
  }
  test::ScratchDir dir_;
  std::vector<Row> rows_;
};

TEST_F(EngineCorruption, IntactFilesReadBack) {
  ASSERT_OK(ScanStatus());
}

TEST_F(EngineCorruption, FlippedPageIsRefusedNamingFileAndPage) {
  const std::string file = PrimaryFile();
  Flip(file, 1 * 4096 + 2000);  // the root: every read passes through it
  Status s = ScanStatus();
  ASSERT_TRUE(s.IsCorruption()) << s.ToString();
  EXPECT_NE(s.message().find(fs::path(file).filename().string()), std::string::npos)
      << s.ToString();
  EXPECT_NE(s.message().find("page 1"), std::string::npos) << s.ToString();
}

TEST_F(EngineCorruption, FlippedLeafFailsOnlyReadsThatNeedIt) {
  Flip(PrimaryFile(), 3 * 4096 + 3000);  // a leaf near the start
  auto db = Database::Open(test::SmallOptions(dir_.path()));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto txn = (*db)->Begin();
  Table* t = (*db)->FindTable("t");
  auto good = txn->Get(t, {int64_t{2999}});  // the last leaf is intact
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  EXPECT_EQ(**good, rows_.back());
  int refused = 0;
  for (int64_t id = 0; id < 3000; id += 7) {
    auto r = txn->Get(t, {id});
    if (!r.ok()) {
      EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
      ++refused;
    } else {
      ASSERT_TRUE(r->has_value());
      EXPECT_EQ(**r, rows_[static_cast<size_t>(id)]);
    }
  }
  EXPECT_GT(refused, 0);
}

TEST_F(EngineCorruption, TruncatedPageFileIsRefused) {
  const std::string file = PrimaryFile();
  fs::resize_file(file, fs::file_size(file) / 2 + 100);
  Status s = ScanStatus();
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.IsCorruption() || s.IsIOError()) << s.ToString();
}

TEST_F(EngineCorruption, FlippedCatalogIsRefused) {
  Flip(dir_.Sub("db/catalog"), 30);
  auto db = Database::Open(test::SmallOptions(dir_.path()));
  ASSERT_TRUE(db.status().IsCorruption()) << db.status().ToString();
  EXPECT_NE(db.status().message().find("catalog"), std::string::npos);
}

// A catalog of format version 1 (before the log salt and the tables'
// auto_increment_start) still opens; a version from the future is refused
// by number.
// Offsets in a catalog body with one table (see docs/formats/catalog.md).
struct OneTableCatalog {
  static constexpr size_t kSaltAt = 4 + 4 + 4 + 1;
  static constexpr size_t kFloorAt = kSaltAt + 8;  // u64 lsn_floor (version 4)
  size_t autoinc_start_at = 0;                     // the table's u64 auto_increment_start
  size_t temporary_at = 0;                         // the table's u8 temporary (version 3)
  std::vector<size_t> descending_at;               // each column's u8 descending (version 3)
  explicit OneTableCatalog(const std::vector<uint8_t>& image) {
    const uint8_t* body = image.data() + 20;
    size_t at = kFloorAt + 8 + 4 + 4 + 1;  // the LSN floor, table count, table id and state
    at += 4 + DecodeFixed32(body + at);    // name
    at += 4 + DecodeFixed32(body + at);    // data_dir
    at += 4;                               // auto_increment_column
    autoinc_start_at = at;
    at += 8;
    temporary_at = at;
    at += 1;
    const uint32_t columns = DecodeFixed32(body + at);
    at += 4;
    for (uint32_t c = 0; c < columns; ++c) {
      at +=
          4 + DecodeFixed32(body + at) + 1 + 1 + 1 + 4;  // name, type, width, nullable, max_length
      descending_at.push_back(at);
      at += 1;
    }
  }
};

// `image` less the body bytes at the given offsets, with its header redone.
std::vector<uint8_t> WithoutBodyBytes(const std::vector<uint8_t>& image,
                                      const std::vector<std::pair<size_t, size_t>>& cuts,
                                      uint32_t version) {
  std::vector<uint8_t> out(image.begin(), image.begin() + 20);
  size_t from = 0;
  for (const auto& [at, n] : cuts) {
    out.insert(out.end(), image.begin() + 20 + from, image.begin() + 20 + at);
    from = at + n;
  }
  out.insert(out.end(), image.begin() + 20 + from, image.end());
  EncodeFixed32(out.data() + 8, version);
  EncodeFixed32(out.data() + 12, static_cast<uint32_t>(out.size() - 20));
  EncodeFixed32(out.data() + 16, crc32c::Value(out.data() + 20, out.size() - 20));
  return out;
}

TEST_F(EngineCorruption, CatalogFormatVersionsAreReadOrRefusedByNumber) {
  const std::string path = dir_.Sub("db/catalog");
  const std::vector<uint8_t> v4 = test::ReadFile(path);
  ASSERT_EQ(DecodeFixed32(v4.data() + 8), 4u);
  const OneTableCatalog layout(v4);
  ASSERT_LE(20 + layout.descending_at.back() + 1, v4.size());
  // v3 lacks the u64 LSN floor (after the log salt).
  std::vector<std::pair<size_t, size_t>> v3_cuts = {{OneTableCatalog::kFloorAt, 8}};
  // v2 also lacks the table's temporary byte and each column's descending byte.
  ASSERT_EQ(v4[20 + layout.temporary_at], 0u);
  std::vector<std::pair<size_t, size_t>> v2_cuts = v3_cuts;
  v2_cuts.emplace_back(layout.temporary_at, 1);
  for (size_t at : layout.descending_at) {
    ASSERT_EQ(v4[20 + at], 0u);
    v2_cuts.emplace_back(at, 1);
  }
  // v1 also lacks the u64 log salt (after the in_use byte) and the table's
  // u64 auto_increment_start.
  ASSERT_EQ(DecodeFixed64(v4.data() + 20 + layout.autoinc_start_at), 0u);
  std::vector<std::pair<size_t, size_t>> v1_cuts = v2_cuts;
  v1_cuts.emplace_back(OneTableCatalog::kSaltAt, 8);
  v1_cuts.emplace_back(layout.autoinc_start_at, 8);
  std::sort(v1_cuts.begin(), v1_cuts.end());
  for (const auto& [version, cuts] :
       {std::pair{3u, v3_cuts}, std::pair{2u, v2_cuts}, std::pair{1u, v1_cuts}}) {
    test::WriteFile(path, WithoutBodyBytes(v4, cuts, version));
    auto db = Database::Open(test::SmallOptions(dir_.path()));
    ASSERT_TRUE(db.ok()) << "version " << version << ": " << db.status().ToString();
    Table* t = (*db)->FindTable("t");
    ASSERT_NE(t, nullptr);
    for (const Column& c : t->def().columns) EXPECT_FALSE(c.descending);
    auto txn = (*db)->Begin();
    EXPECT_EQ(test::ScanAll(txn.get(), t).size(), rows_.size());
    ASSERT_OK(txn->Commit());
  }  // closing rewrites it as the current version
  std::vector<uint8_t> future = test::ReadFile(path);
  EXPECT_EQ(DecodeFixed32(future.data() + 8), 4u);
  EncodeFixed32(future.data() + 8, 5);
  test::WriteFile(path, future);
  auto db = Database::Open(test::SmallOptions(dir_.path()));
  ASSERT_TRUE(db.status().IsCorruption()) << db.status().ToString();
  EXPECT_NE(db.status().message().find("version 5"), std::string::npos) << db.status().ToString();
  // Flags other than 0 or 1 do not parse.
  for (size_t at : {layout.temporary_at, layout.descending_at[0]}) {
    std::vector<uint8_t> bad = v4;
    bad[20 + at] = 2;
    test::WriteFile(path, WithoutBodyBytes(bad, {}, 4));
    EXPECT_TRUE(Database::Open(test::SmallOptions(dir_.path())).status().IsCorruption()) << at;
  }
}

TEST_F(EngineCorruption, MissingPageFileIsRefused) {
  fs::remove(PrimaryFile());
  auto db = Database::Open(test::SmallOptions(dir_.path()));
  ASSERT_TRUE(db.status().IsCorruption()) << db.status().ToString();
  EXPECT_NE(db.status().message().find("missing"), std::string::npos);
}

// A database in use whose PM tier lost its log (a reboot wipes /dev/shm) is
// refused; after a clean shutdown the log is not needed.
TEST(EngineLostLog, UncleanDatabaseWithoutItsLogIsRefused) {
  test::ScratchDir dir;
  const Options o = test::SmallOptions(dir.path());
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->CreateTable(test::SampleTable()).ok());
    ASSERT_OK((*db)->Close());
  }
  fs::remove_all(dir.Sub("pm"));
  auto db = Database::Open(o);  // clean: a new log is fine
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_NE((*db)->FindTable("t"), nullptr);
  auto txn = (*db)->Begin();
  ASSERT_OK(txn->Insert((*db)->FindTable("t"), SampleRow(1, 1, std::nullopt, "x")));
  ASSERT_OK(txn->Commit());
  // "Crash": copy the data directory of the open database, without its log.
  const std::string copy = dir.Sub("copy");
  fs::create_directories(copy);
  fs::copy(dir.Sub("db"), copy + "/db", fs::copy_options::recursive);
  auto lost = Database::Open(test::SmallOptions(copy));
  ASSERT_TRUE(lost.status().IsCorruption()) << lost.status().ToString();
  EXPECT_NE(lost.status().message().find("not shut down cleanly"), std::string::npos);
}

// K8: a log made after a clean shutdown (a reboot cleared the PM tier)
// starts past the old log's end. The page files keep the old log's LSNs;
// a new log starting lower would have redo after the next crash skip its
// records as already in those pages (P3): committed changes lost.
// A database of table t holding rows [first, first + n) with value v,
// closed cleanly.
void MakeClosedDatabase(const Options& o, int64_t first, int64_t n, const std::string& v) {
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto t = (*db)->CreateTable(test::SampleTable());
  ASSERT_TRUE(t.ok());
  auto txn = (*db)->Begin();
  for (int64_t id = first; id < first + n; ++id) {
    ASSERT_OK(txn->Insert(*t, SampleRow(id, 1, std::nullopt, v)));
  }
  ASSERT_OK(txn->Commit());
  ASSERT_OK((*db)->Close());
}

void ANewLogKeepsWhatItHolds(bool old_catalog) {
  test::ScratchDir dir;
  const Options o = test::SmallOptions(dir.path());
  constexpr int64_t kRows = 2000;
  auto row = [](int64_t id, int version) {
    return SampleRow(id, static_cast<uint64_t>(version), std::nullopt,
                     std::string(200, static_cast<char>('a' + version)));
  };
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto t = (*db)->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    auto txn = (*db)->Begin();
    for (int64_t id = 0; id < kRows; ++id) ASSERT_OK(txn->Insert(*t, row(id, 0)));
    ASSERT_OK(txn->Commit());
    ASSERT_OK((*db)->Close());
  }
  if (old_catalog) {  // as a build before the floor wrote it: version 3
    const std::vector<uint8_t> v4 = test::ReadFile(dir.Sub("db/catalog"));
    test::WriteFile(dir.Sub("db/catalog"),
                    WithoutBodyBytes(v4, {{OneTableCatalog::kFloorAt, 8}}, 3));
  }
  fs::remove_all(dir.Sub("pm"));
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Table* t = (*db)->FindTable("t");
  ASSERT_NE(t, nullptr);
  auto txn = (*db)->Begin();
  for (int64_t id = 0; id < kRows; id += 100) ASSERT_OK(txn->Update(t, row(id, 0), row(id, 1)));
  ASSERT_OK(txn->Commit());
  // "Crash": copy both tiers of the open database; the updated pages were
  // not written, so only the new log holds the updates.
  const std::string copy = dir.Sub("copy");
  fs::create_directories(copy);
  fs::copy(dir.Sub("db"), copy + "/db", fs::copy_options::recursive);
  fs::copy(dir.Sub("pm"), copy + "/pm", fs::copy_options::recursive);
  auto crashed = Database::Open(test::SmallOptions(copy));
  ASSERT_TRUE(crashed.ok()) << crashed.status().ToString();
  EXPECT_GT((*crashed)->recovery().records_redone, 0u);
  auto check = (*crashed)->Begin();
  const std::vector<Row> rows = test::ScanAll(check.get(), (*crashed)->FindTable("t"));
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRows));
  for (const Row& r : rows) {
    const int64_t id = std::get<int64_t>(r[0]);
    EXPECT_EQ(r, row(id, id % 100 == 0 ? 1 : 0)) << "row " << id;
  }
  ASSERT_OK(check->Commit());
}

TEST(EngineLostLog, ANewLogStartsPastThePagesLsns) {
  ANewLogKeepsWhatItHolds(false);
}

TEST(EngineLostLog, ANewLogForACatalogWithoutAFloorStartsHigh) {
  ANewLogKeepsWhatItHolds(true);
}

// K8 for a database an older build shut down cleanly after it had made a
// new log at the first LSN (the bug the floor fixes): that log is behind
// the pages, and is replaced by one starting at 2^48 instead of having
// every old page refused. Built here from a fresh database's log (its
// salt written into the other's version-3 catalog).
TEST(EngineLostLog, ACleanOldCatalogsLogBehindItsPagesIsReplaced) {
  test::ScratchDir dir;
  const Options a = test::SmallOptions(dir.Sub("a"));
  const Options b = test::SmallOptions(dir.Sub("b"));
  MakeClosedDatabase(a, 0, 2000, std::string(200, 'a'));
  MakeClosedDatabase(b, 0, 0, "");
  const std::vector<uint8_t> b_catalog = test::ReadFile(b.dir + "/catalog");
  const uint64_t b_salt = DecodeFixed64(b_catalog.data() + 20 + OneTableCatalog::kSaltAt);
  std::vector<uint8_t> a_catalog = test::ReadFile(a.dir + "/catalog");
  EncodeFixed64(a_catalog.data() + 20 + OneTableCatalog::kSaltAt, b_salt);
  test::WriteFile(a.dir + "/catalog",
                  WithoutBodyBytes(a_catalog, {{OneTableCatalog::kFloorAt, 8}}, 3));
  fs::remove_all(a.pm_dir);
  fs::create_directories(a.pm_dir);
  fs::copy(b.pm_dir + "/log", a.pm_dir + "/log", fs::copy_options::recursive);
  auto db = Database::Open(a);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto txn = (*db)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")).size(), 2000u);
  ASSERT_OK(txn->Commit());
  ASSERT_OK((*db)->Close());
  const std::vector<uint8_t> after = test::ReadFile(a.dir + "/catalog");
  EXPECT_GE(DecodeFixed64(after.data() + 20 + OneTableCatalog::kFloorAt), uint64_t{1} << 48);
}

// K5: a database never uses another database's redo log (its records would
// be redone on the wrong pages), whether it was closed cleanly or not; the
// foreign log is left as it was. A lost log after a clean close is replaced.
TEST(EngineLostLog, AnotherDatabasesLogIsRefused) {
  test::ScratchDir dir;
  const Options a = test::SmallOptions(dir.Sub("a"));
  const Options b = test::SmallOptions(dir.Sub("b"));
  MakeClosedDatabase(a, 1, 1, "x");
  MakeClosedDatabase(b, 2, 1, "x");
  const std::vector<uint8_t> b_log = test::ReadFile(b.pm_dir + "/log/log.0");
  Options mixed = a;
  mixed.pm_dir = b.pm_dir;
  auto db = Database::Open(mixed);
  ASSERT_TRUE(db.status().IsInvalidArgument()) << db.status().ToString();
  EXPECT_NE(db.status().message().find("belongs to another database"), std::string::npos)
      << db.status().ToString();
  EXPECT_EQ(test::ReadFile(b.pm_dir + "/log/log.0"), b_log) << "the foreign log was changed";
  // Each still opens with its own log, and a's (after a clean close) may be replaced.
  fs::remove_all(a.pm_dir);
  for (const Options& o : {a, a, b}) {
    auto ok = Database::Open(o);
    ASSERT_TRUE(ok.ok()) << ok.status().ToString();
    auto txn = (*ok)->Begin();
    EXPECT_EQ(test::ScanAll(txn.get(), (*ok)->FindTable("t")).size(), 1u);
    ASSERT_OK(txn->Commit());
  }
}

// The log of a database that was not closed (a copy taken while it ran):
// damage inside the records recovery must replay is refused, not skipped.
TEST(EngineLogCorruption, FlippedLogRecordIsRefused) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.buffer_pool_bytes = 64 << 20;  // nothing is written back: the checkpoint stays early
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok());
  auto t = (*db)->CreateTable(test::SampleTable());
  ASSERT_TRUE(t.ok());
  // Many commits: later records then carry durable hints past the damaged
  // one, which tells damage from a torn tail (docs/formats/redo-log.md, I3).
  for (int i = 0; i < 500; i += 10) {
    auto txn = (*db)->Begin();
    for (int j = i; j < i + 10; ++j) {
      ASSERT_OK(txn->Insert(*t, SampleRow(j, 0, std::nullopt, std::string(100, 'x'))));
    }
    ASSERT_OK(txn->Commit());
  }
  const std::string copy = dir.Sub("copy");
  fs::create_directories(copy);
  fs::copy(dir.path() + "/db", copy + "/db", fs::copy_options::recursive);
  fs::copy(dir.path() + "/pm", copy + "/pm", fs::copy_options::recursive);
  fs::remove(copy + "/pm/log/LOCK");
  {
    auto clean = Database::Open(test::SmallOptions(copy));  // the copy recovers
    ASSERT_TRUE(clean.ok()) << clean.status().ToString();
    auto r = (*clean)->Begin();
    EXPECT_EQ(test::ScanAll(r.get(), (*clean)->FindTable("t")).size(), 500u);
    ASSERT_OK(r->Commit());
    (*clean).reset();
  }
  fs::remove_all(copy);
  fs::create_directories(copy);
  fs::copy(dir.path() + "/db", copy + "/db", fs::copy_options::recursive);
  fs::copy(dir.path() + "/pm", copy + "/pm", fs::copy_options::recursive);
  fs::remove(copy + "/pm/log/LOCK");
  Flip(copy + "/pm/log/log.0", 4096 + 20000);
  auto bad = Database::Open(test::SmallOptions(copy));
  ASSERT_TRUE(bad.status().IsCorruption()) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("log"), std::string::npos) << bad.status().ToString();
}

}  // namespace
}  // namespace subito
