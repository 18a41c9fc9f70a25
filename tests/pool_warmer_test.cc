// Buffer pool warm-up (buffer/pool_warmer.h): the page list's format and
// its refusal of damaged lists, the pool's Preload (free frames only,
// checked like any read), and the engine's list at a clean close, every
// interval, and its load at the next open. The load after a crash, with
// redo pending, is in lazy_recovery_test.cc.
#include "buffer/pool_warmer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "crash_images.h"
#include "engine_util.h"
#include "forwarding_fs.h"
#include "page/page_format.h"
#include "storage_stack.h"
#include "test_util.h"
#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/crc32c.h"

namespace subito {
namespace {

using buffer::PageId;

std::vector<uint8_t> Bytes(const std::string& path) {
  return test::ReadFile(path);
}

// Page-file reads of more than one page (the warm-up's spans; a miss reads
// one page) wait while the gate is closed, so a test can act while the
// load is inside a read.
class GatedFileSystem final : public test::ForwardingFileSystem {
 public:
  explicit GatedFileSystem(FileSystem* base) : ForwardingFileSystem(base) {}
  void Shut() {
    std::lock_guard lock(mu_);
    shut_ = true;
  }
  void Lift() {
    {
      std::lock_guard lock(mu_);
      shut_ = false;
    }
    cv_.notify_all();
  }
  // Lets one read through the shut gate (now or the next to come).
  void LetOneThrough() {
    {
      std::lock_guard lock(mu_);
      ++passes_;
    }
    cv_.notify_all();
  }
  // Waits (up to 10 s) until a read waits at the gate; the file it reads.
  std::string AwaitWaiter() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return waiting_ > 0; });
    return waiting_ > 0 ? waiting_path_ : "";
  }
  // Lifts the gate when the test ends, passed or not, before the database
  // it feeds is closed (a close waits for a read held at the gate).
  struct LiftAtEnd {
    GatedFileSystem* gate;
    ~LiftAtEnd() { gate->Lift(); }
  };

 private:
  class GatedFile final : public test::ForwardingFile {
   public:
    GatedFile(GatedFileSystem* fs, std::unique_ptr<File> base)
        : ForwardingFile(std::move(base)), fs_(fs) {}
    Status Read(uint64_t offset, void* dst, size_t n) override {
      if (n > 4096 && path().ends_with(".sbt")) fs_->Pass(path());
      return ForwardingFile::Read(offset, dst, n);
    }

   private:
    GatedFileSystem* const fs_;
  };
  std::unique_ptr<File> MakeFile(std::unique_ptr<File> base) override {
    return std::make_unique<GatedFile>(this, std::move(base));
  }
  void Pass(const std::string& path) {
    std::unique_lock lock(mu_);
    ++waiting_;
    waiting_path_ = path;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !shut_ || passes_ > 0; });
    if (shut_) --passes_;
    --waiting_;
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool shut_ = false;         // guarded by mu_
  int passes_ = 0;            // guarded by mu_
  int waiting_ = 0;           // guarded by mu_
  std::string waiting_path_;  // guarded by mu_
};

TEST(PageList, RoundTripsSortedWithoutDuplicates) {
  test::ScratchDir dir;
  const std::string path = dir.path() + "/pool_pages";
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), path, 4096,
                                  {{2, 5}, {1, 9}, {2, 1}, {1, 9}, {1, 0}}));
  auto list = buffer::ReadPageList(PosixFileSystem(), path, 4096);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(*list, (std::vector<PageId>{{1, 0}, {1, 9}, {2, 1}, {2, 5}}));
  EXPECT_EQ(Bytes(path).size(), buffer::kPageListHeaderSize + 4 * 8);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  // A new list replaces the old one whole.
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), path, 4096, {{7, 7}}));
  list = buffer::ReadPageList(PosixFileSystem(), path, 4096);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<PageId>{{7, 7}}));
  // An empty pool lists nothing, and that reads back.
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), path, 4096, {}));
  list = buffer::ReadPageList(PosixFileSystem(), path, 4096);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_TRUE(list->empty());
  EXPECT_TRUE(
      buffer::ReadPageList(PosixFileSystem(), dir.path() + "/none", 4096).status().IsNotFound());
}

TEST(PageList, DamagedOrForeignListsAreRefusedWithTheReason) {
  test::ScratchDir dir;
  const std::string path = dir.path() + "/pool_pages";
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), path, 4096, {{1, 1}, {1, 2}, {3, 4}}));
  const std::vector<uint8_t> good = Bytes(path);
  auto refused = [&](std::vector<uint8_t> bytes, uint32_t page_size = 4096) {
    test::WriteFile(path, bytes);
    auto r = buffer::ReadPageList(PosixFileSystem(), path, page_size);
    EXPECT_TRUE(r.status().IsCorruption()) << r.status().ToString();
    return r.status().ToString();
  };
  std::vector<uint8_t> b = good;
  b[buffer::kPageListHeaderSize + 9] ^= 1;
  EXPECT_NE(refused(b).find("entries' checksum mismatch"), std::string::npos);
  b = good;
  b[13] ^= 1;
  EXPECT_NE(refused(b).find("header checksum mismatch"), std::string::npos);
  b = good;
  b.resize(b.size() - 8);
  EXPECT_NE(refused(b).find("bytes for 3 entries"), std::string::npos);
  EXPECT_NE(refused({1, 2, 3}).find("shorter than its header"), std::string::npos);
  b = good;
  b[0] = 'X';
  EXPECT_NE(refused(b).find("not a page list"), std::string::npos);
  EXPECT_NE(refused(good, 16384).find("pages of 4096 bytes, the database's are 16384"),
            std::string::npos);
  b = good;  // a later format, its header checksum right
  EncodeFixed16(b.data() + 4, buffer::kPageListVersion + 1);
  EncodeFixed32(b.data() + 20, crc32c::Value(b.data(), 20));
  EXPECT_NE(refused(b).find("format version 2, this build reads 1"), std::string::npos);
}

constexpr uint32_t kPs = 4096;

TEST(Preload, LoadsAbsentPagesIntoFreeFramesOnlyAndTheyAreHitsAfter) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 40, 16, &st);
  buffer::BufferPool* pool = st->pool.get();
  { auto h = pool->Fetch({1, 3}, buffer::Latch::kShared); }  // resident already
  auto scratch = AlignedBuffer::Allocate(buffer::BufferPool::kMaxPreloadSpan * kPs);
  ASSERT_TRUE(scratch.ok());
  const std::vector<uint32_t> first{1, 2, 3, 5, 9};
  bool full = true;
  uint32_t n = 0;
  ASSERT_OK(pool->Preload(1, first.data(), 5, scratch->get(), &n, &full));
  EXPECT_EQ(n, 4u);  // page 3 was in the pool
  EXPECT_FALSE(full);
  const uint64_t misses = pool->stats().misses;
  for (uint32_t p : first) {
    auto h = pool->Fetch({1, p}, buffer::Latch::kShared);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(DecodeFixed32(h->data() + 64), test::PageMark(p)) << "page " << p;
  }
  EXPECT_EQ(pool->stats().misses, misses);
  EXPECT_EQ(pool->stats().pages_preloaded, 4u);
  const std::vector<PageId> resident = pool->ResidentPages();
  EXPECT_EQ(resident.size(), 5u);

  // 11 frames are free: a span of 20 absent pages loads 11 and stops there,
  // evicting none of the 5 loaded pages.
  std::vector<uint32_t> more;
  for (uint32_t p = 10; p < 30; ++p) more.push_back(p);
  ASSERT_OK(
      pool->Preload(1, more.data(), static_cast<uint32_t>(more.size()), scratch->get(), &n, &full));
  EXPECT_EQ(n, 11u);
  EXPECT_TRUE(full);
  EXPECT_EQ(pool->stats().evictions, 0u);
  EXPECT_EQ(pool->ResidentPages().size(), 16u);
  // Pages past the end are not loaded; an unknown space loads nothing.
  const std::vector<uint32_t> past{60, 61};
  ASSERT_OK(pool->Preload(1, past.data(), 2, scratch->get(), &n, &full));
  EXPECT_EQ(n, 0u);
  ASSERT_OK(pool->Preload(9, first.data(), 5, scratch->get(), &n, &full));
  EXPECT_EQ(n, 0u);
  // A span wider than one read is refused.
  const std::vector<uint32_t> wide{0, buffer::BufferPool::kMaxPreloadSpan};
  EXPECT_TRUE(pool->Preload(1, wide.data(), 2, scratch->get(), &n, &full).IsInvalidArgument());
  // Its reads are the pool's, not the space's (not its table's work).
  EXPECT_EQ(st->space->stats().pages_read, 1u);  // the fetch of page 3
  EXPECT_EQ(pool->stats().preload_pages_read, 9u + 11u);
  st->Close(false);
}

TEST(Preload, ADamagedPageIsLeftOutAndItsFetchStillFails) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 12, 64, &st);
  st->Close(false);
  test::DamagePage(dir.path(), 6);
  ASSERT_OK(st->Open());
  buffer::BufferPool* pool = st->pool.get();
  auto scratch = AlignedBuffer::Allocate(buffer::BufferPool::kMaxPreloadSpan * kPs);
  ASSERT_TRUE(scratch.ok());
  const std::vector<uint32_t> pages{4, 5, 6, 7, 8};
  bool full = false;
  uint32_t n = 0;
  const Status st6 = pool->Preload(1, pages.data(), 5, scratch->get(), &n, &full);
  EXPECT_TRUE(st6.IsCorruption()) << st6.ToString();
  EXPECT_NE(st6.ToString().find("page 6"), std::string::npos) << st6.ToString();
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(pool->stats().pages_preloaded, 4u);
  EXPECT_EQ(pool->ResidentPages().size(), 4u);
  EXPECT_TRUE(pool->Fetch({1, 6}, buffer::Latch::kShared).status().IsCorruption());
  for (uint32_t p : {4u, 5u, 7u, 8u}) {
    auto h = pool->Fetch({1, p}, buffer::Latch::kShared);
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(DecodeFixed32(h->data() + 64), test::PageMark(p));
  }
  st->Close(false);
}

// Fetches of pages a preload is loading wait for it and get the page;
// pages are loaded once either way, and no pin or loading flag is left.
TEST(Preload, FetchesOfPagesBeingLoadedWaitAndGetThem) {
  test::ScratchDir dir;
  std::unique_ptr<test::StorageStack> st;
  test::MakeMarkedSpace(dir.path(), 200, 256, &st);
  buffer::BufferPool* pool = st->pool.get();
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      uint32_t p = static_cast<uint32_t>(r * 37);
      while (!done.load()) {
        p = (p * 7 + 13) % 200 + 1;  // the test pages are 1-200
        auto h = pool->Fetch({1, p}, buffer::Latch::kShared);
        if (!h.ok() || DecodeFixed32(h->data() + 64) != test::PageMark(p)) ++bad;
      }
    });
  }
  auto scratch = AlignedBuffer::Allocate(buffer::BufferPool::kMaxPreloadSpan * kPs);
  ASSERT_TRUE(scratch.ok());
  uint32_t total = 0;
  for (uint32_t first = 1; first <= 200; first += 40) {
    std::vector<uint32_t> span;
    for (uint32_t p = first; p < first + 40; ++p) span.push_back(p);
    uint32_t n = 0;
    bool full = false;
    ASSERT_OK(pool->Preload(1, span.data(), 40, scratch->get(), &n, &full));
    EXPECT_FALSE(full);
    total += n;
  }
  done.store(true);
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  // Every page is in the pool once: loaded by the preload or by a reader.
  EXPECT_EQ(pool->ResidentPages().size(), 200u);
  EXPECT_EQ(total + pool->stats().misses, 200u);
  for (uint32_t p = 1; p <= 200; ++p) {
    auto h = pool->Fetch({1, p}, buffer::Latch::kExclusive);  // no pin or latch left behind
    ASSERT_TRUE(h.ok());
    EXPECT_EQ(DecodeFixed32(h->data() + 64), test::PageMark(p));
  }
  st->Close(false);
}

class Warmup : public ::testing::Test {
 protected:
  // Page files are named t<table>-<index>-<space>.sbt (catalog.cc).
  static uint32_t SpaceOf(const std::string& page_file) {
    return static_cast<uint32_t>(std::stoul(page_file.substr(page_file.rfind('-') + 1)));
  }
  Options Opts() {
    Options o = test::SmallOptions(dir_.path());
    o.buffer_pool_bytes = 16 << 20;
    o.info_log = [this](const std::string& m) {
      std::lock_guard lock(mu_);
      notes_.push_back(m);
    };
    return o;
  }
  std::string Notes() {
    std::lock_guard lock(mu_);
    std::string all;
    for (const std::string& n : notes_) all += n + "\n";
    return all;
  }
  // A table of `rows` rows (about 1 KB each), the database closed; the
  // rows of table "t" are kept in rows_.
  void Fill(int rows, const std::string& name = "t") {
    auto db = Database::Open(Opts());
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto t = (*db)->CreateTable(test::SampleTable(name));
    ASSERT_TRUE(t.ok());
    for (int i = 0; i < rows; i += 100) {
      auto txn = (*db)->Begin();
      for (int j = i; j < i + 100 && j < rows; ++j) {
        const Row r =
            test::SampleRow(j, j % 7, "u" + std::to_string(j), std::string(1000, 'a' + j % 26));
        ASSERT_OK(txn->Insert(*t, r));
        if (name == "t") rows_.push_back(r);
      }
      ASSERT_OK(txn->Commit());
    }
    ASSERT_OK((*db)->Close());
  }
  static void AwaitLoad(Database* db) {
    for (int i = 0; i < 10000 && (db->Stats().pool_loading || db->Stats().pool_load_seconds == 0);
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_GT(db->Stats().pool_load_seconds, 0.0) << "the load did not finish";
  }
  std::string ListPath() { return dir_.path() + "/db/pool_pages"; }
  // Opens the database with its page files behind gated_, shut: the
  // warm-up's first read waits there.
  Result<std::unique_ptr<Database>> OpenBehindShutGate() {
    Options o = Opts();
    o.file_system = &gated_;
    gated_.Shut();
    return Database::Open(o);
  }

  test::ScratchDir dir_;
  std::unique_ptr<FileSystem> posix_ = NewPosixFileSystem(false, 0);
  GatedFileSystem gated_{posix_.get()};
  std::vector<Row> rows_;
  std::mutex mu_;
  std::vector<std::string> notes_;
};

TEST_F(Warmup, ACleanCloseListsThePoolAndTheNextOpenLoadsItBack) {
  Fill(3000);
  auto list = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_GT(list->size(), 700u);  // 3 MB of rows, fewer than the pool's 4096 frames

  auto db = Database::Open(Opts());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  AwaitLoad(db->get());
  const DatabaseStats s = (*db)->Stats();
  EXPECT_EQ(s.pool_load_listed, list->size());
  // Open itself reads a few (page 0 of each tree): those are not loaded again.
  EXPECT_GT(s.pool_load_pages, list->size() - 20);
  EXPECT_LE(s.pool_load_pages, list->size());
  EXPECT_NE(Notes().find("buffer pool load completed"), std::string::npos) << Notes();
  // The load's reads are not the table's work.
  for (const IndexStats& is : (*db)->FindTable("t")->Stats().indexes) {
    EXPECT_EQ(is.file_bytes_read, 0u) << is.name;
  }
  // Every index scanned whole: no page is read from its file any more.
  const uint64_t misses = s.buffer_misses;
  auto txn = (*db)->Begin();
  Table* t = (*db)->FindTable("t");
  EXPECT_EQ(test::ScanAll(txn.get(), t), rows_);
  EXPECT_EQ(test::ScanAll(txn.get(), t, 1).size(), rows_.size());
  EXPECT_EQ(test::ScanAll(txn.get(), t, 2).size(), rows_.size());
  ASSERT_OK(txn->Commit());
  EXPECT_EQ((*db)->Stats().buffer_misses, misses);
  ASSERT_OK((*db)->Close());
  EXPECT_GE((*db)->Stats().pool_dumps, 1u);
}

TEST_F(Warmup, WithoutTheLoadAFreshPoolReadsPageByPage) {
  Fill(1000);
  Options o = Opts();
  o.pool_load_at_open = false;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ((*db)->Stats().pool_load_pages, 0u);
  EXPECT_EQ((*db)->Stats().pool_load_listed, 0u);
  const uint64_t misses = (*db)->Stats().buffer_misses;
  auto txn = (*db)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")), rows_);
  ASSERT_OK(txn->Commit());
  EXPECT_GT((*db)->Stats().buffer_misses, misses + 100);
}

TEST_F(Warmup, ADamagedListLoadsNothingAndTheOpenGoesOn) {
  Fill(500);
  std::vector<uint8_t> b = Bytes(ListPath());
  b[buffer::kPageListHeaderSize + 3] ^= 0x10;
  test::WriteFile(ListPath(), b);
  auto db = Database::Open(Opts());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  AwaitLoad(db->get());  // done at once: nothing to load
  EXPECT_EQ((*db)->Stats().pool_load_pages, 0u);
  const std::string notes = Notes();
  EXPECT_NE(notes.find("buffer pool load skipped"), std::string::npos) << notes;
  EXPECT_NE(notes.find("entries' checksum mismatch"), std::string::npos) << notes;
  auto txn = (*db)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")), rows_);
  ASSERT_OK(txn->Commit());
  // The close writes a good list again.
  ASSERT_OK((*db)->Close());
  EXPECT_TRUE(buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096).ok());
}

TEST_F(Warmup, ADamagedPageIsLeftOutAndTheLoadGoesOn) {
  Fill(3000);
  std::string primary;
  for (const auto& e : std::filesystem::directory_iterator(dir_.path() + "/db")) {
    if (e.path().filename().string().find("PRIMARY") != std::string::npos) primary = e.path();
  }
  ASSERT_FALSE(primary.empty());
  std::vector<uint8_t> file = test::ReadFile(primary);
  // The middle one of the leaves with keys (the list is read in spans of
  // many pages: it lies inside one).
  std::vector<uint32_t> leaves;
  for (uint32_t p = 1; p < file.size() / 4096; ++p) {
    const uint8_t* page = file.data() + uint64_t{p} * 4096;
    if (page::TypeOf(page) == page::kPageBtreeLeaf && DecodeFixed16(page + 34) > 0) {
      leaves.push_back(p);
    }
  }
  ASSERT_GT(leaves.size(), 10u);
  const uint32_t leaf = leaves[leaves.size() / 2];
  file[uint64_t{leaf} * 4096 + 200] ^= 0x08;
  test::WriteFile(primary, file);
  auto db = Database::Open(Opts());
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  AwaitLoad(db->get());
  const DatabaseStats s = (*db)->Stats();
  const std::string notes = Notes();
  EXPECT_NE(notes.find("buffer pool load completed"), std::string::npos) << notes;
  EXPECT_NE(notes.find("1 damaged page(s) left out"), std::string::npos) << notes;
  EXPECT_NE(notes.find("page " + std::to_string(leaf)), std::string::npos) << notes;
  EXPECT_GT(s.pool_load_pages, s.pool_load_listed - 20);
  // The page's reader gets the damage, as without the load.
  auto txn = (*db)->Begin();
  auto c = txn->OpenCursor((*db)->FindTable("t"), 0);
  ASSERT_TRUE(c.ok());
  Status st = (*c)->Seek(SeekOp::kFirst);
  while (st.ok() && (*c)->Valid()) st = (*c)->Next();
  EXPECT_TRUE(st.IsCorruption()) << st.ToString();
}

TEST_F(Warmup, PagesOfSpacesNoLongerThereAreLeftOutAndAFullPoolEndsTheLoad) {
  Fill(3000);
  auto list = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(list.ok());
  std::vector<PageId> pages = *list;
  for (uint32_t p = 0; p < 50; ++p) pages.push_back({999, p});  // no such space
  pages.push_back({list->front().space, 1u << 30});             // past its end
  ASSERT_OK(buffer::WritePageList(PosixFileSystem(), ListPath(), 4096, pages));
  Options o = Opts();
  o.buffer_pool_bytes = 256 * 4096;  // fewer frames than the list names
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  AwaitLoad(db->get());
  const DatabaseStats s = (*db)->Stats();
  EXPECT_EQ(s.pool_load_listed, list->size() + 1);
  EXPECT_GT(s.pool_load_pages, 200u);
  EXPECT_LE(s.pool_load_pages, 256u);
  const std::string notes = Notes();
  EXPECT_NE(notes.find("buffer pool load ended early"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the pool is full"), std::string::npos) << notes;
  auto txn = (*db)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")), rows_);
  ASSERT_OK(txn->Commit());
}

// A close while the load is inside a read waits for that read, ends the
// load before its next one, and keeps the list on disk (the pool holds
// less than it names); the next open loads the whole list.
TEST_F(Warmup, ACloseDuringTheLoadEndsItAndKeepsTheFullerList) {
  Fill(3000);
  const std::vector<uint8_t> before = Bytes(ListPath());
  auto list = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(list.ok());
  ASSERT_GT(list->size(), 10u * buffer::BufferPool::kMaxPreloadSpan);  // more than 10 reads
  auto db = OpenBehindShutGate();
  GatedFileSystem::LiftAtEnd lift{&gated_};
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  ASSERT_FALSE(gated_.AwaitWaiter().empty()) << "the load made no read of many pages";
  EXPECT_TRUE((*db)->Stats().pool_loading);
  std::atomic<bool> closed{false};
  Status close_status;
  std::thread closer([&] {
    close_status = (*db)->Close();
    closed.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(closed.load()) << "the close did not wait for the load's read";
  // The load's reads go through one at a time until the close has ended
  // it (the close asks first thing; the list takes more than 10 reads).
  for (int i = 0; i < 200 && !closed.load(); ++i) {
    gated_.LetOneThrough();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  gated_.Lift();
  closer.join();
  ASSERT_OK(close_status);
  const DatabaseStats s = (*db)->Stats();
  EXPECT_GT(s.pool_load_pages, 0u);
  EXPECT_LT(s.pool_load_pages, list->size());
  const std::string notes = Notes();
  EXPECT_NE(notes.find("buffer pool load ended early"), std::string::npos) << notes;
  EXPECT_NE(notes.find("the engine is closing"), std::string::npos) << notes;
  EXPECT_EQ(Bytes(ListPath()), before) << "the close replaced the list with the partial pool";
  db->reset();

  auto again = Database::Open(Opts());
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  AwaitLoad(again->get());
  EXPECT_GT((*again)->Stats().pool_load_pages, list->size() - 20);
  auto txn = (*again)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*again)->FindTable("t")), rows_);
  ASSERT_OK(txn->Commit());
}

// DROP TABLE while the load reads one of the table's spans: the drop waits
// for that read and then sweeps what it loaded, the load leaves the
// dropped table's other pages out, and nothing of it stays in the pool
// (the next list names none of its pages); the other table is whole.
TEST_F(Warmup, ADropDuringTheLoadWaitsForItsReadAndLeavesNoPageOfTheTable) {
  Fill(3000, "gone");
  Fill(3000);
  std::set<uint32_t> gone_spaces;
  {
    auto db = Database::Open(Opts());
    ASSERT_TRUE(db.ok());
    for (const IndexStats& is : (*db)->FindTable("gone")->Stats().indexes) {
      gone_spaces.insert(SpaceOf(is.path));
    }
    ASSERT_OK((*db)->Close());
  }
  ASSERT_FALSE(gone_spaces.empty());
  auto list = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(list.ok());
  // "gone" was created first: the load, in space order, starts with it.
  ASSERT_TRUE(gone_spaces.count(list->front().space)) << list->front().space;
  auto db = OpenBehindShutGate();
  GatedFileSystem::LiftAtEnd lift{&gated_};
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  const std::string read = gated_.AwaitWaiter();
  ASSERT_FALSE(read.empty()) << "the load made no read of many pages";
  ASSERT_TRUE(gone_spaces.count(SpaceOf(read))) << read << " is not a file of the table dropped";
  std::atomic<bool> dropped{false};
  Status drop_status;
  std::thread dropper([&] {
    drop_status = (*db)->DropTable("gone");
    dropped.store(true);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(dropped.load()) << "the drop did not wait for the load's read";
  gated_.Lift();
  dropper.join();
  ASSERT_OK(drop_status);
  AwaitLoad(db->get());
  EXPECT_EQ((*db)->FindTable("gone"), nullptr);
  auto txn = (*db)->Begin();
  EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")), rows_);
  ASSERT_OK(txn->Commit());
  ASSERT_OK((*db)->Close());
  auto after = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_GT(after->size(), 700u);
  for (const PageId& p : *after) {
    ASSERT_FALSE(gone_spaces.count(p.space))
        << "page " << p.page_no << " of dropped space " << p.space << " is still in the pool";
  }
  db->reset();
  // A new table of the same name starts empty.
  auto reopened = Database::Open(Opts());
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  AwaitLoad(reopened->get());
  auto t = (*reopened)->CreateTable(test::SampleTable("gone"));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto txn2 = (*reopened)->Begin();
  EXPECT_TRUE(test::ScanAll(txn2.get(), *t).empty());
  ASSERT_OK(txn2->Commit());
  ASSERT_OK((*reopened)->Close());
}

TEST_F(Warmup, ThePoolIsListedEveryIntervalWhileTheEngineRuns) {
  Options o = Opts();
  o.pool_dump_interval_seconds = 1;
  auto db = Database::Open(o);
  ASSERT_TRUE(db.ok());
  auto t = (*db)->CreateTable(test::SampleTable());
  ASSERT_TRUE(t.ok());
  auto txn = (*db)->Begin();
  for (int i = 0; i < 300; ++i) {
    ASSERT_OK(txn->Insert(*t, test::SampleRow(i, 1, std::nullopt, std::string(1000, 'x'))));
  }
  ASSERT_OK(txn->Commit());
  for (int i = 0; i < 5000 && (*db)->Stats().pool_dumps < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_GE((*db)->Stats().pool_dumps, 2u);
  auto list = buffer::ReadPageList(PosixFileSystem(), ListPath(), 4096);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_GT(list->size(), 60u);  // 300 KB of rows in 4 KiB pages, and their indexes
  // With pool_dump off the list is loaded, and never written.
  ASSERT_OK((*db)->Close());
  db->reset();
  const std::vector<uint8_t> before = Bytes(ListPath());
  o.pool_dump = false;
  auto quiet = Database::Open(o);
  ASSERT_TRUE(quiet.ok());
  AwaitLoad(quiet->get());
  EXPECT_GT((*quiet)->Stats().pool_load_pages, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  auto txn2 = (*quiet)->Begin();
  ASSERT_OK(txn2->Insert((*quiet)->FindTable("t"), test::SampleRow(1000, 1, std::nullopt, "z")));
  ASSERT_OK(txn2->Commit());
  ASSERT_OK((*quiet)->Close());
  EXPECT_EQ((*quiet)->Stats().pool_dumps, 0u);
  EXPECT_EQ(Bytes(ListPath()), before);
}

// Power cuts while the close writes the list (after each write, before its
// sync, and after the rename): the database opens, every row is there, and
// the load finds the old list, none, or the new one, whole or refused.
TEST(WarmupCrash, APowerCutWhileTheListIsWrittenLeavesAGoodDatabase) {
  TrackedRun run;
  std::vector<Row> rows;
  {
    auto db = Database::Open(TrackedOptions(run.dir.Sub("pm"), &run.fs, &run.pm));
    ASSERT_TRUE(db.ok()) << db.status().ToString();
    auto t = (*db)->CreateTable(test::SampleTable());
    ASSERT_TRUE(t.ok());
    auto txn = (*db)->Begin();
    for (int i = 0; i < 300; ++i) {
      rows.push_back(test::SampleRow(i, 2, std::nullopt, std::string(500, 'p')));
      ASSERT_OK(txn->Insert(*t, rows.back()));
    }
    ASSERT_OK(txn->Commit());
    ASSERT_OK((*db)->Close());
  }
  std::vector<uint64_t> cuts = run.fs.TimesAfterWrites("/pool_pages");
  const std::vector<uint64_t> syncs = run.fs.TimesBeforeSyncs("/pool_pages");
  ASSERT_FALSE(cuts.empty()) << "the close wrote no list: the test lost its reach";
  ASSERT_FALSE(syncs.empty());
  cuts.insert(cuts.end(), syncs.begin(), syncs.end());
  cuts.push_back(run.clock->Now());
  int loaded = 0, cut_no = 0;
  for (uint64_t at : cuts) {
    for (int variant = 0; variant < 3; ++variant) {
      SCOPED_TRACE(::testing::Message() << "cut at " << at << " (seed " << run.seed << ")");
      const std::string image = run.CutImage(at, "cut" + std::to_string(++cut_no));
      std::vector<std::string> notes;
      std::mutex mu;
      Options o = PlainOptions(image);
      o.info_log = [&](const std::string& m) {
        std::lock_guard lock(mu);
        notes.push_back(m);
      };
      auto db = Database::Open(o);
      ASSERT_TRUE(db.ok()) << db.status().ToString();
      for (int i = 0; i < 10000 && (*db)->Stats().pool_load_seconds == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ASSERT_GT((*db)->Stats().pool_load_seconds, 0.0);
      loaded += (*db)->Stats().pool_load_pages > 0;
      auto txn = (*db)->Begin();
      EXPECT_EQ(test::ScanAll(txn.get(), (*db)->FindTable("t")), rows);
      ASSERT_OK(txn->Commit());
      ASSERT_OK((*db)->Close());
      std::lock_guard lock(mu);
      for (const std::string& n : notes) {
        EXPECT_EQ(n.find("stopped at a page"), std::string::npos) << n;
      }
    }
  }
  std::printf("%d of %d cuts loaded a list\n", loaded, cut_no);
}

}  // namespace
}  // namespace subito
