// A log, a double-write area, one space (id 1) and a buffer pool in a
// directory, for tests of the storage layers; reopenable after Close.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "buffer/buffer_pool.h"
#include "buffer/double_write.h"
#include "buffer/mtr.h"
#include "buffer/page_recovery.h"
#include "page/page_format.h"
#include "test_util.h"
#include "util/coding.h"

namespace subito::test {

struct StorageStackOptions {
  uint32_t page_size = 4096;
  uint64_t pool_bytes = 1 << 20;
  uint64_t log_file = 4096 + (1 << 20);
  uint32_t cleaners = 1;
  uint32_t dwb_slots = 16;
  uint64_t page_version_limit = 0;
  buffer::PageLogStore* page_log = nullptr;  // NV-PPL's store, if any
  uint32_t page_log_threshold = 256;
  bool checkpoint_held = false;  // BufferPoolOptions::checkpoint_held
};

class StorageStack {
 public:
  explicit StorageStack(std::string dir, StorageStackOptions o = {})
      : dir_(std::move(dir)), o_(o) {}

  // Opens everything, creating the space if it does not exist yet.
  Status Open() {
    log::LogOptions lo = SmallLog(dir_ + "/log", log::LogWriteMode::kNf, 1);
    lo.file_size = o_.log_file;
    lo.on_log_full = [this] {
      if (pool) pool->OnLogFull();
    };
    auto l = log::RedoLog::Open(lo);
    if (!l.ok()) return l.status();
    log = std::move(*l);
    auto d = buffer::DoubleWrite::OpenPm(dir_ + "/dwb", o_.page_size, o_.dwb_slots);
    if (!d.ok()) return d.status();
    dwb = std::move(*d);
    const std::string path = dir_ + "/t.sbt";
    auto s = PosixFileSystem()->Exists(path)
                 ? page::SpaceFile::Open(PosixFileSystem(), path)
                 : page::SpaceFile::Create(PosixFileSystem(), path, 1, o_.page_size, "t");
    if (!s.ok()) return s.status();
    space = std::move(*s);
    buffer::BufferPoolOptions po;
    po.capacity_bytes = o_.pool_bytes;
    po.page_size = o_.page_size;
    po.flush_batch = std::min<uint32_t>(16, o_.dwb_slots);
    po.cleaner_threads = o_.cleaners;
    po.cleaner_interval_ms = 5;
    po.page_version_limit = o_.page_version_limit;
    po.page_log = o_.page_log;
    po.page_log_threshold = o_.page_log_threshold;
    po.checkpoint_held = o_.checkpoint_held;
    auto p = buffer::BufferPool::Create(po, log.get(), dwb.get());
    if (!p.ok()) return p.status();
    pool = std::move(*p);
    return pool->AddSpace(space.get());
  }
  // Repairs torn pages and redoes the log from its checkpoint.
  Status Recover() { return buffer::RecoverPages(pool.get(), dwb.get()).status(); }
  void Close(bool flush) {
    if (flush && pool) {
      EXPECT_TRUE(pool->FlushAll().ok());
    }
    pool.reset();
    space.reset();
    dwb.reset();
    if (log) {
      EXPECT_TRUE(log->Close().ok());
    }
    log.reset();
  }

  std::unique_ptr<log::RedoLog> log;
  std::unique_ptr<buffer::DoubleWrite> dwb;
  std::unique_ptr<page::SpaceFile> space;
  std::unique_ptr<buffer::BufferPool> pool;

 private:
  std::string dir_;
  StorageStackOptions o_;
};

// Opens the stack in dir, recovers it from its log, and checks that each
// page of space 1 in `model` (page number -> its bytes [16, page size): all
// but the crc and page_lsn) holds those bytes.
inline void ExpectRecoveredPages(const std::string& dir, StorageStackOptions o,
                                 const std::map<uint32_t, std::vector<uint8_t>>& model) {
  StorageStack st(dir, o);
  ASSERT_TRUE(st.Open().ok());
  ASSERT_TRUE(st.Recover().ok());
  for (const auto& [p, bytes] : model) {
    auto h = st.pool->Fetch({1, p}, buffer::Latch::kShared);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(0, std::memcmp(h->data() + 16, bytes.data(), bytes.size())) << "page " << p;
  }
  st.Close(true);
}

// Allocates n pages in space 1 and formats them as test pages through
// Mtrs; returns their numbers.
inline std::vector<uint32_t> MakePages(buffer::BufferPool* pool, int n) {
  const uint32_t ps = pool->page_size();
  std::vector<uint32_t> pages;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(pool->LogFreeCheck().ok());
    auto h = pool->Allocate(1);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    if (!h.ok()) break;
    std::vector<uint8_t> image(ps);
    page::InitPage(image.data(), ps, page::kPageTest, 1, h->id().page_no);
    buffer::Mtr mtr(pool);
    mtr.Write(*h, 0, image.data(), page::kPageHeaderSize);
    EXPECT_TRUE(mtr.Commit().ok());
    pages.push_back(h->id().page_no);
  }
  return pages;
}

// Flips a bit of page `page` (4 KiB pages) in the closed stack's space file.
inline void DamagePage(const std::string& dir, uint32_t page) {
  std::vector<uint8_t> file = ReadFile(dir + "/t.sbt");
  file[page * 4096 + 100] ^= 0x40;
  WriteFile(dir + "/t.sbt", file);
}

// The mark MakeMarkedSpace writes at offset 64 of page p.
inline uint32_t PageMark(uint32_t p) {
  return p * 3 + 1;
}

// A space of `pages` test pages of 4 KiB, each with PageMark(page) at
// offset 64, written to its file; then the stack is reopened in *out with a
// pool of `frames` (none loaded).
inline void MakeMarkedSpace(const std::string& dir, uint32_t pages, uint32_t frames,
                            std::unique_ptr<StorageStack>* out) {
  constexpr uint32_t kPs = 4096;
  {
    StorageStack st(dir, {kPs, 1 << 20});
    ASSERT_TRUE(st.Open().ok());
    const std::vector<uint32_t> made = MakePages(st.pool.get(), static_cast<int>(pages));
    ASSERT_EQ(made.size(), pages);
    for (uint32_t p : made) {
      auto h = st.pool->Fetch({1, p}, buffer::Latch::kExclusive);
      ASSERT_TRUE(h.ok());
      uint8_t v[4];
      EncodeFixed32(v, PageMark(p));
      buffer::Mtr mtr(st.pool.get());
      mtr.Write(*h, 64, v, 4);
      ASSERT_TRUE(mtr.Commit().ok());
    }
    st.Close(/*flush=*/true);
  }
  *out = std::make_unique<StorageStack>(dir, StorageStackOptions{kPs, uint64_t{frames} * kPs});
  ASSERT_TRUE((*out)->Open().ok());
}

}  // namespace subito::test
