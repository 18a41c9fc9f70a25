// DoubleWrite: torn page writes are impossible because every page image is
// first made durable in the double-write area, and only then written in
// place. On the PM tier (NV-PPL keeps its double-write buffer in NVDIMM) or,
// for the classic configuration, in a file on the data device.
//
// Layout (docs/formats/double-write.md):
//   0        header, 64 B: magic "SUBITODW", u32 version, u32 page_size,
//            u32 slots, u8[40] reserved, u32 crc of [0, 60)
//   4096     slot entries, 64 B each: u32 space_id, u32 page_no,
//            u64 page_lsn, u32 image_crc, u8[40] reserved, u32 crc of [0, 60)
//   images   at 4096 + AlignUp(slots * 64, 4096): slots x page_size
//
// Invariants:
//  D1. A slot is valid iff its entry crc matches and its image matches
//      image_crc. An entry and image torn by a crash make the slot invalid.
//  D2. A batch's slots are durable before any of its pages is written in
//      place, and the next batch reuses slots only after the previous
//      batch's in-place writes were synced. So a page torn in place always
//      has a valid, at least as new copy here.
//  D3. Repair writes a slot's image in place iff the in-place page fails
//      its check (P1) or has an older page_lsn; a newer in-place page is
//      never replaced.
//  D4. Only the last batch's slots are valid: a batch clears the entries
//      of the slots it does not reuse, durable with its own. So a valid
//      copy is its page's last image written (every page write goes
//      through a batch), and a page damaged in place after its write is
//      either repaired with that image or refused, never given an older
//      one (whose changes since redo from the checkpoint may not hold).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "page/space_file.h"
#include "pmem/persistence.h"
#include "pmem/pm_file.h"
#include "subito/status.h"
#include "util/file_io.h"

namespace subito::buffer {

struct PageImage {
  uint32_t space_id;
  uint32_t page_no;
  uint64_t page_lsn;
  const uint8_t* data;  // sealed
};

class DoubleWrite {
 public:
  // PM backend: `path` is mapped (created if missing) on the PM tier.
  static Result<std::unique_ptr<DoubleWrite>> OpenPm(const std::string& path, uint32_t page_size,
                                                     uint32_t slots,
                                                     pmem::Persistence* persistence = nullptr);
  // File backend: pwrite + fdatasync.
  static Result<std::unique_ptr<DoubleWrite>> OpenFile(FileSystem* fs, const std::string& path,
                                                       uint32_t page_size, uint32_t slots);
  virtual ~DoubleWrite() = default;

  uint32_t slots() const { return slots_; }
  uint32_t page_size() const { return page_size_; }
  // Makes `pages` (at most slots()) durable here (D2). One batch at a time.
  Status WriteBatch(const std::vector<PageImage>& pages);
  // D3, for every valid slot. `space_of` maps a space id to its open file
  // (null: the space is gone, the slot is skipped). Returns pages repaired.
  Result<uint32_t> Repair(const std::function<page::SpaceFile*(uint32_t)>& space_of);
  uint64_t bytes_written() const { return bytes_written_.load(std::memory_order_relaxed); }
  virtual std::string Describe() const = 0;

 protected:
  DoubleWrite(uint32_t page_size, uint32_t slots) : page_size_(page_size), slots_(slots) {}
  virtual Status Store(uint64_t offset, const void* src, size_t n) = 0;
  virtual Status MakeDurable() = 0;
  virtual Status Load(uint64_t offset, void* dst, size_t n) = 0;
  Status Format();
  Status CheckHeader(const std::string& where);
  uint64_t EntryOffset(uint32_t slot) const { return 4096 + uint64_t{slot} * 64; }
  uint64_t ImageOffset(uint32_t slot) const;

  const uint32_t page_size_;
  const uint32_t slots_;
  std::mutex mu_;
  // Slots [0, dirty_slots_) may hold valid entries (D4); all of them until
  // the first batch of this run.
  uint32_t dirty_slots_ = slots_;
  std::atomic<uint64_t> bytes_written_{0};
};

uint64_t DoubleWriteFileSize(uint32_t page_size, uint32_t slots);

}  // namespace subito::buffer
