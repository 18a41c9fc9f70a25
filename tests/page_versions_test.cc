// Pages as of an LSN (buffer/page_versions.h): what a reader in a ReadAsOf
// scope sees, checked against a copy of the pages taken when the epoch
// began, under eviction, several epochs, concurrent writers and the limit.
#include "buffer/page_versions.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "buffer/buffer_pool.h"
#include "buffer/mtr.h"
#include "ppl/ppl_region.h"
#include "storage_stack.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::buffer {
namespace {

constexpr uint32_t kPs = 4096;
constexpr uint32_t kSlots = 64;  // u64 values used per test page

using test::MakePages;

// One Mtr: slot += delta on each (page, slot, delta), pages latched in order.
Status Add(BufferPool* pool, std::vector<std::tuple<uint32_t, uint32_t, int64_t>> changes) {
  SUBITO_RETURN_IF_ERROR(pool->LogFreeCheck());
  std::sort(changes.begin(), changes.end());
  std::map<uint32_t, PageHandle> held;
  Mtr mtr(pool);
  for (auto& [page_no, slot, delta] : changes) {
    if (!held.count(page_no)) {
      auto h = pool->Fetch({1, page_no}, Latch::kExclusive);
      if (!h.ok()) return h.status();
      held.emplace(page_no, std::move(*h));
    }
    PageHandle& h = held.at(page_no);
    uint8_t b[8];
    EncodeFixed64(b, DecodeFixed64(h.data() + 64 + slot * 8) + static_cast<uint64_t>(delta));
    mtr.Write(h, 64 + slot * 8, b, 8);
  }
  return mtr.Commit().status();
}

using Values = std::map<uint32_t, std::vector<uint64_t>>;  // page -> slots

Values ReadAll(BufferPool* pool, const std::vector<uint32_t>& pages) {
  Values v;
  for (uint32_t p : pages) {
    auto h = pool->Fetch({1, p}, Latch::kShared);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    if (!h.ok()) continue;
    for (uint32_t s = 0; s < kSlots; ++s) v[p].push_back(DecodeFixed64(h->data() + 64 + s * 8));
  }
  return v;
}

// A per-page log region of 64 blocks in the test's directory.
std::unique_ptr<ppl::PplRegion> OpenRegion(const test::ScratchDir& dir, uint32_t block_size) {
  auto region =
      ppl::PplRegion::Open({dir.Sub("ppl"), 4096 + 64 * block_size, block_size, 0, nullptr});
  EXPECT_TRUE(region.ok()) << region.status().ToString();
  return region.ok() ? std::move(*region) : nullptr;
}

// Options for a pool with that region as its page log.
test::StorageStackOptions WithPageLog(ppl::PplRegion* region, uint32_t threshold,
                                      uint64_t pool_pages) {
  test::StorageStackOptions o;
  o.pool_bytes = pool_pages * kPs;
  o.page_log = region;
  o.page_log_threshold = threshold;
  return o;
}

// A 1,000-byte change past the slots no reader looks at: past the
// threshold, so the page is written in place at the next flush.
void ChangePastThreshold(BufferPool* pool, uint32_t page_no) {
  ASSERT_TRUE(pool->LogFreeCheck().ok());
  auto h = pool->Fetch({1, page_no}, Latch::kExclusive);
  ASSERT_TRUE(h.ok());
  const std::vector<uint8_t> big(1000, 0x5a);
  Mtr mtr(pool);
  mtr.Write(*h, 64 + kSlots * 8, big.data(), static_cast<uint32_t>(big.size()));
  ASSERT_TRUE(mtr.Commit().ok());
}

// Random one- to three-page Mtrs through a pool that holds 8 of 32 pages,
// with two epochs begun along the way: each reads exactly the pages as
// they were when it began, the scope's end gives the current pages back,
// and each page is copied at most once per epoch.
TEST(PageVersions, AnEpochReadsEveryPageAsOfItsLsn) {
  test::ScratchDir dir;
  test::StorageStack st(dir.path(), {kPs, 8 * kPs});
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 32);
  std::mt19937_64 rng(test::TestSeed());
  auto churn = [&](int n) {
    for (int i = 0; i < n; ++i) {
      std::vector<std::tuple<uint32_t, uint32_t, int64_t>> c;
      for (int k = 1 + static_cast<int>(rng() % 3); k > 0; --k) {
        c.emplace_back(pages[rng() % pages.size()], static_cast<uint32_t>(rng() % kSlots),
                       static_cast<int64_t>(rng() % 1000));
      }
      ASSERT_TRUE(Add(st.pool.get(), c).ok());
    }
  };
  churn(500);
  const Values at1 = ReadAll(st.pool.get(), pages);
  auto e1 = st.pool->versions().Begin(*st.log);
  churn(1000);
  const Values at2 = ReadAll(st.pool.get(), pages);
  auto e2 = st.pool->versions().Begin(*st.log);
  churn(1000);
  const Values now = ReadAll(st.pool.get(), pages);
  ASSERT_NE(at1, at2);
  ASSERT_NE(at2, now);
  {
    ReadAsOf scope(e1.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), at1);
    {
      ReadAsOf inner(e2.get());
      EXPECT_EQ(ReadAll(st.pool.get(), pages), at2);
    }
    EXPECT_EQ(ReadAll(st.pool.get(), pages), at1);
    // An exclusive fetch is never as of an epoch: writers change the present.
    auto h = st.pool->Fetch({1, pages[0]}, Latch::kExclusive);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(DecodeFixed64(h->data() + 64), now.at(pages[0])[0]);
  }
  EXPECT_EQ(ReadAll(st.pool.get(), pages), now);
  PageVersions::Stats s = st.pool->versions().stats();
  EXPECT_EQ(s.epochs, 2u);
  EXPECT_LE(s.images, 2 * pages.size());
  EXPECT_GE(s.images, pages.size());  // 1,000 changes of 32 pages touch every one
  EXPECT_EQ(s.bytes, s.images * kPs);
  st.pool->versions().End(e1);
  st.pool->versions().End(e2);
  s = st.pool->versions().stats();
  EXPECT_EQ(s.epochs, 0u);
  EXPECT_EQ(s.bytes, 0u);
  churn(100);  // no epoch: nothing captured
  EXPECT_EQ(st.pool->versions().stats().captures, s.captures);
  st.Close(true);
}

// Writers move units between pages (each Mtr adds 1 to one page and takes
// 1 from another, so any consistent cut sums to zero) while epochs begin
// and end: every epoch's pages sum to zero, and read twice, a while
// apart, they are the same.
TEST(PageVersions, EpochsBegunUnderConcurrentWritersAreConsistentCuts) {
  test::ScratchDir dir;
  test::StorageStack st(dir.path(), {kPs, 16 * kPs});
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 24);
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  writers.reserve(3);
  for (int t = 0; t < 3; ++t) {
    writers.emplace_back([&, t] {
      std::mt19937_64 rng(test::TestSeed() + t);
      while (!stop.load()) {
        const uint32_t a = pages[rng() % pages.size()];
        uint32_t b = pages[rng() % pages.size()];
        if (b == a) b = pages[(rng() % (pages.size() - 1) + 1 + a) % pages.size()];
        if (b == a) continue;
        ASSERT_TRUE(Add(st.pool.get(), {{a, 0, 1}, {b, 0, -1}}).ok());
      }
    });
  }
  auto sum = [&](const Values& v) {
    int64_t total = 0;
    for (auto& [p, slots] : v) total += static_cast<int64_t>(slots[0]);
    return total;
  };
  for (int round = 0; round < 40; ++round) {
    auto e = st.pool->versions().Begin(*st.log);
    ReadAsOf scope(e.get());
    const Values first = ReadAll(st.pool.get(), pages);
    EXPECT_EQ(sum(first), 0) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(ReadAll(st.pool.get(), pages), first) << "round " << round;
    st.pool->versions().End(e);
  }
  stop = true;
  for (auto& w : writers) w.join();
  EXPECT_GT(st.pool->versions().stats().captures, 0u);
  EXPECT_EQ(sum(ReadAll(st.pool.get(), pages)), 0);
  st.Close(true);
}

// Past the limit the oldest epoch goes: reads of its pages changed since
// fail with SnapshotTooOld, unchanged ones still read; a newer epoch keeps
// working, and pages allocated after an epoch cost it nothing.
TEST(PageVersions, PastTheLimitTheOldestEpochIsCut) {
  test::ScratchDir dir;
  test::StorageStackOptions o;
  o.page_version_limit = 6 * kPs;
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 12);
  auto old = st.pool->versions().Begin(*st.log);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(Add(st.pool.get(), {{pages[i], 0, 5}}).ok());
  auto young = st.pool->versions().Begin(*st.log);
  const Values young_sees = ReadAll(st.pool.get(), pages);
  MakePages(st.pool.get(), 3);  // E2: nothing to keep
  EXPECT_EQ(st.pool->versions().stats().images, 4u);
  for (int i = 4; i < 8; ++i) ASSERT_TRUE(Add(st.pool.get(), {{pages[i], 0, 5}}).ok());
  EXPECT_TRUE(old->cut.load());
  EXPECT_FALSE(young->cut.load());
  PageVersions::Stats s = st.pool->versions().stats();
  EXPECT_EQ(s.epochs_cut, 1u);
  EXPECT_EQ(s.epochs, 1u);
  EXPECT_EQ(s.images, 4u);  // the young epoch's pages 4..7
  {
    ReadAsOf scope(old.get());
    auto changed = st.pool->Fetch({1, pages[0]}, Latch::kShared);
    EXPECT_TRUE(changed.status().IsSnapshotTooOld()) << changed.status().ToString();
    auto unchanged = st.pool->Fetch({1, pages[10]}, Latch::kShared);
    ASSERT_TRUE(unchanged.ok());
    EXPECT_EQ(DecodeFixed64(unchanged->data() + 64), 0u);
  }
  {
    ReadAsOf scope(young.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), young_sees);
  }
  st.pool->versions().End(young);
  st.pool->versions().End(old);  // cut already: nothing to do
  EXPECT_EQ(st.pool->versions().stats().bytes, 0u);
  st.Close(true);
}

// E4, old page + per-page logs: pages clean when first changed past L (all
// flushed before the epochs begin) are not copied. The epochs keep recipes,
// and the pages as of L are rebuilt from their file images and per-page
// log entries when read, or before the page is written (a page whose entries
// outgrow the threshold is written, and its file image changes). Every read
// is exact; no page is copied; every recipe gets built, some before a write.
// Without the build before a write, the reads fail (their file images are
// newer than L).
TEST(PageVersions, RecipesRebuildPagesFromTheirFileImagesAndPerPageLogs) {
  test::ScratchDir dir;
  auto region = OpenRegion(dir, 512);
  ASSERT_NE(region, nullptr);
  test::StorageStackOptions o = WithPageLog(region.get(), 128, 8);
  o.cleaners = 0;  // a cleaner's flush in flight would make a page copied instead
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 32);
  std::mt19937_64 rng(test::TestSeed());
  // n changes of pages [lo, hi).
  auto churn = [&](int n, size_t lo, size_t hi) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          Add(st.pool.get(), {{pages[lo + rng() % (hi - lo)], static_cast<uint32_t>(rng() % kSlots),
                               static_cast<int64_t>(rng() % 1000)}})
              .ok());
      if (i % 50 == 49) {
        ASSERT_TRUE(st.pool->FlushAll().ok());
      }
    }
  };
  churn(300, 0, 32);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  const Values at1 = ReadAll(st.pool.get(), pages);
  auto e1 = st.pool->versions().Begin(*st.log);
  churn(400, 0, 32);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  const Values at2 = ReadAll(st.pool.get(), pages);
  auto e2 = st.pool->versions().Begin(*st.log);
  // Pages 0-15 change often (written, their recipes built first), 16-31
  // once each (their changes stay in the per-page log: built when read).
  churn(600, 0, 16);
  for (uint32_t i = 16; i < 32; ++i) ASSERT_TRUE(Add(st.pool.get(), {{pages[i], 1, 7}}).ok());
  ASSERT_TRUE(st.pool->FlushAll().ok());
  const Values now = ReadAll(st.pool.get(), pages);
  ASSERT_NE(at1, at2);
  ASSERT_NE(at2, now);
  PageVersions::Stats s = st.pool->versions().stats();
  EXPECT_EQ(s.captures, 0u);            // no page copied
  EXPECT_GE(s.deferred, pages.size());  // e1's pages, and e2's
  EXPECT_GT(s.rebuilt_before_write, 0u);
  // Most of pages 16-31 (one whose entries were near the threshold is
  // written by its change).
  EXPECT_GE(s.recipes, 8u);
  EXPECT_LT(s.bytes, s.images * kPs + s.recipes * 1024);
  EXPECT_GT(st.pool->stats().pages_logged, 0u);  // the per-page logs were used
  {
    ReadAsOf scope(e1.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), at1);
    ReadAsOf inner(e2.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), at2);
  }
  {
    ReadAsOf scope(e2.get());  // the built images, once more
    EXPECT_EQ(ReadAll(st.pool.get(), pages), at2);
  }
  EXPECT_EQ(ReadAll(st.pool.get(), pages), now);
  s = st.pool->versions().stats();
  EXPECT_EQ(s.recipes, 0u);  // every page was read: every recipe built
  EXPECT_GT(s.rebuilt, 0u);
  EXPECT_EQ(s.bytes, s.images * kPs);
  st.pool->versions().End(e1);
  st.pool->versions().End(e2);
  EXPECT_EQ(st.pool->versions().stats().bytes, 0u);
  st.Close(true);
}

// E4 under the limit: a limit of 6 pages, and an epoch whose 32 changed
// pages are all recipes (their changes in the per-page log, no page
// written). Reading them builds 32 images, more than the limit holds: the
// built ones go back to recipes instead of the epoch being cut, and the
// epoch reads every page exactly, twice.
TEST(PageVersions, PastTheLimitBuiltImagesGoBackToRecipesBeforeAnyCut) {
  test::ScratchDir dir;
  auto region = OpenRegion(dir, 1024);
  ASSERT_NE(region, nullptr);
  test::StorageStackOptions o = WithPageLog(region.get(), 960, 8);
  o.page_version_limit = 6 * kPs;
  o.cleaners = 0;
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 32);
  for (uint32_t p : pages) ASSERT_TRUE(Add(st.pool.get(), {{p, 0, 1}}).ok());
  ASSERT_TRUE(st.pool->FlushAll().ok());
  const Values then = ReadAll(st.pool.get(), pages);
  auto e = st.pool->versions().Begin(*st.log);
  for (uint32_t p : pages) ASSERT_TRUE(Add(st.pool.get(), {{p, 2, 5}}).ok());
  ASSERT_TRUE(st.pool->FlushAll().ok());
  PageVersions::Stats s = st.pool->versions().stats();
  EXPECT_EQ(s.captures, 0u);
  EXPECT_EQ(s.recipes, pages.size());
  EXPECT_EQ(s.rebuilt_before_write, 0u);
  for (int round = 0; round < 2; ++round) {
    ReadAsOf scope(e.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), then) << "round " << round;
  }
  s = st.pool->versions().stats();
  EXPECT_FALSE(e->cut.load());
  EXPECT_EQ(s.epochs_cut, 0u);
  // Each page built in each round, but for the few still built from the
  // first round (the limit holds 6 pages).
  EXPECT_LE(s.rebuilt, 2 * pages.size());
  EXPECT_GE(s.rebuilt, 2 * pages.size() - 6);
  EXPECT_GT(s.demoted, 0u);
  EXPECT_LE(s.bytes, 6u * kPs);
  // A page written now keeps its built image (its file image changes):
  // a change past the threshold (bytes no reader here looks at) has it
  // written in place at the next flush.
  ChangePastThreshold(st.pool.get(), pages.back());
  const bool was_recipe = st.pool->versions().Find(*e, {1, pages.back()}).recipe != nullptr;
  const uint64_t written = st.pool->stats().pages_written;
  ASSERT_TRUE(st.pool->FlushAll().ok());
  EXPECT_GT(st.pool->stats().pages_written, written);
  {
    ReadAsOf scope(e.get());
    EXPECT_EQ(ReadAll(st.pool.get(), pages), then);
  }
  s = st.pool->versions().stats();
  EXPECT_EQ(s.epochs_cut, 0u);
  // Built before the write if its image had gone back to a recipe, else
  // kept as it was.
  EXPECT_EQ(s.rebuilt_before_write, was_recipe ? 1u : 0u);
  EXPECT_LE(s.bytes, 6u * kPs);
  st.pool->versions().End(e);
  st.Close(true);
}

// A recipe whose file image is damaged (a byte flipped on disk after the
// recipe was taken): a reader's build is refused with the page named, and
// the build before the page's write fails too: the write goes ahead, and
// the epoch is cut with its own reason. Nothing damaged is ever served.
TEST(PageVersions, ARecipeOnADamagedFileImageIsRefusedAndItsEpochCut) {
  test::ScratchDir dir;
  auto region = OpenRegion(dir, 1024);
  ASSERT_NE(region, nullptr);
  test::StorageStackOptions o = WithPageLog(region.get(), 960, 256);
  o.cleaners = 0;
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 4);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  auto e = st.pool->versions().Begin(*st.log);
  const uint32_t p = pages[2];
  ASSERT_TRUE(Add(st.pool.get(), {{p, 0, 9}}).ok());
  ASSERT_EQ(st.pool->versions().stats().recipes, 1u);
  {
    std::fstream f(dir.path() + "/t.sbt", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(uint64_t{p} * kPs + 100));
    f.put('\x7f');
  }
  {
    ReadAsOf scope(e.get());
    auto h = st.pool->Fetch({1, p}, Latch::kShared);
    ASSERT_FALSE(h.ok());
    EXPECT_TRUE(h.status().IsCorruption()) << h.status().ToString();
    EXPECT_NE(h.status().ToString().find("t.sbt"), std::string::npos) << h.status().ToString();
  }
  ChangePastThreshold(st.pool.get(), p);  // the page is written at the next flush
  ASSERT_TRUE(st.pool->FlushAll().ok());
  EXPECT_TRUE(e->cut.load());
  EXPECT_EQ(st.pool->versions().stats().epochs_unbuildable, 1u);
  EXPECT_EQ(st.pool->versions().stats().epochs_cut, 0u);  // not a budget cut
  {
    ReadAsOf scope(e.get());
    auto h = st.pool->Fetch({1, p}, Latch::kShared);
    EXPECT_TRUE(h.status().IsSnapshotTooOld()) << h.status().ToString();
    EXPECT_NE(h.status().ToString().find("could not be rebuilt"), std::string::npos);
  }
  // The write repaired the file: the page reads back whole.
  st.Close(true);
  ASSERT_TRUE(st.Open().ok());
  auto h = st.pool->Fetch({1, p}, Latch::kShared);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(DecodeFixed64(h->data() + 64), 9u);
  h->Release();
  st.Close(true);
}

// The same under concurrency: writers move units between pages (every
// consistent cut sums to zero) while the cleaner logs and writes pages and
// a small pool evicts them; epochs begun meanwhile read consistent cuts,
// the same twice, most pages through recipes.
TEST(PageVersions, RecipesUnderConcurrentWritersCleanersAndEvictions) {
  test::ScratchDir dir;
  auto region = OpenRegion(dir, 512);
  ASSERT_NE(region, nullptr);
  test::StorageStackOptions o = WithPageLog(region.get(), 128, 12);
  test::StorageStack st(dir.path(), o);
  ASSERT_TRUE(st.Open().ok());
  auto pages = MakePages(st.pool.get(), 24);
  ASSERT_TRUE(st.pool->FlushAll().ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  threads.reserve(3);
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(test::TestSeed() + t);
      while (!stop.load()) {
        const uint32_t a = pages[rng() % pages.size()];
        const uint32_t b = pages[rng() % pages.size()];
        if (b == a) continue;
        ASSERT_TRUE(Add(st.pool.get(), {{a, 0, 1}, {b, 0, -1}}).ok());
      }
    });
  }
  threads.emplace_back([&] {
    while (!stop.load()) {
      ASSERT_TRUE(st.pool->FlushAll().ok());
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  auto sum = [&](const Values& v) {
    int64_t total = 0;
    for (auto& [p, slots] : v) total += static_cast<int64_t>(slots[0]);
    return total;
  };
  for (int round = 0; round < 30; ++round) {
    auto e = st.pool->versions().Begin(*st.log);
    ReadAsOf scope(e.get());
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    const Values first = ReadAll(st.pool.get(), pages);
    EXPECT_EQ(sum(first), 0) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    EXPECT_EQ(ReadAll(st.pool.get(), pages), first) << "round " << round;
    st.pool->versions().End(e);
  }
  stop = true;
  for (auto& t : threads) t.join();
  const PageVersions::Stats s = st.pool->versions().stats();
  EXPECT_GT(s.deferred, 0u);
  EXPECT_GT(s.rebuilt + s.rebuilt_before_write, 0u);
  EXPECT_EQ(sum(ReadAll(st.pool.get(), pages)), 0);
  std::printf("copies %llu, recipes %llu, built for readers %llu, before writes %llu\n",
              static_cast<unsigned long long>(s.captures),
              static_cast<unsigned long long>(s.deferred),
              static_cast<unsigned long long>(s.rebuilt),
              static_cast<unsigned long long>(s.rebuilt_before_write));
  st.Close(true);
}

}  // namespace
}  // namespace subito::buffer
