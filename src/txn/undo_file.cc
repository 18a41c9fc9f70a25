#include "txn/undo_file.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"

namespace subito::txn {
namespace {

constexpr char kMagic[8] = {'S', 'U', 'B', 'U', 'N', 'D', 'O', '\0'};
constexpr uint64_t kBlock = AlignedBuffer::kAlign;
constexpr size_t kReadWindow = 1 << 20;

Status Damaged(const std::string& path, uint64_t offset, const std::string& what) {
  return Status::Corruption(StrFormat("undo file %s, offset %llu: %s", path.c_str(),
                                      static_cast<unsigned long long>(offset), what.c_str()));
}

uint32_t EntryCrc(uint64_t seq, std::string_view payload) {
  uint8_t s[8];
  EncodeFixed64(s, seq);
  return crc32c::Extend(crc32c::Value(s, 8), payload.data(), payload.size());
}

}  // namespace

std::string UndoFilePath(const std::string& dir, uint64_t txn) {
  return dir + "/undo-" + std::to_string(txn) + ".sbu";
}

std::string EncodeUndoAnchor(const UndoAnchor& a) {
  std::string out(24, '\0');
  auto* p = reinterpret_cast<uint8_t*>(out.data());
  EncodeFixed64(p, a.txn);
  EncodeFixed64(p + 8, a.count);
  EncodeFixed64(p + 16, a.bytes);
  return out;
}

Result<UndoAnchor> DecodeUndoAnchor(const uint8_t* payload, uint32_t length) {
  if (length != 24) return Status::Corruption("undo-file record: wrong length");
  UndoAnchor a{DecodeFixed64(payload), DecodeFixed64(payload + 8), DecodeFixed64(payload + 16)};
  if (a.bytes < kUndoFileHeaderBytes || (a.count == 0) != (a.bytes == kUndoFileHeaderBytes) ||
      a.bytes - kUndoFileHeaderBytes < a.count * (kUndoEntryHeaderBytes + 1)) {
    return Status::Corruption("undo-file record: count and size disagree");
  }
  return a;
}

Result<std::unique_ptr<UndoFile>> UndoFile::Create(FileSystem* fs, const std::string& dir,
                                                   uint64_t txn) {
  const std::string path = UndoFilePath(dir, txn);
  SUBITO_RETURN_IF_ERROR(fs->Remove(path));
  Result<AlignedBuffer> tail = AlignedBuffer::Allocate(kBlock);
  if (!tail.ok()) return tail.status();
  std::memset(tail->get(), 0, kBlock);
  std::memcpy(tail->get(), kMagic, 8);
  EncodeFixed32(tail->get() + 8, kUndoFileVersion);
  EncodeFixed64(tail->get() + 16, txn);
  EncodeFixed32(tail->get() + 24, crc32c::Value(tail->get(), 24));
  Result<std::unique_ptr<File>> f = fs->Create(path);
  if (!f.ok()) return f.status();
  Status st = (*f)->Write(0, tail->get(), kBlock);
  if (!st.ok()) {
    (void)fs->Remove(path);
    return st;
  }
  std::memset(tail->get(), 0, kBlock);
  auto u = std::unique_ptr<UndoFile>(new UndoFile(std::move(*f), txn, std::move(*tail)));
  u->fs_ = fs;
  return u;
}

Result<std::unique_ptr<UndoFile>> UndoFile::Open(FileSystem* fs, const std::string& dir,
                                                 const UndoAnchor& a) {
  const std::string path = UndoFilePath(dir, a.txn);
  if (!fs->Exists(path)) {
    return Status::Corruption(
        StrFormat("the redo log names undo file %s of transaction %llu, which is missing",
                  path.c_str(), static_cast<unsigned long long>(a.txn)));
  }
  Result<std::unique_ptr<File>> f = fs->Open(path);
  if (!f.ok()) return f.status();
  const auto bad = [&](uint64_t offset, const std::string& what) {
    return Damaged(path, offset, what);
  };
  if ((*f)->Size() < AlignUp(a.bytes, kBlock)) {
    return bad((*f)->Size(), StrFormat("the file ends there, before the %llu bytes the redo log "
                                       "names (in whole 4 KiB blocks)",
                                       static_cast<unsigned long long>(a.bytes)));
  }
  Result<AlignedBuffer> window = AlignedBuffer::Allocate(kReadWindow);
  if (!window.ok()) return window.status();
  SUBITO_RETURN_IF_ERROR((*f)->Read(0, window->get(), kBlock));
  const uint8_t* h = window->get();
  if (std::memcmp(h, kMagic, 8) != 0 || DecodeFixed32(h + 24) != crc32c::Value(h, 24)) {
    return bad(0, "not an undo file, or its header is damaged");
  }
  if (DecodeFixed32(h + 8) != kUndoFileVersion) {
    return bad(8, StrFormat("format version %u, this build reads %u", DecodeFixed32(h + 8),
                            kUndoFileVersion));
  }
  if (DecodeFixed64(h + 16) != a.txn) return bad(16, "the file belongs to another transaction");

  File* file = f->get();  // owned by the UndoFile below
  // Entries are checked through a window of the file that slides forward.
  uint64_t window_start = 0, window_end = 0;
  std::string big;  // an entry longer than the window
  const auto bytes_at = [&](uint64_t pos, uint64_t n) -> Result<const uint8_t*> {
    if (pos >= window_start && pos + n <= window_end) return window->get() + (pos - window_start);
    const uint64_t start = AlignDown(pos, kBlock);
    const uint64_t len = AlignUp(pos + n, kBlock) - start;
    if (len > kReadWindow) {
      big.resize(len);
      for (uint64_t done = 0; done < len; done += kReadWindow) {
        const uint64_t part = std::min<uint64_t>(kReadWindow, len - done);
        SUBITO_RETURN_IF_ERROR(file->Read(start + done, window->get(), part));
        std::memcpy(big.data() + done, window->get(), part);
      }
      window_start = window_end = 0;
      return reinterpret_cast<const uint8_t*>(big.data()) + (pos - start);
    }
    const uint64_t file_end = AlignUp(a.bytes, kBlock);
    window_start = start;
    window_end = std::min(start + kReadWindow, file_end);
    SUBITO_RETURN_IF_ERROR(file->Read(start, window->get(), window_end - start));
    return window->get() + (pos - start);
  };
  Result<AlignedBuffer> tail = AlignedBuffer::Allocate(kBlock);
  if (!tail.ok()) return tail.status();
  auto u = std::unique_ptr<UndoFile>(new UndoFile(std::move(*f), a.txn, std::move(*tail)));
  u->fs_ = fs;
  u->named_durable_ = true;
  u->offsets_.reserve(a.count);
  uint64_t pos = kUndoFileHeaderBytes;
  for (uint64_t seq = 0; seq < a.count; ++seq) {
    if (a.bytes - pos < kUndoEntryHeaderBytes) return bad(pos, "an entry is cut short");
    Result<const uint8_t*> e = bytes_at(pos, kUndoEntryHeaderBytes);
    if (!e.ok()) return e.status();
    const uint32_t length = DecodeFixed32(*e), crc = DecodeFixed32(*e + 4);
    if (DecodeFixed64(*e + 8) != seq) return bad(pos, "an entry out of place");
    if (length == 0 || a.bytes - pos - kUndoEntryHeaderBytes < length) {
      return bad(pos, "an entry's length runs past the end");
    }
    Result<const uint8_t*> payload = bytes_at(pos + kUndoEntryHeaderBytes, length);
    if (!payload.ok()) return payload.status();
    if (EntryCrc(seq, {reinterpret_cast<const char*>(*payload), length}) != crc) {
      return bad(pos, "checksum mismatch");
    }
    u->offsets_.push_back(pos);
    pos += kUndoEntryHeaderBytes + length;
  }
  if (pos != a.bytes) return bad(pos, "entries end before the size the redo log names");
  u->end_ = u->high_water_ = pos;
  Result<AlignedBuffer> at_end = u->TailAt(pos);
  if (!at_end.ok()) return at_end.status();
  u->tail_ = std::move(*at_end);
  return u;
}

Result<AlignedBuffer> UndoFile::TailAt(uint64_t end) {
  Result<AlignedBuffer> tail = AlignedBuffer::Allocate(kBlock);
  if (!tail.ok()) return tail.status();
  std::memset(tail->get(), 0, kBlock);
  const uint64_t in_block = end % kBlock;
  if (in_block == 0) return tail;
  SUBITO_RETURN_IF_ERROR(file_->Read(end - in_block, tail->get(), kBlock));
  std::memset(tail->get() + in_block, 0, kBlock - in_block);
  return tail;
}

Status UndoFile::Append(const std::vector<std::string>& payloads) {
  if (payloads.empty() && named_durable_) return Status::OK();
  const uint64_t start = AlignDown(end_, kBlock);
  uint64_t new_end = end_;
  for (const std::string& p : payloads) new_end += kUndoEntryHeaderBytes + p.size();
  const uint64_t len = std::max<uint64_t>(AlignUp(new_end, kBlock) - start, kBlock);
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(len);
  if (!buf.ok()) return buf.status();
  uint8_t* b = buf->get();
  std::memcpy(b, tail_.get(), kBlock);
  std::memset(b + (end_ - start), 0, len - (end_ - start));
  // The block the new end falls in keeps the file's bytes after it: they
  // may be entries a durable anchor still names (a rollback took them back
  // and the list is written again at their positions, U2).
  const uint64_t last = AlignDown(new_end, kBlock);
  if (new_end % kBlock != 0 && last < high_water_) {
    SUBITO_RETURN_IF_ERROR(file_->Read(last, b + (last - start), kBlock));
  }
  std::vector<uint64_t> added;
  added.reserve(payloads.size());
  uint64_t pos = end_;
  for (const std::string& p : payloads) {
    uint8_t* e = b + (pos - start);
    const uint64_t seq = offsets_.size() + added.size();
    EncodeFixed32(e, static_cast<uint32_t>(p.size()));
    EncodeFixed32(e + 4, EntryCrc(seq, p));
    EncodeFixed64(e + 8, seq);
    std::copy(p.begin(), p.end(), e + kUndoEntryHeaderBytes);
    added.push_back(pos);
    pos += kUndoEntryHeaderBytes + p.size();
  }
  if (end_ != new_end || !named_durable_) {
    SUBITO_RETURN_IF_ERROR(file_->Write(start, b, len));
    SUBITO_RETURN_IF_ERROR(file_->Sync());
  }
  if (!named_durable_) {
    SUBITO_RETURN_IF_ERROR(fs_->SyncDirOf(file_->path()));
    named_durable_ = true;
  }
  offsets_.insert(offsets_.end(), added.begin(), added.end());
  end_ = new_end;
  high_water_ = std::max(high_water_, end_);
  if (end_ % kBlock == 0) {
    std::memset(tail_.get(), 0, kBlock);
  } else {
    std::memcpy(tail_.get(), b + (last - start), kBlock);
    std::memset(tail_.get() + (end_ - last), 0, kBlock - (end_ - last));
  }
  return Status::OK();
}

Result<std::vector<UndoRecord>> UndoFile::Read(uint64_t first, uint64_t end) {
  std::vector<UndoRecord> out;
  if (first >= end) return out;
  if (end > count()) return Status::InvalidArgument("undo file: reading past its entries");
  const uint64_t from = AlignDown(offsets_[first], kBlock);
  const uint64_t to = AlignUp(end == count() ? end_ : offsets_[end], kBlock);
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(to - from);
  if (!buf.ok()) return buf.status();
  SUBITO_RETURN_IF_ERROR(file_->Read(from, buf->get(), to - from));
  out.reserve(end - first);
  for (uint64_t i = first; i < end; ++i) {
    const uint8_t* e = buf->get() + (offsets_[i] - from);
    const uint32_t length = DecodeFixed32(e);
    const uint8_t* payload = e + kUndoEntryHeaderBytes;
    const auto bad = [&](const std::string& what) { return Damaged(path(), offsets_[i], what); };
    if (DecodeFixed64(e + 8) != i ||
        EntryCrc(i, {reinterpret_cast<const char*>(payload), length}) != DecodeFixed32(e + 4)) {
      return bad("checksum mismatch");
    }
    Result<UndoRecord> r = DecodeUndo(payload, length);
    if (!r.ok()) return bad(r.status().message());
    if (r->txn != txn_) return bad("an entry of another transaction");
    out.push_back(std::move(*r));
  }
  return out;
}

void UndoFile::RemoveAll(const std::string& dir, const std::vector<std::string>& keep) {
  if (keep.empty()) return RemoveFilesNamed(dir, "undo-", ".sbu");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("undo-", 0) != 0 || e.path().extension() != ".sbu") continue;
    const bool kept = std::any_of(keep.begin(), keep.end(), [&](const std::string& path) {
      return std::filesystem::path(path).filename() == name;
    });
    if (!kept) std::filesystem::remove(e.path(), ec);
  }
}

Status UndoFile::Truncate(uint64_t count) {
  if (count >= offsets_.size()) return Status::OK();
  Result<AlignedBuffer> tail = TailAt(offsets_[count]);  // first: a failure changes nothing
  if (!tail.ok()) return tail.status();
  tail_ = std::move(*tail);
  end_ = offsets_[count];
  offsets_.resize(count);
  return Status::OK();
}

}  // namespace subito::txn
