#include "log/log_files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <random>

#include "util/file_io.h"
#include "util/strings.h"

namespace subito::log {
namespace fs = std::filesystem;

namespace {

std::string Errno(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return Status::IOError(Errno("cannot open directory " + dir));
  int rc = ::fsync(fd);
  ::close(fd);
  if (rc != 0) return Status::IOError(Errno("cannot fsync directory " + dir));
  return Status::OK();
}

uint64_t NewLogSalt() {
  std::random_device rd;
  uint64_t salt = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  salt ^= static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return salt == 0 ? 1 : salt;
}

}  // namespace

std::string LogFiles::StreamPath(const std::string& dir, size_t i) {
  return dir + "/log." + std::to_string(i);
}

Result<std::unique_ptr<LogFiles>> LogFiles::OpenOrCreate(const LogOptions& options) {
  std::unique_ptr<LogFiles> lf(new LogFiles(options));
  std::error_code ec;
  if (Status st = CreatePrivateDirectories(options.dir); !st.ok()) {
    return Status::IOError("cannot create log directory " + options.dir + " (" + st.message() +
                           ")");
  }
  SUBITO_RETURN_IF_ERROR(lf->Lock());
  // log.0 first: a log exists exactly when log.0 does.
  if (options.replace) fs::remove(StreamPath(options.dir, 0), ec);
  size_t count = 0;
  while (fs::exists(StreamPath(options.dir, count))) ++count;
  if (count == 0) {
    // No log.0: any later stream file is an interrupted creation (log.0 is
    // renamed into place last), which never held a record.
    for (size_t i = 1; i <= 16; ++i) fs::remove(StreamPath(options.dir, i), ec);
    SUBITO_RETURN_IF_ERROR(lf->Create());
  } else {
    SUBITO_RETURN_IF_ERROR(lf->OpenExisting(count));
  }
  if (options.write_mode == LogWriteMode::kClassic) {
    FileSystem* fs = options.file_system ? options.file_system : PosixFileSystem();
    for (auto& f : lf->files_) {
      Result<std::unique_ptr<File>> w = fs->Open(f->path());
      if (!w.ok()) return w.status();
      lf->writers_.push_back(std::move(*w));
    }
  }
  return lf;
}

Status LogFiles::Lock() {
  std::string path = options_.dir + "/LOCK";
  lock_fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (lock_fd_ < 0) return Status::IOError(Errno("cannot create " + path));
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Busy("log directory " + options_.dir + " is in use by another process");
  }
  return Status::OK();
}

Status LogFiles::Create() {
  const uint32_t n = options_.streams;
  const uint64_t salt = NewLogSalt();
  if (options_.on_create) SUBITO_RETURN_IF_ERROR(options_.on_create(salt));
  std::vector<std::string> tmp(n);
  for (uint32_t i = 0; i < n; ++i) {
    tmp[i] = StreamPath(options_.dir, i) + ".tmp";
    std::error_code ec;
    fs::remove(tmp[i], ec);
    Result<std::unique_ptr<pmem::PmFile>> f = pmem::PmFile::Create(tmp[i], options_.file_size);
    if (!f.ok()) return f.status();
    pmem::PmFile& file = **f;
    // Creation is not a crash point (an interrupted creation leaves no log.0),
    // so it persists through the mapping's own path even under a test tracker.
    pmem::Persistence* p = file.DefaultPersistence();
    FileHeader h{};
    std::memcpy(h.magic, kLogMagic, sizeof h.magic);
    h.format_version = kLogFormatVersion;
    h.header_size = kFileHeaderSize;
    h.salt = salt;
    h.stream_id = i;
    h.stream_count = n;
    h.file_size = file.size();
    h.data_offset = kDataOffset;
    h.data_size = file.size() - kDataOffset;
    h.stripe_size = kStripeSize;
    h.write_ahead_size = options_.write_ahead_size;
    h.created_unix_time = static_cast<uint64_t>(::time(nullptr));
    SealFileHeader(&h);
    p->CopyNoDrain(file.data() + kFileHeaderOffset, &h, sizeof h);
    if (i == 0) {
      CheckpointSlot slot{};
      const Lsn first = std::max<Lsn>(
          kFirstLsn, (options_.first_lsn + kRecordAlign - 1) / kRecordAlign * kRecordAlign);
      slot.checkpoint_lsn = first;
      slot.durable_lsn = first;
      slot.sequence = 1;
      slot.salt = salt;
      slot.write_reach = options_.buffer_size;
      SealCheckpointSlot(&slot);
      p->CopyNoDrain(file.data() + kCheckpointSlotOffset[1], &slot, sizeof slot);
    }
    p->Drain();
    files_.push_back(std::move(*f));
  }
  files_.clear();  // unmap; reopened under the final names below
  // log.0 last, after the other names are durable: a log exists exactly when
  // log.0 does.
  for (uint32_t i = n; i-- > 0;) {
    if (i == 0) SUBITO_RETURN_IF_ERROR(SyncDir(options_.dir));
    if (::rename(tmp[i].c_str(), StreamPath(options_.dir, i).c_str()) != 0) {
      return Status::IOError(Errno("cannot rename " + tmp[i]));
    }
  }
  SUBITO_RETURN_IF_ERROR(SyncDir(options_.dir));
  created_ = true;
  return OpenExisting(n);
}

Status LogFiles::OpenExisting(size_t count) {
  for (size_t i = 0; i < count; ++i) {
    Result<std::unique_ptr<pmem::PmFile>> f = pmem::PmFile::Open(StreamPath(options_.dir, i));
    if (!f.ok()) return f.status();
    files_.push_back(std::move(*f));
  }
  // The stream count is a property of the log; a setting that disagrees is
  // the user's to fix, a missing file is damage.
  Result<FileHeader> h0 = ReadFileHeader(Views()[0]);
  if (!h0.ok()) return h0.status();
  if (h0->stream_count != options_.streams) {
    return Status::InvalidArgument(StrFormat(
        "log in %s has %u streams but log_streams=%u; the stream count is fixed when the log is "
        "created (shut down cleanly and remove the log files to change it)",
        options_.dir.c_str(), h0->stream_count, options_.streams));
  }
  if (count != h0->stream_count) {
    return Status::Corruption(StrFormat("log in %s has %u streams but %zu stream files (%s)",
                                        options_.dir.c_str(), h0->stream_count, count,
                                        count < h0->stream_count
                                            ? ("missing " + StreamPath(options_.dir, count)).c_str()
                                            : "extra files"));
  }
  persistence_ = options_.persistence ? options_.persistence : files_[0]->DefaultPersistence();
  for (auto& f : files_) persistence_->OnMap(f->path(), f->data(), f->size());
  return Status::OK();
}

LogFiles::~LogFiles() {
  for (auto& f : files_) {
    if (persistence_) persistence_->OnUnmap(f->data());
  }
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

std::vector<StreamView> LogFiles::Views() const {
  std::vector<StreamView> v;
  for (auto& f : files_) v.push_back({f->path(), f->data(), f->size()});
  return v;
}

Status LogFiles::WriteDurably(size_t i, uint64_t offset, const void* src, size_t n) {
  if (writers_.empty()) {
    uint8_t* dst = files_[i]->data() + offset;
    if (src) {
      persistence_->CopyNoDrain(dst, src, n);
    } else {
      persistence_->FillNoDrain(dst, 0, n);
    }
    persistence_->Drain();
    return Status::OK();
  }
  std::vector<uint8_t> zeros;
  if (!src) {
    zeros.assign(n, 0);
    src = zeros.data();
  }
  SUBITO_RETURN_IF_ERROR(writers_[i]->Write(offset, src, n));
  return writers_[i]->Sync();
}

}  // namespace subito::log
