// The bounded cache of open descriptors (util/descriptor_cache.h): at most
// the limit open at once (D1), a written descriptor synced before it is
// closed and a failed sync reported by the file's next Sync (D2), and a
// database of many tables that never holds more page-file descriptors than
// Options::max_open_files.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine_util.h"
#include "test_util.h"
#include "util/descriptor_cache.h"
#include "util/file_io.h"

namespace subito {
namespace {

// Descriptors this process has open on files under `dir` (whose names end
// in `suffix`, if given).
size_t DescriptorsUnder(const std::string& dir, const std::string& suffix = "") {
  const std::string root = std::filesystem::canonical(dir).string();
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(root, 0) == 0 && target.size() >= suffix.size() &&
        target.compare(target.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ++n;
    }
  }
  return n;
}

TEST(DescriptorCache, KeepsAtMostItsLimitOpenAndEveryFileReadable) {
  test::ScratchDir dir;
  auto fs = NewPosixFileSystem(false, 2);
  std::vector<std::unique_ptr<File>> files;
  for (int i = 0; i < 6; ++i) {
    auto f = fs->Create(dir.Sub("f" + std::to_string(i)));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    files.push_back(std::move(*f));
    EXPECT_LE(fs->descriptors().open, 2u);
  }
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 6; ++i) {
      const std::string v = "file " + std::to_string(i) + " round " + std::to_string(round);
      ASSERT_OK(files[i]->Write(uint64_t{64} * round, v.data(), v.size()));
      EXPECT_LE(DescriptorsUnder(dir.path()), 2u);
    }
  }
  for (int i = 0; i < 6; ++i) ASSERT_OK(files[i]->Sync());
  for (int round = 0; round < 3; ++round) {
    for (int i = 5; i >= 0; --i) {
      const std::string v = "file " + std::to_string(i) + " round " + std::to_string(round);
      std::string got(v.size(), '\0');
      ASSERT_OK(files[i]->Read(uint64_t{64} * round, got.data(), got.size()));
      EXPECT_EQ(got, v);
    }
  }
  const DescriptorStats s = fs->descriptors();
  EXPECT_LE(s.open, 2u);
  EXPECT_EQ(s.limit, 2u);
  EXPECT_GT(s.closes, 10u);
  EXPECT_GT(s.opens, 10u);
  files.clear();
  EXPECT_EQ(fs->descriptors().open, 0u);
  EXPECT_EQ(DescriptorsUnder(dir.path()), 0u);
}

TEST(DescriptorCache, AFailedSyncAtCloseIsReportedByTheFilesNextSync) {
  // fdatasync of a pipe fails (EINVAL): the cache must not drop that.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);
  DescriptorCache cache(1);
  const uint64_t piped = cache.Register([fd = p[1]]() -> Result<int> { return fd; });
  ASSERT_OK(cache.Use(piped, /*writes=*/true, [](int) { return Status::OK(); }));
  test::ScratchDir dir;
  const std::string other = dir.Sub("other");
  const uint64_t file = cache.Register([other]() -> Result<int> {
    const int fd = ::open(other.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return Status::IOError("open " + other);
    return fd;
  });
  // Opening the second file closes the written pipe, whose sync fails.
  ASSERT_OK(cache.Use(file, false, [](int) { return Status::OK(); }));
  EXPECT_EQ(cache.stats().closes, 1u);
  const Status s = cache.Sync(piped, "pipe");
  EXPECT_TRUE(s.IsIOError()) << s.ToString();
  EXPECT_NE(s.ToString().find("before closing"), std::string::npos) << s.ToString();
  EXPECT_TRUE(cache.Sync(piped, "pipe").IsIOError());  // for good
  cache.Unregister(file);
  cache.Unregister(piped);
}

TEST(DescriptorCache, AFileClosedCleanNeedsNoReopenToSync) {
  test::ScratchDir dir;
  auto fs = NewPosixFileSystem(false, 1);
  auto a = fs->Create(dir.Sub("a"));
  ASSERT_TRUE(a.ok());
  ASSERT_OK((*a)->Write(0, "x", 1));
  auto b = fs->Create(dir.Sub("b"));  // closes a, syncing it first (D2)
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fs->descriptors().closes, 1u);
  EXPECT_EQ(fs->descriptors().open, 1u);
  const uint64_t opens = fs->descriptors().opens;
  ASSERT_OK((*a)->Sync());
  EXPECT_EQ(fs->descriptors().opens, opens);
}

TEST(DescriptorCache, ThreadsSharingFewDescriptorsSeeTheirOwnBytes) {
  test::ScratchDir dir;
  constexpr size_t kLimit = 3;
  auto fs = NewPosixFileSystem(false, kLimit);
  constexpr int kFiles = 12, kThreads = 6;
  std::vector<std::unique_ptr<File>> files;
  for (int i = 0; i < kFiles; ++i) {
    auto f = fs->Create(dir.Sub("f" + std::to_string(i)));
    ASSERT_TRUE(f.ok());
    files.push_back(std::move(*f));
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int op = 0; op < 400; ++op) {
        // Each thread owns an 8-byte slot in every file.
        const int f = static_cast<int>(rng() % kFiles);
        const uint64_t v = (uint64_t{static_cast<uint32_t>(t)} << 32) | static_cast<uint32_t>(op);
        if (!files[f]->Write(8 * t, &v, 8).ok()) ++bad;
        uint64_t got = 0;
        if (!files[f]->Read(8 * t, &got, 8).ok() || got != v) ++bad;
        if (op % 50 == 0 && !files[f]->Sync().ok()) ++bad;
        if (fs->descriptors().open > kLimit) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_LE(fs->descriptors().open, kLimit);
}

// The limit is on page files (.sbt), as innodb_open_files is on tablespaces:
// the catalog, the warm-up's page list and undo files are opened besides,
// briefly (an 11th descriptor under the directory was seen once, while the
// warm-up ran).
TEST(EngineOpenFiles, ManyTablesNeverHoldMoreDescriptorsThanTheLimit) {
  test::ScratchDir dir;
  Options o = test::SmallOptions(dir.path());
  o.max_open_files = 10;
  constexpr int kTables = 60;  // 180 page files
  auto def = [](int i) {
    TableDef d = test::SampleTable();
    d.name = "t" + std::to_string(i);
    return d;
  };
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    for (int i = 0; i < kTables; ++i) {
      auto t = (*db)->CreateTable(def(i));
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      auto txn = (*db)->Begin();
      for (int k = 0; k < 20; ++k) {
        ASSERT_OK(txn->Insert(*t, test::SampleRow(k, i, "u" + std::to_string(k), "row")));
      }
      ASSERT_OK(txn->Commit());
      ASSERT_LE(DescriptorsUnder(dir.path() + "/db", ".sbt"), 10u) << "table " << i;
    }
    const DatabaseStats s = (*db)->Stats();
    EXPECT_LE(s.open_files, 10u);
    EXPECT_EQ(s.open_files_limit, 10u);
    EXPECT_GT(s.file_closes, 100u);
    ASSERT_OK((*db)->Close());
  }
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_LE(DescriptorsUnder(dir.path() + "/db", ".sbt"), 10u);
  auto txn = (*db)->Begin();
  for (int i = kTables - 1; i >= 0; --i) {
    Table* t = (*db)->FindTable("t" + std::to_string(i));
    ASSERT_NE(t, nullptr);
    const std::vector<Row> rows = test::ScanAll(txn.get(), t);
    ASSERT_EQ(rows.size(), 20u) << "table " << i;
    EXPECT_EQ(rows[7], test::SampleRow(7, i, "u7", "row"));
    EXPECT_EQ(test::ScanAll(txn.get(), t, 2).size(), 20u);
    ASSERT_LE(DescriptorsUnder(dir.path() + "/db", ".sbt"), 10u);
  }
  ASSERT_OK(txn->Commit());
  for (int i = 0; i < kTables; ++i) ASSERT_OK((*db)->DropTable("t" + std::to_string(i)));
  EXPECT_EQ(DescriptorsUnder(dir.path() + "/db"), 0u);
  size_t sbt = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/db")) {
    if (e.path().extension() == ".sbt") ++sbt;
  }
  EXPECT_EQ(sbt, 0u);
  ASSERT_OK((*db)->Close());
}

}  // namespace
}  // namespace subito
