#include "pmem/tracking_persistence.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>

namespace subito::pmem {
namespace {

class TrackingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mem_.assign(4096, 0xAA);
    t_.OnMap("r", mem_.data(), mem_.size());
  }
  uint8_t At(const TrackingPersistence::Image& img, size_t off) { return img.at("r")[off]; }

  std::vector<uint8_t> mem_;
  TrackingPersistence t_;
};

TEST_F(TrackingTest, OnlyFlushedAndFencedBytesSurvive) {
  mem_[0] = 1;  // stored, never flushed
  mem_[64] = 2;
  t_.Flush(&mem_[64], 1);  // flushed, not fenced yet
  size_t before_fence = t_.EventCount();
  t_.Drain();
  mem_[128] = 3;
  t_.Flush(&mem_[128], 1);  // flushed after the fence, never fenced

  auto img = t_.ImageAt(t_.EventCount());
  EXPECT_EQ(At(img, 0), 0xAA);
  EXPECT_EQ(At(img, 64), 2);
  EXPECT_EQ(At(img, 128), 0xAA);
  auto early = t_.ImageAt(before_fence);
  EXPECT_EQ(At(early, 64), 0xAA);
}

TEST_F(TrackingTest, ContentIsTakenAtFlushTime) {
  mem_[0] = 1;
  t_.Flush(&mem_[0], 1);
  mem_[0] = 9;  // changed after the flush, not flushed again
  t_.Drain();
  EXPECT_EQ(At(t_.ImageAt(t_.EventCount()), 0), 1);
}

TEST_F(TrackingTest, AFenceOrdersOnlyItsOwnThread) {
  std::thread other([&] {
    mem_[256] = 5;
    t_.Flush(&mem_[256], 1);  // this thread never fences
  });
  other.join();
  mem_[512] = 6;
  t_.Flush(&mem_[512], 1);
  t_.Drain();
  auto img = t_.ImageAt(t_.EventCount());
  EXPECT_EQ(At(img, 256), 0xAA);
  EXPECT_EQ(At(img, 512), 6);
}

TEST_F(TrackingTest, LaterDurableFlushOfALineWins) {
  std::thread a([&] {
    mem_[0] = 1;
    t_.Flush(&mem_[0], 1);
  });
  a.join();  // thread a's flush stays pending forever
  mem_[0] = 2;
  t_.Flush(&mem_[0], 1);
  t_.Drain();
  EXPECT_EQ(At(t_.ImageAt(t_.EventCount()), 0), 2);
}

TEST_F(TrackingTest, RandomSubsetKeepsSomeUnfencedLines) {
  for (int i = 0; i < 32; ++i) {
    mem_[i * 64] = static_cast<uint8_t>(i);
    t_.Flush(&mem_[i * 64], 1);
  }
  std::mt19937_64 rng(42);
  auto img = t_.ImageAt(t_.EventCount(), &rng);
  int kept = 0;
  for (int i = 0; i < 32; ++i) kept += At(img, i * 64) == i ? 1 : 0;
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, 32);
}

TEST_F(TrackingTest, PersistPointsFollowFences) {
  std::vector<size_t> points;
  for (int i = 0; i < 3; ++i) {
    mem_[i] = static_cast<uint8_t>(i + 1);
    t_.Persist(&mem_[i], 1);
  }
  std::vector<int> seen;
  t_.ForEachPersistPoint([&](size_t k, const TrackingPersistence::Image& img) {
    points.push_back(k);
    seen.push_back(img.at("r")[0] == 1 ? 1 : 0);
  });
  // Start, and after each of the three fences.
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(t_.FenceCount(), 3u);
}

TEST_F(TrackingTest, FreezeStopsRecording) {
  t_.Freeze();
  mem_[0] = 7;
  t_.Persist(&mem_[0], 1);
  EXPECT_EQ(t_.EventCount(), 0u);
  EXPECT_EQ(At(t_.ImageAt(100), 0), 0xAA);
}

}  // namespace
}  // namespace subito::pmem
