// PplRegion: per-page logs (NV-PPL, seed 001) in one mapped region of the
// PM tier. A page whose changes since its last write are small keeps them
// here instead of being written: its file holds an older image, and a read
// applies the page's entries to it. Format and crash argument:
// docs/formats/ppl.md.
//
// Layout: a 4 KiB region header, then `block_count` blocks of `block_size`
// bytes. A page owns at most one block: a 64-byte block header (the page,
// the block's generation, and `used`, the bytes of its committed entries),
// then entries appended one after another:
//   u32 crc, u16 length, u16 reserved (0), u64 end_lsn, `length` edit bytes
// (the page's part of one redo record: u16 offset, u16 kind_length, data;
// buffer/mtr.h). An entry's crc covers the block's generation and the entry
// from its length on, so the bytes of a block's earlier owner never pass for
// this owner's entries.
//
// Invariants (docs/formats/ppl.md):
//  G1. A block is owned iff its `used` (one aligned u32, a failure-atomic
//      store) is not 0. An owned block's header must pass its crc, and its
//      first `used` entry bytes must be whole entries with increasing
//      end_lsns that pass their crcs: anything else is corruption, refused
//      with the file and offset. The open checks headers; the entries are
//      checked each time the page's entries are read, and before the first
//      append to them, before any is handed out.
//  G2. An append writes the entry (and a new block's header) and fences
//      before it raises `used`: a torn append is past `used` and ignored. A
//      complete entry past `used` (a cut between the two fences) is kept if
//      its end_lsn follows (it holds what its redo record holds), from the
//      first read or append of the page's entries on, in memory: the
//      block's next append raises `used` over it, and until then every
//      open finds the same bytes and decides the same.
//  G3. Append returns once `used` is durable: only then may the caller count
//      the changes as written (the page clean, the checkpoint past them).
//  G4. Free durably sets `used` to 0 before it returns. The caller frees a
//      page's block only once the page image it wrote in place (holding
//      every entry) is durable, so a cut before the free leaves entries no
//      newer than the page's file image: harmless.
//  G5. Generations increase over the region's life: every one handed out is
//      below a floor kept in the region header and raised (durably) before
//      it is reached, and each Open starts at the floor.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "buffer/page_id.h"
#include "buffer/page_log.h"
#include "pmem/persistence.h"
#include "pmem/pm_file.h"
#include "subito/status.h"

namespace subito::ppl {

inline constexpr uint32_t kRegionHeaderSize = 4096;
inline constexpr uint32_t kBlockHeaderSize = 64;
inline constexpr uint32_t kEntryHeaderSize = 16;

struct PplOptions {
  std::string path;  // the region file, e.g. <pm_dir>/ppl
  // Bytes of the region, header included. Used when the region is created;
  // an existing region keeps its own size and block size (OpenResizing
  // replaces an empty one).
  uint64_t size = 256ull << 20;
  // Bytes of one block, header included: a multiple of 64, 128 .. 65536.
  uint32_t block_size = 512;
  // The database this region belongs to (the log's salt, catalog K5): a
  // region with another salt is refused. 0: any.
  uint64_t salt = 0;
  // Tests: replaces the mapping's own persistence.
  pmem::Persistence* persistence = nullptr;
};

struct PplStats {
  uint64_t blocks = 0, blocks_used = 0;
  uint64_t appends = 0, append_bytes = 0;  // entries and their bytes, headers included
  uint64_t allocations = 0, frees = 0;
  uint64_t full = 0;  // appends refused for want of a free block or room in one
};

class PplRegion final : public buffer::PageLogStore {
 public:
  // Opens the region at options.path, creating it (zeroed, with a fresh
  // header) if there is none. The analysis pass: scans every block's header,
  // rebuilds the page -> block table from them and `used` (G1) and probes
  // the bytes past `used` (G2); a block whose header fails its checks is
  // Corruption naming the file and offset. (Entries are checked by
  // ForEachEntry and Append.)
  static Result<std::unique_ptr<PplRegion>> Open(const PplOptions& options);
  // Open for a database start: a region that holds no page's entries takes
  // the geometry of `options` (it is replaced by a fresh one if its size or
  // block size differs; with options.size 0 it is removed and nullptr
  // returned). A region that holds entries keeps its geometry until they
  // are written back (a clean shutdown), and *kept says so.
  static Result<std::unique_ptr<PplRegion>> OpenResizing(const PplOptions& options, bool* kept);
  // The block size that holds `threshold` bytes of entries after the block
  // header: a multiple of 64, 128 .. 65536.
  static uint32_t BlockSizeFor(uint32_t threshold) {
    return static_cast<uint32_t>(
        std::clamp<uint64_t>((kBlockHeaderSize + uint64_t{threshold} + 63) / 64 * 64, 128, 65536));
  }
  // Blocks a region of `size` bytes (header included) holds.
  static uint64_t BlocksFor(uint64_t size, uint32_t block_size) {
    return (size - std::min<uint64_t>(size, kRegionHeaderSize)) / block_size;
  }
  ~PplRegion() override;
  PplRegion(const PplRegion&) = delete;
  PplRegion& operator=(const PplRegion&) = delete;

  // Bytes an entry of `edit_bytes` takes in a block (header included), and
  // the most a block holds.
  static uint32_t EntrySizeOf(size_t edit_bytes) {
    return kEntryHeaderSize + static_cast<uint32_t>(edit_bytes);
  }
  uint32_t block_capacity() const { return block_size_ - kBlockHeaderSize; }

  // buffer::PageLogStore.
  // Bytes of the page's entries (headers included); 0 if it has no block.
  // Before the page's entries are first read, this counts the complete
  // entries past `used` (G2) that the read may yet drop.
  uint32_t Used(uint32_t space, uint32_t page_no) const override;
  uint32_t Capacity() const override { return block_capacity(); }
  uint32_t EntrySize(size_t n) const override { return EntrySizeOf(n); }
  // Calls fn(end_lsn, edits, length) for each of the page's entries, oldest
  // first, once all of them have passed their crcs (G1): an entry that
  // does not is Corruption naming the file and offset, and fn is not called.
  // An error from fn stops the walk and is returned.
  Status ForEachEntry(uint32_t space, uint32_t page_no,
                      const std::function<Status(uint64_t end_lsn, const uint8_t* edits, size_t n)>&
                          fn) const override;
  // Appends one entry to the page's block, taking a free block first if the
  // page has none; durable on return (G3). NoSpace when no block is free or
  // the page's block has no room: the caller writes the page instead.
  Status Append(uint32_t space, uint32_t page_no, uint64_t end_lsn, const uint8_t* edits,
                size_t n) override;
  // Gives the page's block back, durably (G4). No-op (false) without one.
  bool Free(uint32_t space, uint32_t page_no) override;
  // Frees every block of a space (a dropped table).
  void FreeSpace(uint32_t space) override;
  std::vector<std::pair<uint32_t, uint32_t>> LoggedPages(size_t n = SIZE_MAX) const override;
  uint64_t PageCapacity() const override { return block_count_; }
  uint64_t PagesUsed() const override;
  // Pages that own a block, and the bytes each uses.
  std::vector<std::pair<buffer::PageId, uint32_t>> Pages() const;

  PplStats stats() const;
  uint32_t block_size() const { return block_size_; }
  std::string Describe() const;

 private:
  // A block's last_lsn before CheckEntries has read its entries.
  static constexpr uint64_t kUnchecked = UINT64_MAX;
  struct Block {
    uint32_t index = 0;
    uint64_t generation = 0;
    uint32_t used = 0;      // committed entry bytes after the header (the field)
    uint64_t last_lsn = 0;  // of its last entry; kUnchecked until checked
    // Bytes past `used` that the open found to be whole entries passing
    // their crcs (G2): kept by CheckEntries if their LSNs follow.
    uint32_t probed = 0;
  };
  PplRegion(std::unique_ptr<pmem::PmFile> file, pmem::Persistence* p, uint32_t block_size,
            uint64_t block_count);
  uint8_t* BlockAt(uint32_t index) const;
  // Makes a fresh region file (zeroed, with its header) at options.path
  // through a rename, replacing any there.
  static Status Create(const PplOptions& options);
  // What Analyze's scan of blocks [begin, end) found; reads only.
  struct Scan {
    struct Used {
      buffer::PageId page;
      Block block{};
    };
    std::vector<Used> used;
    std::vector<uint32_t> free;  // ascending
    uint64_t max_generation = 0;
    Status status;  // the first bad block's Corruption; the scan stops there
  };
  void ScanBlocks(uint32_t begin, uint32_t end, Scan* out) const;
  // G1 for the page's committed entries: whole, in increasing LSN order,
  // each passing its crc; else Corruption with the file and offset. Then
  // G2 for the probed bytes: the entries among them that follow in order
  // are kept (blk->used raised, in memory only), the rest ignored. Sets
  // blk->last_lsn if unchecked. Caller holds mu_.
  Status CheckEntries(buffer::PageId page, Block* blk) const;
  Status Analyze();
  void WriteBlockHeader(uint32_t index, buffer::PageId page, uint64_t generation);
  void StoreUsed(uint32_t index, uint32_t used);
  void RaiseFloor(uint64_t floor);

  std::unique_ptr<pmem::PmFile> file_;
  pmem::Persistence* const p_;
  const uint32_t block_size_;
  const uint64_t block_count_;
  mutable std::mutex mu_;  // everything below, and the bytes of blocks
  // mutable: ForEachEntry (const) checks a block's entries and keeps the
  // last LSN it finds.
  mutable std::unordered_map<buffer::PageId, Block, buffer::PageIdHash> table_;
  std::vector<uint32_t> free_;
  uint64_t next_generation_ = 1;
  uint64_t generation_floor_ = 0;  // durable: next_generation_ < it (G5)
  PplStats stats_;
};

}  // namespace subito::ppl
