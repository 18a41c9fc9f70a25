// The B+-tree against a std::map model: random operations, every seek mode,
// scans both ways, splits over several levels, reopen + redo after a crash,
// concurrent use, and damaged input.
#include "btree/btree.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "btree/node.h"
#include "page/page_format.h"

#include <map>
#include <random>
#include <thread>

#include "btree/key_encoding.h"
#include "btree_harness.h"
#include "buffer/page_recovery.h"
#include "storage_stack.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::btree {
namespace {

using namespace test_harness;  // NOLINT(google-build-using-namespace)
using buffer::Latch;
using buffer::Mtr;

std::string KeyOf(uint64_t k, std::mt19937_64& rng) {
  // Variable-length keys: an encoded integer plus a random-length tail.
  std::string key = KeyEncoder().Unsigned(k, 4).Release();
  key.append(rng() % 3 == 0 ? rng() % 40 : 0, static_cast<char>('a' + k % 26));
  return key;
}

void ExpectSeekMatches(BTree& tree, const Model& m, SeekMode mode, const std::string& k) {
  BTree::Cursor c(&tree);
  ASSERT_TRUE(c.Seek(mode, k).ok());
  Model::const_iterator it;
  bool found;
  switch (mode) {
    case SeekMode::kGE:
      it = m.lower_bound(k);
      found = it != m.end();
      break;
    case SeekMode::kGT:
      it = m.upper_bound(k);
      found = it != m.end();
      break;
    case SeekMode::kLE:
      it = m.upper_bound(k);
      found = it != m.begin();
      if (found) --it;
      break;
    default:  // kLT
      it = m.lower_bound(k);
      found = it != m.begin();
      if (found) --it;
      break;
  }
  ASSERT_EQ(c.Valid(), found) << "seek mode " << static_cast<int>(mode);
  if (found) {
    ASSERT_EQ(c.key(), it->first);
  }
}

TEST(BTree, RandomOperationsMatchAMap) {
  test::ScratchDir dir;
  Harness h(dir.path());
  ASSERT_TRUE(h.Open(true).ok());
  std::mt19937_64 rng(test::TestSeed());
  Model m;
  for (int op = 0; op < 12000; ++op) {
    const std::string key = KeyOf(rng() % 2500, rng);
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 6) {
      std::string v(rng() % 200, static_cast<char>('A' + rng() % 26));
      ASSERT_TRUE(h.tree->Put(key, v).ok());
      m[key] = v;
    } else if (kind < 8) {
      auto d = h.tree->Delete(key);
      ASSERT_TRUE(d.ok()) << d.status().ToString();
      ASSERT_EQ(*d, m.erase(key) == 1);
    } else {
      auto g = h.tree->Get(key);
      ASSERT_TRUE(g.ok());
      auto it = m.find(key);
      ASSERT_EQ(g->has_value(), it != m.end());
      if (it != m.end()) {
        ASSERT_EQ(**g, it->second);
      }
      auto c = h.tree->Contains(key);
      ASSERT_TRUE(c.ok());
      ASSERT_EQ(*c, it != m.end());
    }
    if (op % 3000 == 2999) {
      ExpectScansMatch(*h.tree, m);
      ASSERT_EQ(*h.tree->entries(), m.size());
    }
  }
  for (int i = 0; i < 300; ++i) {
    const std::string k = KeyOf(rng() % 2600, rng);
    for (SeekMode mode : {SeekMode::kGE, SeekMode::kGT, SeekMode::kLE, SeekMode::kLT}) {
      ExpectSeekMatches(*h.tree, m, mode, k);
    }
  }
  // Counting a range reads slot counts only; it must agree with the model
  // up to the limit, across leaves, with an open or a closed end.
  for (int i = 0; i < 300; ++i) {
    std::string lo = KeyOf(rng() % 2600, rng), hi = KeyOf(rng() % 2600, rng);
    if (hi < lo) std::swap(lo, hi);
    const bool open_end = i % 7 == 0;
    const uint64_t in_model = static_cast<uint64_t>(
        std::distance(m.lower_bound(lo), open_end ? m.end() : m.lower_bound(hi)));
    for (uint64_t limit : {uint64_t{1}, uint64_t{48}, uint64_t{1} << 40}) {
      auto n = h.tree->CountUpTo(lo, open_end ? std::nullopt : std::optional<std::string_view>(hi),
                                 limit);
      ASSERT_TRUE(n.ok()) << n.status().ToString();
      ASSERT_EQ(*n, std::min(in_model, limit)) << "range " << i << ", limit " << limit;
    }
  }
  EXPECT_GT(h.pool->stats().evictions, 0u);  // the tree is far larger than the pool
  // Delete everything: empty leaves are unlinked all the way up.
  for (auto& [k, v] : Model(m)) {
    ASSERT_TRUE(*h.tree->Delete(k));
    m.erase(k);
  }
  ExpectScansMatch(*h.tree, m);
  ASSERT_TRUE(h.tree->Put("again", "x").ok());
  ExpectScansMatch(*h.tree, {{"again", "x"}});
  h.Close(true);
}

// A lookup leaves a hint of the key's leaf for the next lookup of that key
// (BTree::HintedLeaf). Whatever happened to that leaf since, split away,
// emptied, merged, freed or reused, the next Get, Put or Delete of the key
// must act on the key's real leaf.
TEST(BTree, StaleLeafHintsAreNeverTrusted) {
  test::ScratchDir dir;
  Harness h(dir.path());
  ASSERT_TRUE(h.Open(true).ok());
  std::mt19937_64 rng(test::TestSeed());
  Model m;
  auto key = [](uint32_t k) { return KeyEncoder().Unsigned(k, 4).Release(); };
  for (uint32_t k = 0; k < 4000; k += 2) {
    ASSERT_TRUE(h.tree->Put(key(k), std::string(60, 'a')).ok());
    m[key(k)] = std::string(60, 'a');
  }
  for (int round = 0; round < 40; ++round) {
    const uint32_t k = static_cast<uint32_t>(rng() % 4000) & ~1u;
    auto g = h.tree->Get(key(k));  // hints k's leaf
    ASSERT_TRUE(g.ok());
    ASSERT_EQ(g->has_value(), m.count(key(k)) == 1);
    // Another thread (hints are per thread) changes the neighbourhood:
    // fills it (splits) or empties it (merges and frees). Then this thread
    // uses k again, once by each kind of lookup.
    const bool fill = round % 2 == 0;
    std::thread other([&] {
      for (uint32_t j = k > 300 ? k - 300 : 0; j < std::min<uint32_t>(k + 300, 4000); ++j) {
        if (j == k) continue;
        if (fill) {
          const std::string v(static_cast<size_t>(rng() % 120), 'f');
          ASSERT_TRUE(h.tree->Put(key(j), v).ok());
          m[key(j)] = v;
        } else if (m.count(key(j))) {
          ASSERT_TRUE(*h.tree->Delete(key(j)));
          m.erase(key(j));
        }
      }
    });
    other.join();
    const std::string v = "round" + std::to_string(round);
    ASSERT_TRUE(h.tree->Put(key(k), v).ok());
    m[key(k)] = v;
    g = h.tree->Get(key(k));
    ASSERT_TRUE(g.ok() && g->has_value());
    ASSERT_EQ(**g, v);
    if (round % 3 == 0) {
      ASSERT_TRUE(*h.tree->Delete(key(k)));
      m.erase(key(k));
      g = h.tree->Get(key(k));
      ASSERT_TRUE(g.ok());
      ASSERT_FALSE(g->has_value());
    }
  }
  ExpectScansMatch(*h.tree, m);
  h.Close(true);
}

// A key past the end of the last leaf takes the leaf hint of the key met
// before it (rows loaded in order descend once per leaf); once another
// thread has split that leaf, so that it is no longer the last, a key
// beyond its new right neighbour's first key must not go into it. The same
// at the front for descending keys.
TEST(BTree, HintsAtTheTreesEndsFollowSplitsByOtherThreads) {
  for (bool ascending : {true, false}) {
    test::ScratchDir dir;
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    auto key = [](uint32_t k) { return KeyEncoder().Unsigned(k, 4).Release(); };
    // Ascending: this thread loads 10000..11000, another thread 20000..21000
    // past it and makes room in this thread's hinted leaf, then this thread
    // goes on past both, then between them. Descending: the mirror image.
    auto at = [&](uint32_t k) { return ascending ? k : 40000 - k; };
    Model m;
    auto put = [&](uint32_t k) {
      const std::string v(80, static_cast<char>('a' + k % 26));
      ASSERT_TRUE(h.tree->Put(key(at(k)), v).ok());
      m[key(at(k))] = v;
    };
    for (uint32_t k = 10000; k <= 11000; ++k) put(k);
    std::thread other([&] {
      for (uint32_t k = 20000; k <= 21000; ++k) put(k);
      // Room again in the hinted leaf, which is no longer the last.
      for (uint32_t k = 10990; k <= 10999; ++k) {
        ASSERT_TRUE(*h.tree->Delete(key(at(k))));
        m.erase(key(at(k)));
      }
    });
    other.join();
    for (uint32_t k = 30000; k <= 30100; ++k) put(k);  // past the other thread's keys
    for (uint32_t k = 15000; k <= 15100; ++k) put(k);  // between the two runs
    ExpectScansMatch(*h.tree, m);
    for (const auto& [k, v] : m) {
      auto g = h.tree->Get(k);
      ASSERT_TRUE(g.ok() && g->has_value());
      ASSERT_EQ(**g, v);
    }
    h.Close(true);
  }
}

// The first leaf's hint, for a key before the hinted one, is not trusted
// once that leaf was emptied, freed and reused in the middle of the tree
// (its prev is no longer 0).
TEST(BTree, AHintAtTheFirstLeafFollowsItsReuseElsewhere) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  auto key = [](uint32_t k) { return KeyEncoder().Unsigned(k, 4).Release(); };
  Model m;
  const std::string v(100, 'v');
  for (uint32_t k = 1000; k < 5000; k += 2) {
    ASSERT_TRUE(h.tree->Put(key(k), v).ok());
    m[key(k)] = v;
  }
  auto g = h.tree->Get(key(1000));  // hints the first leaf
  ASSERT_TRUE(g.ok() && g->has_value());
  std::thread other([&] {
    // Empties (and frees) the first leaves, then splits leaves in the
    // middle, which take the freed pages.
    for (uint32_t k = 1000; k < 1600; k += 2) {
      ASSERT_TRUE(*h.tree->Delete(key(k)));
      m.erase(key(k));
    }
    for (uint32_t k = 3001; k < 4601; k += 2) {
      ASSERT_TRUE(h.tree->Put(key(k), v).ok());
      m[key(k)] = v;
    }
  });
  other.join();
  ASSERT_TRUE(h.tree->Put(key(5), "first").ok());
  m[key(5)] = "first";
  ExpectScansMatch(*h.tree, m);
  auto got = h.tree->Get(key(5));
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ(**got, "first");
  h.Close(true);
}

// Keys arriving in order (auto-increment) fill leaves instead of leaving
// each half empty; both directions.
TEST(BTree, OrderedInsertsFillTheirLeaves) {
  for (bool ascending : {true, false}) {
    test::ScratchDir dir;
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    const std::string v(100, 'v');
    constexpr uint32_t kKeys = 4000;
    for (uint32_t i = 0; i < kKeys; ++i) {
      const uint32_t k = ascending ? i : kKeys - i;
      ASSERT_TRUE(h.tree->Put(KeyEncoder().Unsigned(k, 4).Release(), v).ok());
    }
    const uint64_t bytes = uint64_t{kKeys} * (4 + 1 + 100 + 6);  // key, tag, value, slot+lengths
    const uint64_t ideal_pages = bytes / (kPs - 64) + 1;
    EXPECT_LT(h.space->page_count(), ideal_pages * 5 / 4 + 3)
        << (ascending ? "ascending" : "descending") << ": leaves are left part empty";
    BTree::Cursor c(h.tree.get());
    ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
    uint32_t n = 0;
    while (c.Valid()) {
      ++n;
      ASSERT_TRUE(c.Next().ok());
    }
    EXPECT_EQ(n, kKeys);
  }
}

// Deleting most keys merges internal nodes too: the tree gets lower again,
// and every key left is still found, both ways.
TEST(BTree, InternalNodesMergeWhenTheTreeShrinks) {
  const uint64_t seed = test::TestSeed();
  std::mt19937_64 rng(seed);
  test::ScratchDir dir;
  Harness h(dir.path(), 128);
  ASSERT_TRUE(h.Open(true).ok());
  Model m;
  auto key = [](uint32_t i) {
    return KeyEncoder().Unsigned(i, 4).Release() + std::string(150, 'k');
  };
  std::vector<uint32_t> ids(6000);
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  for (uint32_t i : ids) {
    ASSERT_TRUE(h.tree->Put(key(i), "v").ok());
    m[key(i)] = "v";
  }
  const uint32_t tall = *h.tree->height();
  ASSERT_GE(tall, 3u) << "the test needs internal levels";
  std::shuffle(ids.begin(), ids.end(), rng);
  for (size_t n = 0; n + 30 < ids.size(); ++n) {
    auto d = h.tree->Delete(key(ids[n]));
    ASSERT_TRUE(d.ok() && *d);
    m.erase(key(ids[n]));
  }
  EXPECT_LT(*h.tree->height(), tall) << "seed " << seed;
  ExpectScansMatch(*h.tree, m);
  for (auto& [k, v] : m) EXPECT_EQ(*h.tree->Get(k), std::optional<std::string>(v));
  h.Close(true);
  ExpectReopenedTreeMatches(dir.path(), m);
}

TEST(BTree, MergedAndFreedPagesAreReused) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  Model m;
  auto key = [](uint32_t range, uint32_t i) {
    return KeyEncoder().Unsigned(range, 1).Unsigned(i, 4).Release();
  };
  const std::string v(100, 'v');
  for (uint32_t i = 0; i < 3000; ++i) {
    ASSERT_TRUE(h.tree->Put(key(1, i), v).ok());
    m[key(1, i)] = v;
  }
  const uint32_t pages_full = h.space->page_count();
  for (uint32_t i = 0; i < 3000; ++i) {  // 90% gone: leaves underfull, merged, freed
    if (i % 10 == 0) continue;
    ASSERT_TRUE(*h.tree->Delete(key(1, i)));
    m.erase(key(1, i));
  }
  ExpectScansMatch(*h.tree, m);
  for (uint32_t i = 0; i < 2700; ++i) {  // as much data again, elsewhere in the key space
    ASSERT_TRUE(h.tree->Put(key(2, i), v).ok());
    m[key(2, i)] = v;
  }
  ExpectScansMatch(*h.tree, m);
  // Without merging and reuse the space would need ~90% more pages.
  EXPECT_LT(h.space->page_count(), pages_full + pages_full / 5)
      << "before: " << pages_full << " pages";
  h.Close(true);
}

TEST(BTree, LongValuesLiveInOverflowChains) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  std::mt19937_64 rng(test::TestSeed());
  Model m;
  auto value = [&](size_t n) {
    std::string v(n, '\0');
    for (char& c : v) c = static_cast<char>(rng());
    return v;
  };
  const uint32_t limit = std::min<uint32_t>(h.tree->max_value(), 30000);
  for (int op = 0; op < 600; ++op) {
    const std::string key = KeyEncoder().Unsigned(rng() % 120, 4).Release();
    if (rng() % 4 == 0) {
      ASSERT_TRUE(h.tree->Delete(key).ok());
      m.erase(key);
    } else {
      std::string v = value(rng() % 2 ? rng() % 200 : rng() % limit);  // inline or chained
      ASSERT_TRUE(h.tree->Put(key, v).ok());
      m[key] = v;
    }
  }
  for (auto& [k, v] : m) {
    auto g = h.tree->Get(k);
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_TRUE(g->has_value());
    ASSERT_EQ(**g, v);
    ASSERT_TRUE(*h.tree->Contains(k));  // inline or chained
  }
  for (uint64_t k = 120; k < 130; ++k) {
    ASSERT_FALSE(*h.tree->Contains(KeyEncoder().Unsigned(k, 4).Release()));
  }
  ExpectScansMatch(*h.tree, m);
  // Replacing values frees their chains for reuse: with values of the same
  // sizes the space grows by at most one chain (a new chain is written
  // before the old one is freed).
  const uint32_t pages = h.space->page_count();
  for (int round = 0; round < 3; ++round) {
    for (auto& [k, v] : m) {
      v = value(v.size());
      ASSERT_TRUE(h.tree->Put(k, v).ok());
      ASSERT_TRUE(h.tree->CollectGarbage().ok());
    }
  }
  EXPECT_LE(h.space->page_count(), pages + limit / (kPs - 48) + 2) << "chains are not reused";
  ExpectScansMatch(*h.tree, m);
  h.Close(true);
  ExpectReopenedTreeMatches(dir.path(), m);
}

// A value written with a larger pool and log stays readable, and can be
// rewritten, with smaller ones: no setting bounds a value's size.
TEST(BTree, ALongValueStaysReadableAndWritableWithASmallerPool) {
  test::ScratchDir dir;
  std::string v(3 << 20, 'w');
  for (size_t i = 0; i < v.size(); i += 4093) v[i] = static_cast<char>('a' + i % 26);
  {
    Harness h(dir.path(), 256);
    ASSERT_TRUE(h.Open(true).ok());
    ASSERT_TRUE(h.tree->Put("k", v).ok());
    h.Close(true);
  }
  Harness small(dir.path(), 16);
  ASSERT_TRUE(small.Open(false).ok());
  auto g = small.tree->Get("k");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(g->has_value());
  EXPECT_TRUE(**g == v);
  ASSERT_TRUE(small.tree->Put("k2", v).ok());
  g = small.tree->Get("k2");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_TRUE(**g == v);
  small.Close(true);
}

TEST(BTree, ChangesSurviveACrashThroughRedo) {
  test::ScratchDir dir;
  Model m;
  {
    Harness h(dir.path(), 512);
    ASSERT_TRUE(h.Open(true).ok());
    h.pool->HoldCheckpoint();  // keep the whole history in the log
    std::mt19937_64 rng(test::TestSeed());
    for (int op = 0; op < 5000; ++op) {
      const std::string key = KeyOf(rng() % 3000, rng);
      if (rng() % 5 == 0) {
        ASSERT_TRUE(h.tree->Delete(key).ok());
        m.erase(key);
      } else {
        std::string v(rng() % 100, 'v');
        ASSERT_TRUE(h.tree->Put(key, v).ok());
        m[key] = v;
      }
    }
    ASSERT_TRUE(h.log->WaitDurable(h.log->reserved_lsn()).ok());
    h.tree.reset();
    h.pool.reset();  // no flush: only the log knows most pages
    h.Close(false);
  }
  ExpectReopenedTreeMatches(dir.path(), m, Left::kCrashed);  // recovery through redo
  ExpectReopenedTreeMatches(dir.path(), m);  // and once more, from the flushed files
}

// A change of a key latches its leaf, not the space header: the header's
// copy of the count is written once the count drifts past its slack, and at
// a clean close. A crash loses at most the slack; ANALYZE's Recount repairs it.
TEST(BTree, TheHeaderCountIsWrittenPastItsSlackAndAtACleanClose) {
  test::ScratchDir dir;
  Model m;
  auto put = [&](Harness& h, uint32_t from, uint32_t to) {
    for (uint32_t i = from; i < to; ++i) {
      const std::string key = KeyEncoder().Unsigned(i, 4).Release();
      ASSERT_TRUE(h.tree->Put(key, "v").ok());
      m[key] = "v";
    }
    ASSERT_TRUE(h.log->WaitDurable(h.log->reserved_lsn()).ok());
  };
  {
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(true).ok());
    put(h, 0, 10);
    EXPECT_EQ(*h.tree->entries(), 10u);
    h.Close(false);
  }
  {
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(false).ok());
    ExpectScansMatch(*h.tree, m);
    EXPECT_EQ(*h.tree->entries(), 0u) << "ten keys are within the slack: no header write";
    EXPECT_FALSE(*h.tree->Empty());
    put(h, 10, 3000);
    h.Close(false);
  }
  {
    Harness h(dir.path(), 64);
    ASSERT_TRUE(h.Open(false).ok());
    const uint64_t count = *h.tree->entries();
    EXPECT_GT(count, 0u) << "the count drifted past its slack and was written";
    EXPECT_LE(m.size() - count, BTree::CountSlack(count) + 10);
    EXPECT_LT(count, m.size()) << "the ten keys the first crash took stay lost";
    ASSERT_TRUE(h.tree->Recount().ok());
    EXPECT_EQ(*h.tree->entries(), m.size());
    put(h, 3000, 3005);
    h.Close(true);
  }
  ExpectReopenedTreeMatches(dir.path(), m);
}

TEST(BTree, ConcurrentWritersAndReaders) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  std::vector<std::thread> threads;
  for (uint32_t t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      for (uint32_t i = 0; i < 1500; ++i) {
        std::string k = KeyEncoder().Unsigned(t, 1).Unsigned(i, 4).Release();
        ASSERT_TRUE(h.tree->Put(k, std::to_string(i)).ok());
        if (i % 3 == 0) {
          ASSERT_TRUE(*h.tree->Delete(k));
        }
      }
    });
  }
  threads.emplace_back([&] {
    for (int round = 0; round < 20; ++round) {
      BTree::Cursor c(h.tree.get());
      ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
      std::string last;
      while (c.Valid()) {
        ASSERT_LT(last, c.key()) << "scan went backwards under concurrent writes";
        last = c.key();
        ASSERT_TRUE(c.Next().ok());
      }
    }
  });
  for (auto& th : threads) th.join();
  Model m;
  for (uint32_t t = 0; t < 3; ++t) {
    for (uint32_t i = 0; i < 1500; ++i) {
      if (i % 3 != 0) {
        m[KeyEncoder().Unsigned(t, 1).Unsigned(i, 4).Release()] = std::to_string(i);
      }
    }
  }
  ExpectScansMatch(*h.tree, m);
  h.Close(true);
}

// A scan serves steps from a copy of its leaf while the tree is unchanged;
// any change in between (here: inserts, deletes and value changes just
// ahead of the cursor, in its leaf and beyond) must show in the next step,
// in both directions.
TEST(BTree, AScanSeesChangesMadeWhileItIsOpen) {
  test::ScratchDir dir;
  Harness h(dir.path());
  ASSERT_TRUE(h.Open(true).ok());
  std::mt19937_64 rng(test::TestSeed());
  Model m;
  auto key = [](uint64_t k) { return KeyEncoder().Unsigned(k, 4).Release(); };
  for (uint64_t k = 0; k < 3000; k += 2) {
    m[key(k)] = "v" + std::to_string(k);
    ASSERT_TRUE(h.tree->Put(key(k), m[key(k)]).ok());
  }
  for (const bool forward : {true, false}) {
    BTree::Cursor c(h.tree.get());
    ASSERT_TRUE(c.Seek(forward ? SeekMode::kFirst : SeekMode::kLast).ok());
    ASSERT_TRUE(c.Valid());
    ASSERT_EQ(c.key(), forward ? m.begin()->first : m.rbegin()->first);
    std::string last;
    int steps = 0;
    while (c.Valid()) {
      auto want = m.find(std::string(c.key()));
      ASSERT_NE(want, m.end()) << "step " << steps << ": a deleted key";
      ASSERT_EQ(c.value(), want->second) << "step " << steps;
      last = c.key();
      const uint64_t at =
          DecodeFixed32(reinterpret_cast<const uint8_t*>(last.data())) ^ 0x80000000u;
      if (rng() % 3 == 0) {  // change something 1..6 keys ahead
        const uint64_t d = 1 + rng() % 6;
        const uint64_t k = forward ? at + d : (at >= d ? at - d : at);
        const std::string kk = key(k);
        if (kk != last) {
          if (m.count(kk) && rng() % 2) {
            ASSERT_TRUE(h.tree->Delete(kk).ok());
            m.erase(kk);
          } else {
            m[kk] = "w" + std::to_string(rng() % 1000);
            ASSERT_TRUE(h.tree->Put(kk, m[kk]).ok());
          }
        }
      }
      ASSERT_TRUE((forward ? c.Next() : c.Prev()).ok());
      ++steps;
      if (c.Valid() && forward) {
        auto next = m.upper_bound(last);
        ASSERT_NE(next, m.end());
        ASSERT_EQ(c.key(), next->first) << "forward step " << steps;
      } else if (c.Valid()) {
        auto prev = m.lower_bound(last);
        ASSERT_NE(prev, m.begin());
        ASSERT_EQ(c.key(), std::prev(prev)->first) << "backward step " << steps;
      }
    }
    EXPECT_GT(steps, 1000);
  }
  h.Close(true);
}

// A node page against a map: random inserts, removes and value
// replacements, the node checked after each and its used bytes (slots and
// live records) counted from the map. A removed record's space is
// taken again by a later insert of a record that fits it (the heap does not
// grow), and a damaged free list is refused by the check.
TEST(NodeView, RemovedRecordsAreReusedAndTheHeapStaysConsistent) {
  std::vector<uint8_t> page(kPs);
  NodeView n(page.data(), kPs);
  n.Init(1, 5, 0);
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(test::TestSeed());
  auto heap_start = [&] { return DecodeFixed16(page.data() + 36); };
  uint32_t reused = 0;
  for (int op = 0; op < 20000; ++op) {
    const std::string key = "k" + std::to_string(rng() % 120);
    const std::string value(rng() % 60, static_cast<char>('a' + rng() % 26));
    const uint16_t i = n.LowerBound(key);
    const bool present = i < n.count() && n.Key(i) == key;
    if (present && rng() % 2 == 0) {
      n.Remove(i);
      model.erase(key);
    } else if (present) {
      bool kept = true;
      if (!n.ReplaceValue(i, value)) {  // the value grew
        n.Remove(i);
        const uint32_t room =
            heap_start() - (kNodeHeaderEnd + 2u * n.count()) + DecodeFixed16(page.data() + 38);
        const bool fits = room >= 4 + key.size() + value.size() + 2;
        ASSERT_EQ(n.Insert(i, key, value), fits) << "room " << room;
        kept = fits;
      }
      if (kept) {
        model[key] = value;
      } else {
        model.erase(key);
      }
    } else {
      const uint16_t before = heap_start();
      const uint32_t gap = before - (kNodeHeaderEnd + 2u * n.count());
      if (n.Insert(i, key, value)) {
        model[key] = value;
        if (gap < 4 + key.size() + value.size() + 2 && heap_start() == before) ++reused;
      }
    }
    ASSERT_TRUE(n.Check("op " + std::to_string(op)).ok()) << n.Check("").ToString();
    ASSERT_EQ(n.count(), model.size());
    uint32_t used = 2u * n.count();
    for (const auto& [key, value] : model) used += 4u + key.size() + value.size();
    ASSERT_EQ(n.UsedBytes(), used) << "op " << op;
  }
  uint16_t k = 0;
  for (auto& [key, value] : model) {
    ASSERT_EQ(n.Key(k), key);
    ASSERT_EQ(n.Value(k++), value);
  }
  EXPECT_GT(reused, 100u) << "inserts that took a freed record's place";

  // A free list that loops, or points outside the heap, is damage.
  if (n.count() > 0) n.Remove(0);
  const uint16_t head = DecodeFixed16(page.data() + 52);
  ASSERT_NE(head, 0);
  std::vector<uint8_t> bad = page;
  EncodeFixed16(bad.data() + head + 2, head);  // the chunk points to itself
  Status st = NodeView(bad.data(), kPs).Check("looped");
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("free list"), std::string::npos) << st.ToString();
  bad = page;
  EncodeFixed16(bad.data() + 52, 20);  // inside the header
  EXPECT_TRUE(NodeView(bad.data(), kPs).Check("outside").IsCorruption());

  // A chunk over a live record's bytes, everything else in order, is damage
  // too: an insert would take them.
  std::vector<uint8_t> node(kPs);
  NodeView v(node.data(), kPs);
  v.Init(1, 9, 0);
  ASSERT_TRUE(v.Insert(0, "a", std::string(100, 'x')));
  ASSERT_TRUE(v.Insert(1, "b", "yy"));
  ASSERT_TRUE(v.Insert(2, "c", "zz"));
  v.Remove(1);
  ASSERT_TRUE(v.Check("one chunk").ok());
  const uint16_t a = DecodeFixed16(node.data() + kNodeHeaderEnd);
  const uint16_t chunk = DecodeFixed16(node.data() + DecodeFixed16(node.data() + 52));
  EncodeFixed16(node.data() + 52, a + 8);  // inside a's value
  EncodeFixed16(node.data() + a + 8, chunk);
  EncodeFixed16(node.data() + a + 10, 0);
  st = v.Check("over a record");
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("a chunk overlaps"), std::string::npos) << st.ToString();

  // Two records that overlap, with a garbage count that makes the heap's
  // accounting add up and no free chunk, are damage (a compaction slides
  // records as disjoint runs).
  v.Init(1, 10, 0);
  const uint32_t rec_a = 4000, rec_b = 4040;  // b's bytes lie inside a's value
  EncodeFixed16(node.data() + rec_a, 2);
  EncodeFixed16(node.data() + rec_a + 2, 40);
  std::memcpy(node.data() + rec_a + 4, "aa", 2);
  std::memset(node.data() + rec_a + 6, 'x', 40);
  EncodeFixed16(node.data() + rec_b, 4);
  EncodeFixed16(node.data() + rec_b + 2, 10);
  std::memcpy(node.data() + rec_b + 4, "bbbb", 4);
  std::memset(node.data() + rec_b + 8, 'y', 10);
  EncodeFixed16(node.data() + kNodeHeaderEnd, rec_a);
  EncodeFixed16(node.data() + kNodeHeaderEnd + 2, rec_b);
  EncodeFixed16(node.data() + 34, 2);
  EncodeFixed16(node.data() + 36, rec_a);
  EncodeFixed16(node.data() + 38, kPs - rec_a - (46 + 18));
  st = v.Check("records over each other");
  EXPECT_TRUE(st.IsCorruption());
  EXPECT_NE(st.message().find("records at 4000 and 4040 overlap"), std::string::npos)
      << st.ToString();
  EncodeFixed16(node.data() + kNodeHeaderEnd + 2, rec_a + 46);  // b moved past a
  std::memmove(node.data() + rec_a + 46, node.data() + rec_b, 18);
  std::memset(node.data() + rec_a + 6, 'x', 40);
  EXPECT_TRUE(v.Check("records side by side").ok());
}

// Bytes of a node that hold nothing must be zero: the gap between the slots
// and the heap, and each free chunk past its header.
void ExpectUnusedBytesZero(const uint8_t* page, const std::string& where) {
  const uint32_t gap = kNodeHeaderEnd + 2u * DecodeFixed16(page + 34);
  for (uint32_t b = gap; b < DecodeFixed16(page + 36); ++b) {
    ASSERT_EQ(page[b], 0) << where << ": byte " << b << " of the gap";
  }
  for (uint32_t f = DecodeFixed16(page + 52); f != 0; f = DecodeFixed16(page + f + 2)) {
    for (uint32_t b = f + 4; b < f + DecodeFixed16(page + f); ++b) {
      ASSERT_EQ(page[b], 0) << where << ": byte " << b << " of the free chunk at " << f;
    }
  }
}

// A node edited in place through a Mtr (how a row change edits its leaf):
// random inserts, removals and value replacements, each change committed
// or given up. A given-up change leaves the page exactly as it was; the
// log alone (no page written) rebuilds every committed one; each node
// passes Check and keeps its unused bytes zero; and a change without a
// compaction is logged in the bytes it wrote plus a few edit headers per
// operation, not in a rewrite of the node.
TEST(NodeView, InPlaceChangesThroughAMtrReplayAndGivenUpOnesLeaveNoTrace) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  std::map<uint32_t, std::vector<uint8_t>> model;  // bytes [16, kPs) of each page
  int committed = 0, given_up = 0, compacted = 0;
  {
    Harness h(dir.path(), 64, 16 << 20);
    ASSERT_TRUE(h.Open(true).ok());
    std::vector<uint32_t> pages;
    for (int i = 0; i < 3; ++i) {
      auto page = h.pool->Allocate(1);
      ASSERT_TRUE(page.ok());
      Mtr mtr(h.pool.get());
      NodeView(&*page, kPs, &mtr).Init(1, page->id().page_no, 0);
      ASSERT_TRUE(mtr.Commit().ok());
      pages.push_back(page->id().page_no);
    }
    for (int round = 0; round < 3000; ++round) {
      const uint32_t p = pages[rng() % pages.size()];
      ASSERT_TRUE(h.pool->LogFreeCheck().ok());
      auto page = h.pool->Fetch({1, p}, Latch::kExclusive);
      ASSERT_TRUE(page.ok());
      const std::vector<uint8_t> before(page->data(), page->data() + kPs);
      Mtr mtr(h.pool.get());
      NodeView n(&*page, kPs, &mtr);
      uint32_t wrote = 0;  // bytes of records and values the change wrote
      bool compaction = false;
      const int ops = 1 + static_cast<int>(rng() % 4);
      for (int op = 0; op < ops; ++op) {
        const std::string key = "k" + std::to_string(rng() % 150);
        const std::string value(rng() % 80, static_cast<char>('a' + rng() % 26));
        const uint16_t i = n.LowerBound(key);
        if (i < n.count() && n.Key(i) == key) {
          if (rng() % 2 == 0 || !n.ReplaceValue(i, value)) {
            n.Remove(i);  // logs no record bytes: they become zeros
          } else {
            wrote += static_cast<uint32_t>(value.size());
          }
        } else {
          const uint32_t heap = DecodeFixed16(page->data() + 36);
          const uint32_t garbage = DecodeFixed16(page->data() + 38);
          const uint32_t len = 4 + static_cast<uint32_t>(key.size() + value.size());
          if (n.Insert(i, key, value)) {
            wrote += len;
            // In the heap's new space, the heap start moved down by len;
            // in a free chunk, it stayed. Otherwise the node was compacted
            // (which may also leave it where it was, when the garbage was
            // len bytes: a change that leaves no garbage is not bounded).
            const uint32_t heap_now = DecodeFixed16(page->data() + 36);
            const bool surely = heap_now != heap - len && heap_now != heap;
            compacted += surely;
            compaction =
                compaction || surely || (garbage > 0 && DecodeFixed16(page->data() + 38) == 0);
          }
        }
      }
      const std::string where = "round " + std::to_string(round);
      ASSERT_TRUE(NodeView(page->data(), kPs).Check(where).ok());
      ExpectUnusedBytesZero(page->data(), where);
      if (rng() % 4 == 0) {
        mtr.Abort();
        ASSERT_EQ(0, std::memcmp(page->data() + 16, before.data() + 16, kPs - 16))
            << "round " << round;
        ++given_up;
        continue;
      }
      if (mtr.empty()) continue;
      // An operation costs at most 7 edits beyond the bytes it wrote: the
      // record or value, the slots (or a move and a slot), the header
      // fields, and for an insert into a free chunk two links; for a
      // removal the chunk, its zeros and the list's head; a short value,
      // its shorter length and the garbage. A value's changed bytes are at
      // most 12 apart in one edit. A compaction adds a move per run of
      // adjacent records and the slots that changed, never the heap.
      const uint32_t slots = DecodeFixed16(page->data() + 34);
      const uint32_t compaction_bytes = compaction ? (14 + 2) * slots + 4 * 14 : 0;
      EXPECT_LE(mtr.payload_bytes(), wrote + ops * (7 * 14 + 14) + compaction_bytes)
          << "round " << round << (compaction ? ", compacted" : "");
      ASSERT_TRUE(mtr.Commit().ok());
      model[p].assign(page->data() + 16, page->data() + kPs);
      ++committed;
    }
    ASSERT_TRUE(h.log->WaitDurable(h.log->reserved_lsn()).ok());
    h.Close(/*flush=*/false);
  }
  EXPECT_GT(committed, 2000);
  EXPECT_GT(given_up, 500);
  EXPECT_GT(compacted, 10);
  test::ExpectRecoveredPages(dir.path(), {kPs, 64 * kPs, 4096 + (16 << 20)}, model);
}

TEST(BTree, OversizedRecordsAndDamagedNodesAreRefused) {
  test::ScratchDir dir;
  {
    Harness h(dir.path());
    ASSERT_TRUE(h.Open(true).ok());
    std::string long_key(h.tree->max_record(), 'k');
    EXPECT_TRUE(h.tree->Put(long_key, "v").IsInvalidArgument());
    EXPECT_FALSE(BTree::Create(h.pool.get(), 1).ok());  // already has a tree
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(h.tree->Put("key" + std::to_string(i), "v").ok());
    h.Close(true);
  }
  // Damage the root's slot array on disk, with a valid page checksum: the
  // node check refuses it instead of reading out of bounds.
  const auto original = test::ReadFile(dir.Sub("t.sbt"));
  auto bytes = original;
  const uint32_t root = 1;
  uint8_t* page = bytes.data() + root * kPs;
  page[kNodeHeaderEnd] = 0xFF;
  page[kNodeHeaderEnd + 1] = 0xFF;
  page::SealPage(page, kPs);
  test::WriteFile(dir.Sub("t.sbt"), bytes);
  {
    Harness h(dir.path());
    ASSERT_TRUE(h.Open(false).ok());
    auto g = h.tree->Get("key7");
    ASSERT_FALSE(g.ok());
    EXPECT_TRUE(g.status().IsCorruption()) << g.status().ToString();
    EXPECT_NE(g.status().message().find("page 1"), std::string::npos) << g.status().ToString();
    h.Close(false);
  }
  // A garbage count that disagrees with the heap (valid checksum) would make
  // an insert write outside the page: refused before any use.
  bytes = original;
  page = bytes.data() + root * kPs;
  page[38] = 0xE8;  // garbage = 1000
  page[39] = 0x03;
  page::SealPage(page, kPs);
  test::WriteFile(dir.Sub("t.sbt"), bytes);
  Harness h(dir.path());
  ASSERT_TRUE(h.Open(false).ok());
  Status put = h.tree->Put("new", std::string(300, 'x'));
  EXPECT_TRUE(put.IsCorruption()) << put.ToString();
  EXPECT_NE(put.message().find("heap accounting"), std::string::npos) << put.ToString();
  h.Close(false);
}

}  // namespace
}  // namespace subito::btree
