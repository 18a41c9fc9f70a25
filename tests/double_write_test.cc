// The double-write area repairs torn in-place page writes and never replaces
// a newer page (D1-D3), on the PM tier and in a file.
#include "buffer/double_write.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <random>

#include "buffer/page_writer.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"
#include "util/fault_file_system.h"

namespace subito::buffer {
namespace {

constexpr uint32_t kPs = 8192;

std::vector<uint8_t> MakePage(uint32_t no, uint64_t lsn, uint8_t fill) {
  std::vector<uint8_t> p(kPs);
  page::InitPage(p.data(), kPs, page::kPageTest, 3, no);
  std::memset(p.data() + page::kPageHeaderSize, fill, kPs - page::kPageHeaderSize);
  page::SetPageLsn(p.data(), lsn);
  page::SealPage(p.data(), kPs);
  return p;
}

class DoubleWriteTest : public ::testing::TestWithParam<bool> {  // true: PM backend
 protected:
  void SetUp() override {
    auto s = page::SpaceFile::Create(PosixFileSystem(), dir_.Sub("s.sbt"), 3, kPs, "s");
    ASSERT_TRUE(s.ok());
    space_ = std::move(*s);
    for (uint32_t i = 0; i < 4; ++i) ASSERT_TRUE(space_->AllocatePage().ok());
    v1_ = MakePage(2, 100, 0x11);
    ASSERT_TRUE(space_->WritePage(2, v1_.data()).ok());
    ASSERT_TRUE(space_->Sync().ok());
  }
  Result<std::unique_ptr<DoubleWrite>> Open(uint32_t slots = 8) {
    return GetParam() ? DoubleWrite::OpenPm(dir_.Sub("dwb"), kPs, slots)
                      : DoubleWrite::OpenFile(PosixFileSystem(), dir_.Sub("dwb"), kPs, slots);
  }
  Result<uint32_t> Repair(DoubleWrite& dw) {
    return dw.Repair([&](uint32_t id) { return id == 3 ? space_.get() : nullptr; });
  }
  test::ScratchDir dir_;
  std::unique_ptr<page::SpaceFile> space_;
  std::vector<uint8_t> v1_;
};

TEST_P(DoubleWriteTest, RepairsATornInPlaceWrite) {
  auto v2 = MakePage(2, 200, 0x22);
  {
    auto dw = Open();
    ASSERT_TRUE(dw.ok()) << dw.status().ToString();
    ASSERT_TRUE((*dw)->WriteBatch({{3, 2, 200, v2.data()}}).ok());
  }
  // Power fails halfway through the in-place write.
  std::vector<uint8_t> torn = v1_;
  std::memcpy(torn.data(), v2.data(), kPs / 2);
  ASSERT_TRUE(space_->WritePage(2, torn.data()).ok());
  std::vector<uint8_t> buf(kPs);
  ASSERT_TRUE(space_->ReadPage(2, buf.data()).IsCorruption());
  auto dw = Open();  // reopened, as at restart
  ASSERT_TRUE(dw.ok());
  auto repaired = Repair(**dw);
  ASSERT_TRUE(repaired.ok()) << repaired.status().ToString();
  EXPECT_EQ(*repaired, 1u);
  ASSERT_TRUE(space_->ReadPage(2, buf.data()).ok());
  EXPECT_EQ(buf, v2);
}

TEST_P(DoubleWriteTest, ATornSpaceHeaderPageDoesNotBlockOpeningAndIsRepaired) {
  std::vector<uint8_t> h0(kPs);
  ASSERT_TRUE(space_->ReadPage(0, h0.data()).ok());
  std::vector<uint8_t> v2 = h0;
  v2[page::kSpaceMetaOffset] = 0x5A;  // a meta change, as upper layers make
  page::SetPageLsn(v2.data(), 300);
  page::SealPage(v2.data(), kPs);
  {
    auto dw = Open();
    ASSERT_TRUE(dw.ok());
    ASSERT_TRUE((*dw)->WriteBatch({{3, 0, 300, v2.data()}}).ok());
  }
  std::vector<uint8_t> torn = h0;
  std::memcpy(torn.data(), v2.data(), 64);  // the new header made it, the new meta did not
  ASSERT_TRUE(space_->WritePage(0, torn.data()).ok());
  space_.reset();
  auto reopened = page::SpaceFile::Open(PosixFileSystem(), dir_.Sub("s.sbt"));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  space_ = std::move(*reopened);
  std::vector<uint8_t> buf(kPs);
  EXPECT_TRUE(space_->ReadPage(0, buf.data()).IsCorruption());
  auto dw = Open();
  ASSERT_TRUE(dw.ok());
  auto repaired = Repair(**dw);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(*repaired, 1u);
  ASSERT_TRUE(space_->ReadPage(0, buf.data()).ok());
  EXPECT_EQ(buf, v2);
}

TEST_P(DoubleWriteTest, NeverReplacesANewerPage) {
  auto v2 = MakePage(2, 200, 0x22), v3 = MakePage(2, 300, 0x33);
  auto dw = Open();
  ASSERT_TRUE(dw.ok());
  ASSERT_TRUE((*dw)->WriteBatch({{3, 2, 200, v2.data()}}).ok());
  ASSERT_TRUE(space_->WritePage(2, v3.data()).ok());
  auto repaired = Repair(**dw);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(*repaired, 0u);
  std::vector<uint8_t> buf(kPs);
  ASSERT_TRUE(space_->ReadPage(2, buf.data()).ok());
  EXPECT_EQ(buf, v3);
}

// D4: a page written through slot 1 and later again through slot 0, whose
// copy a third batch then overwrote, keeps no copy: when it is damaged in
// place it is refused at its next read, not given the first, older image
// (redo from a checkpoint past that image would not bring its changes
// back). Also across a reopen, which starts with every slot possibly valid.
TEST_P(DoubleWriteTest, APageDamagedAfterItsLastCopyIsGoneIsNotGivenAnOlderOne) {
  auto other = MakePage(1, 150, 0x44), v2 = MakePage(2, 200, 0x22), v3 = MakePage(2, 300, 0x33);
  auto o2 = MakePage(1, 400, 0x55);
  for (bool reopen : {false, true}) {
    SCOPED_TRACE(reopen);
    ASSERT_TRUE(space_->WritePage(2, v1_.data()).ok());
    {
      auto dw = Open();
      ASSERT_TRUE(dw.ok());
      // The previous round left copies of page 2 in two slots: the first
      // batch of this run clears them.
      ASSERT_TRUE((*dw)->WriteBatch({{3, 1, 150, other.data()}, {3, 2, 200, v2.data()}}).ok());
      ASSERT_TRUE(space_->WritePage(1, other.data()).ok());
      ASSERT_TRUE(space_->WritePage(2, v2.data()).ok());
      if (reopen) {
        dw->reset();
        dw = Open();
        ASSERT_TRUE(dw.ok());
      }
      ASSERT_TRUE((*dw)->WriteBatch({{3, 2, 300, v3.data()}}).ok());
      ASSERT_TRUE(space_->WritePage(2, v3.data()).ok());
      ASSERT_TRUE((*dw)->WriteBatch({{3, 1, 400, o2.data()}}).ok());
      ASSERT_TRUE(space_->WritePage(1, o2.data()).ok());
    }
    std::vector<uint8_t> damaged = v3;
    damaged[kPs / 2] ^= 0x40;
    ASSERT_TRUE(space_->WritePage(2, damaged.data()).ok());
    auto dw = Open();
    ASSERT_TRUE(dw.ok());
    auto repaired = Repair(**dw);
    ASSERT_TRUE(repaired.ok()) << repaired.status().ToString();
    EXPECT_EQ(*repaired, 0u);
    std::vector<uint8_t> buf(kPs);
    EXPECT_TRUE(space_->ReadPage(2, buf.data()).IsCorruption());
    ASSERT_TRUE(space_->ReadPage(1, buf.data()).ok());
    EXPECT_EQ(buf, o2);
  }
}

// D4 at every cut: three batches on the tracked PM tier (Z: pages 1-5, A:
// page 3 again, B: page 1), each written in place once durable. A power cut
// anywhere, then page 3 damaged in place: repair gives it the image it had
// in place at the cut or the one of the batch in flight, or leaves it to be
// refused; never Z's copy once A's image is in place (A cleared Z's slots
// in its own durable step).
TEST(DoubleWriteCuts, EveryCutLeavesADamagedPageItsLastImageOrNone) {
  test::ScratchDir dir;
  pmem::TrackingPersistence pm;
  std::vector<std::vector<uint8_t>> z, a(1, MakePage(3, 200, 0x33)), b(1, MakePage(1, 300, 0x44));
  for (uint32_t no = 1; no <= 5; ++no) z.push_back(MakePage(no, 150, 0x10 + no));
  // Page 3's image in place after each in-place write: (event count, lsn).
  std::vector<std::pair<size_t, uint64_t>> in_place = {{0, 0}};
  std::string path;
  {
    auto dw = DoubleWrite::OpenPm(dir.Sub("dwb"), kPs, 8, &pm);
    ASSERT_TRUE(dw.ok()) << dw.status().ToString();
    std::vector<PageImage> batch;
    for (uint32_t no = 1; no <= 5; ++no) batch.push_back({3, no, 150, z[no - 1].data()});
    ASSERT_TRUE((*dw)->WriteBatch(batch).ok());
    in_place.emplace_back(pm.EventCount(), 150);
    ASSERT_TRUE((*dw)->WriteBatch({{3, 3, 200, a[0].data()}}).ok());
    in_place.emplace_back(pm.EventCount(), 200);
    ASSERT_TRUE((*dw)->WriteBatch({{3, 1, 300, b[0].data()}}).ok());
    pm.Freeze();
  }
  std::mt19937_64 rng(test::TestSeed());
  const size_t events = pm.EventCount();
  int refused = 0, repaired = 0;
  for (size_t k = 0; k <= events; k += 1 + rng() % 5) {
    SCOPED_TRACE(k);
    const pmem::TrackingPersistence::Image image = pm.ImageAt(k, &rng);
    ASSERT_EQ(image.size(), 1u);
    const std::string cut = dir.Sub("cut");
    std::filesystem::remove_all(cut);
    std::filesystem::create_directories(cut);
    test::WriteFile(cut + "/dwb", image.begin()->second);
    // The pages in place at the cut: Z's once Z was durable, A's page 3
    // once A was (B's page is not written in place before the cut ends).
    uint64_t lsn3 = 0;
    for (const auto& [at, lsn] : in_place) {
      if (at <= k) lsn3 = lsn;
    }
    auto s = page::SpaceFile::Create(PosixFileSystem(), cut + "/s.sbt", 3, kPs, "s");
    ASSERT_TRUE(s.ok());
    for (uint32_t i = 0; i < 6; ++i) ASSERT_TRUE((*s)->AllocatePage().ok());
    if (lsn3 != 0) {
      for (uint32_t no = 1; no <= 5; ++no) {
        std::vector<uint8_t> img = no == 3 && lsn3 == 200 ? a[0] : z[no - 1];
        if (no == 3) img[kPs / 2] ^= 0x40;  // damaged after its write
        ASSERT_TRUE((*s)->WritePage(no, img.data()).ok());
      }
    }
    auto dw = DoubleWrite::OpenPm(cut + "/dwb", kPs, 8);
    ASSERT_TRUE(dw.ok()) << dw.status().ToString();
    ASSERT_TRUE((*dw)->Repair([&](uint32_t id) { return id == 3 ? s->get() : nullptr; }).ok());
    std::vector<uint8_t> got(kPs);
    const Status read = (*s)->ReadPage(3, got.data());
    if (!read.ok()) {
      EXPECT_TRUE(read.IsCorruption()) << read.ToString();
      ++refused;
      continue;
    }
    if (page::IsZeroPage(got.data(), kPs)) continue;  // nothing in place yet, no copy durable
    ++repaired;
    EXPECT_GE(page::PageLsn(got.data()), lsn3) << "an image older than the one in place";
    EXPECT_TRUE(got == z[2] || got == a[0]);
  }
  // Both outcomes are reached: a copy of the page in a valid slot, and none.
  EXPECT_GT(refused, 0);
  EXPECT_GT(repaired, 0);
}

TEST_P(DoubleWriteTest, ATornSlotIsIgnored) {
  auto v2 = MakePage(2, 200, 0x22);
  {
    auto dw = Open();
    ASSERT_TRUE(dw.ok());
    ASSERT_TRUE((*dw)->WriteBatch({{3, 2, 200, v2.data()}}).ok());
  }
  auto bytes = test::ReadFile(dir_.Sub("dwb"));
  bytes[bytes.size() - 8 * kPs + 100] ^= 1;  // slot 0's image
  test::WriteFile(dir_.Sub("dwb"), bytes);
  auto dw = Open();
  ASSERT_TRUE(dw.ok());
  auto repaired = Repair(**dw);
  ASSERT_TRUE(repaired.ok());
  EXPECT_EQ(*repaired, 0u);  // and v1 stays: it was never torn
  std::vector<uint8_t> buf(kPs);
  ASSERT_TRUE(space_->ReadPage(2, buf.data()).ok());
  EXPECT_EQ(buf, v1_);
}

TEST_P(DoubleWriteTest, GeometryMismatchAndOversizedBatchesAreRefused) {
  { ASSERT_TRUE(Open(8).ok()); }
  auto other = Open(16);
  ASSERT_FALSE(other.ok());
  auto dw = Open(8);
  ASSERT_TRUE(dw.ok());
  std::vector<PageImage> nine(9, PageImage{3, 1, 1, v1_.data()});
  EXPECT_TRUE((*dw)->WriteBatch(nine).IsInvalidArgument());
}

// P4: a batch whose in-place write failed (a short write left page 2 torn)
// keeps its double-write slots until it is written again: the next batch,
// of other pages, first rewrites it. Without that, the next batch would
// take the slots and a crash would find page 2 torn with no copy.
TEST_P(DoubleWriteTest, AFailedBatchKeepsItsSlotsUntilItIsWrittenAgain) {
  FaultInjectingFileSystem fs(PosixFileSystem());
  auto s = page::SpaceFile::Create(&fs, dir_.Sub("f.sbt"), 3, kPs, "f");
  ASSERT_TRUE(s.ok());
  std::unique_ptr<page::SpaceFile> space = std::move(*s);
  for (uint32_t i = 0; i < 9; ++i) ASSERT_TRUE(space->AllocatePage().ok());
  std::vector<std::vector<uint8_t>> v1, v2;
  for (uint32_t no = 1; no <= 8; ++no) {
    v1.push_back(MakePage(no, 0, 0x10 + no));
    v2.push_back(MakePage(no, 0, 0x20 + no));
    ASSERT_TRUE(space->WritePage(no, v1.back().data()).ok());
  }
  ASSERT_TRUE(space->Sync().ok());
  auto log = log::RedoLog::Open(test::SmallLog(dir_.Sub("log"), log::LogWriteMode::kNf, 1));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto dw = Open();
  ASSERT_TRUE(dw.ok());
  auto space_of = [&](uint32_t id) { return id == 3 ? space.get() : nullptr; };
  {
    PageWriter writer(log->get(), dw->get());
    auto batch = [&](uint32_t first) {
      std::vector<PageImage> b;
      for (uint32_t no = first; no < first + 4; ++no) b.push_back({3, no, 0, v2[no - 1].data()});
      return b;
    };
    fs.Add({kFaultWrite, "f.sbt", EIO, /*skip=*/1, /*times=*/1, 1.0, /*short_write=*/true});
    EXPECT_TRUE(writer.Write(batch(1), space_of).IsIOError());
    EXPECT_TRUE(writer.retry_pending());
    std::vector<uint8_t> buf(kPs);
    ASSERT_TRUE(space->ReadPage(2, buf.data()).IsCorruption()) << "page 2 is not torn";
    ASSERT_TRUE(writer.Write(batch(5), space_of).ok());
    EXPECT_FALSE(writer.retry_pending());
    EXPECT_EQ(writer.failures(), 1u);
  }
  // Page 2 as a crash now would find it: torn in the file unless written
  // again, and the slots' copies repair what is torn.
  auto again = Open();
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE((*again)->Repair(space_of).ok());
  for (uint32_t no = 1; no <= 8; ++no) {
    std::vector<uint8_t> buf(kPs);
    ASSERT_TRUE(space->ReadPage(no, buf.data()).ok()) << "page " << no;
    EXPECT_EQ(buf, v2[no - 1]) << "page " << no;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, DoubleWriteTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "pm" : "file"; });

}  // namespace
}  // namespace subito::buffer
