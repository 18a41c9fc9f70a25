// Large I/O for what is read or written in page order: scans' read-ahead
// (BufferPool::ReadAhead, from the B-tree cursor's leaf hops), and the page
// writer's runs of consecutive pages in one write (File::WriteGather).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <random>

#include "btree/builder.h"
#include "btree/key_encoding.h"
#include "btree_harness.h"
#include "buffer/page_writer.h"
#include "engine_util.h"
#include "forwarding_fs.h"
#include "storage_stack.h"
#include "test_util.h"
#include "util/aligned_buffer.h"
#include "util/coding.h"

namespace subito {
namespace {

constexpr uint32_t kPs = 4096;

void ExpectPage(buffer::BufferPool* pool, uint32_t p) {
  auto h = pool->Fetch({1, p}, buffer::Latch::kShared);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(DecodeFixed32(h->data() + 64), test::PageMark(p)) << "page " << p;
}

TEST(ReadAhead, LoadsTheAbsentPagesOfTheSpanInOneReadAsTheSpacesOwnReads) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 40, 64, &st);
  buffer::BufferPool* pool = st->pool.get();
  ExpectPage(pool, 12);  // resident already: in the span, not read again
  const uint64_t misses = pool->stats().misses;
  pool->ReadAhead({1, 10}, 8);
  EXPECT_EQ(pool->stats().read_aheads, 1u);
  EXPECT_EQ(pool->stats().pages_read_ahead, 7u);
  // One read of the span, counted as the space's (its table's) reads.
  EXPECT_EQ(st->space->stats().pages_read, 1u + 8u);
  for (uint32_t p = 10; p < 18; ++p) ExpectPage(pool, p);
  EXPECT_EQ(pool->stats().misses, misses) << "the scan's fetches find them";
  EXPECT_EQ(pool->ResidentPages().size(), 8u);

  // A page in the pool: nothing to do (the scan is ahead of its reads).
  pool->ReadAhead({1, 15}, 8);
  EXPECT_EQ(pool->stats().read_aheads, 1u);
  // The span stops at the space's end; past it, nothing; an unknown space,
  // nothing.
  const uint32_t end = st->space->page_count();
  ASSERT_GT(end, 36u);
  ASSERT_LT(end, 36u + 64u);
  pool->ReadAhead({1, 36}, 64);
  EXPECT_EQ(pool->stats().pages_read_ahead, 7u + (end - 36));
  pool->ReadAhead({1, end}, 8);
  pool->ReadAhead({9, 1}, 8);
  EXPECT_EQ(pool->stats().read_aheads, 2u);
  st->Close(false);
}

TEST(ReadAhead, TakesCleanFramesButNeverWaitsForOne) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 60, 16, &st);
  buffer::BufferPool* pool = st->pool.get();
  for (uint32_t p = 1; p <= 16; ++p) ExpectPage(pool, p);  // the pool is full, all clean
  pool->ReadAhead({1, 20}, 8);
  EXPECT_EQ(pool->stats().pages_read_ahead, 8u) << "clean frames are taken";
  for (uint32_t p = 20; p < 28; ++p) ExpectPage(pool, p);

  // Every frame pinned: it loads nothing and returns at once.
  std::vector<buffer::PageHandle> held;
  for (uint32_t p = 20; p < 36; ++p) {
    auto h = pool->Fetch({1, p}, buffer::Latch::kShared);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    held.push_back(std::move(*h));
  }
  // (A miss would wait for a frame, retrying for about a second.)
  const auto start = std::chrono::steady_clock::now();
  pool->ReadAhead({1, 40}, 8);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(pool->stats().pages_read_ahead, 8u);
  held.clear();
  st->Close(false);
}

TEST(ReadAhead, ADamagedPageIsLeftForTheScansOwnFetchToFail) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 20, 64, &st);
  st->Close(false);
  test::DamagePage(dir.path(), 6);
  ASSERT_OK(st->Open());
  buffer::BufferPool* pool = st->pool.get();
  pool->ReadAhead({1, 4}, 6);
  EXPECT_EQ(pool->stats().pages_read_ahead, 5u);
  const Status bad = pool->Fetch({1, 6}, buffer::Latch::kShared).status();
  EXPECT_TRUE(bad.IsCorruption()) << bad.ToString();
  EXPECT_NE(bad.ToString().find("page 6"), std::string::npos) << bad.ToString();
  for (uint32_t p : {4u, 5u, 7u, 8u, 9u}) ExpectPage(pool, p);
  st->Close(false);
}

// A forward scan of a built tree (leaves in ascending page order) in a pool
// far smaller than the tree reads its leaves ahead and returns every entry
// in order; a backward scan and a short scan do not read ahead.
TEST(ReadAhead, ForwardScansOfABuiltTreeReadTheirLeavesAhead) {
  using namespace btree;                // NOLINT(google-build-using-namespace)
  using namespace btree::test_harness;  // NOLINT(google-build-using-namespace)
  test::ScratchDir dir;
  Model m;
  {
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    BTree::Builder b(h.tree.get());
    std::mt19937_64 rng(test::TestSeed());
    for (uint32_t i = 0; i < 20000; ++i) {
      std::string key = KeyEncoder().Unsigned(uint64_t{i} * 5, 4).Release();
      std::string v(40 + rng() % 80, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(b.Add(key, v).ok());
      m[key] = v;
    }
    ASSERT_TRUE(b.Finish().ok());
    h.Close(true);
  }
  Harness h(dir.path(), 48);
  ASSERT_TRUE(h.Open(false).ok());
  ASSERT_GT(h.space->page_count(), 4 * 48u) << "the tree is several times the pool";
  {  // a short scan: three leaves at most (each holds 29 to 74 entries)
    BTree::Cursor c(h.tree.get());
    ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
    for (int i = 0; i < 58 && c.Valid(); ++i) ASSERT_TRUE(c.Next().ok());
  }
  EXPECT_EQ(h.pool->stats().read_aheads, 0u);
  {
    BTree::Cursor c(h.tree.get());
    ASSERT_TRUE(c.Seek(SeekMode::kLast).ok());
    for (auto it = m.rbegin(); it != m.rend(); ++it) {
      ASSERT_TRUE(c.Valid());
      ASSERT_EQ(c.key(), it->first);
      ASSERT_TRUE(c.Prev().ok());
    }
  }
  EXPECT_EQ(h.pool->stats().read_aheads, 0u) << "backward scans do not read ahead";
  const uint64_t misses = h.pool->stats().misses;
  {
    BTree::Cursor c(h.tree.get());
    ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
    for (auto& [k, v] : m) {
      ASSERT_TRUE(c.Valid());
      ASSERT_EQ(c.key(), k);
      ASSERT_EQ(c.value(), v);
      ASSERT_TRUE(c.Next().ok());
    }
    EXPECT_FALSE(c.Valid());
  }
  const buffer::BufferPoolStats s = h.pool->stats();
  EXPECT_GT(s.read_aheads, 0u);
  // Nearly every leaf came in through read-ahead, not a miss of its own.
  EXPECT_GT(s.pages_read_ahead, 10 * (s.misses - misses))
      << s.pages_read_ahead << " pages read ahead, " << s.misses - misses << " misses";
  h.Close(false);
}

// Counts the page files' writes and gathered writes, and the pieces of each.
class CountingFileSystem final : public test::ForwardingFileSystem {
 public:
  explicit CountingFileSystem(FileSystem* base) : ForwardingFileSystem(base) {}
  std::atomic<int> writes{0}, gathers{0};
  std::vector<size_t> pieces;  // of each gathered write

 private:
  class CountingFile final : public test::ForwardingFile {
   public:
    CountingFile(CountingFileSystem* fs, std::unique_ptr<File> base)
        : ForwardingFile(std::move(base)), fs_(fs) {}
    Status Write(uint64_t offset, const void* src, size_t n) override {
      ++fs_->writes;
      return ForwardingFile::Write(offset, src, n);
    }
    Status WriteGather(uint64_t offset, const uint8_t* const* pieces, size_t n,
                       size_t each) override {
      ++fs_->gathers;
      fs_->pieces.push_back(n);
      return ForwardingFile::WriteGather(offset, pieces, n, each);
    }

   private:
    CountingFileSystem* const fs_;
  };
  std::unique_ptr<File> MakeFile(std::unique_ptr<File> base) override {
    return std::make_unique<CountingFile>(this, std::move(base));
  }
};

std::vector<uint8_t> SealedPage(uint32_t space, uint32_t no, uint8_t fill) {
  std::vector<uint8_t> p(kPs);
  page::InitPage(p.data(), kPs, page::kPageTest, space, no);
  std::memset(p.data() + page::kPageHeaderSize, fill, kPs - page::kPageHeaderSize);
  page::SealPage(p.data(), kPs);
  return p;
}

// The batch in any order: each run of consecutive pages of one space is one
// gathered write, in page order, and every page lands where it belongs.
TEST(PageWriterRuns, ConsecutivePagesOfASpaceGoOutInOneWrite) {
  test::ScratchDir dir;
  CountingFileSystem fs(PosixFileSystem(/*direct_io=*/true));
  auto a = page::SpaceFile::Create(&fs, dir.Sub("a.sbt"), 3, kPs, "a");
  auto b = page::SpaceFile::Create(&fs, dir.Sub("b.sbt"), 4, kPs, "b");
  ASSERT_TRUE(a.ok() && b.ok());
  for (int i = 0; i < 12; ++i) ASSERT_TRUE((*a)->AllocatePage().ok() && (*b)->AllocatePage().ok());
  auto log = log::RedoLog::Open(test::SmallLog(dir.Sub("log"), log::LogWriteMode::kNf, 1));
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  auto dw = buffer::DoubleWrite::OpenPm(dir.Sub("dwb"), kPs, 16);
  ASSERT_TRUE(dw.ok());
  std::map<std::pair<uint32_t, uint32_t>, std::vector<uint8_t>> images;
  std::vector<buffer::PageImage> batch;
  // Space 3: pages 5, 3, 4, 9, 1, 2 (runs 1-5 and 9); space 4: 7, 6 (one run).
  for (auto [space, no] : std::vector<std::pair<uint32_t, uint32_t>>{
           {3, 5}, {4, 7}, {3, 3}, {3, 4}, {3, 9}, {4, 6}, {3, 1}, {3, 2}}) {
    auto& img = images[{space, no}];
    img = SealedPage(space, no, static_cast<uint8_t>(space * 16 + no));
    batch.push_back({space, no, 0, img.data()});
  }
  // Images from AlignedBuffer copies, as the pool's are (O_DIRECT).
  std::vector<AlignedBuffer> copies;
  for (auto& p : batch) {
    auto c = AlignedBuffer::Allocate(kPs);
    ASSERT_TRUE(c.ok());
    std::memcpy(c->get(), p.data, kPs);
    p.data = c->get();
    copies.push_back(std::move(*c));
  }
  buffer::PageWriter writer(log->get(), dw->get());
  auto space_of = [&](uint32_t id) -> page::SpaceFile* {
    return id == 3 ? a->get() : id == 4 ? b->get() : nullptr;
  };
  fs.writes = 0;  // the spaces' creation
  ASSERT_OK(writer.Write(batch, space_of));
  EXPECT_EQ(fs.writes.load(), 0);
  EXPECT_EQ(fs.gathers.load(), 3);
  EXPECT_EQ(fs.pieces, (std::vector<size_t>{5, 1, 2}));
  EXPECT_EQ((*a)->stats().pages_written, 6u);
  auto buf = AlignedBuffer::Allocate(kPs);
  ASSERT_TRUE(buf.ok());
  for (auto& [at, img] : images) {
    ASSERT_OK(space_of(at.first)->ReadPage(at.second, buf->get()));
    EXPECT_EQ(std::memcmp(buf->get(), img.data(), kPs), 0)
        << "space " << at.first << " page " << at.second;
  }
}

TEST(PageWriterRuns, AGatheredWriteOfMisalignedPiecesIsRefusedUnderODirect) {
  test::ScratchDir dir;
  auto f = PosixFileSystem(/*direct_io=*/true)->Create(dir.Sub("f"));
  ASSERT_TRUE(f.ok());
  auto good = AlignedBuffer::Allocate(2 * kPs);
  ASSERT_TRUE(good.ok());
  std::memset(good->get(), 0x5a, 2 * kPs);
  const uint8_t* pieces[2] = {good->get(), good->get() + kPs};
  ASSERT_OK((*f)->WriteGather(kPs, pieces, 2, kPs));
  EXPECT_EQ((*f)->Size(), 3u * kPs);
  auto rb = AlignedBuffer::Allocate(2 * kPs);
  ASSERT_TRUE(rb.ok());
  ASSERT_OK((*f)->Read(kPs, rb->get(), 2 * kPs));
  EXPECT_EQ(std::memcmp(rb->get(), good->get(), 2 * kPs), 0);
  const uint8_t* skewed[2] = {good->get(), good->get() + 100};
  EXPECT_TRUE((*f)->WriteGather(0, skewed, 2, kPs).IsInvalidArgument());
}

}  // namespace
}  // namespace subito
