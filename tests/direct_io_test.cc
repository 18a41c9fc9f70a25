// Page files and O_DIRECT (Options::direct_io): on a disk file system every
// page-file descriptor carries O_DIRECT, so the buffer pool is the pages'
// only cache, and every path that reads or writes them (pool misses,
// cleaners, eviction, recovery, a failed batch written again) uses aligned
// buffers; with direct_io off, or on tmpfs (which refuses O_DIRECT), the
// files go through the OS page cache, and the stats say so. These tests
// need a disk: their data lives under /var/tmp, not /dev/shm.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "engine_util.h"
#include "test_util.h"
#include "util/aligned_buffer.h"
#include "util/fault_file_system.h"
#include "util/file_io.h"

namespace subito {
namespace {

constexpr const char* kDisk = "/var/tmp";

// Flags of every descriptor this process has open on a .sbt file under dir.
std::map<std::string, int> PageFileFlags(const std::string& dir) {
  const std::string root = std::filesystem::canonical(dir).string();
  std::map<std::string, int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (ec || target.rfind(root, 0) != 0 || !target.ends_with(".sbt")) continue;
    std::ifstream info("/proc/self/fdinfo/" + e.path().filename().string());
    std::string key;
    while (info >> key) {
      if (key == "flags:") {
        std::string octal;
        info >> octal;
        out[target] = std::stoi(octal, nullptr, 8);
        break;
      }
    }
  }
  return out;
}

// A file opened for O_DIRECT refuses misaligned buffers, offsets and
// lengths whatever its device would accept (a 512-byte disk, tmpfs), so a
// misaligned caller fails in every test.
TEST(DirectIoFile, MisalignedIoIsRefusedOnEveryFileSystem) {
  for (const char* base : {kDisk, "/dev/shm"}) {
    SCOPED_TRACE(base);
    test::ScratchDir dir(base);
    auto fs = NewPosixFileSystem(true, 0);
    auto f = fs->Create(dir.Sub("f"));
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    Result<AlignedBuffer> buf = AlignedBuffer::Allocate(8192);
    ASSERT_TRUE(buf.ok());
    std::memset(buf->get(), 'x', 8192);
    ASSERT_OK((*f)->Write(4096, buf->get(), 4096));
    EXPECT_TRUE((*f)->Write(4096, buf->get() + 512, 4096).IsInvalidArgument());
    EXPECT_TRUE((*f)->Write(512, buf->get(), 4096).IsInvalidArgument());
    EXPECT_TRUE((*f)->Write(0, buf->get(), 1000).IsInvalidArgument());
    EXPECT_TRUE((*f)->Read(4096, buf->get() + 16, 4096).IsInvalidArgument());
    ASSERT_OK((*f)->Read(4096, buf->get() + 4096, 4096));
    EXPECT_EQ(buf->get()[4096 + 100], 'x');
    auto buffered = NewPosixFileSystem(false, 0);
    auto plain = buffered->Create(dir.Sub("g"));
    ASSERT_TRUE(plain.ok());
    EXPECT_OK((*plain)->Write(3, "abc", 3));  // no O_DIRECT: any alignment
  }
}

class DirectIoTest : public ::testing::Test {
 protected:
  // A pool of 4 MB and some 8 MB of rows: pages are evicted, written by
  // the cleaners and read back through the files.
  static constexpr int64_t kRows = 12000;
  static std::string Value(int64_t id) {
    return std::string(600, static_cast<char>('a' + id % 26));
  }

  // Inserts the rows 500 per transaction. With `failures_allowed`, a
  // transaction failing with an I/O error (a page write its eviction needed
  // failed) is rolled back and run again.
  void Fill(Database* db, int failures_allowed = 0) {
    auto t = db->CreateTable(test::SampleTable("t"));
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (int64_t id = 0; id < kRows; id += 500) {
      for (;;) {
        auto txn = db->Begin();
        Status st;
        for (int64_t k = id; k < id + 500 && st.ok(); ++k) {
          st = txn->Insert(*t, test::SampleRow(k, k % 97, std::nullopt, Value(k)));
        }
        if (st.ok()) st = txn->Commit();
        if (st.ok()) break;
        ASSERT_TRUE(st.IsIOError() && failures_allowed-- > 0) << st.ToString();
        ASSERT_OK(txn->Rollback());
      }
    }
  }
  void Check(Database* db) {
    Table* t = db->FindTable("t");
    ASSERT_NE(t, nullptr);
    auto txn = db->Begin();
    const std::vector<Row> rows = test::ScanAll(txn.get(), t);
    ASSERT_EQ(rows.size(), static_cast<size_t>(kRows));
    for (const Row& r : rows) {
      const int64_t id = std::get<int64_t>(r[0]);
      ASSERT_EQ(r, test::SampleRow(id, id % 97, std::nullopt, Value(id)));
    }
    EXPECT_EQ(test::ScanAll(txn.get(), t, 1).size(), static_cast<size_t>(kRows));
    ASSERT_OK(txn->Commit());
  }
};

TEST_F(DirectIoTest, PageFilesOnADiskAreReadAndWrittenWithODirect) {
  test::ScratchDir dir(kDisk);
  Options o = test::SmallOptions(dir.path());
  o.page_size = 16384;           // the server's default
  o.double_write_on_pm = false;  // the double-write file too is on the disk
  {
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Fill(db->get());
    const std::map<std::string, int> flags = PageFileFlags(o.dir);
    ASSERT_FALSE(flags.empty());
    for (const auto& [path, f] : flags) EXPECT_TRUE(f & O_DIRECT) << path;
    const DatabaseStats s = (*db)->Stats();
    EXPECT_EQ(s.page_files_cached_by_os, 0u);
    EXPECT_GT(s.page_file_bytes_written, 0u);
    EXPECT_NE((*db)->Describe().find("page files: O_DIRECT"), std::string::npos)
        << (*db)->Describe();
    Check(db->get());
    EXPECT_GT((*db)->Stats().page_file_bytes_read, 0u) << "no page was read back";
    ASSERT_OK((*db)->Close());
  }
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Check(db->get());
}

// A process that ends without closing (as kill -9 leaves it): the next
// start redoes the log into pages it reads and writes with O_DIRECT.
TEST_F(DirectIoTest, RecoveryAfterACrashRedoesThroughODirect) {
  test::ScratchDir dir(kDisk);
  Options o = test::SmallOptions(dir.path());
  o.double_write_on_pm = false;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto db = Database::Open(o);
    if (!db.ok()) ::_exit(2);
    Fill(db->get());
    std::fflush(stdout);
    ::_exit(HasFailure() ? 1 : 0);  // no close: the pool's dirty pages are lost
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_GT((*db)->recovery().records_redone, 0u);
  EXPECT_EQ((*db)->Stats().page_files_cached_by_os, 0u);
  Check(db->get());
}

// Page writes that fail after the double-write area holds their images:
// the batch's copies (4 KiB aligned, as O_DIRECT wants) are written again
// before any later batch, and nothing is lost.
TEST_F(DirectIoTest, AFailedBatchIsWrittenAgainFromAlignedCopies) {
  test::ScratchDir dir(kDisk);
  auto direct = NewPosixFileSystem(true, 0);
  FaultInjectingFileSystem fs(direct.get(), test::TestSeed());
  Options o = test::SmallOptions(dir.path());
  o.file_system = &fs;
  o.meta_file_system = PosixFileSystem(false);
  std::filesystem::create_directories(o.dir);
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  fs.Add({kFaultWrite, ".sbt", EIO, 200, 3});
  Fill(db->get(), /*failures_allowed=*/3);
  for (int i = 0; i < 1000 && fs.injected() < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(fs.injected(), 3u);
  EXPECT_GT((*db)->Stats().page_write_failures, 0u);
  EXPECT_EQ((*db)->Stats().page_files_cached_by_os, 0u);
  Check(db->get());
  ASSERT_OK((*db)->Close());  // writes every dirty page, the failed ones included
  db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->recovery().records_redone, 0u);
  Check(db->get());
}

// tmpfs keeps files in memory (and accepts O_DIRECT since Linux 6.6): its
// page files are counted as cached by the OS, as are all with direct_io off.
TEST_F(DirectIoTest, OffOrOnTmpfsPageFilesGoThroughThePageCacheAndSaySo) {
  {
    test::ScratchDir dir(kDisk);
    Options o = test::SmallOptions(dir.path());
    o.direct_io = false;
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Fill(db->get());
    const std::map<std::string, int> flags = PageFileFlags(o.dir);
    ASSERT_FALSE(flags.empty());
    for (const auto& [path, f] : flags) EXPECT_FALSE(f & O_DIRECT) << path;
    EXPECT_EQ((*db)->Stats().page_files_cached_by_os, 0u);
    EXPECT_NE((*db)->Describe().find("OS page cache (direct_io off)"), std::string::npos);
  }
  test::ScratchDir dir("/dev/shm");
  Options o = test::SmallOptions(dir.path());
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  Fill(db->get());
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(o.dir)) {
    if (e.path().extension() == ".sbt") ++files;
  }
  ASSERT_GT(files, 0u);
  EXPECT_EQ((*db)->Stats().page_files_cached_by_os, files);
  EXPECT_NE((*db)->Describe().find("the OS caches"), std::string::npos) << (*db)->Describe();
  Check(db->get());
}

}  // namespace
}  // namespace subito
