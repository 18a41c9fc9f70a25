#include "pmem/pm_file.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "pmem/numa.h"
#include "pmem/prefaulter.h"
#include "test_util.h"

namespace subito::pmem {
namespace {

TEST(PmFile, DevShmIsEmulatedPmAndSaysSo) {
  test::ScratchDir dir;
  auto f = PmFile::Create(dir.Sub("a"), 1 << 20);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  if (dir.path().rfind("/dev/shm", 0) == 0) {
    EXPECT_EQ((*f)->kind(), PmKind::kEmulatedDram);
    EXPECT_NE((*f)->Describe().find("emulated PM"), std::string::npos);
    EXPECT_EQ((*f)->DefaultPersistence(), PmemPersistenceInstance());
  }
  EXPECT_EQ((*f)->size(), 1u << 20);
  std::memcpy((*f)->data(), "subito", 6);
  (*f)->DefaultPersistence()->Persist((*f)->data(), 6);
  f.value().reset();
  auto g = PmFile::Open(dir.Sub("a"));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(std::memcmp((*g)->data(), "subito", 6), 0);
}

TEST(PmFile, RegularFileUsesMsync) {
  // /tmp may be tmpfs on some machines; /var/tmp is on the root device here.
  std::string path = "/var/tmp/subito-pmfile-test-" + std::to_string(::getpid());
  auto f = PmFile::Create(path, 64 * 1024);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  if ((*f)->kind() == PmKind::kBlockDevice) {
    EXPECT_EQ((*f)->DefaultPersistence(), MsyncPersistenceInstance());
    (*f)->data()[0] = 1;
    (*f)->DefaultPersistence()->Persist((*f)->data(), 1);
  }
  f.value().reset();
  std::remove(path.c_str());
}

TEST(PmFile, ErrorsNameThePath) {
  auto f = PmFile::Open("/nonexistent-dir/log.0");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("/nonexistent-dir/log.0"), std::string::npos);
  test::ScratchDir dir;
  auto c = PmFile::Create(dir.Sub("z"), 0);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(c.status().IsInvalidArgument());
  auto once = PmFile::Create(dir.Sub("b"), 4096);
  ASSERT_TRUE(once.ok());
  auto twice = PmFile::Create(dir.Sub("b"), 4096);
  EXPECT_FALSE(twice.ok());  // never clobbers an existing file
}

TEST(Prefaulter, PopulatesWithoutChangingBytes) {
  test::ScratchDir dir;
  auto f = PmFile::Create(dir.Sub("p"), 8 << 20);
  ASSERT_TRUE(f.ok());
  uint8_t* d = (*f)->data();
  d[0] = 0x11;
  d[(5 << 20) + 7] = 0x22;
  Prefaulter pf;
  pf.Add(d, (*f)->size(), 3 << 20);
  pf.WaitIdle();
  EXPECT_EQ(pf.PopulatedBytes(), 8u << 20);
  EXPECT_EQ(d[0], 0x11);
  EXPECT_EQ(d[(5 << 20) + 7], 0x22);
  EXPECT_EQ(d[1], 0);
}

// Paced: with a lead of 2 MiB (two 1 MiB chunks) it stops exactly 2 MiB
// ahead of what the writers consumed, goes on as they consume, and WaitIdle
// lifts the pacing. Two regions are populated in turn, not one after the
// other: the first 2 MiB are the first chunk of each.
TEST(Prefaulter, PacedStaysALeadAheadOfTheWriters) {
  test::ScratchDir dir;
  auto a = PmFile::Create(dir.Sub("a"), 8 << 20);
  auto b = PmFile::Create(dir.Sub("b"), 8 << 20);
  ASSERT_TRUE(a.ok() && b.ok());
  std::atomic<uint64_t> consumed{0};
  Prefaulter pf(
      -1, [&] { return consumed.load(); }, 2 << 20);
  pf.AddAll({{(*a)->data(), (*a)->size(), 0}, {(*b)->data(), (*b)->size(), 0}});
  auto settle = [&](uint64_t want) {
    for (int i = 0; i < 500 && pf.PopulatedBytes() < want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // time to overrun, if it would
  };
  settle(2 << 20);
  EXPECT_EQ(pf.PopulatedBytes(), 2u << 20);  // 1 MiB chunks: exactly the lead
  // Resident pages (tmpfs: populated ones): each region's first chunk.
  auto resident = [](uint8_t* p, size_t n) {
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    std::vector<unsigned char> v(n / page);
    EXPECT_EQ(::mincore(p, n, v.data()), 0);
    size_t count = 0;
    for (unsigned char c : v) count += c & 1;
    return count * page;
  };
  if (resident((*a)->data() + (1 << 20), 1 << 20) == 0) {  // else not tmpfs-like: skip
    EXPECT_EQ(resident((*a)->data(), 1 << 20), 1u << 20);
    EXPECT_EQ(resident((*b)->data(), 1 << 20), 1u << 20);
  }
  consumed = 5 << 20;
  settle(7 << 20);
  EXPECT_EQ(pf.PopulatedBytes(), 7u << 20);
  pf.WaitIdle();
  EXPECT_EQ(pf.PopulatedBytes(), 16u << 20);
}

TEST(Numa, SingleNodeIsANoOp) {
  if (NumaNodeCount() > 1) GTEST_SKIP() << "multi-node machine";
  EXPECT_FALSE(PinCurrentThreadToNode(0));
  EXPECT_FALSE(PinCurrentThreadToNode(-1));
}

}  // namespace
}  // namespace subito::pmem
