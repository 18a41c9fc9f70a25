#include "util/file_io.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "util/strings.h"

namespace subito {

void RemoveFilesNamed(const std::string& dir, const std::string& prefix,
                      const std::string& extension) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == extension) {
      std::filesystem::remove(e.path(), ec);
    }
  }
}

Status File::WriteGather(uint64_t offset, const uint8_t* const* pieces, size_t n, size_t each) {
  for (size_t i = 0; i < n; ++i) SUBITO_RETURN_IF_ERROR(Write(offset + i * each, pieces[i], each));
  return Status::OK();
}

Status StatusFromErrno(int err, const std::string& what, const std::string& path) {
  std::string msg = what + " " + path + ": " + std::strerror(err);
  if (err == ENOSPC || err == EDQUOT) return Status::NoSpace(std::move(msg));
  return Status::IOError(std::move(msg));
}

Status ReplaceFile(FileSystem* fs, const std::string& path, const void* data, size_t n) {
  const std::string tmp = path + ".tmp";
  SUBITO_RETURN_IF_ERROR(fs->Remove(tmp));
  Result<std::unique_ptr<File>> f = fs->Create(tmp);
  if (!f.ok()) return f.status();
  SUBITO_RETURN_IF_ERROR((*f)->Write(0, data, n));
  SUBITO_RETURN_IF_ERROR((*f)->Sync());
  f->reset();
  SUBITO_RETURN_IF_ERROR(fs->Rename(tmp, path));
  return fs->SyncDirOf(path);
}

Status CreatePrivateDirectories(const std::string& dir) {
  std::filesystem::path at;
  for (const auto& part : std::filesystem::absolute(dir).lexically_normal()) {
    at /= part;
    if (::mkdir(at.c_str(), 0700) == 0) {
      if (::chmod(at.c_str(), 0700) != 0) return StatusFromErrno(errno, "cannot chmod", at);
    } else if (errno != EEXIST) {
      return StatusFromErrno(errno, "cannot create", at);
    }
  }
  return Status::OK();
}

namespace {

Status Errno(const std::string& what, const std::string& path) {
  return StatusFromErrno(errno, what, path);
}

// Files hold table data: no access for other users, whatever the umask.
constexpr mode_t kFileMode = 0660;

// How a file was opened: set by its first open, read by later ones (the
// descriptor cache may close and reopen it).
struct OpenState {
  int extra;    // O_CREAT | O_EXCL until the first open succeeds
  bool direct;  // O_DIRECT asked and not (yet) refused
  // O_DIRECT was asked, yet the OS caches the file: the file system refused
  // O_DIRECT, or keeps its files in memory (tmpfs). Counted in cached_files.
  bool cached = false;
  bool opened = false;
};

bool InMemoryFileSystem(int fd) {
  struct statfs st {};
  if (::fstatfs(fd, &st) != 0) return false;
  const auto type = static_cast<unsigned long>(st.f_type);  // NOLINT(google-runtime-int)
  return type == TMPFS_MAGIC || type == RAMFS_MAGIC;
}

class PosixFile final : public File {
 public:
  PosixFile(DescriptorCache* cache, uint64_t id, std::string path, uint64_t size, bool direct,
            std::shared_ptr<OpenState> state, std::atomic<uint64_t>* cached_files)
      : cache_(cache),
        id_(id),
        path_(std::move(path)),
        size_(size),
        direct_(direct),
        state_(std::move(state)),
        cached_files_(cached_files) {}
  PosixFile(const PosixFile&) = delete;
  PosixFile& operator=(const PosixFile&) = delete;
  ~PosixFile() override {
    cache_->Unregister(id_);
    if (state_->cached) cached_files_->fetch_sub(1, std::memory_order_relaxed);
  }

  Status Read(uint64_t offset, void* dst, size_t n) override {
    SUBITO_RETURN_IF_ERROR(CheckAligned("read", offset, dst, n));
    return cache_->Use(id_, false, [&](int fd) {
      auto* p = static_cast<uint8_t*>(dst);
      for (size_t done = 0; done < n;) {
        ssize_t r = ::pread(fd, p + done, n - done, static_cast<off_t>(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return Errno("read", path_);
        if (r == 0) {
          return Status::Corruption(
              StrFormat("%s: read of %zu bytes at offset %llu ends past the "
                        "end of the file (%llu bytes; truncated?)",
                        path_.c_str(), n, static_cast<unsigned long long>(offset),
                        static_cast<unsigned long long>(Size())));
        }
        done += static_cast<size_t>(r);
      }
      return Status::OK();
    });
  }
  Status Write(uint64_t offset, const void* src, size_t n) override {
    SUBITO_RETURN_IF_ERROR(CheckAligned("write", offset, src, n));
    SUBITO_RETURN_IF_ERROR(cache_->Use(id_, true, [&](int fd) {
      const auto* p = static_cast<const uint8_t*>(src);
      for (size_t done = 0; done < n;) {
        ssize_t w = ::pwrite(fd, p + done, n - done, static_cast<off_t>(offset + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return Errno("write", path_);
        done += static_cast<size_t>(w);
      }
      return Status::OK();
    }));
    GrowTo(offset + n);
    return Status::OK();
  }
  Status WriteGather(uint64_t offset, const uint8_t* const* pieces, size_t n,
                     size_t each) override {
    for (size_t i = 0; i < n; ++i) {
      SUBITO_RETURN_IF_ERROR(CheckAligned("write", offset + i * each, pieces[i], each));
    }
    constexpr size_t kMaxPieces = 256;  // below IOV_MAX (1024)
    iovec iov[kMaxPieces];
    for (size_t at = 0; at < n; at += kMaxPieces) {
      const size_t count = std::min(kMaxPieces, n - at);
      for (size_t i = 0; i < count; ++i) {
        iov[i].iov_base = const_cast<uint8_t*>(pieces[at + i]);
        iov[i].iov_len = each;
      }
      const uint64_t start = offset + at * each;
      SUBITO_RETURN_IF_ERROR(cache_->Use(id_, true, [&](int fd) {
        const size_t total = count * each;
        size_t first = 0;  // the piece the next write begins in
        for (size_t done = 0; done < total;) {
          ssize_t w = ::pwritev(fd, iov + first, static_cast<int>(count - first),
                                static_cast<off_t>(start + done));
          if (w < 0 && errno == EINTR) continue;
          if (w <= 0) return Errno("write", path_);
          done += static_cast<size_t>(w);
          // A short write: go on from the first byte not written.
          while (first < count && done >= (first + 1) * each) ++first;
          if (first < count) {
            const size_t in_piece = done - first * each;
            iov[first].iov_base = const_cast<uint8_t*>(pieces[at + first] + in_piece);
            iov[first].iov_len = each - in_piece;
          }
        }
        return Status::OK();
      }));
      GrowTo(start + count * each);
    }
    return Status::OK();
  }
  Status Sync() override { return cache_->Sync(id_, path_); }
  Status Extend(uint64_t size) override {
    if (size <= Size()) return Status::OK();
    // Space is reserved, not left sparse: a full file system fails this
    // call (a statement allocating pages), never a later page write.
    SUBITO_RETURN_IF_ERROR(cache_->Use(id_, true, [&](int fd) {
      const uint64_t from = Size();
      if (::fallocate(fd, 0, static_cast<off_t>(from), static_cast<off_t>(size - from)) == 0) {
        return Status::OK();
      }
      if (errno != EOPNOTSUPP && errno != ENOSYS) return Errno("extend", path_);
      if (::ftruncate(fd, static_cast<off_t>(size)) != 0) return Errno("extend", path_);
      return Status::OK();
    }));
    GrowTo(size);
    return Status::OK();
  }
  uint64_t Size() const override { return size_.load(std::memory_order_acquire); }
  const std::string& path() const override { return path_; }

 private:
  // A file opened for O_DIRECT takes only 4 KiB aligned buffers, offsets and
  // lengths, whatever its device accepts (a 512-byte disk, tmpfs), so that
  // a misaligned caller fails in every test rather than on 4K-native disks.
  Status CheckAligned(const char* what, uint64_t offset, const void* p, size_t n) const {
    constexpr uint64_t kAlign = 4096;
    if (!direct_ ||
        ((offset | n | reinterpret_cast<uintptr_t>(p)) & (kAlign - 1)) == 0) {  // NOLINT
      return Status::OK();
    }
    return Status::InvalidArgument(
        StrFormat("%s: O_DIRECT %s of %zu bytes at offset %llu from %p is not 4 KiB aligned",
                  path_.c_str(), what, n, static_cast<unsigned long long>(offset), p));
  }
  void GrowTo(uint64_t size) {
    uint64_t cur = size_.load(std::memory_order_relaxed);
    while (size > cur && !size_.compare_exchange_weak(cur, size)) {
    }
  }
  DescriptorCache* const cache_;
  const uint64_t id_;
  const std::string path_;
  std::atomic<uint64_t> size_;  // read by readers while writers grow the file
  const bool direct_;           // O_DIRECT asked for
  const std::shared_ptr<OpenState> state_;
  std::atomic<uint64_t>* const cached_files_;
};

class PosixFs final : public FileSystem {
 public:
  PosixFs(bool direct, size_t max_open_files) : direct_(direct), cache_(max_open_files) {}
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
  DescriptorStats descriptors() const override { return cache_.stats(); }
  uint64_t cached_files() const override { return cached_files_.load(std::memory_order_relaxed); }

 private:
  // The first open creates the file if asked (`extra`); later ones, after
  // the cache closed the descriptor for room, open it as it is. O_DIRECT is
  // dropped for good once the file system refuses it.
  Result<std::unique_ptr<File>> OpenWith(const std::string& path, int extra) {
    auto state = std::make_shared<OpenState>(OpenState{extra, direct_});
    const uint64_t id = cache_.Register([this, path, state]() -> Result<int> {
      // O_NOFOLLOW: a link planted where a Subito file belongs is refused,
      // never written through.
      const int flags = O_RDWR | O_CLOEXEC | O_NOFOLLOW | state->extra;
      int fd = state->direct ? ::open(path.c_str(), flags | O_DIRECT, kFileMode) : -1;
      if (fd < 0 && state->direct && errno != EINVAL) {
        return Errno(state->extra ? "cannot create" : "cannot open", path);
      }
      int plain = flags;
      if (fd < 0 && state->direct) {
        // Refused: a file system that checks O_DIRECT at open (tmpfs before
        // Linux 6.6) has created the file by then.
        state->direct = false;
        plain &= ~O_EXCL;
      }
      if (fd < 0) fd = ::open(path.c_str(), plain, kFileMode);
      if (fd < 0) return Errno(state->extra ? "cannot create" : "cannot open", path);
      if (!state->opened) {
        state->opened = true;
        state->cached = direct_ && (!state->direct || InMemoryFileSystem(fd));
        if (state->cached) cached_files_.fetch_add(1, std::memory_order_relaxed);
      }
      state->extra = 0;
      return fd;
    });
    uint64_t size = 0;
    Status s = cache_.Use(id, false, [&](int fd) {
      struct stat st {};
      if (::fstat(fd, &st) != 0) return Errno("stat", path);
      size = static_cast<uint64_t>(st.st_size);
      return Status::OK();
    });
    if (!s.ok()) {
      cache_.Unregister(id);
      return s;
    }
    return std::unique_ptr<File>(
        new PosixFile(&cache_, id, path, size, direct_, std::move(state), &cached_files_));
  }
  const bool direct_;
  std::atomic<uint64_t> cached_files_{0};  // see OpenState::cached
  DescriptorCache cache_;
};

}  // namespace

FileSystem* PosixFileSystem(bool direct_io) {
  static PosixFs buffered(false, 0);
  static PosixFs direct(true, 0);
  return direct_io ? &direct : &buffered;
}

std::unique_ptr<FileSystem> NewPosixFileSystem(bool direct_io, size_t max_open_files) {
  return std::make_unique<PosixFs>(direct_io, max_open_files);
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
    if (e.kind == Event::kSyncDir) continue;
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
  // Each file under its durable name at `time`: a directory's name changes
  // up to its last sync, then (keep_random) a random prefix of the rest.
  auto dir_of = [](const std::string& name) {
    return std::filesystem::path(name).parent_path().string();
  };
  std::map<std::string, uint64_t> dir_synced;           // directory -> time of its last sync
  std::map<std::string, size_t> unsynced;               // directory -> name changes after it
  std::vector<std::pair<size_t, std::string>> changes;  // event index, directory
  for (size_t k = 0; k < events_.size() && events_[k].time < time; ++k) {
    const Event& e = events_[k];
    if (e.kind == Event::kSyncDir) {
      dir_synced[std::string(e.bytes.begin(), e.bytes.end())] = e.time;
    } else if (e.kind == Event::kCreate || e.kind == Event::kRename) {
      changes.emplace_back(k, dir_of(std::string(e.bytes.begin(), e.bytes.end())));
    } else if (e.kind == Event::kRemove) {
      changes.emplace_back(k, dir_of(removed_names_.at(k)));
    }
  }
  for (const auto& [k, dir] : changes) {
    auto it = dir_synced.find(dir);
    if (it == dir_synced.end() || events_[k].time > it->second) ++unsynced[dir];
  }
  std::map<std::string, size_t> keep;  // directory -> unsynced changes that survive
  for (const auto& [dir, n] : unsynced) keep[dir] = keep_random ? rng() % (n + 1) : 0;
  std::vector<std::string> names(nodes_);
  std::vector<bool> exists(nodes_, false);
  for (const auto& [k, dir] : changes) {
    const Event& e = events_[k];
    auto it = dir_synced.find(dir);
    if (it == dir_synced.end() || e.time > it->second) {
      if (keep[dir] == 0) continue;  // lost, and so is every later change of dir
      --keep[dir];
    }
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
  Image image;
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
    (void)SyncDirOf(name);
  }
}

Status TrackingFileSystem::Remove(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::OK();
  removed_names_[events_.size()] = path;
  events_.push_back({clock_->next++, it->second->index, Event::kRemove, 0, {}});
  files_.erase(it);
  return Status::OK();
}

Status TrackingFileSystem::SyncDirOf(const std::string& path) {
  std::lock_guard lock(clock_->mu);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  events_.push_back(
      {clock_->next++, SIZE_MAX, Event::kSyncDir, 0, std::vector<uint8_t>(dir.begin(), dir.end())});
  return Status::OK();
}

std::vector<uint64_t> TrackingFileSystem::TimesAfterWrites(const std::string& suffix) const {
  return TimesOf(Event::kWrite, 1, suffix);
}

std::vector<uint64_t> TrackingFileSystem::TimesBeforeSyncs(const std::string& suffix) const {
  return TimesOf(Event::kSync, 0, suffix);
}

std::vector<uint64_t> TrackingFileSystem::TimesOf(Event::Kind kind, uint64_t after,
                                                  const std::string& suffix) const {
  std::lock_guard lock(clock_->mu);
  std::set<size_t> chosen;
  for (const auto& [name, node] : files_) {
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      chosen.insert(node->index);
    }
  }
  std::vector<uint64_t> times;
  for (const Event& e : events_) {
    if (e.kind == kind && (suffix.empty() || chosen.count(e.file))) times.push_back(e.time + after);
  }
  return times;
}

uint64_t TrackingFileSystem::syncs() const {
  std::lock_guard lock(clock_->mu);
  return syncs_;
}

}  // namespace subito
