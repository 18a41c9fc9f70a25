// Space files and the page format: round trips, and every kind of damage is
// refused with the file and the page named (P1).
#include "page/space_file.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "test_util.h"
#include "util/coding.h"

namespace subito::page {
namespace {

std::vector<uint8_t> MakePage(uint32_t ps, uint32_t space, uint32_t no, uint64_t lsn,
                              uint8_t fill) {
  std::vector<uint8_t> p(ps);
  InitPage(p.data(), ps, kPageTest, space, no);
  std::memset(p.data() + kPageHeaderSize, fill, ps - kPageHeaderSize);
  SetPageLsn(p.data(), lsn);
  SealPage(p.data(), ps);
  return p;
}

class SpaceFileTest : public ::testing::TestWithParam<uint32_t> {
 protected:
  std::string Path() { return dir_.Sub("t1.sbt"); }
  std::unique_ptr<SpaceFile> CreateWithPages(int pages) {
    auto s = SpaceFile::Create(PosixFileSystem(), Path(), 7, GetParam(), "t1");
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    for (int i = 0; i < pages; ++i) {
      auto no = (*s)->AllocatePage();
      EXPECT_TRUE(no.ok());
      auto img = MakePage(GetParam(), 7, *no, 100 + *no, static_cast<uint8_t>(*no));
      EXPECT_TRUE((*s)->WritePage(*no, img.data()).ok());
    }
    EXPECT_TRUE((*s)->Sync().ok());
    return std::move(*s);
  }
  test::ScratchDir dir_;
};

TEST_P(SpaceFileTest, PagesRoundTripThroughReopen) {
  { CreateWithPages(20); }
  auto s = SpaceFile::Open(PosixFileSystem(), Path());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->space_id(), 7u);
  EXPECT_EQ((*s)->page_size(), GetParam());
  EXPECT_EQ((*s)->name(), "t1");
  EXPECT_GE((*s)->page_count(), 21u);
  std::vector<uint8_t> buf(GetParam());
  for (uint32_t no = 1; no <= 20; ++no) {
    ASSERT_TRUE((*s)->ReadPage(no, buf.data()).ok());
    EXPECT_EQ(buf, MakePage(GetParam(), 7, no, 100 + no, static_cast<uint8_t>(no)));
  }
  // Allocated by growth, never written: reads as zeros (P1).
  auto fresh = (*s)->AllocatePage();
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*s)->ReadPage(*fresh, buf.data()).ok());
  EXPECT_TRUE(IsZeroPage(buf.data(), GetParam()));
  Status past = (*s)->ReadPage((*s)->page_count() + 5, buf.data());
  EXPECT_EQ(past.code(), Status::Code::kNotFound);
  EXPECT_EQ((*s)->stats().pages_read, 20u + 1);
}

TEST_P(SpaceFileTest, EveryBitFlipInAPageIsRefused) {
  { CreateWithPages(4); }
  const uint32_t ps = GetParam();
  auto original = test::ReadFile(Path());
  std::mt19937_64 rng(test::TestSeed());
  std::vector<uint8_t> buf(ps);
  for (int trial = 0; trial < 64; ++trial) {
    auto bytes = original;
    uint32_t no = 1 + static_cast<uint32_t>(rng() % 4);
    uint64_t off = uint64_t{no} * ps + rng() % ps;
    bytes[off] ^= static_cast<uint8_t>(1u << (rng() % 8));
    test::WriteFile(Path(), bytes);
    auto s = SpaceFile::Open(PosixFileSystem(), Path());
    ASSERT_TRUE(s.ok());
    Status st = (*s)->ReadPage(no, buf.data());
    ASSERT_TRUE(st.IsCorruption()) << "flip at " << off << " accepted";
    EXPECT_NE(st.message().find(Path() + " page " + std::to_string(no)), std::string::npos)
        << st.ToString();
  }
}

TEST_P(SpaceFileTest, MisdirectedWritesAndForeignPagesAreRefused) {
  auto s = CreateWithPages(6);
  const uint32_t ps = GetParam();
  std::vector<uint8_t> buf(ps);
  auto page2 = MakePage(ps, 7, 2, 500, 0x22);
  ASSERT_TRUE(s->WritePage(5, page2.data()).ok());  // page 2's image in page 5's place
  Status st = s->ReadPage(5, buf.data());
  ASSERT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("misdirected"), std::string::npos) << st.ToString();
  auto other = MakePage(ps, 8, 4, 500, 0x44);  // another space's page
  ASSERT_TRUE(s->WritePage(4, other.data()).ok());
  EXPECT_TRUE(s->ReadPage(4, buf.data()).IsCorruption());
}

TEST_P(SpaceFileTest, DamagedOrTruncatedFilesAreRefusedAtOpen) {
  { CreateWithPages(2); }
  auto original = test::ReadFile(Path());
  auto bytes = original;
  bytes[40] ^= 1;  // space header page body
  test::WriteFile(Path(), bytes);
  auto s = SpaceFile::Open(PosixFileSystem(), Path());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.status().IsCorruption());
  EXPECT_NE(s.status().message().find(Path() + " page 0"), std::string::npos);
  bytes = original;
  bytes.resize(1000);
  test::WriteFile(Path(), bytes);
  s = SpaceFile::Open(PosixFileSystem(), Path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("truncated"), std::string::npos) << s.status().ToString();
  test::WriteFile(Path(), std::vector<uint8_t>(8192, 0x61));
  s = SpaceFile::Open(PosixFileSystem(), Path());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a Subito space file"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(PageSizes, SpaceFileTest, ::testing::Values(4096u, 8192u, 16384u),
                         [](const auto& info) { return std::to_string(info.param); });

TEST(SpaceFile, AnInterruptedCreationLeavesNoSpaceAndDoesNotBlockTheNext) {
  test::ScratchDir dir;
  // What a crash between creating the file and syncing its header leaves.
  test::WriteFile(dir.Sub("t.sbt.tmp"), std::vector<uint8_t>(100, 0x33));
  EXPECT_FALSE(PosixFileSystem()->Exists(dir.Sub("t.sbt")));
  auto s = SpaceFile::Create(PosixFileSystem(), dir.Sub("t.sbt"), 4, 4096, "t");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  s.value().reset();
  EXPECT_FALSE(PosixFileSystem()->Exists(dir.Sub("t.sbt.tmp")));
  auto o = SpaceFile::Open(PosixFileSystem(), dir.Sub("t.sbt"));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ((*o)->space_id(), 4u);
  EXPECT_EQ((*o)->page_size(), 4096u);
}

// MariaDB names may be 64 characters each ("db/table.index" up to ~200 bytes,
// temporary tables longer): the header keeps the first 63 bytes as a label.
TEST(SpaceFile, LongNamesAreAcceptedAndLabelledByTheirFirst63Bytes) {
  test::ScratchDir dir;
  std::string name(64, 'd');
  name += "/" + std::string(64, 't') + "." + std::string(64, 'i');
  auto s = SpaceFile::Create(PosixFileSystem(), dir.Sub("long.sbt"), 9, 4096, name);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ((*s)->name(), name.substr(0, 63));
  s.value().reset();
  auto o = SpaceFile::Open(PosixFileSystem(), dir.Sub("long.sbt"));
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ((*o)->name(), name.substr(0, 63));
  EXPECT_EQ((*o)->space_id(), 9u);
}

TEST(SpaceFile, BadSettingsAreRefused) {
  test::ScratchDir dir;
  auto s = SpaceFile::Create(PosixFileSystem(), dir.Sub("x"), 1, 1000, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("page size 1000"), std::string::npos);
  s = SpaceFile::Create(PosixFileSystem(), "/proc/nope/x.sbt", 1, 4096, "x");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/proc/nope/x.sbt"), std::string::npos);
  ASSERT_TRUE(SpaceFile::Create(PosixFileSystem(), dir.Sub("z"), 1, 4096, "z").ok());
  EXPECT_FALSE(SpaceFile::Create(PosixFileSystem(), dir.Sub("z"), 1, 4096, "z").ok());
}

}  // namespace
}  // namespace subito::page
