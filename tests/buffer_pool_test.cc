// Buffer pool + mini-transactions + page writer, checked against a model of
// what every page must hold.
#include "buffer/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <unordered_map>

#include "buffer/mtr.h"
#include "buffer/page_frame_map.h"
#include "buffer/page_recovery.h"
#include "storage_stack.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::buffer {
namespace {

constexpr uint32_t kPs = 4096;
constexpr uint32_t kSlots = (kPs - 64) / 8;  // u64 values per test page

// The storage stack of these tests: 4 KiB pages.
class Stack : public test::StorageStack {
 public:
  explicit Stack(const std::string& dir, uint64_t pool_bytes = 1 << 20,
                 uint64_t log_file = 4096 + (1 << 20), uint32_t cleaners = 1)
      : StorageStack(dir, {kPs, pool_bytes, log_file, cleaners, 16}) {}
};

using test::MakePages;

Status SetValue(BufferPool* pool, uint32_t page_no, uint32_t slot, uint64_t v) {
  SUBITO_RETURN_IF_ERROR(pool->LogFreeCheck());
  auto h = pool->Fetch({1, page_no}, Latch::kExclusive);
  if (!h.ok()) return h.status();
  uint8_t b[8];
  EncodeFixed64(b, v);
  Mtr mtr(pool);
  mtr.Write(*h, 64 + slot * 8, b, 8);
  return mtr.Commit().status();
}

uint64_t GetValue(const uint8_t* page, uint32_t slot) {
  return DecodeFixed64(page + 64 + slot * 8);
}

using Model = std::map<std::pair<uint32_t, uint32_t>, uint64_t>;

void ExpectPoolMatches(BufferPool* pool, const Model& model) {
  for (auto& [key, v] : model) {
    auto h = pool->Fetch({1, key.first}, Latch::kShared);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    ASSERT_EQ(GetValue(h->data(), key.second), v) << "page " << key.first << " slot " << key.second;
  }
}

void ExpectFilesMatch(const std::string& dir, const Model& model) {
  auto s = page::SpaceFile::Open(PosixFileSystem(), dir + "/t.sbt");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  std::vector<uint8_t> buf(kPs);
  for (auto& [key, v] : model) {
    ASSERT_TRUE((*s)->ReadPage(key.first, buf.data()).ok());
    ASSERT_EQ(GetValue(buf.data(), key.second), v) << "page " << key.first;
  }
}

// The page table's map against std::unordered_map over random puts, erases
// and finds: few live keys in a small array (runs that wrap at its end,
// erases inside runs) and then many (growth).
TEST(PageFrameMap, AgreesWithAnUnorderedMap) {
  for (const uint32_t live : {5u, 40u, 3000u}) {
    std::mt19937_64 rng(live);
    PageFrameMap map;
    std::unordered_map<uint64_t, uint32_t> ref;
    // Keys from a small set, so that erased keys come back and runs collide.
    const uint32_t universe = live * 3;
    // Pages of the same numbers in several spaces: a map that ignored the
    // space would mix them up.
    auto key_of = [](uint64_t k) {
      return PageId{static_cast<uint32_t>(k % 7), static_cast<uint32_t>(k / 7)};
    };
    for (int step = 0; step < 200000; ++step) {
      const uint64_t k = rng() % universe;
      const PageId id = key_of(k);
      const uint32_t r = static_cast<uint32_t>(rng() % 4);
      if (r == 0 || (r == 1 && ref.size() < live)) {
        const uint32_t frame = static_cast<uint32_t>(rng() % 100000);
        map.Put(id, frame);
        ref[k] = frame;
      } else if (r == 2 || ref.size() >= live) {
        map.Erase(id);
        ref.erase(k);
      }
      const std::optional<uint32_t> got = map.Find(id);
      auto it = ref.find(k);
      ASSERT_EQ(got.has_value(), it != ref.end()) << "step " << step << " key " << k;
      if (got) {
        ASSERT_EQ(*got, it->second);
      }
      ASSERT_EQ(map.size(), ref.size());
      if (step % 997 == 0) {
        for (uint64_t j = 0; j < universe; ++j) {
          auto e = ref.find(j);
          const std::optional<uint32_t> f = map.Find(key_of(j));
          ASSERT_EQ(f.has_value(), e != ref.end()) << "step " << step << " key " << j;
          if (f) {
            ASSERT_EQ(*f, e->second);
          }
        }
      }
    }
  }
}

// The keys of one shard (the pool's: the top six bits of the same
// product) spread over the shard's array: many small spaces of a few pages
// each, the pool's common case with many tables and indexes, and one large
// space. Half full, the longest run of used slots is 4 (2 for the large
// space); the hash the first version used (bits 26 and up of the product,
// which for small arrays depend on the page number alone) made it 18-20.
TEST(PageFrameMap, SpreadsTheKeysOfManySmallSpaces) {
  auto shard_of = [](PageId id) { return PageFrameMap::Hash(id) >> 58; };
  for (const uint32_t pages_per_space : {4u, 16u, 1u << 20}) {
    PageFrameMap map;
    uint32_t n = 0;
    for (uint32_t space = 1; n < 4096; ++space) {
      for (uint32_t page = 0; page < pages_per_space && n < 4096; ++page) {
        const PageId id{space, page};
        if (shard_of(id) != 5) continue;
        map.Put(id, n++);
      }
    }
    ASSERT_EQ(map.size(), 4096u);
    EXPECT_LE(map.LongestRun(), 12u) << pages_per_space << " pages per space";
  }
}

TEST(BufferPool, ChangesReachThePageFilesAfterFlush) {
  test::ScratchDir dir;
  Stack st(dir.path());
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 10);
  Model model;
  for (uint32_t i = 0; i < 200; ++i) {
    uint32_t p = pages[i % pages.size()], slot = i % kSlots;
    ASSERT_TRUE(SetValue(st.pool.get(), p, slot, i * 7 + 1).ok());
    model[{p, slot}] = i * 7 + 1;
  }
  ExpectPoolMatches(st.pool.get(), model);
  st.Close(/*flush=*/true);
  ExpectFilesMatch(dir.path(), model);
}

TEST(BufferPool, ASmallPoolEvictsAndLosesNothing) {
  test::ScratchDir dir;
  Stack st(dir.path(), /*pool_bytes=*/8 * kPs);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 64);
  Model model;
  std::mt19937_64 rng(test::TestSeed());
  for (int i = 0; i < 3000; ++i) {
    uint32_t p = pages[rng() % pages.size()], slot = static_cast<uint32_t>(rng() % kSlots);
    ASSERT_TRUE(SetValue(st.pool.get(), p, slot, rng()).ok());
    auto h = st.pool->Fetch({1, p}, Latch::kShared);
    ASSERT_TRUE(h.ok());
    model[{p, slot}] = GetValue(h->data(), slot);
  }
  ExpectPoolMatches(st.pool.get(), model);
  BufferPoolStats s = st.pool->stats();
  EXPECT_EQ(s.frames, 8u);
  EXPECT_GT(s.evictions, 100u);
  EXPECT_GT(s.pages_read, 100u);
  EXPECT_GT(s.pages_written, 100u);
  st.Close(true);
  ExpectFilesMatch(dir.path(), model);
}

TEST(BufferPool, NewPagesAreZeroedWithoutAReadOrAMiss) {
  test::ScratchDir dir;
  Stack st(dir.path(), /*pool_bytes=*/8 * kPs);
  ASSERT_TRUE(st.Open().ok());
  // Fill every frame with nonzero bytes, so new pages land in used frames.
  auto pages = MakePages(st.pool.get(), 8);
  for (uint32_t p : pages) ASSERT_TRUE(SetValue(st.pool.get(), p, kSlots - 1, ~uint64_t{0}).ok());
  const page::SpaceIoStats before = st.space->stats();
  const uint64_t misses_before = st.pool->stats().misses;
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(st.pool->LogFreeCheck().ok());
    auto h = st.pool->Allocate(1);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    const std::vector<uint8_t> zeros(kPs, 0);
    ASSERT_EQ(std::memcmp(h->data(), zeros.data(), kPs), 0) << "page " << h->id().page_no;
  }
  // The space file grows by extents ahead of its pages: allocated pages
  // inside the file were read (and counted) before.
  const page::SpaceIoStats after = st.space->stats();
  EXPECT_EQ(after.pages_read, before.pages_read);
  EXPECT_EQ(after.buffer_misses, before.buffer_misses);
  EXPECT_EQ(st.pool->stats().misses, misses_before);
}

TEST(BufferPool, ConcurrentMtrsKeepEveryIncrement) {
  test::ScratchDir dir;
  Stack st(dir.path(), 16 * kPs);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 32);
  constexpr int kThreads = 4, kOps = 800;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(test::TestSeed() + t);
      for (int i = 0; i < kOps; ++i) {
        ASSERT_TRUE(st.pool->LogFreeCheck().ok());
        // Two pages in one Mtr, latched in page order (no deadlock).
        uint32_t a = pages[rng() % pages.size()], b = pages[rng() % pages.size()];
        if (a > b) std::swap(a, b);
        auto ha = st.pool->Fetch({1, a}, Latch::kExclusive);
        ASSERT_TRUE(ha.ok());
        Mtr mtr(st.pool.get());
        uint8_t v[8];
        EncodeFixed64(v, GetValue(ha->data(), 0) + 1);
        mtr.Write(*ha, 64, v, 8);
        PageHandle hb;
        if (b != a) {
          auto r = st.pool->Fetch({1, b}, Latch::kExclusive);
          ASSERT_TRUE(r.ok());
          hb = std::move(*r);
          EncodeFixed64(v, GetValue(hb.data(), 1) + 1);
          mtr.Write(hb, 72, v, 8);
        }
        ASSERT_TRUE(mtr.Commit().ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  uint64_t sum0 = 0, sum1 = 0;
  for (uint32_t p : pages) {
    auto h = st.pool->Fetch({1, p}, Latch::kShared);
    ASSERT_TRUE(h.ok());
    sum0 += GetValue(h->data(), 0);
    sum1 += GetValue(h->data(), 1);
  }
  EXPECT_EQ(sum0, uint64_t{kThreads} * kOps);
  EXPECT_GT(sum1, 0u);
  EXPECT_LE(sum1, uint64_t{kThreads} * kOps);
  st.Close(true);
}

TEST(BufferPool, TheLogWrapsWhileCleanersCheckpoint) {
  test::ScratchDir dir;
  Stack st(dir.path(), 32 * kPs, /*log_file=*/4096 + 64 * 1024);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 100);
  Model model;
  std::mt19937_64 rng(test::TestSeed());
  const uint64_t laps = 8 * st.log->capacity();
  while (st.log->reserved_lsn() < log::kFirstLsn + laps) {
    uint32_t p = pages[rng() % pages.size()], slot = static_cast<uint32_t>(rng() % kSlots);
    uint64_t v = rng();
    ASSERT_TRUE(SetValue(st.pool.get(), p, slot, v).ok());
    model[{p, slot}] = v;
  }
  EXPECT_GT(st.pool->stats().checkpoints, 4u);
  EXPECT_GT(st.log->checkpoint_lsn(), log::kFirstLsn + 6 * st.log->capacity());
  ExpectPoolMatches(st.pool.get(), model);
  st.Close(true);
  ExpectFilesMatch(dir.path(), model);
}

TEST(BufferPool, RedoRebuildsChangesThatNeverReachedThePageFiles) {
  test::ScratchDir dir;
  Model model;
  {
    Stack st(dir.path(), 64 * kPs, 4096 + (4 << 20), /*cleaners=*/0);
    ASSERT_TRUE(st.Open().ok());
    auto pages = MakePages(st.pool.get(), 40);
    std::mt19937_64 rng(test::TestSeed());
    for (int i = 0; i < 2000; ++i) {
      uint32_t p = pages[rng() % pages.size()], slot = static_cast<uint32_t>(rng() % kSlots);
      uint64_t v = rng();
      ASSERT_TRUE(SetValue(st.pool.get(), p, slot, v).ok());
      model[{p, slot}] = v;
    }
    ASSERT_TRUE(st.log->WaitDurable(st.log->reserved_lsn()).ok());
    EXPECT_EQ(st.pool->stats().pages_written, 0u);
    st.Close(/*flush=*/false);  // like a crash: no page was ever written
  }
  Stack st(dir.path(), 64 * kPs, 4096 + (4 << 20));
  ASSERT_TRUE(st.Open().ok());
  ASSERT_TRUE(st.Recover().ok());
  ExpectPoolMatches(st.pool.get(), model);
  ASSERT_TRUE(st.Recover().ok());  // P3: redo is idempotent
  ExpectPoolMatches(st.pool.get(), model);
  st.Close(true);
  ExpectFilesMatch(dir.path(), model);
}

TEST(BufferPool, TheCheckpointStaysWhileHeld) {
  test::ScratchDir dir;
  Stack st(dir.path(), 64 * kPs, 4096 + (1 << 20), /*cleaners=*/0);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 5);
  for (uint32_t i = 0; i < 50; ++i) ASSERT_TRUE(SetValue(st.pool.get(), pages[i % 5], i, i).ok());
  const log::Lsn before = st.log->checkpoint_lsn();
  st.pool->HoldCheckpoint();  // as RecoverPages does during redo
  ASSERT_TRUE(st.pool->FlushAll().ok());
  EXPECT_EQ(st.log->checkpoint_lsn(), before);
  st.pool->ReleaseCheckpoint();
  ASSERT_TRUE(st.pool->Checkpoint().ok());
  EXPECT_GT(st.log->checkpoint_lsn(), before);
  st.Close(true);
}

// Between a restart's pool creation and recovery's own hold, the cleaners
// (every 5 ms here) must not move the checkpoint to the log's end: a crash
// before the redone pages are written would lose their redo.
TEST(BufferPool, APoolMadeForRecoveryKeepsTheCheckpointUntilReleased) {
  test::ScratchDir dir;
  Model model;
  {
    Stack st(dir.path(), 64 * kPs);
    ASSERT_TRUE(st.Open().ok());
    auto pages = MakePages(st.pool.get(), 5);
    ASSERT_TRUE(st.pool->FlushAll().ok());
    st.pool->HoldCheckpoint();
    for (uint32_t i = 0; i < 50; ++i) {
      ASSERT_TRUE(SetValue(st.pool.get(), pages[i % 5], i, i + 1).ok());
      model[{pages[i % 5], i}] = i + 1;
    }
    ASSERT_TRUE(st.log->WaitDurable(st.log->reserved_lsn()).ok());
    st.Close(false);  // a crash: the changes are in the log only
  }
  test::ScratchDir unheld;
  std::filesystem::copy(
      dir.path(), unheld.path(),
      std::filesystem::copy_options::recursive | std::filesystem::copy_options::overwrite_existing);
  for (bool held : {true, false}) {
    test::StorageStackOptions o;
    o.pool_bytes = 64 * kPs;
    o.checkpoint_held = held;
    test::StorageStack st(held ? dir.path() : unheld.path(), o);
    ASSERT_TRUE(st.Open().ok());
    const log::Lsn recovered = st.log->recovered().checkpoint_lsn;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // twenty cleaner rounds
    if (!held) {
      // Without the hold the cleaners move it to the end: the redo is still
      // in the log, but nothing names it any more.
      EXPECT_GT(st.log->checkpoint_lsn(), recovered) << "the window the option closes";
      st.Close(false);
      continue;
    }
    EXPECT_EQ(st.log->checkpoint_lsn(), recovered);
    ASSERT_TRUE(st.Recover().ok());  // its own hold took over
    ExpectPoolMatches(st.pool.get(), model);
    ASSERT_TRUE(st.pool->FlushAll().ok());
    ASSERT_TRUE(st.pool->Checkpoint().ok());
    EXPECT_GT(st.log->checkpoint_lsn(), recovered) << "the pool's hold was released";
    st.Close(true);
    ExpectFilesMatch(dir.path(), model);
  }
}

// A pool made for recovery writes no page until recovery has repaired the
// double-write area: a batch before the repair would take the slots of a
// torn page's copy (D4 clears every slot it does not use). Pages dirtied
// before it wait for the release.
TEST(BufferPool, APoolMadeForRecoveryWritesNothingBeforeTheRepair) {
  test::ScratchDir dir;
  {
    Stack st(dir.path(), 64 * kPs);
    ASSERT_TRUE(st.Open().ok());
    MakePages(st.pool.get(), 40);
    ASSERT_TRUE(st.pool->FlushAll().ok());
    st.Close(true);
  }
  test::StorageStackOptions o;
  o.pool_bytes = 64 * kPs;
  o.checkpoint_held = true;
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  // Far more dirty pages than the cleaners' threshold (half the pool).
  for (uint32_t page = 1; page <= 40; ++page) ASSERT_TRUE(SetValue(st.pool.get(), page, 0, 7).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // about 60 cleaner rounds
  EXPECT_EQ(st.dwb->bytes_written(), 0u) << "a page was written before the repair";
  ASSERT_TRUE(st.Recover().ok());
  for (int i = 0; i < 3000 && st.dwb->bytes_written() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_GT(st.dwb->bytes_written(), 0u) << "the cleaners did not write after the repair";
  st.Close(true);
}

TEST(BufferPool, AMtrThatCannotBeLoggedLeavesNoTraceInItsPages) {
  test::ScratchDir dir;
  Stack st(dir.path(), 64 * kPs, 4096 + 64 * 1024);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 24);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  std::vector<std::vector<uint8_t>> before;
  std::vector<PageHandle> handles;
  Mtr mtr(st.pool.get());
  std::vector<uint8_t> junk(kPs - 64, 0xEE);
  for (uint32_t p : pages) {  // 24 x 4 KiB of edits: more than the 64 KiB log can take
    auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
    ASSERT_TRUE(h.ok());
    before.emplace_back(h->data(), h->data() + kPs);
    handles.push_back(std::move(*h));
    mtr.Write(handles.back(), 64, junk.data(), static_cast<uint32_t>(junk.size()));
  }
  auto r = mtr.Commit();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().IsInvalidArgument()) << r.status().ToString();
  for (size_t i = 0; i < handles.size(); ++i) {
    EXPECT_EQ(std::vector<uint8_t>(handles[i].data(), handles[i].data() + kPs), before[i]);
  }
  handles.clear();
  EXPECT_EQ(st.pool->stats().dirty, 0u);
  st.Close(true);
}

TEST(BufferPool, AnMtrNeverCommittedLeavesNoTrace) {
  test::ScratchDir dir;
  Stack st(dir.path());
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 2);
  auto h = st.pool->Fetch({1, pages[0]}, Latch::kExclusive);
  ASSERT_TRUE(h.ok());
  const std::vector<uint8_t> before(h->data(), h->data() + kPs);
  const log::Lsn reserved = st.log->reserved_lsn();
  {
    Mtr mtr(st.pool.get());
    std::vector<uint8_t> junk(500, 0x77);
    mtr.Write(*h, 100, junk.data(), 500);
    mtr.Write(*h, 2000, junk.data(), 300);
    // An error path returns here without committing.
  }
  EXPECT_EQ(std::vector<uint8_t>(h->data(), h->data() + kPs), before);
  EXPECT_EQ(st.log->reserved_lsn(), reserved);  // nothing was logged
  h->Release();
  st.Close(true);
}

// A changed page image as a B-tree makes them: a u16 slot inserted or
// removed (the array shifts), a record written or zeroed, scattered bytes.
void MutateLikeANode(std::vector<uint8_t>& img, std::mt19937_64& rng) {
  const uint32_t slots_end = 64 + 2 * static_cast<uint32_t>(200 + rng() % 1500);
  const uint32_t at = 64 + 2 * static_cast<uint32_t>(rng() % ((slots_end - 64) / 2 - 1));
  switch (rng() % 4) {
    case 0:  // insert a slot
      std::memmove(&img[at + 2], &img[at], slots_end - at - 2);
      EncodeFixed16(&img[at], static_cast<uint16_t>(rng()));
      break;
    case 1:  // remove a slot
      std::memmove(&img[at], &img[at + 2], slots_end - at - 2);
      EncodeFixed16(&img[slots_end - 2], 0);
      break;
    case 2: {  // zero a record, with a chunk header
      const uint32_t off = 16 + static_cast<uint32_t>(rng() % (kPs - 16 - 600));
      std::memset(&img[off], 0, 4 + rng() % 596);
      EncodeFixed16(&img[off], 77);
      break;
    }
    default:
      for (int k = 0; k < 20; ++k) img[16 + rng() % (kPs - 16)] = static_cast<uint8_t>(rng());
  }
}

// WriteDiff logs shifts as moves and zero runs as zero fills; redo, which
// replays them on the page as it was before the Mtr, must rebuild every
// byte, and an Mtr aborted after such edits must leave no trace.
TEST(BufferPool, DiffEditsReplayExactlyAndStaySmall) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  std::map<uint32_t, std::vector<uint8_t>> model;  // bytes [16, kPs) of each page
  uint64_t logged = 0, shifted = 0;
  {
    Stack st(dir.path(), 64 * kPs, 4096 + (8 << 20), /*cleaners=*/0);
    ASSERT_TRUE(st.Open().ok());
    auto pages = MakePages(st.pool.get(), 8);
    for (uint32_t p : pages) {  // random contents to start from
      auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
      ASSERT_TRUE(h.ok());
      std::vector<uint8_t> img(h->data(), h->data() + kPs);
      for (uint32_t i = 64; i < kPs; ++i) img[i] = static_cast<uint8_t>(rng() % 4 ? rng() : 0);
      Mtr mtr(st.pool.get());
      mtr.WriteDiff(*h, img.data());
      ASSERT_TRUE(mtr.Commit().ok());
    }
    for (int round = 0; round < 600; ++round) {
      ASSERT_TRUE(st.pool->LogFreeCheck().ok());
      const uint32_t p = pages[rng() % pages.size()];
      auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
      ASSERT_TRUE(h.ok());
      const std::vector<uint8_t> before(h->data(), h->data() + kPs);
      std::vector<uint8_t> img = before;
      MutateLikeANode(img, rng);
      Mtr mtr(st.pool.get());
      mtr.WriteDiff(*h, img.data());
      ASSERT_EQ(0, std::memcmp(h->data() + 16, img.data() + 16, kPs - 16));
      if (round % 10 == 0) {
        mtr.Abort();
        ASSERT_EQ(0, std::memcmp(h->data(), before.data(), kPs));
        continue;
      }
      if (mtr.empty()) continue;
      auto r = mtr.Commit();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      logged += r->end - r->start;
      shifted += kPs;
      model[p].assign(img.begin() + 16, img.end());
    }
    ASSERT_TRUE(st.log->WaitDurable(st.log->reserved_lsn()).ok());
    EXPECT_EQ(st.pool->stats().pages_written, 0u);
    st.Close(/*flush=*/false);
  }
  // Slot shifts of 400-3400 bytes, records zeroed: a literal diff would log
  // about a third of each page; moves and zero fills keep it far below.
  EXPECT_LT(logged * 8, shifted) << logged << " bytes logged for " << model.size() << " pages";
  test::ExpectRecoveredPages(dir.path(), {kPs, 64 * kPs, 4096 + (8 << 20)}, model);
}

// Two differing bytes at most 12 positions apart (11 equal bytes between)
// are one edit (an edit's header costs 12 bytes), further apart two (at 13
// both cost 26 bytes), wherever the pair falls against the words the
// comparison reads. A slot array shifted by two bytes is a move, and a run
// of zeros a zero fill, not literal bytes.
TEST(BufferPool, DiffJoinsDifferencesAtMostTwelveBytesApart) {
  test::ScratchDir dir;
  Stack st(dir.path(), 16 * kPs, 4096 + (8 << 20), /*cleaners=*/0);
  ASSERT_TRUE(st.Open().ok());
  const uint32_t p = MakePages(st.pool.get(), 1)[0];
  auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
  ASSERT_TRUE(h.ok());
  std::vector<uint8_t> img(h->data(), h->data() + kPs);
  for (uint32_t i = 64; i < kPs; ++i) img[i] = static_cast<uint8_t>(i * 7 + 1) | 1;
  {
    Mtr fill(st.pool.get());
    fill.WriteDiff(*h, img.data());
    ASSERT_TRUE(fill.Commit().ok());
  }
  constexpr size_t kHeader = 12;  // an edit of literal bytes: header, then the bytes
  for (uint32_t at = 64; at < 64 + 24; ++at) {
    for (uint32_t gap : {1u, 7u, 8u, 11u, 12u, 14u, 15u, 20u}) {
      std::vector<uint8_t> next(h->data(), h->data() + kPs);
      next[at] ^= 0x80;
      next[at + gap] ^= 0x80;
      Mtr mtr(st.pool.get());
      mtr.WriteDiff(*h, next.data());
      const size_t want = gap <= 12 ? kHeader + gap + 1 : 2 * (kHeader + 1);
      EXPECT_EQ(mtr.payload_bytes(), want) << "differences at " << at << " and " << at + gap;
      ASSERT_EQ(0, std::memcmp(h->data() + 16, next.data() + 16, kPs - 16));
      mtr.Abort();
    }
    // Each difference at most 12 bytes after the one before, several close
    // together: one edit from the first to the last.
    for (const std::vector<uint32_t>& offsets :
         {std::vector<uint32_t>{0, 12, 24}, std::vector<uint32_t>{0, 3, 7, 19},
          std::vector<uint32_t>{0, 1, 2, 9, 10, 22, 30}}) {
      std::vector<uint8_t> next(h->data(), h->data() + kPs);
      for (uint32_t k : offsets) next[at + k] ^= 0x80;
      Mtr mtr(st.pool.get());
      mtr.WriteDiff(*h, next.data());
      EXPECT_EQ(mtr.payload_bytes(), kHeader + offsets.back() + 1)
          << "differences from " << at << " to " << at + offsets.back();
      ASSERT_EQ(0, std::memcmp(h->data() + 16, next.data() + 16, kPs - 16));
      mtr.Abort();
    }
  }
  for (uint32_t at = 64; at < 64 + 16; ++at) {
    for (uint32_t len : {40u, 41u, 300u, 1001u}) {
      std::vector<uint8_t> shifted(h->data(), h->data() + kPs);
      std::memmove(shifted.data() + at + 2, shifted.data() + at, len);
      Mtr move(st.pool.get());
      move.WriteDiff(*h, shifted.data());
      // One move edit: a header and its source offset.
      EXPECT_EQ(move.payload_bytes(), kHeader + 2) << len << " bytes shifted at " << at;
      ASSERT_EQ(0, std::memcmp(h->data() + 16, shifted.data() + 16, kPs - 16));
      move.Abort();
      std::vector<uint8_t> zeroed(h->data(), h->data() + kPs);
      std::memset(zeroed.data() + at, 0, len);
      Mtr zero(st.pool.get());
      zero.WriteDiff(*h, zeroed.data());
      EXPECT_EQ(zero.payload_bytes(), kHeader) << len << " bytes zeroed at " << at;
      ASSERT_EQ(0, std::memcmp(h->data() + 16, zeroed.data() + 16, kPs - 16));
      zero.Abort();
    }
  }
  h->Release();
  st.Close(/*flush=*/false);
}

// A diff compared only inside one range around the change (as a B-tree
// split logs its pages) leaves the page equal to the image and replays
// exactly.
TEST(BufferPool, ADiffInsideARangeReplaysExactly) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  std::map<uint32_t, std::vector<uint8_t>> model;  // bytes [16, kPs) of each page
  {
    Stack st(dir.path(), 16 * kPs, 4096 + (8 << 20), /*cleaners=*/0);
    ASSERT_TRUE(st.Open().ok());
    const std::vector<uint32_t> pages = MakePages(st.pool.get(), 4);
    for (uint32_t p : pages) {
      auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
      ASSERT_TRUE(h.ok());
      std::vector<uint8_t> img(h->data(), h->data() + kPs);
      for (uint32_t i = 64; i < kPs; ++i) img[i] = static_cast<uint8_t>(rng()) | 1;
      Mtr fill(st.pool.get());
      fill.WriteDiff(*h, img.data());
      ASSERT_TRUE(fill.Commit().ok());
    }
    for (int round = 0; round < 300; ++round) {
      const uint32_t p = pages[rng() % pages.size()];
      auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
      ASSERT_TRUE(h.ok());
      std::vector<uint8_t> img(h->data(), h->data() + kPs);
      MutateLikeANode(img, rng);
      // A range around the whole change, or the whole page.
      ByteRange range{16, kPs};
      if (rng() % 2) {
        uint32_t lo = kPs, hi = 0;
        for (uint32_t i = 16; i < kPs; ++i) {
          if (img[i] != h->data()[i]) lo = std::min(lo, i), hi = i + 1;
        }
        if (lo < hi) range = {lo, hi};
      }
      Mtr mtr(st.pool.get());
      mtr.WriteDiff(*h, img.data(), &range, 1);
      ASSERT_EQ(0, std::memcmp(h->data() + 16, img.data() + 16, kPs - 16)) << "round " << round;
      if (mtr.empty()) continue;
      auto r = mtr.Commit();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      model[p].assign(img.begin() + 16, img.end());
    }
    ASSERT_TRUE(st.log->WaitDurable(st.log->reserved_lsn()).ok());
    st.Close(/*flush=*/false);
  }
  test::ExpectRecoveredPages(dir.path(), {kPs, 16 * kPs, 4096 + (8 << 20)}, model);
}

// A literal written where the Mtr's previous edit, a literal of the same
// page, ended extends that edit (a record written field by field is one
// edit); WriteChanged logs only the bytes that differ. Random mixes of
// every kind of edit, committed or given up, replay exactly, and a given
// up Mtr leaves its pages as they were.
TEST(BufferPool, AdjacentLiteralsAreOneEditAndUnchangedBytesAreNotLogged) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  std::map<uint32_t, std::vector<uint8_t>> model;  // bytes [16, kPs) of each page
  constexpr size_t kHeader = 12;
  {
    Stack st(dir.path(), 16 * kPs, 4096 + (8 << 20), /*cleaners=*/0);
    ASSERT_TRUE(st.Open().ok());
    const std::vector<uint32_t> pages = MakePages(st.pool.get(), 3);
    {
      auto a = st.pool->Fetch({1, pages[0]}, Latch::kExclusive);
      auto b = st.pool->Fetch({1, pages[1]}, Latch::kExclusive);
      ASSERT_TRUE(a.ok() && b.ok());
      const uint8_t bytes[8] = {1, 2, 3, 4, 5, 6, 7, 8};
      Mtr mtr(st.pool.get());
      mtr.Write(*a, 100, bytes, 4);
      mtr.Write(*a, 104, bytes + 2, 6);
      EXPECT_EQ(mtr.payload_bytes(), kHeader + 10);  // one edit
      {
        std::vector<PageRedo> parsed;
        const log::LogRecordView view{
            kRecordPageEdits, 0, 1, 2, mtr.payload(), static_cast<uint32_t>(mtr.payload_bytes())};
        ASSERT_TRUE(ParseRedoRecord(view, kPs, &parsed).ok());
        ASSERT_EQ(parsed.size(), 1u);
        ASSERT_EQ(parsed[0].edits.size(), 1u);
        EXPECT_EQ(parsed[0].edits[0].at, 100);
        EXPECT_EQ(parsed[0].edits[0].n, 10);
        const uint8_t want[10] = {1, 2, 3, 4, 3, 4, 5, 6, 7, 8};
        EXPECT_EQ(0, std::memcmp(parsed[0].edits[0].bytes, want, 10));
        EXPECT_EQ(0, std::memcmp(a->data() + 100, want, 10));
      }
      mtr.Write(*a, 111, bytes, 2);  // a gap: a new edit
      EXPECT_EQ(mtr.payload_bytes(), 2 * kHeader + 12);
      mtr.Write(*b, 113, bytes, 2);  // another page
      EXPECT_EQ(mtr.payload_bytes(), 3 * kHeader + 14);
      mtr.Write(*a, 113, bytes, 2);  // not the last edit's page any more
      EXPECT_EQ(mtr.payload_bytes(), 4 * kHeader + 16);
      mtr.Zero(*a, 115, 20);
      mtr.Write(*a, 135, bytes, 1);  // after a zero fill: a new edit
      EXPECT_EQ(mtr.payload_bytes(), 6 * kHeader + 17);
      std::vector<uint8_t> same(a->data() + 200, a->data() + 300);
      mtr.WriteChanged(*a, 200, same.data(), 100);
      EXPECT_EQ(mtr.payload_bytes(), 6 * kHeader + 17);  // nothing differs
      same[10] ^= 1;
      same[22] ^= 1;  // 12 bytes apart: one edit
      same[60] ^= 1;
      mtr.WriteChanged(*a, 200, same.data(), 100);
      EXPECT_EQ(mtr.payload_bytes(), 8 * kHeader + 17 + 13 + 1);
      EXPECT_EQ(0, std::memcmp(a->data() + 200, same.data(), 100));
      mtr.Abort();
      // Two differences `gap` bytes apart share an edit when gap <= 12,
      // wherever they fall against 8-byte words.
      for (uint32_t at = 0; at < 16; ++at) {
        for (uint32_t first : {0u, 5u, 9u}) {
          for (uint32_t gap : {1u, 7u, 8u, 11u, 12u, 13u, 14u, 20u}) {
            std::vector<uint8_t> next(a->data() + 300 + at, a->data() + 300 + at + 64);
            next[first] ^= 0x80;
            next[first + gap] ^= 0x80;
            Mtr changed(st.pool.get());
            changed.WriteChanged(*a, 300 + at, next.data(), 64);
            EXPECT_EQ(changed.payload_bytes(), gap <= 12 ? kHeader + gap + 1 : 2 * (kHeader + 1))
                << "differences at " << first << " and " << first + gap << ", offset " << at;
            EXPECT_EQ(0, std::memcmp(a->data() + 300 + at, next.data(), 64));
            changed.Abort();
          }
        }
      }
    }
    for (int round = 0; round < 400; ++round) {
      std::vector<PageHandle> held;  // released after the Mtr ends
      std::map<uint32_t, std::vector<uint8_t>> before;
      Mtr mtr(st.pool.get());
      for (int e = 0, edits = 1 + static_cast<int>(rng() % 12); e < edits; ++e) {
        const uint32_t p = pages[rng() % pages.size()];
        PageHandle* h = nullptr;
        for (PageHandle& x : held) {
          if (x.id().page_no == p) h = &x;
        }
        if (h == nullptr) {
          auto f = st.pool->Fetch({1, p}, Latch::kExclusive);
          ASSERT_TRUE(f.ok());
          held.push_back(std::move(*f));
          h = &held.back();
          before[p].assign(h->data() + 16, h->data() + kPs);
        }
        const uint32_t n = 1 + static_cast<uint32_t>(rng() % 300);
        const uint32_t at = 16 + static_cast<uint32_t>(rng() % (kPs - 16 - n));
        std::vector<uint8_t> bytes(n);
        for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng() % 3);  // many equal bytes
        switch (rng() % 5) {
          case 0:
            mtr.Zero(*h, at, n);
            break;
          case 1:
            mtr.Move(*h, at, 16 + static_cast<uint32_t>(rng() % (kPs - 16 - n)), n);
            break;
          case 2:
            mtr.WriteChanged(*h, at, bytes.data(), n);
            break;
          default: {  // in pieces, one after the other
            const uint32_t cut = static_cast<uint32_t>(rng() % n);
            mtr.Write(*h, at, bytes.data(), cut);
            mtr.Write(*h, at + cut, bytes.data() + cut, n - cut);
          }
        }
      }
      if (rng() % 4 == 0) {
        mtr.Abort();
        for (PageHandle& h : held) {
          ASSERT_EQ(0, std::memcmp(h.data() + 16, before[h.id().page_no].data(), kPs - 16))
              << "round " << round;
        }
        continue;
      }
      if (mtr.empty()) {  // every edit of the round changed nothing: no record to commit
        for (PageHandle& h : held) {
          ASSERT_EQ(0, std::memcmp(h.data() + 16, before[h.id().page_no].data(), kPs - 16))
              << "round " << round;
        }
        mtr.Abort();
        continue;
      }
      auto r = mtr.Commit();
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      for (PageHandle& h : held) model[h.id().page_no].assign(h.data() + 16, h.data() + kPs);
    }
    ASSERT_TRUE(st.log->WaitDurable(st.log->reserved_lsn()).ok());
    st.Close(/*flush=*/false);
  }
  test::ExpectRecoveredPages(dir.path(), {kPs, 16 * kPs, 4096 + (8 << 20)}, model);
}

// Inside a range whose every byte changed, each run of 16 zeros or more
// is one zero fill and the bytes between are literal edits, wherever the
// runs fall against 8-byte words; the page then equals the image.
TEST(BufferPool, ZeroRunsOfSixteenOrMoreAreZeroFillsAtAnyAlignment) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  Stack st(dir.path(), 16 * kPs, 4096 + (8 << 20), /*cleaners=*/0);
  ASSERT_TRUE(st.Open().ok());
  const uint32_t p = MakePages(st.pool.get(), 1)[0];
  auto h = st.pool->Fetch({1, p}, Latch::kExclusive);
  ASSERT_TRUE(h.ok());
  std::vector<uint8_t> ff(h->data(), h->data() + kPs);
  std::fill(ff.begin() + 64, ff.end(), 0xff);  // no image byte below is 0xff
  {
    Mtr fill(st.pool.get());
    fill.WriteDiff(*h, ff.data());
    ASSERT_TRUE(fill.Commit().ok());
  }
  constexpr size_t kHeader = 12;
  for (int round = 0; round < 400; ++round) {
    const uint32_t begin = 64 + static_cast<uint32_t>(rng() % 16);
    const uint32_t len = 1 + static_cast<uint32_t>(rng() % 700);
    std::vector<uint8_t> img = ff;
    for (uint32_t i = begin; i < begin + len;) {  // nonzero bytes and zero runs of 1-40
      const uint32_t run = 1 + static_cast<uint32_t>(rng() % 40);
      const bool zero = rng() % 2;
      for (uint32_t k = 0; k < run && i < begin + len; ++k, ++i) {
        img[i] = zero ? 0 : static_cast<uint8_t>(1 + rng() % 254);
      }
    }
    // The edits a byte-at-a-time reading gives.
    size_t want = 0;
    uint32_t literal = 0;
    for (uint32_t i = begin; i < begin + len;) {
      uint32_t j = i;
      while (j < begin + len && img[j] == 0) ++j;
      if (j - i >= 16) {
        if (literal > 0) want += kHeader + literal;
        want += kHeader;
        literal = 0;
        i = j;
      } else if (j > i) {
        literal += j - i;
        i = j;
      } else {
        ++literal;
        ++i;
      }
    }
    if (literal > 0) want += kHeader + literal;
    Mtr mtr(st.pool.get());
    mtr.WriteDiff(*h, img.data());
    EXPECT_EQ(mtr.payload_bytes(), want)
        << "round " << round << ": " << len << " bytes at " << begin;
    ASSERT_EQ(0, std::memcmp(h->data() + 16, img.data() + 16, kPs - 16)) << "round " << round;
    mtr.Abort();
  }
  h->Release();
  st.Close(/*flush=*/false);
}

// A page's verified mark (the B-tree checks a node in full once per read)
// lives with the frame's contents: reading the page again, or redo changing
// it, clears it.
TEST(BufferPool, TheVerifiedMarkLastsUntilThePageIsReadAgain) {
  test::ScratchDir dir;
  Stack st(dir.path(), 16 * kPs);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 64);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  {
    auto h = st.pool->Fetch({1, pages[0]}, Latch::kShared);
    ASSERT_TRUE(h.ok());
    EXPECT_FALSE(h->verified());
    h->set_verified(true);
  }
  {
    auto h = st.pool->Fetch({1, pages[0]}, Latch::kShared);
    ASSERT_TRUE(h.ok());
    EXPECT_TRUE(h->verified());  // still the same frame contents
  }
  const uint64_t evictions = st.pool->stats().evictions;
  for (uint32_t p : pages) ASSERT_TRUE(st.pool->Fetch({1, p}, Latch::kShared).ok());
  ASSERT_GT(st.pool->stats().evictions, evictions);
  auto h = st.pool->Fetch({1, pages[0]}, Latch::kShared);
  ASSERT_TRUE(h.ok());
  EXPECT_FALSE(h->verified());  // read from the file again
  h->Release();
  st.Close(true);
}

// A page log in DRAM that checks, at each append, that the redo the entry
// repeats is durable in the log.
class WalCheckingPageLog final : public PageLogStore {
 public:
  std::function<log::Lsn()> durable_lsn;
  uint32_t Used(uint32_t space, uint32_t page_no) const override {
    std::lock_guard lock(mu_);
    auto it = pages_.find({space, page_no});
    if (it == pages_.end()) return 0;
    uint32_t used = 0;
    for (const auto& [end, edits] : it->second) used += EntrySize(edits.size());
    return used;
  }
  uint32_t Capacity() const override { return 4096; }
  uint32_t EntrySize(size_t n) const override { return static_cast<uint32_t>(n + 16); }
  Status ForEachEntry(
      uint32_t space, uint32_t page_no,
      const std::function<Status(uint64_t, const uint8_t*, size_t)>& fn) const override {
    std::lock_guard lock(mu_);
    auto it = pages_.find({space, page_no});
    if (it == pages_.end()) return Status::OK();
    for (const auto& [end, edits] : it->second) {
      SUBITO_RETURN_IF_ERROR(fn(end, edits.data(), edits.size()));
    }
    return Status::OK();
  }
  Status Append(uint32_t space, uint32_t page_no, uint64_t end_lsn, const uint8_t* edits,
                size_t n) override {
    std::lock_guard lock(mu_);
    ++appends;
    if (end_lsn > durable_lsn()) ++before_their_redo;
    pages_[{space, page_no}].emplace_back(end_lsn, std::vector<uint8_t>(edits, edits + n));
    return Status::OK();
  }
  bool Free(uint32_t space, uint32_t page_no) override {
    std::lock_guard lock(mu_);
    return pages_.erase({space, page_no}) != 0;
  }
  void FreeSpace(uint32_t space) override {
    std::lock_guard lock(mu_);
    for (auto it = pages_.begin(); it != pages_.end();) {
      it = it->first.first == space ? pages_.erase(it) : std::next(it);
    }
  }
  std::vector<std::pair<uint32_t, uint32_t>> LoggedPages(size_t n) const override {
    std::lock_guard lock(mu_);
    std::vector<std::pair<uint32_t, uint32_t>> out;
    for (const auto& [id, entries] : pages_) {
      if (out.size() < n) out.push_back(id);
    }
    return out;
  }
  uint64_t PageCapacity() const override { return 1000; }
  uint64_t PagesUsed() const override {
    std::lock_guard lock(mu_);
    return pages_.size();
  }
  uint64_t appends = 0, before_their_redo = 0;  // guarded by mu_ while the pool runs

 private:
  mutable std::mutex mu_;
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<uint64_t, std::vector<uint8_t>>>>
      pages_;
};

// WAL for per-page logs: a page-log entry is durable once appended, so it
// may be appended only once the redo records it repeats are durable;
// else a crash could keep a change whose record (and so its undo) is lost.
// Small changes are made without waiting for the log, then written out.
TEST(BufferPool, APageLogEntryIsAppendedOnlyOnceItsRedoIsDurable) {
  test::ScratchDir dir;
  WalCheckingPageLog store;
  test::StorageStackOptions o;
  o.pool_bytes = 64 * kPs;
  o.page_log = &store;
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  store.durable_lsn = [&] { return st.log->durable_lsn(); };
  auto pages = MakePages(st.pool.get(), 16);
  ASSERT_TRUE(st.pool->FlushAll().ok());  // file images: later small changes may be logged
  int not_durable_yet = 0;
  for (uint32_t round = 0; round < 20; ++round) {
    for (uint32_t p : pages)
      ASSERT_TRUE(SetValue(st.pool.get(), p, round % kSlots, round + 1).ok());
    if (st.log->durable_lsn() < st.log->reserved_lsn()) ++not_durable_yet;
    ASSERT_TRUE(st.pool->FlushAll().ok());
  }
  st.Close(true);
  EXPECT_GT(not_durable_yet, 0) << "the log was always durable already: the check saw nothing";
  EXPECT_GT(store.appends, 0u);
  EXPECT_EQ(store.before_their_redo, 0u);
}

TEST(BufferPool, BadSettingsAreRefused) {
  test::ScratchDir dir;
  Stack st(dir.path());
  ASSERT_TRUE(st.Open().ok());
  BufferPoolOptions o;
  o.page_size = 4096;
  o.capacity_bytes = 4 * 4096;
  auto p = BufferPool::Create(o, st.log.get(), st.dwb.get());
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("at least 8"), std::string::npos);
  o.capacity_bytes = 1 << 20;
  o.page_size = 8192;  // the double-write area was made for 4 KiB pages
  EXPECT_FALSE(BufferPool::Create(o, st.log.get(), st.dwb.get()).ok());
  o.page_size = 4096;
  o.flush_batch = 17;  // more than the 16 double-write slots
  EXPECT_FALSE(BufferPool::Create(o, st.log.get(), st.dwb.get()).ok());
  EXPECT_EQ(st.pool->Fetch({99, 1}, Latch::kShared).status().code(), Status::Code::kNotFound);
}

}  // namespace
}  // namespace subito::buffer
