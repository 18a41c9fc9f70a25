#include "util/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

#include "util/strings.h"

namespace subito {
namespace {

Status Errno(const std::string& what, const std::string& path) {
  return Status::IOError(what + " " + path + ": " + std::strerror(errno));
}

class PosixFile final : public File {
 public:
  PosixFile(std::string path, int fd, uint64_t size)
      : path_(std::move(path)), fd_(fd), size_(size) {}
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;
  ~PosixFile() override { ::close(fd_); }

  Status Read(uint64_t offset, void* dst, size_t n) override {
    auto* p = static_cast<uint8_t*>(dst);
    for (size_t done = 0; done < n;) {
      ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return Errno("read", path_);
      if (r == 0) {
        return Status::Corruption(
            StrFormat("%s: read of %zu bytes at offset %llu ends past the "
                      "end of the file (%llu bytes; truncated?)",
                      path_.c_str(), n, static_cast<unsigned long long>(offset),
                      static_cast<unsigned long long>(size_)));
      }
      done += static_cast<size_t>(r);
    }
    return Status::OK();
  }
  Status Write(uint64_t offset, const void* src, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(src);
    for (size_t done = 0; done < n;) {
      ssize_t w = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return Errno("write", path_);
      done += static_cast<size_t>(w);
    }
    uint64_t cur = size_.load(std::memory_order_relaxed);
    while (offset + n > cur && !size_.compare_exchange_weak(cur, offset + n)) {
    }
    return Status::OK();
  }
  Status Sync() override {
    if (::fdatasync(fd_) != 0) return Errno("fdatasync", path_);
    return Status::OK();
  }
  Status Extend(uint64_t size) override {
    if (size <= Size()) return Status::OK();
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return Errno("extend", path_);
    uint64_t cur = size_.load(std::memory_order_relaxed);
    while (size > cur && !size_.compare_exchange_weak(cur, size)) {
    }
    return Status::OK();
  }
  uint64_t Size() const override { return size_.load(std::memory_order_acquire); }
  const std::string& path() const override { return path_; }

 private:
  const std::string path_;
  const int fd_;
  std::atomic<uint64_t> size_;  // read by readers while writers grow the file
};

class PosixFs final : public FileSystem {
 public:
  explicit PosixFs(bool direct) : direct_(direct) {}
  Result<std::unique_ptr<File>> Create(const std::string& path) override {
    return OpenWith(path, O_CREAT | O_EXCL);
  }
  Result<std::unique_ptr<File>> Open(const std::string& path) override { return OpenWith(path, 0); }
  bool Exists(const std::string& path) override { return ::access(path.c_str(), F_OK) == 0; }
  Status SyncDirOf(const std::string& path) override {
    const std::string parent = std::filesystem::path(path).parent_path().string();
    const std::string dir = parent.empty() ? std::string(1, '.') : parent;
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open directory", dir);
    int rc = ::fsync(fd);
    ::close(fd);
    if (rc != 0) return Errno("fsync of directory", dir);
    return Status::OK();
  }
  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return Errno("cannot rename", from);
    return Status::OK();
  }
  Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Errno("cannot remove", path);
    return Status::OK();
  }

 private:
  Result<std::unique_ptr<File>> OpenWith(const std::string& path, int extra) {
    int flags = O_RDWR | O_CLOEXEC | extra;
    int fd = direct_ ? ::open(path.c_str(), flags | O_DIRECT, 0644) : -1;
    if (fd < 0 && (!direct_ || errno == EINVAL)) fd = ::open(path.c_str(), flags, 0644);
    if (fd < 0) return Errno(extra ? "cannot create" : "cannot open", path);
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Errno("stat", path);
    }
    return std::unique_ptr<File>(new PosixFile(path, fd, static_cast<uint64_t>(st.st_size)));
  }
  const bool direct_;
};

}  // namespace

FileSystem* PosixFileSystem(bool direct_io) {
  static PosixFs buffered(false);
  static PosixFs direct(true);
  return direct_io ? &direct : &buffered;
}

class TrackingFile final : public File {
 public:
  TrackingFile(TrackingFileSystem* fs, std::string path,
               std::shared_ptr<TrackingFileSystem::Node> n)
      : fs_(fs), path_(std::move(path)), node_(std::move(n)) {}

  Status Read(uint64_t offset, void* dst, size_t n) override {
    std::lock_guard lock(fs_->clock_->mu);
    if (offset + n > node_->current.size()) {
      return Status::Corruption(
          StrFormat("%s: read past the end of the file (truncated?)", path_.c_str()));
    }
    std::memcpy(dst, node_->current.data() + offset, n);
    return Status::OK();
  }
  Status Write(uint64_t offset, const void* src, size_t n) override {
    std::lock_guard lock(fs_->clock_->mu);
    if (offset + n > node_->current.size()) node_->current.resize(offset + n);
    std::memcpy(node_->current.data() + offset, src, n);
    const auto* p = static_cast<const uint8_t*>(src);
    Record(TrackingFileSystem::Event::kWrite, offset, std::vector<uint8_t>(p, p + n));
    return Status::OK();
  }
  Status Sync() override {
    std::lock_guard lock(fs_->clock_->mu);
    Record(TrackingFileSystem::Event::kSync, 0, {});
    ++fs_->syncs_;
    return Status::OK();
  }
  Status Extend(uint64_t size) override {
    std::lock_guard lock(fs_->clock_->mu);
    if (size > node_->current.size()) {
      node_->current.resize(size);
      Record(TrackingFileSystem::Event::kExtend, size, {});
    }
    return Status::OK();
  }
  uint64_t Size() const override {
    std::lock_guard lock(fs_->clock_->mu);
    return node_->current.size();
  }
  const std::string& path() const override { return path_; }

 private:
  void Record(TrackingFileSystem::Event::Kind kind, uint64_t offset, std::vector<uint8_t> bytes) {
    fs_->events_.push_back({fs_->clock_->next++, node_->index, kind, offset, std::move(bytes)});
  }
  TrackingFileSystem* fs_;
  std::string path_;
  std::shared_ptr<TrackingFileSystem::Node> node_;
};

Result<std::unique_ptr<File>> TrackingFileSystem::Create(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  if (files_.count(path)) return Status::IOError("cannot create " + path + ": File exists");
  auto node = std::make_shared<Node>();
  node->index = nodes_++;
  files_[path] = node;
  events_.push_back({clock_->next++, node->index, Event::kCreate, 0,
                     std::vector<uint8_t>(path.begin(), path.end())});
  return std::unique_ptr<File>(new TrackingFile(this, path, node));
}

Result<std::unique_ptr<File>> TrackingFileSystem::Open(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::IOError("cannot open " + path + ": No such file");
  return std::unique_ptr<File>(new TrackingFile(this, path, it->second));
}

bool TrackingFileSystem::Exists(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  return files_.count(path) > 0;
}

TrackingFileSystem::Image TrackingFileSystem::ImageAtTime(uint64_t time, uint64_t seed,
                                                          bool keep_random) const {
  std::lock_guard lock(clock_->mu);
  std::mt19937_64 rng(seed);
  // Each file as of its last sync before `time`.
  std::vector<uint64_t> last_sync(nodes_, 0);
  std::vector<bool> synced(nodes_, false);
  for (const Event& e : events_) {
    if (e.time >= time) break;
    if (e.kind == Event::kSync) {
      last_sync[e.file] = e.time;
      synced[e.file] = true;
    }
  }
  std::vector<std::vector<uint8_t>> bytes(nodes_);
  for (const Event& e : events_) {
    if (e.time >= time) break;
    std::vector<uint8_t>& b = bytes[e.file];
    const bool durable = synced[e.file] && e.time < last_sync[e.file];
    if (e.kind == Event::kExtend) {
      if (durable && b.size() < e.offset) b.resize(e.offset);
    } else if (e.kind == Event::kWrite) {
      for (uint64_t s = 0; s < e.bytes.size(); s += 512) {
        // Unsynced: each 512-byte sector independently, if asked to.
        if (!durable && (!keep_random || (rng() & 1))) continue;
        uint64_t n = std::min<uint64_t>(512, e.bytes.size() - s);
        if (b.size() < e.offset + s + n) b.resize(e.offset + s + n);
        std::memcpy(b.data() + e.offset + s, e.bytes.data() + s, n);
      }
    }
  }
  Image image;
  // Each file under its name at `time`.
  std::vector<std::string> names(nodes_);
  std::vector<bool> exists(nodes_, false);
  for (const Event& e : events_) {
    if (e.time >= time) break;
    const std::string name(e.bytes.begin(), e.bytes.end());
    if (e.kind == Event::kCreate || e.kind == Event::kRename) {
      for (size_t j = 0; j < names.size(); ++j) {
        if (exists[j] && names[j] == name) exists[j] = false;  // replaced
      }
      names[e.file] = name;
      exists[e.file] = true;
    } else if (e.kind == Event::kRemove) {
      exists[e.file] = false;
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    if (exists[i]) image[names[i]] = std::move(bytes[i]);
  }
  return image;
}

Status TrackingFileSystem::Rename(const std::string& from, const std::string& to) {
  std::lock_guard lock(clock_->mu);
  auto it = files_.find(from);
  if (it == files_.end()) return Status::IOError("cannot rename " + from + ": No such file");
  events_.push_back({clock_->next++, it->second->index, Event::kRename, 0,
                     std::vector<uint8_t>(to.begin(), to.end())});
  files_[to] = it->second;
  files_.erase(it);
  return Status::OK();
}

void TrackingFileSystem::Load(const Image& image) {
  for (const auto& [name, bytes] : image) {
    Result<std::unique_ptr<File>> f = Create(name);
    if (!f.ok()) continue;
    (void)(*f)->Write(0, bytes.data(), bytes.size());
    (void)(*f)->Sync();
  }
}

Status TrackingFileSystem::Remove(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::OK();
  events_.push_back({clock_->next++, it->second->index, Event::kRemove, 0, {}});
  files_.erase(it);
  return Status::OK();
}

std::vector<uint64_t> TrackingFileSystem::TimesAfterWrites() const {
  std::lock_guard lock(clock_->mu);
  std::vector<uint64_t> times;
  for (const Event& e : events_) {
    if (e.kind == Event::kWrite) times.push_back(e.time + 1);
  }
  return times;
}

uint64_t TrackingFileSystem::syncs() const {
  std::lock_guard lock(clock_->mu);
  return syncs_;
}

}  // namespace subito
