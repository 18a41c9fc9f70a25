#include "page/space_file.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <vector>

#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::page {
namespace {

constexpr char kSpaceMagic[8] = {'S', 'U', 'B', 'I', 'T', 'O', 'S', 'P'};
constexpr uint32_t kSpaceFormatVersion = 1;

}  // namespace

Result<std::unique_ptr<SpaceFile>> SpaceFile::Create(FileSystem* fs, const std::string& path,
                                                     uint32_t space_id, uint32_t page_size,
                                                     const std::string& name) {
  if (!ValidPageSize(page_size)) {
    return Status::InvalidArgument(
        StrFormat("page size %u: must be 4096, 8192 or 16384", page_size));
  }
  if (fs->Exists(path)) return Status::IOError("cannot create " + path + ": File exists");
  // Written under a temporary name and renamed into place once its header
  // page is durable: a crash during creation never leaves a space file
  // that cannot be opened.
  // A leftover (or planted) .tmp is removed, never opened: the new file is
  // created exclusively, so no link is followed.
  const std::string tmp = path + ".tmp";
  SUBITO_RETURN_IF_ERROR(fs->Remove(tmp));
  Result<std::unique_ptr<File>> f = fs->Create(tmp);
  if (!f.ok()) return f.status();
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(page_size);
  if (!buf.ok()) return buf.status();
  uint8_t* const hdr = buf->get();
  InitPage(hdr, page_size, kPageSpaceHeader, space_id, 0);
  std::memcpy(hdr + 32, kSpaceMagic, sizeof kSpaceMagic);
  EncodeFixed32(hdr + 40, kSpaceFormatVersion);
  EncodeFixed32(hdr + 44, page_size);
  EncodeFixed32(hdr + 48, space_id);
  // A label for people reading the file; nothing identifies a space by it.
  const std::string label = name.substr(0, kSpaceLabelMax);
  std::copy(label.begin(), label.end(), hdr + 56);
  EncodeFixed64(hdr + 120, static_cast<uint64_t>(::time(nullptr)));
  SealPage(hdr, page_size);
  SUBITO_RETURN_IF_ERROR((*f)->Extend(uint64_t{page_size} * kExtendPages));
  SUBITO_RETURN_IF_ERROR((*f)->Write(0, hdr, page_size));
  SUBITO_RETURN_IF_ERROR((*f)->Sync());
  f.value().reset();
  SUBITO_RETURN_IF_ERROR(fs->Rename(tmp, path));
  SUBITO_RETURN_IF_ERROR(fs->SyncDirOf(path));  // the new name is durable too
  f = fs->Open(path);
  if (!f.ok()) return f.status();
  return std::unique_ptr<SpaceFile>(new SpaceFile(std::move(*f), space_id, page_size, label, 1));
}

Result<std::unique_ptr<SpaceFile>> SpaceFile::Open(FileSystem* fs, const std::string& path) {
  Result<std::unique_ptr<File>> f = fs->Open(path);
  if (!f.ok()) return f.status();
  File& file = **f;
  if (file.Size() < kMinPageSize) {
    return Status::Corruption(
        StrFormat("%s: %llu bytes, too short for a space header page "
                  "(truncated?)",
                  path.c_str(), static_cast<unsigned long long>(file.Size())));
  }
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(kMinPageSize);
  if (!buf.ok()) return buf.status();
  const uint8_t* const first = buf->get();
  SUBITO_RETURN_IF_ERROR(file.Read(0, buf->get(), kMinPageSize));
  if (std::memcmp(first + 32, kSpaceMagic, sizeof kSpaceMagic) != 0) {
    return Status::Corruption(path + " page 0: not a Subito space file (bad magic)");
  }
  const uint32_t page_size = DecodeFixed32(first + 44);
  const uint32_t space_id = DecodeFixed32(first + 48);
  if (!ValidPageSize(page_size) || file.Size() < page_size) {
    return Status::Corruption(
        StrFormat("%s page 0: impossible page size %u", path.c_str(), page_size));
  }
  // Only the identity fields, which never change after creation, are read
  // here. Page 0's checksum is not required: a torn write of page 0 (its
  // meta area changes like any page) is repaired from the double-write area
  // after the space is open, and until then reading page 0 reports it.
  if (DecodeFixed32(first + 40) != kSpaceFormatVersion || DecodeFixed32(first + 16) != space_id ||
      DecodeFixed32(first + 20) != 0) {
    return Status::Corruption(path + " page 0: not a valid space header page");
  }
  char name[kSpaceLabelMax + 1] = {};
  std::memcpy(name, first + 56, kSpaceLabelMax);
  // Every page of the file counts, written or not: a page allocated before a
  // crash may be needed by redo.
  uint32_t pages = static_cast<uint32_t>(file.Size() / page_size);
  return std::unique_ptr<SpaceFile>(new SpaceFile(std::move(*f), space_id, page_size, name, pages));
}

Status SpaceFile::ReadPage(uint32_t page_no, uint8_t* buf) {
  SUBITO_RETURN_IF_ERROR(ReadPages(page_no, 1, buf));
  return CheckRead(page_no, buf);
}

Status SpaceFile::ReadPages(uint32_t first, uint32_t n, uint8_t* buf, bool count) {
  if (n == 0 || uint64_t{first} + n > page_count()) {
    return Status::NotFound(StrFormat("%s: page %u is past the end of the space (%u pages)",
                                      path().c_str(), first + n - 1, page_count()));
  }
  const uint64_t off = uint64_t{first} * page_size_;
  const uint64_t want = uint64_t{n} * page_size_;
  const uint64_t size = file_->Size();
  // Allocated in memory, the file not grown that far yet: never written.
  // Whole pages only: a page the file holds part of was never written.
  const uint64_t in_file = size <= off ? 0 : std::min(want, size - off) / page_size_ * page_size_;
  if (in_file > 0) SUBITO_RETURN_IF_ERROR(file_->Read(off, buf, in_file));
  if (in_file < want) std::memset(buf + in_file, 0, want - in_file);
  if (count) pages_read_.fetch_add(in_file / page_size_, std::memory_order_relaxed);
  return Status::OK();
}

Status SpaceFile::CheckRead(uint32_t page_no, const uint8_t* buf) const {
  return CheckPage(buf, page_size_, space_id_, page_no, path());
}

Status SpaceFile::WritePage(uint32_t page_no, const uint8_t* buf) {
  return WritePages(page_no, &buf, 1);
}

Status SpaceFile::WritePages(uint32_t first, const uint8_t* const* bufs, uint32_t n) {
  if (n == 0) return Status::OK();
  const uint64_t off = uint64_t{first} * page_size_;
  if (off + uint64_t{n} * page_size_ > file_->Size()) SUBITO_RETURN_IF_ERROR(GrowFile(first + n));
  SUBITO_RETURN_IF_ERROR(file_->WriteGather(off, bufs, n, page_size_));
  pages_written_.fetch_add(n, std::memory_order_relaxed);
  return Status::OK();
}

Status SpaceFile::Sync() {
  return file_->Sync();
}

Status SpaceFile::GrowFile(uint32_t pages) {
  std::lock_guard lock(grow_mu_);
  uint64_t want = uint64_t{(pages + kExtendPages - 1) / kExtendPages * kExtendPages} * page_size_;
  return file_->Extend(want);
}

Result<uint32_t> SpaceFile::AllocatePage() {
  if (page_count() >= kMaxPages) {
    return Status::NotSupported(
        StrFormat("%s: space is full (%u pages)", path().c_str(), kMaxPages));
  }
  uint32_t no = page_count_.fetch_add(1, std::memory_order_acq_rel);
  if (uint64_t{no + 1} * page_size_ > file_->Size()) {
    if (Status st = GrowFile(no + 1); !st.ok()) {
      // The file system is full: the page is given back unless another
      // allocation came after it (then it stays unused past the end, and is
      // not counted after a restart, which counts the file's pages).
      uint32_t expected = no + 1;
      page_count_.compare_exchange_strong(expected, no, std::memory_order_acq_rel);
      return st;
    }
  }
  return no;
}

Status SpaceFile::EnsurePages(uint32_t count) {
  // Page numbers come from log records and double-write slots: untrusted.
  if (count == 0 || count > kMaxPages) {
    return Status::Corruption(
        StrFormat("%s: page number %u is out of range", path().c_str(), count - 1));
  }
  uint32_t cur = page_count();
  while (cur < count && !page_count_.compare_exchange_weak(cur, count)) {
  }
  if (uint64_t{count} * page_size_ > file_->Size()) return GrowFile(count);
  return Status::OK();
}

SpaceIoStats SpaceFile::stats() const {
  SpaceIoStats s;
  s.pages_read = pages_read_.load(std::memory_order_relaxed);
  s.pages_written = pages_written_.load(std::memory_order_relaxed);
  s.bytes_read = s.pages_read * page_size_;
  s.bytes_written = s.pages_written * page_size_;
  s.redo_bytes = redo_bytes_.load(std::memory_order_relaxed);
  s.double_write_bytes = dwb_bytes_.load(std::memory_order_relaxed);
  s.ppl_bytes = ppl_bytes_.load(std::memory_order_relaxed);
  s.ppl_appends = ppl_appends_.load(std::memory_order_relaxed);
  s.buffer_hits = buffer_hits_.value();
  s.buffer_misses = buffer_misses_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace subito::page
