#include "buffer/double_write.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "page/page_format.h"
#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"

namespace subito::buffer {
namespace {

constexpr char kDwMagic[8] = {'S', 'U', 'B', 'I', 'T', 'O', 'D', 'W'};
constexpr uint32_t kDwVersion = 1;

class PmDoubleWrite final : public DoubleWrite {
 public:
  PmDoubleWrite(std::unique_ptr<pmem::PmFile> f, pmem::Persistence* p, uint32_t page_size,
                uint32_t slots)
      : DoubleWrite(page_size, slots), file_(std::move(f)), p_(p) {
    p_->OnMap(file_->path(), file_->data(), file_->size());
  }
  ~PmDoubleWrite() override { p_->OnUnmap(file_->data()); }
  std::string Describe() const override { return "double-write on PM tier: " + file_->Describe(); }
  Status Init(bool fresh) { return fresh ? Format() : CheckHeader(file_->path()); }

 protected:
  Status Store(uint64_t offset, const void* src, size_t n) override {
    p_->CopyNoDrain(file_->data() + offset, src, n);
    return Status::OK();
  }
  Status MakeDurable() override {
    p_->Drain();
    return Status::OK();
  }
  Status Load(uint64_t offset, void* dst, size_t n) override {
    std::memcpy(dst, file_->data() + offset, n);
    return Status::OK();
  }

 private:
  std::unique_ptr<pmem::PmFile> file_;
  pmem::Persistence* p_;
};

class FileDoubleWrite final : public DoubleWrite {
 public:
  FileDoubleWrite(std::unique_ptr<File> f, uint32_t page_size, uint32_t slots)
      : DoubleWrite(page_size, slots), file_(std::move(f)) {}
  std::string Describe() const override { return "double-write in file " + file_->path(); }
  Status Init(bool fresh) {
    if (fresh) {
      SUBITO_RETURN_IF_ERROR(file_->Extend(DoubleWriteFileSize(page_size_, slots_)));
      return Format();
    }
    return CheckHeader(file_->path());
  }

 protected:
  Status Store(uint64_t offset, const void* src, size_t n) override {
    return file_->Write(offset, src, n);
  }
  Status MakeDurable() override { return file_->Sync(); }
  Status Load(uint64_t offset, void* dst, size_t n) override { return file_->Read(offset, dst, n); }

 private:
  std::unique_ptr<File> file_;
};

}  // namespace

uint64_t DoubleWriteFileSize(uint32_t page_size, uint32_t slots) {
  return 4096 + AlignUp(uint64_t{slots} * 64, 4096) + uint64_t{slots} * page_size;
}

uint64_t DoubleWrite::ImageOffset(uint32_t slot) const {
  return 4096 + AlignUp(uint64_t{slots_} * 64, 4096) + uint64_t{slot} * page_size_;
}

Status DoubleWrite::Format() {
  uint8_t h[64] = {};
  std::memcpy(h, kDwMagic, 8);
  EncodeFixed32(h + 8, kDwVersion);
  EncodeFixed32(h + 12, page_size_);
  EncodeFixed32(h + 16, slots_);
  EncodeFixed32(h + 60, crc32c::Value(h, 60));
  SUBITO_RETURN_IF_ERROR(Store(0, h, sizeof h));
  std::vector<uint8_t> empty(AlignUp(uint64_t{slots_} * 64, 4096), 0);
  SUBITO_RETURN_IF_ERROR(Store(4096, empty.data(), empty.size()));
  return MakeDurable();
}

Status DoubleWrite::CheckHeader(const std::string& where) {
  uint8_t h[64];
  SUBITO_RETURN_IF_ERROR(Load(0, h, sizeof h));
  if (std::memcmp(h, kDwMagic, 8) != 0 || crc32c::Value(h, 60) != DecodeFixed32(h + 60)) {
    return Status::Corruption(where + " offset 0: not a valid double-write file header");
  }
  if (DecodeFixed32(h + 8) != kDwVersion || DecodeFixed32(h + 12) != page_size_ ||
      DecodeFixed32(h + 16) != slots_) {
    return Status::InvalidArgument(
        StrFormat("%s: made for %u slots of %u bytes, version %u; expected %u slots of %u bytes",
                  where.c_str(), DecodeFixed32(h + 16), DecodeFixed32(h + 12), DecodeFixed32(h + 8),
                  slots_, page_size_));
  }
  return Status::OK();
}

Status DoubleWrite::WriteBatch(const std::vector<PageImage>& pages) {
  if (pages.size() > slots_) {
    return Status::InvalidArgument(
        StrFormat("double-write batch of %zu pages, %u slots", pages.size(), slots_));
  }
  std::lock_guard lock(mu_);
  const auto used = static_cast<uint32_t>(pages.size());
  // A batch that fails part way may leave valid entries in all its slots.
  const uint32_t clear_to = std::max(dirty_slots_, used);
  dirty_slots_ = clear_to;
  for (uint32_t i = 0; i < pages.size(); ++i) {
    const PageImage& pg = pages[i];
    uint8_t e[64] = {};
    EncodeFixed32(e, pg.space_id);
    EncodeFixed32(e + 4, pg.page_no);
    EncodeFixed64(e + 8, pg.page_lsn);
    EncodeFixed32(e + 16, crc32c::Value(pg.data, page_size_));
    EncodeFixed32(e + 60, crc32c::Value(e, 60));
    SUBITO_RETURN_IF_ERROR(Store(ImageOffset(i), pg.data, page_size_));
    SUBITO_RETURN_IF_ERROR(Store(EntryOffset(i), e, sizeof e));
  }
  // D4: the slots of earlier batches that this one does not reuse are
  // cleared with it.
  if (clear_to > used) {
    const std::vector<uint8_t> zeros(size_t{clear_to - used} * 64, 0);
    SUBITO_RETURN_IF_ERROR(Store(EntryOffset(used), zeros.data(), zeros.size()));
  }
  // D2: one fence / sync makes the whole batch durable before the caller
  // writes any page in place.
  SUBITO_RETURN_IF_ERROR(MakeDurable());
  dirty_slots_ = used;
  bytes_written_.fetch_add(pages.size() * (page_size_ + 64), std::memory_order_relaxed);
  return Status::OK();
}

Result<uint32_t> DoubleWrite::Repair(const std::function<page::SpaceFile*(uint32_t)>& space_of) {
  std::lock_guard lock(mu_);
  Result<AlignedBuffer> img_buf = AlignedBuffer::Allocate(page_size_);
  Result<AlignedBuffer> cur_buf = AlignedBuffer::Allocate(page_size_);
  if (!img_buf.ok()) return img_buf.status();
  if (!cur_buf.ok()) return cur_buf.status();
  uint8_t* const img = img_buf->get();
  uint8_t* const cur = cur_buf->get();
  uint32_t repaired = 0;
  Status st;
  for (uint32_t i = 0; i < slots_ && st.ok(); ++i) {
    uint8_t e[64];
    st = Load(EntryOffset(i), e, sizeof e);
    if (!st.ok()) break;
    if (crc32c::Value(e, 60) != DecodeFixed32(e + 60)) continue;  // D1: never written or torn
    st = Load(ImageOffset(i), img, page_size_);
    if (!st.ok()) break;
    if (crc32c::Value(img, page_size_) != DecodeFixed32(e + 16)) continue;  // D1
    const uint32_t space_id = DecodeFixed32(e), page_no = DecodeFixed32(e + 4);
    page::SpaceFile* space = space_of(space_id);
    if (space == nullptr) continue;
    // The image must be the page the entry names (P1), whatever the crcs say.
    if (page::IsZeroPage(img, page_size_) ||
        !page::CheckPage(img, page_size_, space_id, page_no, "double-write slot").ok()) {
      continue;
    }
    st = space->EnsurePages(page_no + 1);
    if (!st.ok()) break;
    Status in_place = space->ReadPage(page_no, cur);
    bool torn = !in_place.ok();
    if (!torn && page::PageLsn(cur) >= DecodeFixed64(e + 8)) continue;  // D3: newer in place
    st = space->WritePage(page_no, img);
    if (st.ok()) st = space->Sync();
    ++repaired;
  }
  if (!st.ok()) return st;
  return repaired;
}

// Both backends are created under a temporary name, formatted durably, and
// renamed into place (then the directory is synced): a crash during creation
// never leaves a half-formatted area under the real name.

Result<std::unique_ptr<DoubleWrite>> DoubleWrite::OpenPm(const std::string& path,
                                                         uint32_t page_size, uint32_t slots,
                                                         pmem::Persistence* persistence) {
  const uint64_t size = DoubleWriteFileSize(page_size, slots);
  if (!PosixFileSystem()->Exists(path)) {
    const std::string tmp = path + ".tmp";
    std::remove(tmp.c_str());
    {
      auto f = pmem::PmFile::Create(tmp, size);
      if (!f.ok()) return f.status();
      pmem::Persistence* p = (*f)->DefaultPersistence();  // creation is not a crash point
      PmDoubleWrite fresh(std::move(*f), p, page_size, slots);
      SUBITO_RETURN_IF_ERROR(fresh.Init(true));
    }
    SUBITO_RETURN_IF_ERROR(PosixFileSystem()->Rename(tmp, path));
    SUBITO_RETURN_IF_ERROR(PosixFileSystem()->SyncDirOf(path));
  }
  auto f = pmem::PmFile::Open(path);
  if (!f.ok()) return f.status();
  if ((*f)->size() != size) {
    return Status::Corruption(StrFormat(
        "%s: %zu bytes, expected %llu for %u slots of %u bytes (truncated?)", path.c_str(),
        (*f)->size(), static_cast<unsigned long long>(size), slots, page_size));
  }
  pmem::Persistence* p = persistence ? persistence : (*f)->DefaultPersistence();
  auto dw = std::make_unique<PmDoubleWrite>(std::move(*f), p, page_size, slots);
  SUBITO_RETURN_IF_ERROR(dw->Init(false));
  return std::unique_ptr<DoubleWrite>(std::move(dw));
}

Result<std::unique_ptr<DoubleWrite>> DoubleWrite::OpenFile(FileSystem* fs, const std::string& path,
                                                           uint32_t page_size, uint32_t slots) {
  const uint64_t size = DoubleWriteFileSize(page_size, slots);
  if (!fs->Exists(path)) {
    const std::string tmp = path + ".tmp";
    {
      SUBITO_RETURN_IF_ERROR(fs->Remove(tmp));  // never opened: see SpaceFile::Create
      auto f = fs->Create(tmp);
      if (!f.ok()) return f.status();
      FileDoubleWrite fresh(std::move(*f), page_size, slots);
      SUBITO_RETURN_IF_ERROR(fresh.Init(true));
    }
    SUBITO_RETURN_IF_ERROR(fs->Rename(tmp, path));
    SUBITO_RETURN_IF_ERROR(fs->SyncDirOf(path));
  }
  auto f = fs->Open(path);
  if (!f.ok()) return f.status();
  if ((*f)->Size() != size) {
    return Status::Corruption(
        StrFormat("%s: %llu bytes, expected %llu for %u slots of %u bytes (truncated?)",
                  path.c_str(), static_cast<unsigned long long>((*f)->Size()),
                  static_cast<unsigned long long>(size), slots, page_size));
  }
  auto dw = std::make_unique<FileDoubleWrite>(std::move(*f), page_size, slots);
  SUBITO_RETURN_IF_ERROR(dw->Init(false));
  return std::unique_ptr<DoubleWrite>(std::move(dw));
}

}  // namespace subito::buffer
