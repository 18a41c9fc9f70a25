// SpaceFile: the pages of one table or one index, in one file, in a directory
// chosen per space (so tables can be placed on different devices).
//
// Page 0 is the space header page (a regular page, page_type
// kPageSpaceHeader); its body:
//
//   +32  char magic[8] "SUBITOSP"
//   +40  u32  space format version (1)
//   +44  u32  page_size
//   +48  u32  space_id
//   +52  u32  reserved (0)
//   +56  char label[64]: "table.index", its first 63 bytes, zero-padded;
//        for people reading the file, never used to identify the space
//   +120 u64  created_unix_time
//   +128 u8   meta[256]: owned by upper layers (B-tree root, ...), changed
//             only through logged page edits like any other page byte
//
// The file grows in chunks of kExtendPages; pages past the last one written
// read as zeros (P1: allocated, never written).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "page/page_format.h"
#include "subito/status.h"
#include "util/file_io.h"
#include "util/striped_counter.h"

namespace subito::page {

inline constexpr size_t kSpaceMetaOffset = 128;
inline constexpr size_t kSpaceMetaSize = 256;
inline constexpr uint32_t kExtendPages = 16;
inline constexpr size_t kSpaceLabelMax = 63;
inline constexpr uint32_t kMaxPages = 1u << 28;  // 4 TiB of 16 KiB pages per space

struct SpaceIoStats {
  uint64_t pages_read = 0, pages_written = 0, bytes_read = 0, bytes_written = 0;
  // Bytes written on behalf of this space elsewhere: redo records of its
  // changes (and the undo of them), double-write copies of its pages, and
  // per-page log entries (NV-PPL) in place of page writes.
  uint64_t redo_bytes = 0, double_write_bytes = 0, ppl_bytes = 0, ppl_appends = 0;
  // Buffer pool lookups of its pages: found in the pool, read from the file.
  uint64_t buffer_hits = 0, buffer_misses = 0;
};

class SpaceFile {
 public:
  static Result<std::unique_ptr<SpaceFile>> Create(FileSystem* fs, const std::string& path,
                                                   uint32_t space_id, uint32_t page_size,
                                                   const std::string& name);
  static Result<std::unique_ptr<SpaceFile>> Open(FileSystem* fs, const std::string& path);

  uint32_t space_id() const { return space_id_; }
  uint32_t page_size() const { return page_size_; }
  const std::string& name() const { return name_; }
  const std::string& path() const { return file_->path(); }
  // Pages in use: 0 .. page_count() - 1.
  uint32_t page_count() const { return page_count_.load(std::memory_order_acquire); }

  // Reads and checks (P1) a page. A page at or past page_count() is
  // NotFound: it was never allocated.
  Status ReadPage(uint32_t page_no, uint8_t* buf);
  // Reads pages [first, first + n) (all below page_count()) into buf in one
  // read, unchecked; pages not yet in the file are zeros. Each page is
  // checked by CheckRead before use. count = false: not counted in stats()
  // (the pool's warm-up: reads that are not the table's work).
  Status ReadPages(uint32_t first, uint32_t n, uint8_t* buf, bool count = true);
  Status CheckRead(uint32_t page_no, const uint8_t* buf) const;
  // Writes a sealed page image. Only the buffer pool's page writer calls it.
  Status WritePage(uint32_t page_no, const uint8_t* buf);
  // Writes n sealed images of the pages first, first + 1, ... in one go
  // (File::WriteGather).
  Status WritePages(uint32_t first, const uint8_t* const* bufs, uint32_t n);
  Status Sync();
  // A new page number at the end of the space (the file grows as needed).
  Result<uint32_t> AllocatePage();
  // Makes pages [0, count) exist (recovery redoing a page past the end).
  Status EnsurePages(uint32_t count);
  SpaceIoStats stats() const;
  void CountRedo(uint64_t n) { redo_bytes_.fetch_add(n, std::memory_order_relaxed); }
  void CountDoubleWrite(uint64_t n) { dwb_bytes_.fetch_add(n, std::memory_order_relaxed); }
  void CountPplAppend(uint64_t n) {
    ppl_bytes_.fetch_add(n, std::memory_order_relaxed);
    ppl_appends_.fetch_add(1, std::memory_order_relaxed);
  }
  void CountLookup(bool hit) {
    if (hit) {
      buffer_hits_.Add();
    } else {
      buffer_misses_.fetch_add(1, std::memory_order_relaxed);
    }
  }

 private:
  SpaceFile(std::unique_ptr<File> file, uint32_t space_id, uint32_t page_size, std::string name,
            uint32_t pages)
      : file_(std::move(file)),
        space_id_(space_id),
        page_size_(page_size),
        name_(std::move(name)),
        page_count_(pages) {}
  Status GrowFile(uint32_t pages);

  std::unique_ptr<File> file_;
  const uint32_t space_id_;
  const uint32_t page_size_;
  const std::string name_;
  std::atomic<uint32_t> page_count_;
  std::mutex grow_mu_;
  std::atomic<uint64_t> pages_read_{0}, pages_written_{0};
  std::atomic<uint64_t> redo_bytes_{0}, dwb_bytes_{0}, ppl_bytes_{0}, ppl_appends_{0};
  StripedCounter buffer_hits_;  // every page fetch of the space counts one
  std::atomic<uint64_t> buffer_misses_{0};
};

}  // namespace subito::page
