#include "ppl/ppl_region.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <system_error>
#include <thread>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/file_io.h"
#include "util/strings.h"
#include "util/thread_name.h"

namespace subito::ppl {
namespace {

constexpr char kRegionMagic[8] = {'S', 'U', 'B', 'I', 'T', 'O', 'P', 'L'};
constexpr uint32_t kRegionVersion = 1;
constexpr char kBlockMagic[4] = {'S', 'P', 'P', 'L'};
constexpr uint16_t kBlockVersion = 1;
// Block header: magic, u16 version, u16 reserved, u32 space, u32 page_no,
// u64 generation, reserved, u32 used at 56, u32 crc of [0, 56) at 60.
constexpr uint32_t kUsedOffset = 56;
// The generation floor (G5) is one aligned u64 (a failure-atomic store) at
// this offset of the region header, raised this much at a time.
constexpr uint32_t kFloorOffset = 64;
constexpr uint64_t kFloorStep = 1 << 16;

uint32_t EntryCrc(uint64_t generation, const uint8_t* entry_from_length, size_t n) {
  uint8_t g[8];
  EncodeFixed64(g, generation);
  return crc32c::Extend(crc32c::Value(g, sizeof g), entry_from_length, n);
}

// Walks the entries of block bytes `b` from `off` while each is whole
// within `bound`, passes its crc and ends past *last (updated); returns the
// offset of the first that does not, or the last entry's end.
uint32_t WalkEntries(const uint8_t* b, uint32_t off, uint32_t bound, uint64_t generation,
                     uint64_t* last) {
  while (off + kEntryHeaderSize <= bound) {
    const uint8_t* e = b + off;
    const uint32_t len = DecodeFixed16(e + 4);
    const uint64_t lsn = DecodeFixed64(e + 8);
    if (len == 0 || off + kEntryHeaderSize + len > bound || lsn <= *last ||
        EntryCrc(generation, e + 4, 12 + len) != DecodeFixed32(e)) {
      break;
    }
    *last = lsn;
    off += kEntryHeaderSize + len;
  }
  return off;
}

}  // namespace

PplRegion::PplRegion(std::unique_ptr<pmem::PmFile> file, pmem::Persistence* p, uint32_t block_size,
                     uint64_t block_count)
    : file_(std::move(file)), p_(p), block_size_(block_size), block_count_(block_count) {
  p_->OnMap(file_->path(), file_->data(), file_->size());
  stats_.blocks = block_count;
}

Status PplRegion::Create(const PplOptions& options) {
  const uint64_t blocks = BlocksFor(options.size, options.block_size);
  if (blocks == 0 || blocks > UINT32_MAX) {
    return Status::InvalidArgument(StrFormat(
        "PPL region of %llu bytes: room for 1 .. 2^32-1 blocks of %u bytes after its header",
        static_cast<unsigned long long>(options.size), options.block_size));
  }
  FileSystem* fs = PosixFileSystem();
  const std::string tmp = options.path + ".tmp";
  SUBITO_RETURN_IF_ERROR(fs->Remove(tmp));
  {
    auto f = pmem::PmFile::Create(tmp, kRegionHeaderSize + blocks * options.block_size);
    if (!f.ok()) return f.status();
    uint8_t h[64] = {};
    std::memcpy(h, kRegionMagic, sizeof kRegionMagic);
    EncodeFixed32(h + 8, kRegionVersion);
    EncodeFixed32(h + 12, options.block_size);
    EncodeFixed64(h + 16, blocks);
    EncodeFixed64(h + 24, options.salt);
    EncodeFixed32(h + 60, crc32c::Value(h, 60));
    // Creation is not a crash point: the region is renamed into place.
    pmem::Persistence* p = (*f)->DefaultPersistence();
    p->CopyNoDrain((*f)->data(), h, sizeof h);
    p->Drain();
  }
  SUBITO_RETURN_IF_ERROR(fs->Rename(tmp, options.path));
  return fs->SyncDirOf(options.path);
}

Result<std::unique_ptr<PplRegion>> PplRegion::OpenResizing(const PplOptions& options, bool* kept) {
  *kept = false;
  FileSystem* fs = PosixFileSystem();
  SUBITO_RETURN_IF_ERROR(fs->Remove(options.path + ".tmp"));  // a cut creation's
  if (!fs->Exists(options.path)) {
    if (options.size == 0) return std::unique_ptr<PplRegion>();
    return Open(options);
  }
  Result<std::unique_ptr<PplRegion>> r = Open(options);
  if (!r.ok()) return r;
  const PplRegion& old = **r;
  const bool same = options.size > 0 && old.block_size_ == options.block_size &&
                    old.block_count_ == BlocksFor(options.size, options.block_size);
  if (same) return r;
  if (old.PagesUsed() > 0) {
    *kept = true;
    return r;
  }
  // Empty: nothing in it is needed. The new region is made beside it and
  // renamed over it (zeroed: it never shows this one's bytes), so a failure
  // (no room on the PM tier, a size out of range) leaves this one in place.
  r.value().reset();
  if (options.size == 0) {
    SUBITO_RETURN_IF_ERROR(fs->Remove(options.path));
    SUBITO_RETURN_IF_ERROR(fs->SyncDirOf(options.path));
    return std::unique_ptr<PplRegion>();
  }
  SUBITO_RETURN_IF_ERROR(Create(options));
  return Open(options);
}

PplRegion::~PplRegion() {
  p_->OnUnmap(file_->data());
}

uint8_t* PplRegion::BlockAt(uint32_t index) const {
  return file_->data() + kRegionHeaderSize + uint64_t{index} * block_size_;
}

Result<std::unique_ptr<PplRegion>> PplRegion::Open(const PplOptions& options) {
  if (options.block_size % 64 != 0 || options.block_size < 128 || options.block_size > 65536) {
    return Status::InvalidArgument(
        StrFormat("PPL block size %u: a multiple of 64 from 128 to 65536", options.block_size));
  }
  FileSystem* fs = PosixFileSystem();
  if (!fs->Exists(options.path)) SUBITO_RETURN_IF_ERROR(Create(options));
  auto f = pmem::PmFile::Open(options.path);
  if (!f.ok()) return f.status();
  const uint8_t* h = (*f)->data();
  if ((*f)->size() < kRegionHeaderSize || std::memcmp(h, kRegionMagic, 8) != 0 ||
      crc32c::Value(h, 60) != DecodeFixed32(h + 60)) {
    return Status::Corruption(options.path + " offset 0: not a valid PPL region header");
  }
  if (DecodeFixed32(h + 8) != kRegionVersion) {
    return Status::Corruption(StrFormat("%s offset 8: PPL region version %u, this build reads %u",
                                        options.path.c_str(), DecodeFixed32(h + 8),
                                        kRegionVersion));
  }
  const uint32_t block_size = DecodeFixed32(h + 12);
  const uint64_t count = DecodeFixed64(h + 16);
  const uint64_t salt = DecodeFixed64(h + 24);
  if (block_size % 64 != 0 || block_size < 128 || block_size > 65536 || count == 0 ||
      count > UINT32_MAX || (*f)->size() != kRegionHeaderSize + count * block_size) {
    return Status::Corruption(StrFormat(
        "%s: %zu bytes, its header says %llu blocks of %u bytes (truncated?)", options.path.c_str(),
        (*f)->size(), static_cast<unsigned long long>(count), block_size));
  }
  if (options.salt != 0 && salt != 0 && salt != options.salt) {
    return Status::InvalidArgument(StrFormat(
        "%s belongs to another database (salt %016llx, expected %016llx)", options.path.c_str(),
        static_cast<unsigned long long>(salt), static_cast<unsigned long long>(options.salt)));
  }
  pmem::Persistence* p = options.persistence ? options.persistence : (*f)->DefaultPersistence();
  std::unique_ptr<PplRegion> r(new PplRegion(std::move(*f), p, block_size, count));
  SUBITO_RETURN_IF_ERROR(r->Analyze());
  return r;
}

void PplRegion::ScanBlocks(uint32_t begin, uint32_t end, Scan* out) const {
  for (uint32_t i = begin; i < end; ++i) {
    const uint8_t* b = BlockAt(i);
    const uint32_t used = DecodeFixed32(b + kUsedOffset);
    if (used == 0) {
      out->free.push_back(i);
      continue;
    }
    const uint64_t at = kRegionHeaderSize + uint64_t{i} * block_size_;
    if (std::memcmp(b, kBlockMagic, 4) != 0 || DecodeFixed16(b + 4) != kBlockVersion ||
        crc32c::Value(b, kUsedOffset) != DecodeFixed32(b + 60) ||
        used > block_size_ - kBlockHeaderSize) {
      out->status = Status::Corruption(
          StrFormat("%s offset %llu: PPL block %u has a bad header (checksum, magic, version or "
                    "length %u)",
                    file_->path().c_str(), static_cast<unsigned long long>(at), i, used));
      return;
    }
    const buffer::PageId key{DecodeFixed32(b + 8), DecodeFixed32(b + 12)};
    const uint64_t generation = DecodeFixed64(b + 16);
    out->max_generation = std::max(out->max_generation, generation);
    // The committed entries are checked (framing, order, crcs: G1) when the
    // page's entries are read or appended to, not here: the open reads one
    // header per block and the bytes at `used`, whatever the bytes in use.
    // G2: complete entries past `used`, cut before their commit, pass their
    // crcs (bytes of an earlier owner, G5, or of a torn append do not);
    // CheckEntries commits them once it has checked their order.
    // (Their order among themselves only: CheckEntries checks it against
    // the committed ones.)
    uint64_t last = 0;
    const uint32_t off = WalkEntries(b, kBlockHeaderSize + used, block_size_, generation, &last);
    out->used.push_back(
        {key, Block{i, generation, used, kUnchecked, off - kBlockHeaderSize - used}});
  }
}

Status PplRegion::Analyze() {
  std::lock_guard lock(mu_);
  // Reading every block's header is one of the open's longest steps
  // (docs/results.md, restart at 16 GB): large regions are scanned by one
  // thread per core, in runs of blocks, and the results merged in block
  // order, so that what is found (the first bad block, the winner of a
  // page's two blocks) and every store made (the losers) are as in one
  // scan.
  constexpr uint64_t kBlocksPerThread = 16384;
  const uint64_t threads = std::clamp<uint64_t>(
      std::min<uint64_t>(std::thread::hardware_concurrency(), block_count_ / kBlocksPerThread), 1,
      8);
  const uint64_t per = (block_count_ + threads - 1) / threads;
  std::vector<Scan> scans(threads);
  auto scan_run = [this, per, &scans](uint64_t t) {
    Scan local;  // not beside another run's in memory while it grows
    ScanBlocks(static_cast<uint32_t>(t * per),
               static_cast<uint32_t>(std::min(block_count_, (t + 1) * per)), &local);
    scans[t] = std::move(local);
  };
  std::vector<std::thread> workers;
  uint64_t started = 1;
  try {
    for (; started < threads; ++started) {
      workers.emplace_back([&scan_run, started] {
        NameThisThread("subito_pplscan");
        scan_run(started);
      });
    }
  } catch (const std::system_error&) {
    // No thread to be had: the opening thread scans the rest itself.
  }
  for (uint64_t t = started; t < threads; ++t) scan_run(t);
  scan_run(0);
  for (std::thread& w : workers) w.join();
  size_t in_use = 0;
  for (const Scan& scan : scans) {
    if (!scan.status.ok()) return scan.status;
    in_use += scan.used.size();
  }
  table_.reserve(in_use);
  uint64_t max_generation = 0;
  std::vector<uint32_t> losers;
  std::vector<buffer::PageId> doubled;
  for (const Scan& scan : scans) {
    max_generation = std::max(max_generation, scan.max_generation);
    free_.insert(free_.end(), scan.free.begin(), scan.free.end());
    for (const Scan::Used& u : scan.used) {
      auto [it, inserted] = table_.try_emplace(u.page, u.block);
      if (inserted) continue;
      // Two blocks of one page (not made by this code, which frees a page's
      // block before it can take another): the newer generation wins.
      uint32_t loser = u.block.index;
      if (u.block.generation > it->second.generation) {
        loser = it->second.index;
        it->second = u.block;
      }
      losers.push_back(loser);
      doubled.push_back(u.page);
    }
  }
  // A loser is freed only once its winner's entries have passed (G1): a
  // refused region is left as it was.
  for (const buffer::PageId& page : doubled) {
    SUBITO_RETURN_IF_ERROR(CheckEntries(page, &table_.find(page)->second));
  }
  for (uint32_t loser : losers) StoreUsed(loser, 0);
  free_.insert(free_.end(), losers.begin(), losers.end());
  // G5: past every generation handed out before, found or not.
  next_generation_ = std::max(DecodeFixed64(file_->data() + kFloorOffset), max_generation + 1);
  RaiseFloor(next_generation_ + kFloorStep);
  std::reverse(free_.begin(), free_.end());  // low blocks first
  stats_.blocks_used = table_.size();
  return Status::OK();
}

void PplRegion::StoreUsed(uint32_t index, uint32_t used) {
  auto* field = reinterpret_cast<std::atomic<uint32_t>*>(BlockAt(index) + kUsedOffset);
  field->store(used, std::memory_order_relaxed);  // one aligned 4-byte store (G1)
  p_->Persist(field, sizeof used);
}

void PplRegion::RaiseFloor(uint64_t floor) {
  auto* field = reinterpret_cast<std::atomic<uint64_t>*>(file_->data() + kFloorOffset);
  field->store(floor, std::memory_order_relaxed);  // one aligned 8-byte store (G5)
  p_->Persist(field, sizeof floor);
  generation_floor_ = floor;
}

uint32_t PplRegion::Used(uint32_t space, uint32_t page_no) const {
  const buffer::PageId page{space, page_no};
  std::lock_guard lock(mu_);
  auto it = table_.find(page);
  return it == table_.end() ? 0 : it->second.used + it->second.probed;
}

Status PplRegion::ForEachEntry(
    uint32_t space, uint32_t page_no,
    const std::function<Status(uint64_t end_lsn, const uint8_t* edits, size_t n)>& fn) const {
  const buffer::PageId page{space, page_no};
  std::lock_guard lock(mu_);
  auto it = table_.find(page);
  if (it == table_.end()) return Status::OK();
  Block& blk = it->second;
  SUBITO_RETURN_IF_ERROR(CheckEntries(page, &blk));
  const uint8_t* b = BlockAt(blk.index);
  const uint32_t end = kBlockHeaderSize + blk.used;
  for (uint32_t off = kBlockHeaderSize; off < end;) {
    const uint8_t* e = b + off;
    const uint32_t len = DecodeFixed16(e + 4);
    SUBITO_RETURN_IF_ERROR(fn(DecodeFixed64(e + 8), e + kEntryHeaderSize, len));
    off += kEntryHeaderSize + len;
  }
  return Status::OK();
}

Status PplRegion::CheckEntries(buffer::PageId page, Block* blk) const {
  const uint8_t* b = BlockAt(blk->index);
  const uint32_t end = kBlockHeaderSize + blk->used;
  uint64_t last = 0;
  uint32_t off = WalkEntries(b, kBlockHeaderSize, end, blk->generation, &last);
  if (off != end) {
    const uint64_t at = kRegionHeaderSize + uint64_t{blk->index} * block_size_ + off;
    return Status::Corruption(StrFormat(
        "%s offset %llu: PPL entry of page %u:%u (block %u) fails its checksum, length or order",
        file_->path().c_str(), static_cast<unsigned long long>(at), page.space, page.page_no,
        blk->index));
  }
  if (blk->probed > 0) {
    // G2: complete entries cut before their commit, if they follow in order.
    off = WalkEntries(b, end, end + blk->probed, blk->generation, &last);
    // Kept in memory: the field is raised by the block's next append (or
    // zeroed by its free). Until then the bytes past the field stay as they
    // are, and every open decides the same from them.
    blk->probed = 0;
    blk->used = off - kBlockHeaderSize;
  }
  if (blk->last_lsn == kUnchecked) blk->last_lsn = last;
  return Status::OK();
}

void PplRegion::WriteBlockHeader(uint32_t index, buffer::PageId page, uint64_t generation) {
  uint8_t h[kBlockHeaderSize] = {};
  std::memcpy(h, kBlockMagic, 4);
  EncodeFixed16(h + 4, kBlockVersion);
  EncodeFixed32(h + 8, page.space);
  EncodeFixed32(h + 12, page.page_no);
  EncodeFixed64(h + 16, generation);
  EncodeFixed32(h + 60, crc32c::Value(h, kUsedOffset));
  p_->CopyNoDrain(BlockAt(index), h, sizeof h);  // used = 0: not owned until StoreUsed
}

Status PplRegion::Append(uint32_t space, uint32_t page_no, uint64_t end_lsn, const uint8_t* edits,
                         size_t n) {
  const buffer::PageId page{space, page_no};
  const size_t size = EntrySizeOf(n);
  if (n == 0 || n > UINT16_MAX) {
    return Status::InvalidArgument(StrFormat("PPL entry of %zu edit bytes", n));
  }
  std::lock_guard lock(mu_);
  auto it = table_.find(page);
  if (it != table_.end() && (it->second.last_lsn == kUnchecked || it->second.probed > 0)) {
    SUBITO_RETURN_IF_ERROR(CheckEntries(page, &it->second));
  }
  const uint64_t last_lsn = it == table_.end() ? 0 : it->second.last_lsn;
  if (end_lsn <= last_lsn) {
    return Status::InvalidArgument(StrFormat("PPL entry at LSN %llu after one at %llu",
                                             static_cast<unsigned long long>(end_lsn),
                                             static_cast<unsigned long long>(last_lsn)));
  }
  if (it == table_.end()) {
    if (free_.empty() || size > block_capacity()) {
      ++stats_.full;
      return Status::NoSpace("no free PPL block");
    }
    if (next_generation_ >= generation_floor_) RaiseFloor(generation_floor_ + kFloorStep);
    const uint32_t index = free_.back();
    free_.pop_back();
    const uint64_t generation = next_generation_++;
    WriteBlockHeader(index, page, generation);  // made durable with the entry below
    it = table_.emplace(page, Block{index, generation, 0, 0}).first;
    ++stats_.allocations;
    stats_.blocks_used = table_.size();
  } else if (kBlockHeaderSize + it->second.used + size > block_size_) {
    ++stats_.full;
    return Status::NoSpace("the page's PPL block is full");
  }
  Block& blk = it->second;
  uint8_t hdr[kEntryHeaderSize];
  EncodeFixed16(hdr + 4, static_cast<uint16_t>(n));
  EncodeFixed16(hdr + 6, 0);
  EncodeFixed64(hdr + 8, end_lsn);
  uint32_t crc = EntryCrc(blk.generation, hdr + 4, 12);
  crc = crc32c::Extend(crc, edits, n);
  EncodeFixed32(hdr, crc);
  uint8_t* dst = BlockAt(blk.index) + kBlockHeaderSize + blk.used;
  p_->CopyNoDrain(dst, hdr, sizeof hdr);
  p_->CopyNoDrain(dst + sizeof hdr, edits, n);
  p_->Drain();  // G2: the entry, and a new block's header, before the commit
  blk.used += static_cast<uint32_t>(size);
  StoreUsed(blk.index, blk.used);  // G3
  blk.last_lsn = end_lsn;
  ++stats_.appends;
  stats_.append_bytes += size;
  return Status::OK();
}

bool PplRegion::Free(uint32_t space, uint32_t page_no) {
  const buffer::PageId page{space, page_no};
  std::lock_guard lock(mu_);
  auto it = table_.find(page);
  if (it == table_.end()) return false;
  StoreUsed(it->second.index, 0);  // G4
  free_.push_back(it->second.index);
  table_.erase(it);
  ++stats_.frees;
  stats_.blocks_used = table_.size();
  return true;
}

void PplRegion::FreeSpace(uint32_t space) {
  std::vector<buffer::PageId> pages;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, blk] : table_) {
      if (key.space == space) pages.push_back(key);
    }
  }
  for (buffer::PageId k : pages) Free(k.space, k.page_no);
}

std::vector<std::pair<buffer::PageId, uint32_t>> PplRegion::Pages() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<buffer::PageId, uint32_t>> out;
  out.reserve(table_.size());
  for (const auto& [key, blk] : table_) out.emplace_back(key, blk.used + blk.probed);
  return out;
}

std::vector<std::pair<uint32_t, uint32_t>> PplRegion::LoggedPages(size_t n) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<uint32_t, uint32_t>> out;
  out.reserve(std::min(n, table_.size()));
  for (const auto& [key, blk] : table_) {
    if (out.size() == n) break;
    out.emplace_back(key.space, key.page_no);
  }
  return out;
}

uint64_t PplRegion::PagesUsed() const {
  std::lock_guard lock(mu_);
  return table_.size();
}

PplStats PplRegion::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

std::string PplRegion::Describe() const {
  return StrFormat("per-page logs: %s, %llu blocks of %u bytes", file_->Describe().c_str(),
                   static_cast<unsigned long long>(block_count_), block_size_);
}

}  // namespace subito::ppl
