// BTree::Builder (btree/builder.h): trees built bottom up from sorted
// entries match a model, stay valid trees for later changes, survive redo,
// read empty until Finish (B1), and refuse what they cannot build (B2, B3).
// ExternalSorter (util/external_sorter.h): sorts in memory and through runs.
#include "btree/builder.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>

#include "btree/key_encoding.h"
#include "btree_harness.h"
#include "test_util.h"
#include "util/external_sorter.h"
#include "util/fault_file_system.h"

namespace subito::btree {
namespace {

using namespace test_harness;  // NOLINT(google-build-using-namespace)

// n ascending keys of varied lengths, values of varied lengths; with
// `chains`, some values too long for a leaf.
Model SortedEntries(uint32_t n, bool chains, std::mt19937_64& rng) {
  Model m;
  for (uint32_t i = 0; i < n; ++i) {
    std::string key = KeyEncoder().Unsigned(uint64_t{i} * 3, 4).Release();
    key.append(rng() % 4 == 0 ? rng() % 60 : 0, static_cast<char>('a' + i % 26));
    const size_t len = chains && rng() % 40 == 0 ? 1500 + rng() % 20000 : rng() % 120;
    std::string v(len, '\0');
    for (char& c : v) c = static_cast<char>(rng());
    m[key] = v;
  }
  return m;
}

TEST(BTreeBuilder, BuiltTreesMatchTheirEntriesAndStayValidTrees) {
  std::mt19937_64 rng(test::TestSeed());
  // Empty, one leaf, a leaf boundary, and trees of three and more levels.
  for (uint32_t n : {0u, 1u, 30u, 31u, 2000u, 30000u}) {
    SCOPED_TRACE(::testing::Message() << n << " entries");
    test::ScratchDir dir;
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    Model m = SortedEntries(n, n == 2000, rng);  // chains in one, to count pages in another
    BTree::Builder b(h.tree.get());
    for (auto& [k, v] : m) ASSERT_TRUE(b.Add(k, v).ok());
    EXPECT_EQ(*h.tree->entries(), 0u) << "B1: the count moves only at Finish";
    {
      BTree::Cursor c(h.tree.get());
      ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
      EXPECT_FALSE(c.Valid()) << "B1: the tree reads empty until Finish";
    }
    ASSERT_TRUE(b.Finish().ok());
    EXPECT_EQ(*h.tree->entries(), m.size());
    ExpectScansMatch(*h.tree, m);
    if (n == 30000) {
      EXPECT_GE(*h.tree->height(), 3u);
      // Leaves filled to 15/16 (a slot, lengths, the inline tag per entry);
      // internal nodes add about 1%.
      uint64_t bytes = 0;
      for (auto& [k, v] : m) bytes += k.size() + v.size() + 1 + 6;
      const double full_pages = static_cast<double>(bytes) / (kPs - 64);
      EXPECT_LT(h.space->page_count(), full_pages * 16 / 15 * 1.03 + 4);
      EXPECT_GT(h.space->page_count(), full_pages * 1.05) << "leaves keep 1/16 free";
    }
    for (auto& [k, v] : m) {
      if (rng() % 50 != 0) continue;
      auto g = h.tree->Get(k);
      ASSERT_TRUE(g.ok() && g->has_value());
      ASSERT_EQ(**g, v);
    }
    // Later changes split and merge the built nodes like any others.
    for (int op = 0; op < 3000; ++op) {
      const std::string key = KeyEncoder().Unsigned(rng() % (3 * n + 10), 4).Release();
      if (rng() % 3 == 0) {
        ASSERT_TRUE(h.tree->Delete(key).ok());
        m.erase(key);
      } else {
        std::string v(rng() % 100, static_cast<char>('A' + op % 26));
        ASSERT_TRUE(h.tree->Put(key, v).ok());
        m[key] = v;
      }
    }
    ExpectScansMatch(*h.tree, m);
    h.Close(false);  // nothing flushed: the build comes back through redo
    ExpectReopenedTreeMatches(dir.path(), m, Left::kCrashed);
    ExpectReopenedTreeMatches(dir.path(), m);
  }
}

TEST(BTreeBuilder, KeysThatDoNotAscendAndNonEmptyTreesAreRefused) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  {
    BTree::Builder b(h.tree.get());
    ASSERT_TRUE(b.Add("b", "1").ok());
    Status st = b.Add("b", "2");
    EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();  // B2
    st = b.Add("a", "3");
    EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
    ASSERT_TRUE(b.Add("c", "4").ok());
    ASSERT_TRUE(b.Finish().ok());
    EXPECT_TRUE(b.Add("d", "5").IsInvalidArgument());
    EXPECT_TRUE(b.Finish().IsInvalidArgument());
  }
  ExpectScansMatch(*h.tree, {{"b", "1"}, {"c", "4"}});
  BTree::Builder again(h.tree.get());
  Status st = again.Add("x", "y");
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();  // B3
  EXPECT_NE(st.message().find("empty tree"), std::string::npos) << st.ToString();
  ExpectScansMatch(*h.tree, {{"b", "1"}, {"c", "4"}});
  h.Close(true);
}

// Exactly full leaves: n entries of one size fill k leaves to the limit,
// and one more entry begins leaf k+1 (a separator on the next level).
TEST(BTreeBuilder, LeafBoundariesSplitExactlyAtTheFillLimit) {
  // Records of 4 + 4 (key) + 1 + 53 (value) = 62 bytes and a 2-byte slot:
  // 64 per entry; a 4 KiB page keeps 4096 / 16 bytes free, 64 for the
  // header: (4096 - 256 - 64) / 64 = 59 entries per leaf.
  constexpr uint32_t kPerLeaf = (kPs - kPs / 16 - 64) / 64;
  for (uint32_t n : {kPerLeaf, kPerLeaf + 1, 2 * kPerLeaf, 2 * kPerLeaf + 1}) {
    SCOPED_TRACE(::testing::Message() << n << " entries");
    test::ScratchDir dir;
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    const uint32_t pages_before = h.space->page_count();
    Model m;
    BTree::Builder b(h.tree.get());
    for (uint32_t i = 0; i < n; ++i) {
      const std::string key = KeyEncoder().Unsigned(i, 4).Release();
      m[key] = std::string(53, static_cast<char>('a' + i % 26));
      ASSERT_TRUE(b.Add(key, m[key]).ok());
    }
    ASSERT_TRUE(b.Finish().ok());
    const uint32_t leaves = (n + kPerLeaf - 1) / kPerLeaf;
    // One leaf: the root itself; more: a page each, under the root.
    EXPECT_EQ(h.space->page_count() - pages_before, leaves == 1 ? 0u : leaves);
    EXPECT_EQ(*h.tree->height(), leaves == 1 ? 1u : 2u);
    ExpectScansMatch(*h.tree, m);
    h.Close(true);
  }
}

// A crash before Finish leaves an empty tree (B1), and one after, the whole.
TEST(BTreeBuilder, ARestartFindsTheTreeEmptyBeforeFinishAndWholeAfter) {
  std::mt19937_64 rng(test::TestSeed());
  for (bool finish : {false, true}) {
    test::ScratchDir dir;
    Harness h(dir.path(), 32);
    ASSERT_TRUE(h.Open(true).ok());
    const Model m = SortedEntries(5000, true, rng);
    BTree::Builder b(h.tree.get());
    for (auto& [k, v] : m) ASSERT_TRUE(b.Add(k, v).ok());
    if (finish) {
      ASSERT_TRUE(b.Finish().ok());
    }
    ASSERT_TRUE(h.log->WaitDurable(h.log->reserved_lsn()).ok());
    h.Close(false);
    ExpectReopenedTreeMatches(dir.path(), finish ? m : Model{}, Left::kCrashed);
  }
}

TEST(ExternalSorter, SortsInMemoryAndThroughRunsAlike) {
  std::mt19937_64 rng(test::TestSeed());
  test::ScratchDir dir;
  for (size_t memory : {size_t{64} << 20, size_t{1} << 20}) {
    SCOPED_TRACE(::testing::Message() << memory << " bytes of memory");
    std::vector<std::string> all;
    ExternalSorter sorter(PosixFileSystem(), dir.path(), memory);
    for (int i = 0; i < 200000; ++i) {
      // Duplicates, empty strings, shared prefixes, bytes above 0x7f.
      std::string s(rng() % 24, '\0');
      for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? 0xF0 + rng() % 3 : rng() % 3);
      ASSERT_TRUE(sorter.Add(s).ok());
      all.push_back(std::move(s));
    }
    if (memory == size_t{1} << 20) {
      EXPECT_GT(sorter.runs_written(), 2u);
    } else {
      EXPECT_EQ(sorter.runs_written(), 0u);
    }
    std::sort(all.begin(), all.end());
    size_t i = 0;
    ASSERT_TRUE(sorter
                    .Finish([&](std::string_view s) {
                      EXPECT_LT(i, all.size());
                      if (i < all.size() && s != all[i]) {
                        return Status::Corruption("out of order at " + std::to_string(i));
                      }
                      ++i;
                      return Status::OK();
                    })
                    .ok());
    EXPECT_EQ(i, all.size());
    EXPECT_TRUE(sorter.Add("late").IsInvalidArgument());
  }
  EXPECT_EQ(test::CountFiles(dir.path(), ".run"), 0u);  // the runs went with the sorter
}

// Past kMaxFanIn runs of a level, they merge into one of the next: many
// small runs still come out in order, and no more than kMaxFanIn are open
// for the last merge.
TEST(ExternalSorter, ManyRunsMergeInLevels) {
  std::mt19937_64 rng(test::TestSeed());
  test::ScratchDir dir;
  std::vector<std::string> all;
  ExternalSorter sorter(PosixFileSystem(), dir.path(), 64 << 10);
  for (int i = 0; i < 300000; ++i) {
    std::string s = KeyEncoder().Unsigned(rng() % 100000, 4).Release();
    ASSERT_TRUE(sorter.Add(s).ok());
    all.push_back(std::move(s));
  }
  std::sort(all.begin(), all.end());
  size_t i = 0, open_runs = 0;
  ASSERT_TRUE(sorter
                  .Finish([&](std::string_view s) {
                    if (i == 0) open_runs = test::CountFiles(dir.path(), ".run");
                    if (i >= all.size() || s != all[i]) return Status::Corruption("out of order");
                    ++i;
                    return Status::OK();
                  })
                  .ok());
  EXPECT_EQ(i, all.size());
  EXPECT_GT(sorter.runs_written(), ExternalSorter::kMaxFanIn + 1) << "not enough runs to merge";
  EXPECT_LE(open_runs, ExternalSorter::kMaxFanIn);
  EXPECT_GT(open_runs, 0u);
}

TEST(ExternalSorter, AFailedRunWriteFailsTheSortAndLeavesNoFile) {
  test::ScratchDir dir;
  FaultInjectingFileSystem faults(PosixFileSystem());
  FaultRule rule;
  rule.ops = kFaultWrite;
  rule.path_contains = ".run";
  rule.skip = 1;  // the first run is written, the second fails midway
  rule.short_write = true;
  faults.Add(rule);
  {
    ExternalSorter sorter(&faults, dir.path(), 1 << 20);
    Status st;
    for (int i = 0; i < 200000 && st.ok(); ++i) st = sorter.Add(std::string(20, 'a' + i % 26));
    EXPECT_TRUE(st.IsNoSpace()) << st.ToString();
    // The failure sticks: a truncated run is never merged.
    EXPECT_TRUE(sorter.Add("more").IsNoSpace());
    EXPECT_TRUE(sorter.Finish([](std::string_view) { return Status::OK(); }).IsNoSpace());
  }
  EXPECT_EQ(test::CountFiles(dir.path(), ".run"), 0u);
}

}  // namespace
}  // namespace subito::btree
