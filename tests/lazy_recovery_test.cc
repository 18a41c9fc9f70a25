// Lazy redo (buffer/pending_redo.h): after a crash, Open returns once it
// knows where each page's redo is; pages get their records when first read,
// or from the background drain, or at Close. These tests cut power while
// readers and writers run over pages still pending, and check what a
// restart keeps; and they check the bookkeeping around the pending pages
// (drops, the drain, the counters, a clean close).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "buffer/pool_warmer.h"
#include "crash_images.h"
#include "engine_workload.h"
#include "page/space_file.h"
#include "pmem/tracking_persistence.h"
#include "test_util.h"
#include "util/coding.h"
#include "util/file_io.h"

namespace subito {
namespace {

// Commit times of a workload's threads: per thread and committed
// transaction k (1-based), when its commit started and when it returned.
struct Times {
  std::vector<std::vector<uint64_t>> started, acked;
  void Bounds(uint64_t at, std::vector<size_t>* min_k, std::vector<size_t>* max_k) const {
    min_k->assign(started.size(), 0);
    max_k->assign(started.size(), 0);
    for (size_t w = 0; w < started.size(); ++w) {
      for (uint64_t a : acked[w]) (*min_k)[w] += a <= at;
      for (uint64_t s : started[w]) (*max_k)[w] += s < at;
    }
  }
};

// Runs `transactions` transactions of each workload in `work`, one thread
// each, on table "t"; `also` runs beside them until they are done.
void RunWorkload(Database* db, std::vector<test::ThreadWorkload>& work, int transactions,
                 CrashClock* clock, Times* times, const std::function<void()>& also = nullptr) {
  Table* t = db->FindTable("t");
  ASSERT_NE(t, nullptr);
  times->started.assign(work.size(), {});
  times->acked.assign(work.size(), {});
  std::atomic<size_t> running{work.size()};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < work.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < transactions; ++i) {
        bool committed = false;
        ASSERT_OK(work[w].Next(db, t, &committed,
                               [&](uint32_t) { times->started[w].push_back(clock->Now()); }));
        if (committed) times->acked[w].push_back(clock->Now());
      }
      --running;
    });
  }
  if (also) {
    while (running.load() > 0) also();
  }
  for (auto& th : threads) th.join();
}

std::vector<const test::ThreadWorkload*> Plans(const std::vector<test::ThreadWorkload>& a,
                                               const std::vector<test::ThreadWorkload>& b = {}) {
  std::vector<const test::ThreadWorkload*> plans;
  for (const auto& w : a) plans.push_back(&w);
  for (const auto& w : b) plans.push_back(&w);
  return plans;
}

// Under a snapshot, the rows of each thread in `work` equal its model after
// found[w] committed transactions (others may write meanwhile).
void ExpectRows(Database* db, const std::vector<test::ThreadWorkload>& work,
                const std::vector<size_t>& found) {
  auto txn = db->Begin();
  const std::vector<Row> rows = test::ScanAll(txn.get(), db->FindTable("t"));
  ASSERT_OK(txn->Commit());
  for (size_t w = 0; w < work.size(); ++w) {
    std::map<int64_t, Row> got;
    for (const Row& r : rows) {
      const int64_t id = std::get<int64_t>(r[0]);
      if (id / 1000 == work[w].thread()) got[id] = r;
    }
    ASSERT_TRUE(got == work[w].states()[found[w]]) << "thread " << w << " while pages are redone";
  }
}

// Both databases' table "t" holds the same rows, to a snapshot read.
void ExpectSameRows(Database* x, Database* y) {
  auto a = x->Begin();
  auto b = y->Begin();
  EXPECT_EQ(test::ScanAll(a.get(), x->FindTable("t")), test::ScanAll(b.get(), y->FindTable("t")));
  ASSERT_OK(a->Commit());
  ASSERT_OK(b->Commit());
}

class LazyRecovery : public ::testing::Test, public TrackedRun {
 protected:
  // Runs the first workload (threads 0-2) on a tracked database and closes
  // it cleanly; the cuts then all lie before the close.
  void FirstRun(int transactions) {
    auto opened = Database::Open(TrackedOptions(dir.Sub("pm"), &fs, &pm));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<Database> db = std::move(*opened);
    ASSERT_TRUE(db->CreateTable(test::SampleTable()).ok());
    for (int w = 0; w < kThreads; ++w) first.emplace_back(w, seed, false, false);
    start = clock->Now();
    RunWorkload(db.get(), first, transactions, clock.get(), &first_times);
    end = clock->Now();
    db.reset();
  }
  // The image of a cut of the first run that leaves pages pending after
  // Open (the end, else random instants: a cut right after a checkpoint may
  // need no redo), under dir/<name>; *at: the cut's instant. With
  // `read_by_scans`, some of those pages must be ones a scan of an index
  // reads (the open may have redone every tree page the cut left pending,
  // leaving only pages no scan reads).
  std::string PendingImage(const std::string& name, uint64_t* at, bool read_by_scans = false) {
    for (int attempt = 0; attempt < 20; ++attempt) {
      *at = attempt == 0 ? end : start + rng() % std::max<uint64_t>(1, end - start);
      const std::string c = CutImage(*at, name);
      const std::string probe = dir.Sub("probe");
      std::filesystem::remove_all(probe);
      std::filesystem::copy(c, probe, std::filesystem::copy_options::recursive);
      Options o = PlainOptions(probe);
      o.background_redo = false;
      o.background_undo = false;  // no reader but the scans below
      auto db = Database::Open(o);
      if (!db.ok()) continue;
      const uint64_t pending = (*db)->Stats().recovery_pages_pending;
      if (pending == 0) continue;
      if (!read_by_scans) return c;
      for (uint32_t index = 0; index < test::SampleTable().indexes.size() + 1; ++index) {
        auto txn = (*db)->Begin();
        test::ScanAll(txn.get(), (*db)->FindTable("t"), index);
        EXPECT_OK(txn->Commit());
      }
      if ((*db)->Stats().recovery_pages_pending < pending) return c;
    }
    ADD_FAILURE() << "no cut left pages pending: the test lost its reach";
    return CutImage(end, name);
  }
  std::vector<test::ThreadWorkload> first;
  Times first_times;
  uint64_t start = 0, end = 0;
};

// A cut of the first run is recovered lazily (no background drain, so pages
// stay pending) under tracking while new writers (threads 3-4) and a reader
// go through the table; that second run is cut at random instants, and each
// image must hold the first run's recovered state plus the second run's
// acknowledged transactions (and none it had not started). The first
// run's recovered state is learnt from an eager recovery of the same image,
// so that nothing reads the lazy one's pages before the workload does.
// With the parameter, small changes go to per-page logs in a region small
// enough that its cleaner loads pages too.
class LazyRecoveryPpl : public LazyRecovery, public ::testing::WithParamInterface<bool> {
 protected:
  void SetUp() override { g_ppl = GetParam(); }
  void TearDown() override { g_ppl = false; }
};
class LazyRecoveryCuts : public LazyRecoveryPpl {};

TEST_P(LazyRecoveryCuts, PowerCutsWhileReadersAndWritersRedoPagesKeepEverything) {
  FirstRun(120);
  uint64_t pending_at_start = 0, redone_by_reads = 0;
  int cut_no = 0;
  for (uint64_t at : test::CutTimes(start, end, fs.TimesAfterWrites(), 4, rng)) {
    SCOPED_TRACE(::testing::Message() << "first cut at " << at << " (seed " << seed << ")");
    std::vector<size_t> min_k, max_k;
    first_times.Bounds(at, &min_k, &max_k);
    const auto pm_image = pm.ImageAtTime(at, &rng);
    const auto file_image = fs.ImageAtTime(at, rng(), true);
    std::vector<size_t> found(kThreads);
    {
      const std::string e = dir.Sub("eager");
      WriteImage(e, dir.Sub("pm"), pm_image, file_image);
      Options eo = PlainOptions(e);
      eo.lazy_recovery = false;
      auto edb = Database::Open(eo);
      ASSERT_TRUE(edb.ok()) << edb.status().ToString();
      test::CheckRecovered(edb->get(), Plans(first), min_k, max_k, &found);
    }
    auto clock2 = std::make_shared<CrashClock>();
    pmem::TrackingPersistence pm2(clock2);
    TrackingFileSystem fs2(clock2);
    const std::string c = dir.Sub("crash");
    WriteImage(c, dir.Sub("pm"), pm_image, {});
    fs2.Load(file_image);
    std::vector<test::ThreadWorkload> second;
    for (int w = kThreads; w < kThreads + 2; ++w) second.emplace_back(w, seed + at, false, false);
    Times second_times;
    const uint64_t t0 = clock2->Now();
    {
      Options o = TrackedOptions(c + "/pm", &fs2, &pm2);
      o.background_redo = false;
      auto rdb = Database::Open(o);
      ASSERT_TRUE(rdb.ok()) << rdb.status().ToString();
      Database* db = rdb->get();
      ASSERT_TRUE(db->recovery().lazy_redo);
      // The purge may have read some since.
      EXPECT_LE(db->Stats().recovery_pages_pending, db->recovery().pages_pending);
      pending_at_start += db->Stats().recovery_pages_pending;
      const uint64_t redone_before = db->Stats().recovery_pages_redone;
      RunWorkload(db, second, 30, clock2.get(), &second_times,
                  [&] { ExpectRows(db, first, found); });
      redone_by_reads += db->Stats().recovery_pages_redone - redone_before;
      // Close drains what is left before it marks the shutdown clean.
    }
    const uint64_t t1 = clock2->Now();
    for (int i = 0; i < 4; ++i) {
      const uint64_t at2 = t0 + rng() % std::max<uint64_t>(1, t1 - t0);
      SCOPED_TRACE(::testing::Message() << "second cut at " << at2 << " of " << t0 << ".." << t1);
      std::vector<size_t> min2, max2;
      second_times.Bounds(at2, &min2, &max2);
      min2.insert(min2.begin(), found.begin(), found.end());
      max2.insert(max2.begin(), found.begin(), found.end());
      WriteImage(c + "2", c + "/pm", pm2.ImageAtTime(at2, &rng), fs2.ImageAtTime(at2, rng(), true));
      FailedImageKeeper keeper(c + "2", seed, ++cut_no);
      auto again = Database::Open(PlainOptions(c + "2"));
      ASSERT_TRUE(again.ok()) << again.status().ToString();
      test::CheckRecovered(again->get(), Plans(first, second), min2, max2);
    }
  }
  std::printf("pages pending when the writers started: %llu, redone after: %llu\n",
              static_cast<unsigned long long>(pending_at_start),
              static_cast<unsigned long long>(redone_by_reads));
  EXPECT_GT(pending_at_start, 0u) << "no page was left pending: the test lost its reach";
  EXPECT_GT(redone_by_reads, 0u) << "no page was redone under the workload: it lost its reach";
}

INSTANTIATE_TEST_SUITE_P(Ppl, LazyRecoveryCuts, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PerPageLogs" : "Plain"; });

// The same image recovered eagerly and lazily holds the same rows; lazily,
// the pages wait for their first read, and a clean close leaves none.
TEST_F(LazyRecovery, PagesWaitForTheirFirstReadAndMatchAnEagerRedo) {
  FirstRun(150);
  uint64_t at = 0;
  const std::string lazy = PendingImage("lazy", &at, /*read_by_scans=*/true);
  std::vector<size_t> min_k, max_k;
  first_times.Bounds(at, &min_k, &max_k);
  const std::string eager = dir.Sub("eager");
  std::filesystem::copy(lazy, eager, std::filesystem::copy_options::recursive);

  Options eo = PlainOptions(eager);
  eo.lazy_recovery = false;
  auto edb = Database::Open(eo);
  ASSERT_TRUE(edb.ok()) << edb.status().ToString();
  EXPECT_FALSE((*edb)->recovery().lazy_redo);
  EXPECT_EQ((*edb)->recovery().pages_pending, 0u);
  EXPECT_EQ((*edb)->Stats().recovery_pages_pending, 0u);

  Options lo = PlainOptions(lazy);
  lo.background_redo = false;
  auto ldb = Database::Open(lo);
  ASSERT_TRUE(ldb.ok()) << ldb.status().ToString();
  const uint64_t pending = (*ldb)->recovery().pages_pending;
  ASSERT_GT(pending, 0u) << "the image needs no redo: the test lost its reach";
  EXPECT_EQ((*ldb)->recovery().records_redone, (*edb)->recovery().records_redone);
  // Without the drain only reads redo pages (queries', the purge's).
  EXPECT_LE((*ldb)->Stats().recovery_pages_pending, pending);

  test::CheckRecovered(ldb->get(), Plans(first), min_k, max_k);
  test::CheckRecovered(edb->get(), Plans(first), min_k, max_k);
  ExpectSameRows(ldb->get(), edb->get());
  // The pages left pending may all be of the secondary indexes (the scans
  // above read the primary one): read every index, each in both engines.
  for (uint32_t index = 1; index < test::SampleTable().indexes.size() + 1; ++index) {
    auto a = (*ldb)->Begin();
    auto b = (*edb)->Begin();
    EXPECT_EQ(test::ScanAll(a.get(), (*ldb)->FindTable("t"), index),
              test::ScanAll(b.get(), (*edb)->FindTable("t"), index))
        << "index " << index;
    ASSERT_OK(a->Commit());
    ASSERT_OK(b->Commit());
  }
  EXPECT_LT((*ldb)->Stats().recovery_pages_pending, pending);
  EXPECT_GT((*ldb)->Stats().recovery_pages_redone, 0u);

  ASSERT_OK((*ldb)->Close());
  ldb->reset();
  auto reopened = Database::Open(PlainOptions(lazy));
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  EXPECT_EQ((*reopened)->recovery().pages_pending, 0u);
  test::CheckRecovered(reopened->get(), Plans(first), min_k, max_k);
}

// NV-PPL over lazy redo: a page redone when read keeps its records' edits
// for its per-page log, so the cleaners' next write of it is an entry in
// the region, not a page write (docs/formats/ppl.md, "Lazy redo").
class LazyRecoveryWithPpl : public LazyRecovery {
 protected:
  void SetUp() override { g_ppl = true; }
  void TearDown() override { g_ppl = false; }
};

TEST_F(LazyRecoveryWithPpl, APageRedoneOnReadGoesToItsPerPageLog) {
  const Options tracked = TrackedOptions(dir.Sub("pm"), &fs, &pm);
  {
    auto db = Database::Open(tracked);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto t = (*db)->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    auto txn = (*db)->Begin();
    for (int64_t id = 0; id < 40; ++id) {
      ASSERT_OK(txn->Insert(*t, test::SampleRow(id, 1, std::nullopt, "v")));
    }
    ASSERT_OK(txn->Commit());
    ASSERT_OK((*db)->Close());  // every page written: only the change below is redone
  }
  {
    auto db = Database::Open(tracked);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Table* t = (*db)->FindTable("t");
    auto txn = (*db)->Begin();
    ASSERT_OK(txn->Update(t, test::SampleRow(7, 1, std::nullopt, "v"),
                          test::SampleRow(7, 1, std::nullopt, "w")));
    ASSERT_OK(txn->Commit());
    // Power lost here; the recovery runs tracked, to be cut in its turn.
    const uint64_t at = clock->Now();
    const std::string c = dir.Sub("cut");
    WriteImage(c, dir.Sub("pm"), pm.ImageAtTime(at, &rng), {});
    auto clock2 = std::make_shared<CrashClock>();
    pmem::TrackingPersistence pm2(clock2);
    TrackingFileSystem fs2(clock2);
    fs2.Load(fs.ImageAtTime(at, rng(), true));
    Options o = TrackedOptions(c + "/pm", &fs2, &pm2);
    o.background_redo = false;
    auto rdb = Database::Open(o);
    ASSERT_TRUE(rdb.ok()) << rdb.status().ToString();
    ASSERT_GT((*rdb)->recovery().pages_pending, 0u);
    Table* rt = (*rdb)->FindTable("t");
    auto read = (*rdb)->Begin();
    auto row = read->Get(rt, {int64_t{7}});
    ASSERT_TRUE(row.ok() && row->has_value());
    EXPECT_EQ(std::get<std::string>((**row)[3]), "w");
    ASSERT_OK(read->Commit());
    ASSERT_GT((*rdb)->Stats().recovery_pages_redone, 0u);
    // Another table's rows make the redo that moves the cleaners on.
    auto other = (*rdb)->CreateTable(test::SampleTable("other"));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    auto of_t = [&](uint64_t IndexStats::*field) {
      uint64_t n = 0;
      for (const IndexStats& ix : rt->Stats().indexes) n += ix.*field;
      return n;
    };
    for (int64_t id = 0; id < 4000 && of_t(&IndexStats::ppl_appends) == 0; ++id) {
      auto w = (*rdb)->Begin();
      ASSERT_OK(w->Insert(*other, test::SampleRow(id, 1, std::nullopt, std::string(64, 'x'))));
      ASSERT_OK(w->Commit());
    }
    EXPECT_GT(of_t(&IndexStats::ppl_appends), 0u) << "the redone leaf was not logged";
    EXPECT_EQ(of_t(&IndexStats::file_pages_written), 0u) << "the redone leaf was written";
    // A second power cut: the leaf's change is read back from its entry.
    // One instant for both tiers: the cleaners still run, and a page write
    // between two readings of the clock would be in the PM tier's image (a
    // checkpoint past it) but not in the files'.
    const uint64_t at2 = clock2->Now();
    const std::string c2 = dir.Sub("cut2");
    WriteImage(c2, c + "/pm", pm2.ImageAtTime(at2, &rng), fs2.ImageAtTime(at2, rng(), true));
    rdb->reset();
    FailedImageKeeper keep(c2, seed, 2);
    auto again = Database::Open(PlainOptions(c2));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    auto check = (*again)->Begin();
    auto after = check->Get((*again)->FindTable("t"), {int64_t{7}});
    ASSERT_TRUE(after.ok() && after->has_value());
    EXPECT_EQ(std::get<std::string>((**after)[3]), "w");
    ASSERT_OK(check->Commit());
  }
}

// The background thread redoes every pending page by itself and says when.
TEST_F(LazyRecovery, TheBackgroundDrainFinishesAlone) {
  FirstRun(150);
  uint64_t at = 0;
  const std::string c = PendingImage("crash", &at);
  auto db = Database::Open(PlainOptions(c));
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_GT((*db)->recovery().pages_pending, 0u);
  for (int i = 0; i < 5000 && (*db)->Stats().recovery_background_seconds == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const DatabaseStats s = (*db)->Stats();
  EXPECT_GT(s.recovery_background_seconds, 0.0);
  EXPECT_EQ(s.recovery_pages_pending, 0u);
  // Those Open read (undo, the trees' headers) count too.
  EXPECT_GE(s.recovery_pages_redone, (*db)->recovery().pages_pending);
  std::vector<size_t> min_k, max_k;
  first_times.Bounds(at, &min_k, &max_k);
  test::CheckRecovered(db->get(), Plans(first), min_k, max_k);
}

// The warm-up's load (buffer/pool_warmer.h) reads pages that wait for
// redo: each gets its records as any read gives them, so a list naming
// every page leaves none pending, and the rows are an eager redo's.
// With the parameter, small changes go to per-page logs too: the pages
// loaded must get their entries as well (a load that skipped them would
// serve pages older than their redo).
class WarmUpOverPendingRedo : public LazyRecoveryPpl {};

TEST_P(WarmUpOverPendingRedo, TheLoadRedoesThePendingPagesItLoads) {
  FirstRun(150);
  uint64_t at = 0;
  const std::string lazy = PendingImage("warm", &at);
  const std::string eager = dir.Sub("eager");
  std::filesystem::copy(lazy, eager, std::filesystem::copy_options::recursive);
  // Every page of every page file, and pages past their ends (redo may
  // create them; the load skips those still past the end).
  std::vector<buffer::PageId> pages;
  for (const auto& e : std::filesystem::directory_iterator(lazy + "/db")) {
    if (e.path().extension() != ".sbt") continue;
    auto space = page::SpaceFile::Open(PosixFileSystem(), e.path().string());
    ASSERT_TRUE(space.ok()) << space.status().ToString();
    for (uint32_t p = 0; p < (*space)->page_count() + 64; ++p) {
      pages.push_back({(*space)->space_id(), p});
    }
  }
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), lazy + "/db/pool_pages", 4096, pages));

  Options lo = PlainOptions(lazy);
  lo.background_redo = false;
  lo.buffer_pool_bytes = 16 << 20;  // room for every page
  auto ldb = Database::Open(lo);
  ASSERT_TRUE(ldb.ok()) << ldb.status().ToString();
  const uint64_t pending = (*ldb)->recovery().pages_pending;
  ASSERT_GT(pending, 0u) << "the image needs no redo: the test lost its reach";
  for (int i = 0; i < 10000 && (*ldb)->Stats().pool_load_seconds == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const DatabaseStats s = (*ldb)->Stats();
  ASSERT_GT(s.pool_load_seconds, 0.0);
  EXPECT_GT(s.pool_load_pages, 0u);
  EXPECT_EQ(s.recovery_pages_pending, 0u) << "of " << pending;
  EXPECT_GT(s.recovery_background_seconds, 0.0);  // the hold is let go

  Options eo = PlainOptions(eager);
  eo.lazy_recovery = false;
  eo.pool_load_at_open = false;
  auto edb = Database::Open(eo);
  ASSERT_TRUE(edb.ok()) << edb.status().ToString();
  std::vector<size_t> min_k, max_k;
  first_times.Bounds(at, &min_k, &max_k);
  test::CheckRecovered(ldb->get(), Plans(first), min_k, max_k);
  ExpectSameRows(ldb->get(), edb->get());
}

INSTANTIATE_TEST_SUITE_P(Ppl, WarmUpOverPendingRedo, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PerPageLogs" : "Plain"; });

// Power cuts while the background undo rolls back a large loser, with
// writers and a reader running: every cut's restart keeps the writers'
// acknowledged transactions and rolls the loser back again, and no reader,
// before or after a cut, ever sees one of the loser's changes.
TEST_F(LazyRecovery, PowerCutsDuringTheBackgroundUndoKeepEverythingAndShowNoLoser) {
  constexpr int64_t kBase = 900000;  // ids the workload threads never use
  std::map<int64_t, Row> base;
  uint64_t at = 0;
  {
    auto opened = Database::Open(TrackedOptions(dir.Sub("pm"), &fs, &pm));
    ASSERT_TRUE(opened.ok()) << opened.status().ToString();
    std::unique_ptr<Database> db = std::move(*opened);
    auto t = db->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    auto setup = db->Begin();
    for (int64_t i = 0; i < 600; ++i) {
      const Row r = test::SampleRow(kBase + i, i % 5, std::nullopt, "base" + std::to_string(i));
      ASSERT_OK(setup->Insert(*t, r));
      base[kBase + i] = r;
    }
    ASSERT_OK(setup->Commit());
    auto loser = db->Begin();
    for (const auto& [id, r] : base) {
      ASSERT_OK(loser->Update(
          *t, r,
          test::SampleRow(id, 7, "L" + std::to_string(id), "loser" + std::string(100, 'l'))));
    }
    for (int64_t i = 0; i < 600; ++i) {
      ASSERT_OK(loser->Insert(*t, test::SampleRow(kBase + 10000 + i, 3, std::nullopt, "loser")));
    }
    // A later commit makes the loser's records durable.
    auto other = db->Begin();
    const Row r = test::SampleRow(kBase + 50000, 1, std::nullopt, "other");
    ASSERT_OK(other->Insert(*t, r));
    ASSERT_OK(other->Commit());
    base[kBase + 50000] = r;
    at = clock->Now();
  }
  // The rows at and above kBase are `base`, exactly, to a snapshot read.
  auto expect_no_loser = [&](Database* db) {
    auto txn = db->Begin();
    std::map<int64_t, Row> got;
    for (const Row& r : test::ScanAll(txn.get(), db->FindTable("t"))) {
      if (std::get<int64_t>(r[0]) >= kBase) got[std::get<int64_t>(r[0])] = r;
    }
    ASSERT_OK(txn->Commit());
    ASSERT_TRUE(got == base) << got.size() << " rows at and above " << kBase << ", " << base.size()
                             << " expected: a loser's change is visible";
  };

  auto clock2 = std::make_shared<CrashClock>();
  pmem::TrackingPersistence pm2(clock2);
  TrackingFileSystem fs2(clock2);
  const std::string c = dir.Sub("crash");
  WriteImage(c, dir.Sub("pm"), pm.ImageAtTime(at, &rng), {});
  fs2.Load(fs.ImageAtTime(at, rng(), true));
  std::vector<test::ThreadWorkload> second;
  for (int w = kThreads; w < kThreads + 2; ++w) second.emplace_back(w, seed + 17, false, false);
  Times second_times;
  std::atomic<bool> started{false};
  const uint64_t t0 = clock2->Now();
  std::atomic<uint64_t> undo_begun{0};
  uint64_t undo_done = 0;
  {
    Options o = TrackedOptions(c + "/pm", &fs2, &pm2);
    // The rollback waits for the writers, so that they overlap.
    o.before_background_undo = [&] {
      for (int i = 0; i < 5000 && !started.load(); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      undo_begun.store(clock2->Now());
    };
    auto rdb = Database::Open(o);
    ASSERT_TRUE(rdb.ok()) << rdb.status().ToString();
    Database* db = rdb->get();
    ASSERT_EQ(db->recovery().losers_in_background, 1u) << "the loser is not left to the background";
    expect_no_loser(db);
    RunWorkload(db, second, 30, clock2.get(), &second_times, [&] {
      started.store(true);
      expect_no_loser(db);
      if (undo_done == 0 && db->Stats().recovery_losers_pending == 0) undo_done = clock2->Now();
    });
    ASSERT_TRUE(test::AwaitBackgroundUndo(db));
    if (undo_done == 0) undo_done = clock2->Now();
    expect_no_loser(db);
  }
  const uint64_t t1 = clock2->Now();
  ASSERT_GT(undo_done, undo_begun.load()) << "the rollback wrote nothing: the test lost its reach";
  int during_undo = 0;
  for (int i = 0; i < 9; ++i) {
    // A third of the cuts fall anywhere, a third while the rollback runs,
    // a third in the open or before the rollback began.
    const uint64_t from = i % 3 == 1 ? undo_begun.load() : t0;
    const uint64_t until = i % 3 == 0 ? t1 : i % 3 == 1 ? undo_done : undo_begun.load();
    const uint64_t at2 = from + rng() % std::max<uint64_t>(1, until - from);
    during_undo += at2 >= undo_begun.load() && at2 < undo_done;
    SCOPED_TRACE(::testing::Message()
                 << "cut at " << at2 << " of " << t0 << ".." << t1 << ", rollback done by "
                 << undo_done << " (seed " << seed << ")");
    std::vector<size_t> min2, max2;
    second_times.Bounds(at2, &min2, &max2);
    WriteImage(c + "2", c + "/pm", pm2.ImageAtTime(at2, &rng), fs2.ImageAtTime(at2, rng(), true));
    FailedImageKeeper keeper(c + "2", seed, i);
    auto again = Database::Open(PlainOptions(c + "2"));
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    expect_no_loser(again->get());
    test::CheckRecovered(again->get(), Plans(second), min2, max2);
    expect_no_loser(again->get());
  }
  EXPECT_GT(during_undo, 0) << "no cut fell during the rollback: the test lost its reach";
}

// A table dropped while its pages wait takes their redo with it: nothing is
// left pending, the drain ends, and a clean close follows.
TEST_F(LazyRecovery, ADroppedTableTakesItsPendingRedo) {
  FirstRun(150);
  uint64_t at = 0;
  const std::string c = PendingImage("crash", &at);
  Options o = PlainOptions(c);
  o.background_redo = false;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_GT((*db)->Stats().recovery_pages_pending, 0u);
  ASSERT_OK((*db)->DropTable("t"));
  EXPECT_EQ((*db)->Stats().recovery_pages_pending, 0u);
  EXPECT_GT((*db)->Stats().recovery_background_seconds, 0.0);
  auto t = (*db)->CreateTable(test::SampleTable());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto txn = (*db)->Begin();
  ASSERT_OK(txn->Insert(*t, test::SampleRow(1, 1, "one", "v")));
  ASSERT_OK(txn->Commit());
  ASSERT_OK((*db)->Close());
  db->reset();
  auto again = Database::Open(PlainOptions(c));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ((*again)->recovery().pages_pending, 0u);
  auto r = (*again)->Begin();
  EXPECT_EQ(test::ScanAll(r.get(), (*again)->FindTable("t")),
            std::vector<Row>{test::SampleRow(1, 1, "one", "v")});
  ASSERT_OK(r->Commit());
}

// A page whose file image is damaged keeps its pending records (and the
// checkpoint its hold), but the background drain redoes every other page
// past it and names it in the error log; a close is refused for it. With
// per-page logs, the refused close still writes every other page that has
// entries and frees them.
class DamagedPendingPage : public LazyRecoveryPpl {
 protected:
  struct Opened {
    std::unique_ptr<Database> db;
    Status open;           // the open's failure, if it failed
    uint64_t pending = 0;  // pages left with redo by the open
    std::string drain;     // the drain's report of pages it could not read
  };
  // Opens a copy of image `c` whose page files have a bit flipped in each
  // page that `damaged(space, page)` names, and waits for the background
  // drain to finish or to report pages it cannot read. (Under dir/damaged.)
  Opened OpenDamaged(const std::string& c, const std::function<bool(uint32_t, uint32_t)>& damaged) {
    const std::string probe = dir.Sub("damaged");
    std::filesystem::remove_all(probe);
    std::filesystem::copy(c, probe, std::filesystem::copy_options::recursive);
    const uint32_t ps = PlainOptions(probe).page_size;
    for (const auto& e : std::filesystem::recursive_directory_iterator(probe + "/db")) {
      if (e.path().extension() != ".sbt") continue;
      const std::string name = e.path().filename().string();
      const uint32_t space = static_cast<uint32_t>(std::stoul(name.substr(name.rfind('-') + 1)));
      std::vector<uint8_t> bytes = test::ReadFile(e.path().string());
      bool changed = false;
      for (uint32_t page = 1; uint64_t{page + 1} * ps <= bytes.size(); ++page) {
        if (!damaged(space, page)) continue;
        bytes[uint64_t{page} * ps + ps / 2] ^= 0x40;
        changed = true;
      }
      if (changed) test::WriteFile(e.path().string(), bytes);
    }
    Options o = PlainOptions(probe);
    // Losers are rolled back before the open returns: a page their undo
    // needs fails the open, as a page the open reads does.
    o.background_undo = false;
    o.error_log = [this](const std::string& m) {
      std::lock_guard lock(reports_mu_);
      reports_.push_back(m);
    };
    {
      std::lock_guard lock(reports_mu_);
      reports_.clear();
    }
    Opened r;
    auto db = Database::Open(o);
    if (!db.ok()) {
      r.open = db.status();
      return r;
    }
    r.db = std::move(*db);
    r.pending = r.db->recovery().pages_pending;
    for (int i = 0; i < 10000 && r.drain.empty(); ++i) {
      {
        std::lock_guard lock(reports_mu_);
        for (const std::string& m : reports_) {
          if (m.find("background redo") != std::string::npos) r.drain = m;
        }
      }
      if (r.drain.empty() && r.db->Stats().recovery_background_seconds > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return r;
  }
  // The (space, page) a drain or open failure names, from its page file's
  // name and the page number after it.
  static std::optional<std::pair<uint32_t, uint32_t>> NamedPage(const std::string& m) {
    std::smatch got;
    if (!std::regex_search(m, got, std::regex(R"(-([0-9]+)\.sbt page ([0-9]+) )"))) {
      return std::nullopt;
    }
    return std::make_pair(static_cast<uint32_t>(std::stoul(got[1])),
                          static_cast<uint32_t>(std::stoul(got[2])));
  }

 private:
  std::mutex reports_mu_;
  std::vector<std::string> reports_;
};

TEST_P(DamagedPendingPage, KeepsItsRedoWhileTheDrainRedoesTheOthers) {
  FirstRun(150);
  uint64_t at = 0;
  // Find a page that the open leaves pending, that lies in its file (pages
  // past a file's end read as zeros) and that is not the last such page in
  // the drain's order (space, page): every page but those the open reads is
  // damaged, and the drain names the first it cannot read.
  std::optional<std::pair<uint32_t, uint32_t>> victim;
  std::string image;
  for (int attempt = 0; attempt < 8 && !victim; ++attempt) {
    image = attempt == 0 ? PendingImage("crash", &at)
                         : CutImage(start + rng() % std::max<uint64_t>(1, end - start), "crash");
    std::set<std::pair<uint32_t, uint32_t>> read_by_open;
    for (int round = 0; round < 200; ++round) {
      Opened all = OpenDamaged(image, [&](uint32_t space, uint32_t page) {
        return !read_by_open.contains({space, page});
      });
      if (!all.open.ok()) {
        const auto named = NamedPage(all.open.ToString());
        ASSERT_TRUE(named) << all.open.ToString();
        read_by_open.insert(*named);
        continue;
      }
      std::smatch count;
      if (std::regex_search(all.drain, count,
                            std::regex(R"(([0-9]+) page\(s\) with pending redo could not)")) &&
          std::stoul(count[1]) >= 2) {
        victim = NamedPage(all.drain);
        ASSERT_TRUE(victim) << all.drain;
      }
      break;
    }
  }
  ASSERT_TRUE(victim) << "no image left two pages pending in their files: the test lost its reach";
  const auto [space, page] = *victim;
  SCOPED_TRACE(::testing::Message() << "space " << space << ", page " << page);
  Opened one = OpenDamaged(image, [&](uint32_t s, uint32_t p) { return s == space && p == page; });
  ASSERT_TRUE(one.open.ok()) << one.open.ToString();
  EXPECT_EQ(NamedPage(one.drain), victim) << one.drain;
  EXPECT_NE(one.drain.find("1 page(s) with pending redo could not be read"), std::string::npos)
      << one.drain;
  // A drain that stopped at the damaged page would leave those after it.
  EXPECT_EQ(one.db->Stats().recovery_pages_pending, 1u);
  EXPECT_EQ(one.db->Stats().recovery_background_seconds, 0.0);
  if (GetParam()) {
    // Another table's rows make the redo that moves the cleaners on: they
    // write the redone pages (into their per-page logs, mostly).
    auto other = one.db->CreateTable(test::SampleTable("other"));
    ASSERT_TRUE(other.ok()) << other.status().ToString();
    for (int64_t id = 0; id < 4000 && one.db->Stats().ppl_blocks_used == 0; ++id) {
      auto w = one.db->Begin();
      ASSERT_OK(w->Insert(*other, test::SampleRow(id, 1, std::nullopt, std::string(64, 'x'))));
      ASSERT_OK(w->Commit());
    }
  }
  const bool logged = one.db->Stats().ppl_blocks_used > 0;
  const Status closed = one.db->Close();
  EXPECT_TRUE(closed.IsCorruption()) << closed.ToString();
  one.db.reset();
  if (!GetParam()) return;
  EXPECT_TRUE(logged) << "no page went to its per-page log: the test lost its reach";
  const std::vector<uint8_t> region = test::ReadFile(dir.Sub("damaged") + "/pm/ppl");
  const uint32_t block_size = DecodeFixed32(region.data() + 12);
  for (size_t b = 4096; b + block_size <= region.size(); b += block_size) {
    if (DecodeFixed32(region.data() + b + 56) == 0) continue;  // free
    EXPECT_EQ(DecodeFixed32(region.data() + b + 8), space) << "block at " << b;
    EXPECT_EQ(DecodeFixed32(region.data() + b + 12), page) << "block at " << b;
  }
}
INSTANTIATE_TEST_SUITE_P(Ppl, DamagedPendingPage, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "PerPageLogs" : "Plain"; });

// DROP TABLE while the background drain reads the table's pages: the drop
// waits for the page being read or makes the drain skip the rest; neither
// fails, and the close is clean.
TEST_F(LazyRecovery, ADropRacesTheBackgroundDrain) {
  FirstRun(150);
  for (int round = 0; round < 4; ++round) {
    const std::string c = CutImage(end, "crash" + std::to_string(round));
    auto db = Database::Open(PlainOptions(c));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    ASSERT_OK((*db)->DropTable("t"));
    for (int i = 0; i < 5000 && (*db)->Stats().recovery_background_seconds == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    EXPECT_EQ((*db)->Stats().recovery_pages_pending, 0u);
    EXPECT_GT((*db)->Stats().recovery_background_seconds, 0.0);
    ASSERT_OK((*db)->Close());
  }
}

}  // namespace
}  // namespace subito

namespace subito {
namespace {

// Updates a few hot rows, far fewer pages than the pool's dirty share, so
// that only the checkpoint age can make the cleaners write; returns the
// largest checkpoint age seen while writing.
uint64_t HotUpdates(Database* db, Table* t, int updates) {
  uint64_t max_age = 0;
  std::vector<Row> rows;
  for (int i = 0; i < updates; ++i) {
    auto txn = db->Begin();
    const int64_t id = i % 50;
    Row row =
        test::SampleRow(id, 0, std::nullopt, std::string(200, static_cast<char>('a' + i % 26)));
    if (i < 50) {
      EXPECT_OK(txn->Insert(t, row));
      rows.push_back(row);
    } else {
      EXPECT_OK(txn->Update(t, rows[id], row));
      rows[id] = std::move(row);
    }
    EXPECT_OK(txn->Commit());
    if (i % 500 == 0) max_age = std::max(max_age, db->Stats().checkpoint_age);
  }
  return max_age;
}

// The checkpoint age stays near Options::max_checkpoint_age_bytes however
// much room the log has, and without the bound it grows with the redo.
TEST(CheckpointAge, TheCleanersKeepTheRedoSinceTheCheckpointNearItsBound) {
  constexpr uint64_t kBound = 1 << 20;
  for (const bool bounded : {true, false}) {
    test::ScratchDir dir;
    Options o = test::SmallOptions(dir.path());
    o.buffer_pool_bytes = 64 << 20;
    o.log_file_size = 4096 + (128 << 20);  // its half (64 MiB) is never reached
    o.max_checkpoint_age_bytes = bounded ? kBound : 0;
    auto db = Database::Open(o);
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    Result<Table*> t = (*db)->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    const uint64_t max_age = HotUpdates(db->get(), *t, 40000);
    if (bounded) {
      // Writers may run ahead of the cleaner between its rounds (100 ms).
      EXPECT_LT(max_age, 8 * kBound);
      bool settled = false;
      for (int i = 0; i < 500 && !settled; ++i) {
        settled = (*db)->Stats().checkpoint_age <= kBound;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(settled) << "checkpoint age " << (*db)->Stats().checkpoint_age;
    } else {
      EXPECT_GT((*db)->Stats().checkpoint_age, 8 * kBound);
    }
  }
}

}  // namespace
}  // namespace subito
