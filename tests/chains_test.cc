// Overflow chains (btree.h C1-C4): values many times larger than the log
// and the pool, retired chains restored and released, garbage freed for
// reuse, and power cuts while all of that runs, after which every page of
// the space is accounted for (a node, a chain page of a live value, or
// free) and the tree holds exactly the operations whose log survived.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>

#include "btree/btree.h"
#include "btree/key_encoding.h"
#include "btree/node.h"
#include "btree/tree_op.h"
#include "btree_harness.h"
#include "buffer/page_recovery.h"
#include "pmem/tracking_persistence.h"
#include "storage_stack.h"
#include "test_util.h"

namespace subito::btree {
namespace {

using test_harness::kPs;

// A 1 MiB log: chains longer than a chunk are common.
struct Harness : test_harness::Harness {
  explicit Harness(const std::string& dir, uint64_t pool_pages = 32)
      : test_harness::Harness(dir, pool_pages, 1 << 20) {}
};

std::string Bytes(size_t n, std::mt19937_64& rng) {
  std::string v(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t r = rng();
    std::memcpy(v.data() + i, &r, std::min<size_t>(8, n - i));
  }
  return v;
}

// Where every page of space 1 is: tree nodes, pages of chains that leaves
// point to, the free list. Fails on a page reached twice, or a written page
// reached by none of them (a leak). Pages never written (all zeros) may be
// unreached: the file grows ahead of use.
struct PageCensus {
  uint32_t nodes = 0, chain_pages = 0, free_pages = 0, unwritten = 0;
};

PageCensus TakeCensus(buffer::BufferPool* pool, page::SpaceFile* space, uint32_t root) {
  PageCensus c;
  std::set<uint32_t> seen{0};
  auto visit = [&](uint32_t no) {
    EXPECT_NE(no, 0u);
    EXPECT_TRUE(seen.insert(no).second) << "page " << no << " is reached twice";
  };
  auto fetch = [&](uint32_t no) {
    auto h = pool->Fetch({1, no}, buffer::Latch::kShared);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    return std::move(*h);
  };
  std::vector<uint32_t> todo{root};
  while (!todo.empty()) {
    const uint32_t no = todo.back();
    todo.pop_back();
    visit(no);
    ++c.nodes;
    auto h = fetch(no);
    NodeView n(h.data(), kPs);
    if (!n.leaf()) {
      todo.push_back(n.leftmost());
      for (uint16_t k = 0; k < n.count(); ++k) todo.push_back(n.Child(k));
      continue;
    }
    for (uint16_t k = 0; k < n.count(); ++k) {
      const std::string_view v = n.Value(k);
      if (!BTree::IsChainRef(v)) continue;
      for (uint32_t p = RefHead(v); p != 0;) {
        visit(p);
        ++c.chain_pages;
        auto ch = fetch(p);
        EXPECT_EQ(page::TypeOf(ch.data()), page::kPageChain);
        p = DecodeFixed32(ch.data() + kChainNext);
      }
    }
  }
  auto meta = fetch(0);
  for (uint32_t p = DecodeFixed32(meta.data() + kMetaFreeHead); p != 0;) {
    visit(p);
    ++c.free_pages;
    auto f = fetch(p);
    EXPECT_EQ(page::TypeOf(f.data()), page::kPageFree);
    p = DecodeFixed32(f.data() + kFreeNext);
  }
  EXPECT_EQ(DecodeFixed32(meta.data() + kMetaRetired), 0u);
  EXPECT_EQ(DecodeFixed32(meta.data() + kMetaGarbage), 0u);
  for (uint32_t s = 0; s < kBuildSlots; ++s) {
    EXPECT_EQ(DecodeFixed32(meta.data() + kMetaBuilding + 4 * s), 0u);
  }
  meta.Release();
  for (uint32_t no = 1; no < space->page_count(); ++no) {
    if (seen.count(no)) continue;
    auto h = fetch(no);
    EXPECT_TRUE(page::IsZeroPage(h.data(), kPs))
        << "page " << no << " (type " << int{page::TypeOf(h.data())} << ") is lost";
    ++c.unwritten;
  }
  return c;
}

TEST(Chains, ValuesManyTimesTheLogAndThePoolAreStoredReplacedAndFreed) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  Harness h(dir.path(), 32);  // 128 KiB of pool, 1 MiB of log
  ASSERT_TRUE(h.Open(true).ok());
  ASSERT_LT(h.tree->chunk_bytes(), 1u << 20);
  const std::string a = Bytes(5 << 20, rng), b = Bytes((3 << 20) + 7, rng);
  ASSERT_TRUE(h.tree->Put("big", a).ok());
  ASSERT_TRUE(h.tree->Put("small", "v").ok());
  auto g = h.tree->Get("big");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(*g == a) << "the value read back differs";
  ASSERT_TRUE(h.tree->Put("big", b).ok());  // the old chain becomes garbage
  EXPECT_TRUE(h.tree->has_garbage());
  ASSERT_TRUE(h.tree->CollectGarbage().ok());
  EXPECT_FALSE(h.tree->has_garbage());
  g = h.tree->Get("big");
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(*g == b);
  const uint32_t pages = h.space->page_count();
  // Freed pages are reused: rewriting values of the same sizes needs at
  // most one more value's worth of pages (a new chain is written before
  // the old one goes).
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(h.tree->Put("big", round % 2 ? b : a).ok());
    ASSERT_TRUE(h.tree->CollectGarbage().ok());
  }
  EXPECT_LE(h.space->page_count(), pages + (5u << 20) / (kPs - kChainData) + 16);
  ASSERT_TRUE(*h.tree->Delete("big"));
  ASSERT_TRUE(h.tree->CollectGarbage().ok());
  const PageCensus c = TakeCensus(h.pool.get(), h.space.get(), h.tree->root());
  EXPECT_EQ(c.chain_pages, 0u);
  EXPECT_GT(c.free_pages, (5u << 20) / kPs);
  ASSERT_TRUE(h.tree->Put("big", a).ok());
  h.Close(false);  // a crash: redo brings it back
  ASSERT_TRUE(h.Open(false).ok());
  g = h.tree->Get("big");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  ASSERT_TRUE(*g == a) << "the value recovered differs";
  h.Close(true);
}

TEST(Chains, RetiredChainsAreRestoredOrReleased) {
  test::ScratchDir dir;
  std::mt19937_64 rng(test::TestSeed());
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  const std::string v1 = Bytes(30000, rng), v2 = Bytes(700000, rng), v3 = Bytes(9000, rng);
  BTree::ChainMoves moves;
  ASSERT_TRUE(h.tree->Put("k", v1, &moves).ok());
  EXPECT_TRUE(moves.retired.empty());
  auto r1 = h.tree->ChainOf("k");
  ASSERT_TRUE(r1.ok() && r1->has_value());
  ASSERT_TRUE(h.tree->Put("k", v2, &moves).ok());  // multi-chunk, v1's chain retired
  ASSERT_EQ(moves.retired.size(), 1u);
  EXPECT_EQ(moves.retired[0], **r1);
  auto read = h.tree->ReadChain(**r1);
  ASSERT_TRUE(read.ok());
  EXPECT_TRUE(*read == v1) << "a retired chain stays readable";
  auto r2 = h.tree->ChainOf("k");
  ASSERT_TRUE(r2.ok() && r2->has_value());

  // Undo: v1 back, v2's chain retired in turn; a second restore is a no-op.
  moves = {};
  ASSERT_TRUE(h.tree->Restore("k", **r1, &moves).ok());
  ASSERT_EQ(moves.restored, std::vector<std::string>{**r1});
  ASSERT_EQ(moves.retired, std::vector<std::string>{**r2});
  moves = {};
  ASSERT_TRUE(h.tree->Restore("k", **r1, &moves).ok());
  EXPECT_TRUE(moves.retired.empty() && moves.restored.empty());
  auto g = h.tree->Get("k");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_TRUE(**g == v1);
  // The older undo of the same writer restores v2 again (C3).
  ASSERT_TRUE(h.tree->Restore("k", **r2, &moves).ok());
  g = h.tree->Get("k");
  EXPECT_TRUE(**g == v2);
  // A chain that is not retired cannot be restored or released.
  EXPECT_TRUE(h.tree->Restore("other", **r2, &moves).IsCorruption());
  EXPECT_TRUE(h.tree->Release(**r2).IsCorruption());

  // A delete retires; a restore of an absent key puts it back.
  moves = {};
  ASSERT_TRUE(*h.tree->Delete("k", &moves));
  ASSERT_EQ(moves.retired, std::vector<std::string>{**r2});
  ASSERT_TRUE(h.tree->Restore("k", **r2, &moves).ok());
  g = h.tree->Get("k");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_TRUE(**g == v2);

  // Commit: the retired chains are released (v1's is still retired).
  ASSERT_TRUE(h.tree->Put("k", v3, &moves).ok());
  ASSERT_TRUE(h.tree->Release(**r1).ok());
  ASSERT_TRUE(h.tree->Release(**r2).ok());
  EXPECT_TRUE(h.tree->Release(**r2).IsCorruption()) << "released twice";
  ASSERT_TRUE(h.tree->CollectGarbage().ok());
  const PageCensus c = TakeCensus(h.pool.get(), h.space.get(), h.tree->root());
  EXPECT_EQ(c.chain_pages, (v3.size() + kPs - kChainData - 1) / (kPs - kChainData));

  // C4: after a restart, retired chains and unlinked builds go to garbage.
  ASSERT_TRUE(h.tree->Put("k", v1, &moves).ok());  // retires v3's chain
  ASSERT_TRUE(h.tree->Put("j", v2).ok());
  {
    auto p = h.tree->Prepare(v2);
    ASSERT_TRUE(p.ok());
    // A builder that crashed before linking: its Prepared never ends (its
    // reference fits the string's inline buffer, so nothing leaks).
    alignas(BTree::Prepared) unsigned char never_ends[sizeof(BTree::Prepared)];
    new (never_ends) BTree::Prepared(std::move(*p));
  }
  ASSERT_TRUE(h.log->WaitDurable(h.log->reserved_lsn()).ok());
  h.Close(false);
  ASSERT_TRUE(h.Open(false).ok());
  EXPECT_FALSE(h.tree->has_garbage());
  ASSERT_TRUE(h.tree->RecoverChains().ok());
  EXPECT_TRUE(h.tree->has_garbage());
  ASSERT_TRUE(h.tree->CollectGarbage().ok());
  const PageCensus after = TakeCensus(h.pool.get(), h.space.get(), h.tree->root());
  const uint32_t cap = kPs - kChainData;
  EXPECT_EQ(after.chain_pages, (v1.size() + cap - 1) / cap + (v2.size() + cap - 1) / cap);
  g = h.tree->Get("k");
  ASSERT_TRUE(g.ok() && g->has_value());
  EXPECT_TRUE(**g == v1);
  h.Close(true);
}

// C2: a long value is read without the tree latch while a writer replaces
// it and frees the old chain; every read sees one whole value.
TEST(Chains, ReadersOfALongValueNeverSeeItFreed) {
  test::ScratchDir dir;
  Harness h(dir.path(), 64);
  ASSERT_TRUE(h.Open(true).ok());
  std::vector<std::string> values;
  for (char c = 'a'; c < 'e'; ++c) values.push_back(std::string(300000 + (c - 'a') * 4099, c));
  ASSERT_TRUE(h.tree->Put("k", values[0]).ok());
  std::atomic<bool> done{false};
  std::atomic<int> reads{0};
  auto reader = [&](bool cursor) {
    while (!done.load()) {
      std::string v;
      if (cursor) {
        BTree::Cursor c(h.tree.get());
        ASSERT_TRUE(c.Seek(SeekMode::kGE, "k").ok());
        ASSERT_TRUE(c.Valid());
        v = c.value();
      } else {
        auto g = h.tree->Get("k");
        ASSERT_TRUE(g.ok()) << g.status().ToString();
        ASSERT_TRUE(g->has_value());
        v = **g;
      }
      const bool whole = std::find(values.begin(), values.end(), v) != values.end();
      ASSERT_TRUE(whole) << "a read of " << v.size() << " bytes matches no value written";
      ++reads;
    }
  };
  std::thread r1(reader, false), r2(reader, true);
  for (int i = 1; i < 60; ++i) {
    ASSERT_TRUE(h.tree->Put("k", values[i % values.size()]).ok());
    ASSERT_TRUE(h.tree->CollectGarbage().ok());
  }
  done = true;
  r1.join();
  r2.join();
  EXPECT_GT(reads.load(), 10);
  const PageCensus c = TakeCensus(h.pool.get(), h.space.get(), h.tree->root());
  EXPECT_GT(c.free_pages, 0u);
  h.Close(true);
}

// One change of the tree, in the order it was made; `end`: the log's
// reserved end right after it (its content changes in its last record).
struct Change {
  log::Lsn end;
  std::string key;
  std::optional<std::string> value;  // nullopt: deleted
  uint64_t acked_at = UINT64_MAX;
};

TEST(ChainsCrash, PowerCutsLeaveEveryPageAccountedFor) {
  const uint64_t seed = test::TestSeed();
  auto clock = std::make_shared<CrashClock>();
  pmem::TrackingPersistence pm(clock);
  TrackingFileSystem fs(clock);
  test::ScratchDir dir;
  std::unique_ptr<buffer::BufferPool> pool;
  log::LogOptions lo = test::SmallLog(dir.Sub("log"), log::LogWriteMode::kNf, 1);
  lo.file_size = 4096 + 256 * 1024;
  lo.persistence = &pm;
  lo.on_log_full = [&] {
    if (pool) pool->OnLogFull();
  };
  auto log = log::RedoLog::Open(lo);
  ASSERT_TRUE(log.ok());
  auto dwb = buffer::DoubleWrite::OpenPm(dir.Sub("dwb"), kPs, 8, &pm);
  ASSERT_TRUE(dwb.ok());
  auto space = page::SpaceFile::Create(&fs, "t.sbt", 1, kPs, "t");
  ASSERT_TRUE(space.ok());
  buffer::BufferPoolOptions po;
  po.capacity_bytes = 48 * kPs;
  po.page_size = kPs;
  po.flush_batch = 8;
  po.cleaner_interval_ms = 2;
  auto p = buffer::BufferPool::Create(po, log->get(), dwb->get());
  ASSERT_TRUE(p.ok());
  pool = std::move(*p);
  ASSERT_TRUE(pool->AddSpace(space->get()).ok());
  auto tree = BTree::Create(pool.get(), 1);
  ASSERT_TRUE(tree.ok());
  ASSERT_TRUE((*log)->WaitDurable((*log)->reserved_lsn()).ok());

  const uint64_t start_time = clock->Now();
  std::vector<Change> changes;
  std::atomic<bool> done{false};
  std::thread reader([&] {  // scans read chains while they are written and freed
    while (!done.load()) {
      BTree::Cursor c(tree->get());
      ASSERT_TRUE(c.Seek(SeekMode::kFirst).ok());
      while (c.Valid()) ASSERT_TRUE(c.Next().ok());
    }
  });
  std::mt19937_64 rng(seed);
  std::map<std::string, std::string> now;  // the tree's content
  struct Retired {
    std::string ref, key, value;
  };
  std::vector<Retired> retired;
  auto note = [&](const std::string& key, std::optional<std::string> value) {
    if (value) {
      now[key] = *value;
    } else {
      now.erase(key);
    }
    Change c{(*log)->reserved_lsn(), key, std::move(value)};
    if (rng() % 4 == 0) {
      ASSERT_TRUE((*log)->WaitDurable(c.end).ok());
      c.acked_at = clock->Now();
    }
    changes.push_back(std::move(c));
  };
  auto retire = [&](const BTree::ChainMoves& m, const std::string& key, const std::string& old) {
    for (const std::string& r : m.retired) retired.push_back({r, key, old});
  };
  int restores = 0, releases = 0, chunked = 0;
  for (int i = 0; i < 300; ++i) {
    const std::string key = KeyEncoder().Unsigned(rng() % 12, 4).Release();
    const auto cur = now.find(key);
    const std::string old = cur == now.end() ? std::string() : cur->second;
    const uint64_t pick = rng() % 100;
    BTree::ChainMoves m;
    BTree::ChainMoves* moves = rng() % 2 ? &m : nullptr;
    if (pick < 45) {
      const size_t n = pick < 10   ? rng() % 100
                       : pick < 25 ? 2000 + rng() % 8000
                                   : 30000 + rng() % 200000;
      const std::string v = Bytes(n, rng);
      chunked += n > (*tree)->chunk_bytes();
      ASSERT_TRUE((*tree)->Put(key, v, moves).ok());
      retire(m, key, old);
      note(key, v);
    } else if (pick < 60) {
      auto d = (*tree)->Delete(key, moves);
      ASSERT_TRUE(d.ok());
      if (!*d) continue;
      retire(m, key, old);
      note(key, std::nullopt);
    } else if (pick < 75 && !retired.empty()) {
      const size_t k = rng() % retired.size();
      const Retired r = retired[k];
      retired.erase(retired.begin() + static_cast<ptrdiff_t>(k));
      const auto was = now.find(r.key);
      const std::string replaced = was == now.end() ? std::string() : was->second;
      ASSERT_TRUE((*tree)->Restore(r.key, r.ref, &m).ok());
      ++restores;
      ASSERT_EQ(m.restored, std::vector<std::string>{r.ref});
      retire(m, r.key, replaced);
      note(r.key, r.value);
    } else if (pick < 90 && !retired.empty()) {
      const size_t k = rng() % retired.size();
      ASSERT_TRUE((*tree)->Release(retired[k].ref).ok());
      ++releases;
      retired.erase(retired.begin() + static_cast<ptrdiff_t>(k));
    } else {
      ASSERT_TRUE((*tree)->CollectGarbage().ok());
    }
  }
  done = true;
  reader.join();
  EXPECT_GT(chunked, 20);
  EXPECT_GT(restores, 5);
  EXPECT_GT(releases, 5);
  EXPECT_GT(pool->stats().pages_written, 100u);
  const uint64_t end_time = clock->Now();
  tree->reset();
  pool.reset();
  dwb->reset();
  space->reset();
  log->reset();

  const std::vector<uint64_t> times =
      test::CutTimes(start_time, end_time, fs.TimesAfterWrites(), 12, rng);
  for (uint64_t at : times) {
    SCOPED_TRACE(::testing::Message() << "power cut at clock " << at << " (seed " << seed << ")");
    const std::string c = dir.Sub("crash");
    test::WriteCrashImage(c, pm.ImageAtTime(at, &rng), fs.ImageAtTime(at, rng(), true));
    log::LogOptions ro = test::SmallLog(c + "/log", log::LogWriteMode::kNf, 1);
    ro.file_size = lo.file_size;
    auto rlog = log::RedoLog::Open(ro);
    ASSERT_TRUE(rlog.ok()) << rlog.status().ToString();
    auto rdwb = buffer::DoubleWrite::OpenPm(c + "/dwb", kPs, 8);
    ASSERT_TRUE(rdwb.ok());
    auto rspace = page::SpaceFile::Open(PosixFileSystem(), c + "/t.sbt");
    ASSERT_TRUE(rspace.ok()) << rspace.status().ToString();
    po.capacity_bytes = 64 * kPs;  // small chunks: TSan's lock graph grows with latches held
    auto rpool = buffer::BufferPool::Create(po, rlog->get(), rdwb->get());
    ASSERT_TRUE(rpool.ok());
    ASSERT_TRUE((*rpool)->AddSpace(rspace->get()).ok());
    auto rec = buffer::RecoverPages(rpool->get(), rdwb->get());
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    auto rtree = BTree::Open(rpool->get(), 1);
    ASSERT_TRUE(rtree.ok()) << rtree.status().ToString();
    ASSERT_TRUE((*rtree)->RecoverChains().ok());
    ASSERT_TRUE((*rtree)->CollectGarbage().ok());

    const log::Lsn end = (*rlog)->recovered().end_lsn;
    std::map<std::string, std::string> model;
    for (const Change& ch : changes) {
      if (ch.acked_at <= at) {
        ASSERT_LE(ch.end, end) << "acknowledged change lost";
      }
      if (ch.end > end) break;
      if (ch.value) {
        model[ch.key] = *ch.value;
      } else {
        model.erase(ch.key);
      }
    }
    BTree::Cursor cur(rtree->get());
    ASSERT_TRUE(cur.Seek(SeekMode::kFirst).ok());
    for (auto& [k, v] : model) {
      ASSERT_TRUE(cur.Valid()) << "recovered tree is missing keys";
      ASSERT_EQ(cur.key(), k);
      ASSERT_TRUE(cur.value() == v) << "value of " << k.size() << "-byte key differs";
      ASSERT_TRUE(cur.Next().ok());
    }
    ASSERT_FALSE(cur.Valid()) << "recovered tree has extra keys";
    TakeCensus(rpool->get(), rspace->get(), (*rtree)->root());
    rtree->reset();
  }
}

}  // namespace
}  // namespace subito::btree
