// NV-PPL in the engine (Options::ppl_bytes): small changes of pages go to
// the per-page log region instead of their files; a page read from its file
// gets its entries applied; a full region makes pages be written instead;
// a crash loses nothing; a clean shutdown writes every page that has
// entries (the region may be on tmpfs, which a reboot clears); a dropped
// table's entries are freed.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "engine_util.h"
#include "test_util.h"
#include "util/coding.h"
#include "util/fault_file_system.h"
#include "util/file_io.h"

namespace subito {
namespace {

constexpr int64_t kRows = 12000;

// 600 bytes; `version` changes one byte of it.
std::string Value(int64_t id, int version) {
  std::string v(600, static_cast<char>('a' + id % 26));
  v[300] = static_cast<char>('A' + version % 26);
  return v;
}

Options PplOptions(const std::string& dir) {
  Options o = test::SmallOptions(dir);  // a 4 MB pool: pages are evicted and read back
  o.ppl_bytes = 4096 + 4000 * 320;
  o.ppl_threshold = 256;
  return o;
}

// Inserts the rows, then updates `updates` of them (one byte each, so the
// pages change little), all committed. Returns the rows by id.
std::map<int64_t, std::string> Load(Database* db, int updates) {
  std::map<int64_t, std::string> want;
  auto t = db->CreateTable(test::SampleTable("t"));
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  if (!t.ok()) return want;
  for (int64_t id = 0; id < kRows; id += 500) {
    auto txn = db->Begin();
    for (int64_t k = id; k < id + 500; ++k) {
      EXPECT_OK(txn->Insert(*t, test::SampleRow(k, k % 97, std::nullopt, Value(k, 0))));
      want[k] = Value(k, 0);
    }
    EXPECT_OK(txn->Commit());
  }
  std::map<int64_t, int> version;
  for (int i = 0; i < updates; ++i) {
    const int64_t id = (i * 7919) % kRows;
    auto txn = db->Begin();
    const int v = version[id]++;
    EXPECT_OK(txn->Update(*t, test::SampleRow(id, id % 97, std::nullopt, Value(id, v)),
                          test::SampleRow(id, id % 97, std::nullopt, Value(id, v + 1))));
    EXPECT_OK(txn->Commit());
    want[id] = Value(id, v + 1);
  }
  return want;
}

std::map<int64_t, std::string> Rows(Database* db) {
  std::map<int64_t, std::string> out;
  Table* t = db->FindTable("t");
  EXPECT_NE(t, nullptr);
  if (t == nullptr) return out;
  auto txn = db->Begin();
  for (const Row& r : test::ScanAll(txn.get(), t)) {
    out[std::get<int64_t>(r[0])] = std::get<std::string>(r[3]);
  }
  EXPECT_EQ(test::ScanAll(txn.get(), t, 1).size(), out.size()) << "index k disagrees";
  EXPECT_OK(txn->Commit());
  return out;
}

// Runs Load(6000) in a child process that ends without closing (as kill -9
// leaves it), with page-log entries in use at that moment.
void LoadAndCrash(const Options& o) {
  std::fflush(stdout);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto db = Database::Open(o);
    if (!db.ok()) ::_exit(2);
    Load(db->get(), 6000);
    const bool logged = (*db)->Stats().ppl_blocks_used > 0;
    std::fflush(stdout);
    ::_exit(::testing::Test::HasFailure() ? 1 : logged ? 0 : 3);  // no close
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

// The rows the same deterministic load leaves, from a pool that holds them all.
std::map<int64_t, std::string> ModelRows(int updates) {
  test::ScratchDir model_dir;
  Options mo = test::SmallOptions(model_dir.path());
  mo.buffer_pool_bytes = 64 << 20;
  auto model = Database::Open(mo);
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return model.ok() ? Load(model->get(), updates) : std::map<int64_t, std::string>{};
}

TEST(PplEngine, SmallChangesGoToThePageLogAndEveryRowReadsBack) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  std::map<int64_t, std::string> want;
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    want = Load(db->get(), 6000);
    const DatabaseStats s = (*db)->Stats();
    EXPECT_GT(s.ppl_pages_logged, 500u);
    EXPECT_GT(s.ppl_blocks_used, 0u);
    EXPECT_EQ(s.ppl_blocks, 4000u);
    EXPECT_GT(s.buffer_misses, 1000u) << "pages were not read back";
    EXPECT_EQ(Rows(db->get()), want);
  }
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(Rows(db->get()), want);
}

// A clean shutdown writes every page that has entries, including pages
// dirtied last (whose small changes the final flush must not log): a reboot
// that clears the PM tier (tmpfs) afterwards loses nothing.
TEST(PplEngine, ACleanShutdownLeavesNothingInThePageLog) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  std::map<int64_t, std::string> want;
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    want = Load(db->get(), 6000);
    ASSERT_GT((*db)->Stats().ppl_blocks_used, 0u);
    ASSERT_OK((*db)->Close());
  }
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ((*db)->Stats().ppl_blocks_used, 0u);
  }
  std::filesystem::remove_all(o.pm_dir);  // a reboot clears tmpfs
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(Rows(db->get()), want);
}

TEST(PplEngine, AFullRegionMakesPagesBeWrittenInstead) {
  test::ScratchDir dir;
  Options o = PplOptions(dir.path());
  o.ppl_bytes = 4096 + 40 * 320;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const std::map<int64_t, std::string> want = Load(db->get(), 3000);
  const DatabaseStats s = (*db)->Stats();
  EXPECT_GT(s.ppl_full, 0u);
  EXPECT_GT(s.ppl_pages_logged, 0u);
  EXPECT_LE(s.ppl_blocks_used, 40u);
  EXPECT_EQ(Rows(db->get()), want);
}

// A region much smaller than the pages that change: foreground reclamation
// (pages with large entries written when it is 90% full) and the background
// cleaner (pages not in the pool read back and written when 75% full) free
// blocks, so far more pages go through the region than it holds at once.
TEST(PplEngine, TheRegionIsReclaimedAndKeepsServing) {
  test::ScratchDir dir;
  Options o = PplOptions(dir.path());
  o.ppl_bytes = 4096 + 200 * 320;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const std::map<int64_t, std::string> want = Load(db->get(), 8000);
  const DatabaseStats s = (*db)->Stats();
  EXPECT_GT(s.ppl_pages_logged, 400u);
  EXPECT_GT(s.ppl_pages_delogged, 100u);
  EXPECT_LE(s.ppl_blocks_used, 200u);
  std::printf("logged %llu, de-logged %llu, reclaimed in the background %llu, full %llu\n",
              static_cast<unsigned long long>(s.ppl_pages_logged),
              static_cast<unsigned long long>(s.ppl_pages_delogged),
              static_cast<unsigned long long>(s.ppl_reclaimed),
              static_cast<unsigned long long>(s.ppl_full));
  EXPECT_EQ(Rows(db->get()), want);
}

// A process that ends without closing (as kill -9 leaves it): pages come
// back from their files plus their page-log entries, then redo.
TEST(PplEngine, AfterACrashEveryCommittedRowIsThere) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  LoadAndCrash(o);
  ASSERT_FALSE(HasFatalFailure());
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_GT((*db)->Stats().ppl_blocks_used, 0u) << "the crash left no page-log entries to use";
  EXPECT_EQ(Rows(db->get()), ModelRows(6000));
}

// A restart with per-page logs turned off (ppl_bytes 0) still reads the
// region a crash left: its entries hold changes the checkpoint has passed.
TEST(PplEngine, ARestartWithPplOffStillAppliesWhatACrashLeft) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  LoadAndCrash(o);
  ASSERT_FALSE(HasFatalFailure());
  Options off = o;
  off.ppl_bytes = 0;
  const std::map<int64_t, std::string> want = ModelRows(6000);
  {
    auto db = Database::Open(off);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_GT((*db)->Stats().ppl_blocks_used, 0u);
    EXPECT_EQ(Rows(db->get()), want);
    EXPECT_EQ((*db)->Stats().ppl_pages_logged, 0u) << "nothing is logged with ppl_bytes 0";
    ASSERT_OK((*db)->Close());
  }
  auto db = Database::Open(off);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->Stats().ppl_blocks, 0u);
  EXPECT_FALSE(std::filesystem::exists(o.pm_dir + "/ppl")) << "an empty region outlived ppl 0";
  EXPECT_EQ(Rows(db->get()), want);
}

// A new size or threshold takes effect at the next start once the region
// holds nothing; a region a crash left with entries keeps its geometry (and
// serves) until a clean shutdown has written them back.
TEST(PplEngine, ANewSizeOrThresholdTakesEffectOnceTheRegionIsEmpty) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  const uint64_t old_blocks = (o.ppl_bytes - 4096) / 320;
  LoadAndCrash(o);
  ASSERT_FALSE(HasFatalFailure());
  Options bigger = o;
  bigger.ppl_bytes = 4096 + 9000 * 1088;
  bigger.ppl_threshold = 1024;  // blocks of 64 + 1024 bytes
  const std::map<int64_t, std::string> want = ModelRows(6000);
  {
    auto db = Database::Open(bigger);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ((*db)->Stats().ppl_blocks, old_blocks) << "a region with entries was replaced";
    EXPECT_GT((*db)->Stats().ppl_blocks_used, 0u);
    EXPECT_EQ(Rows(db->get()), want);
    ASSERT_OK((*db)->Close());
  }
  for (int round = 0; round < 2; ++round) {
    auto db = Database::Open(bigger);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    EXPECT_EQ((*db)->Stats().ppl_blocks, 9000u);
    EXPECT_NE((*db)->Describe().find("blocks of 1088 bytes"), std::string::npos)
        << (*db)->Describe();
    EXPECT_EQ(Rows(db->get()), want);
    ASSERT_OK((*db)->Close());
  }
}

// Page writes that fail (EIO, at random) while the region is nearly full:
// every acknowledged change reads back, before and after a restart. (A page
// whose write failed is not logged until a write of it succeeds, so that no
// entry is applied to an image newer than the one it was made on; this run
// does not reliably reach that case, so it guards, not proves, the rule.)
TEST(PplEngine, FailedPageWritesNeverLeaveEntriesOnTheWrongImage) {
  test::ScratchDir dir;
  std::filesystem::create_directories(dir.Sub("db"));
  auto posix = NewPosixFileSystem(false, 0);
  FaultInjectingFileSystem fs(posix.get(), test::TestSeed());
  Options o = PplOptions(dir.path());
  o.ppl_bytes = 4096 + 8 * 320;  // mostly full: pages fall back to writes, which fail
  o.file_system = &fs;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  auto t = (*db)->CreateTable(test::SampleTable("t"));
  ASSERT_TRUE(t.ok());
  std::map<int64_t, std::string> want;
  for (int64_t id = 0; id < kRows; ++id) want[id] = Value(id, 0);
  for (int64_t id = 0; id < kRows; id += 500) {
    auto txn = (*db)->Begin();
    for (int64_t k = id; k < id + 500; ++k) {
      ASSERT_OK(txn->Insert(*t, test::SampleRow(k, k % 97, std::nullopt, Value(k, 0))));
    }
    ASSERT_OK(txn->Commit());
  }
  fs.Add({kFaultWrite, ".sbt", EIO, 0, 100, 0.02});
  std::map<int64_t, int> version;
  int failed = 0;
  for (int i = 0; i < 8000; ++i) {
    const int64_t id = (i * 7919) % kRows;
    const int v = version[id];
    auto txn = (*db)->Begin();
    const Row before = test::SampleRow(id, id % 97, std::nullopt, Value(id, v));
    const Row after = test::SampleRow(id, id % 97, std::nullopt, Value(id, v + 1));
    // Half the changes delete the row and insert it again: slot arrays
    // shift (move edits), which applied twice would corrupt a page.
    Status st = i % 2 == 0 ? txn->Update(*t, before, after) : txn->Delete(*t, before);
    if (st.ok() && i % 2 == 1) st = txn->Insert(*t, after);
    if (st.ok()) st = txn->Commit();
    if (st.IsReadOnly()) break;  // a rollback's eviction write failed: the engine stopped
    if (!st.ok()) {              // an eviction needed a write that failed
      ASSERT_TRUE(st.IsIOError()) << st.ToString();
      if (!txn->Rollback().ok()) break;  // and stopped the engine
      ++failed;
      continue;
    }
    version[id] = v + 1;
    want[id] = Value(id, v + 1);
  }
  fs.Clear();
  const DatabaseStats s = (*db)->Stats();
  EXPECT_GT(s.page_write_failures, 0u);
  EXPECT_GT(s.ppl_pages_logged, 0u);
  if (!s.writes_stopped) {
    EXPECT_GT(s.ppl_full, 0u);
    EXPECT_EQ(Rows(db->get()), want) << failed << " changes failed";
    ASSERT_OK((*db)->Close());
  } else {
    (void)(*db)->Close();  // stays in use: recovery undoes the stopped transaction
  }
  db->reset();
  db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(Rows(db->get()), want);
}

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

// A flipped byte in the entries a crash left is refused with the region's
// file and the entry's offset, and never applied. The open checks only block
// headers (docs/formats/ppl.md, G1): it serves, and the first read of the
// damaged page fails, after only committed rows were read.
TEST(PplEngine, AFlippedEntryByteIsRefusedWithTheFileAndOffsetNeverApplied) {
  test::ScratchDir dir;
  const Options o = PplOptions(dir.path());
  LoadAndCrash(o);
  ASSERT_FALSE(HasFatalFailure());
  const std::string region = o.pm_dir + "/ppl";
  const std::vector<uint8_t> good = ReadBytes(region);
  ASSERT_GT(good.size(), 4096u);
  const uint32_t block_size = DecodeFixed32(good.data() + 12);
  // Owned blocks, highest page number first: leaves, mostly, which the open
  // does not read and one of the scans below does. (An internal node off
  // the scans' leftmost path is read by neither: the next block is tried.)
  std::vector<std::pair<uint32_t, size_t>> owned;  // (page, block offset)
  for (size_t b = 4096; b + block_size <= good.size(); b += block_size) {
    if (DecodeFixed32(good.data() + b + 56) != 0) {
      owned.emplace_back(DecodeFixed32(good.data() + b + 12), b);
    }
  }
  ASSERT_FALSE(owned.empty());
  std::sort(owned.rbegin(), owned.rend());
  // Each run on a damaged region changes the files and the log: every run
  // starts from copies of both, as the crash left them.
  const std::string kept = dir.Sub("kept");
  std::filesystem::create_directory(kept);
  std::filesystem::copy(o.dir, kept + "/db", std::filesystem::copy_options::recursive);
  std::filesystem::copy(o.pm_dir, kept + "/pm", std::filesystem::copy_options::recursive);
  auto restore = [&](const std::vector<uint8_t>& ppl) {
    std::filesystem::remove_all(o.dir);
    std::filesystem::remove_all(o.pm_dir);
    std::filesystem::copy(kept + "/db", o.dir, std::filesystem::copy_options::recursive);
    std::filesystem::copy(kept + "/pm", o.pm_dir, std::filesystem::copy_options::recursive);
    WriteBytes(region, ppl);
  };
  const std::map<int64_t, std::string> want = ModelRows(6000);
  bool refused_once = false;
  for (size_t tried = 0; tried < std::min<size_t>(owned.size(), 5) && !refused_once; ++tried) {
    const size_t victim = owned[tried].second;
    SCOPED_TRACE(::testing::Message() << "page " << owned[tried].first << ", block at " << victim);
    std::vector<uint8_t> bad = good;
    bad[victim + 64 + 16] ^= 0x20;  // the first entry's first edit byte
    restore(bad);
    const std::string where = region + " offset " + std::to_string(victim + 64);
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Table* t = (*db)->FindTable("t");
    ASSERT_NE(t, nullptr);
    for (uint32_t index : {0u, 1u}) {
      auto txn = (*db)->Begin();
      auto c = txn->OpenCursor(t, index);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      Status st = (*c)->Seek(SeekOp::kFirst);
      while (st.ok() && (*c)->Valid()) {
        const Row r = (*c)->row();
        const auto it = want.find(std::get<int64_t>(r[0]));
        ASSERT_TRUE(it != want.end());
        EXPECT_EQ(std::get<std::string>(r[3]), it->second);
        st = (*c)->Next();
      }
      if (st.ok()) continue;
      refused_once = true;
      EXPECT_TRUE(st.IsCorruption()) << st.ToString();
      EXPECT_NE(st.ToString().find(where), std::string::npos) << st.ToString();
    }
    // A clean shutdown writes every page that has entries: not this one.
    // The database stays marked in use, its entries kept for the next start;
    // every other page is written and its entries freed.
    const Status closed = (*db)->Close();
    EXPECT_TRUE(closed.IsCorruption()) << closed.ToString();
    EXPECT_NE(closed.ToString().find(where), std::string::npos) << closed.ToString();
    db->reset();
    const std::vector<uint8_t> after = ReadBytes(region);
    size_t left = 0;
    for (size_t b = 4096; b + block_size <= after.size(); b += block_size) {
      if (DecodeFixed32(after.data() + b + 56) == 0) continue;
      ++left;
      EXPECT_EQ(DecodeFixed32(after.data() + b + 8), DecodeFixed32(good.data() + victim + 8));
      EXPECT_EQ(DecodeFixed32(after.data() + b + 12), owned[tried].first) << "block at " << b;
    }
    EXPECT_GE(left, 1u);
  }
  // (A scan of the secondary index reads the primary's rows too.)
  EXPECT_TRUE(refused_once) << "no damaged page was read by either scan";
  // The same files with the region undamaged: every committed row, so the
  // flip was what was refused.
  restore(good);
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ(Rows(db->get()), want);
}

TEST(PplEngine, ADroppedTableFreesItsEntries) {
  test::ScratchDir dir;
  auto db = Database::Open(PplOptions(dir.path()));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Load(db->get(), 3000);
  ASSERT_GT((*db)->Stats().ppl_blocks_used, 0u);
  ASSERT_OK((*db)->DropTable("t"));
  EXPECT_EQ((*db)->Stats().ppl_blocks_used, 0u);
}

}  // namespace
}  // namespace subito
