// File I/O for page files and other block-device data, behind an interface
// tests can swap (as LevelDB's Env): PosixFile for real use, and a
// TrackingFileSystem whose crash image keeps only what was fdatasync'd.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "subito/status.h"
#include "util/crash_clock.h"
#include "util/descriptor_cache.h"

namespace subito {

class File {
 public:
  virtual ~File() = default;
  // Reads exactly n bytes at offset; reading past the end is an error.
  virtual Status Read(uint64_t offset, void* dst, size_t n) = 0;
  virtual Status Write(uint64_t offset, const void* src, size_t n) = 0;
  // Writes n pieces of `each` bytes back to back from `offset`, as Write
  // would write their concatenation: one system call for many pieces where
  // the file allows (pwritev), by default one Write per piece.
  virtual Status WriteGather(uint64_t offset, const uint8_t* const* pieces, size_t n, size_t each);
  // Makes every completed Write durable (fdatasync).
  virtual Status Sync() = 0;
  // Grows the file to at least `size` bytes (zero-filled).
  virtual Status Extend(uint64_t size) = 0;
  virtual uint64_t Size() const = 0;
  virtual const std::string& path() const = 0;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates `path` (failing if it exists) or opens it.
  virtual Result<std::unique_ptr<File>> Create(const std::string& path) = 0;
  virtual Result<std::unique_ptr<File>> Open(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
  // Makes the directory entry of `path` durable (fsync of its directory).
  virtual Status SyncDirOf(const std::string& path) = 0;
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  // Removes a file; a missing file is not an error.
  virtual Status Remove(const std::string& path) = 0;
  // Descriptors open for its files, and its limit (util/descriptor_cache.h).
  virtual DescriptorStats descriptors() const { return {}; }
  // Files open now that asked for O_DIRECT and are cached by the OS all the
  // same: their file system refused O_DIRECT, or keeps its files in memory
  // (tmpfs, which accepts O_DIRECT since Linux 6.6).
  virtual uint64_t cached_files() const { return 0; }
};

// "<what> <path>: <strerror>": NoSpace for ENOSPC and EDQUOT (the statement
// that met it fails; writes resume once space is freed), IOError otherwise.
Status StatusFromErrno(int err, const std::string& what, const std::string& path);

// Removes the files of `dir` whose names start with `prefix` and end with
// `extension` (".run"); errors are ignored (stale temporary files).
void RemoveFilesNamed(const std::string& dir, const std::string& prefix,
                      const std::string& extension);

// Creates `dir` and any missing parent, each new one with mode 0700 (the
// umask aside: a server's umask may leave directories group-writable).
Status CreatePrivateDirectories(const std::string& dir);

// Replaces `path` with `n` bytes, whole or not at all across a crash: they
// go to path.tmp, synced, which is renamed over path, and the directory is
// synced. For small files written whole (the catalog, the page list), on a
// file system without O_DIRECT alignment rules.
Status ReplaceFile(FileSystem* fs, const std::string& path, const void* data, size_t n);

// pread/pwrite/fdatasync. With direct_io, O_DIRECT is asked for and dropped
// where the file system refuses it (tmpfs before Linux 6.6; cached_files
// counts such files and those on tmpfs); buffers, offsets and lengths must
// then be 4 KiB aligned, or the call fails with InvalidArgument.
// PosixFileSystem's descriptors have no limit; NewPosixFileSystem's keep at
// most max_open_files open at once (0: no limit), closing the least
// recently used (util/descriptor_cache.h); a File's path must therefore not
// change while it is open (D4).
FileSystem* PosixFileSystem(bool direct_io = false);
std::unique_ptr<FileSystem> NewPosixFileSystem(bool direct_io, size_t max_open_files);

// Tests: files live in memory, and every write, extension and sync is
// recorded on a CrashClock (shared with other trackers if given), so the
// bytes a power cut at any instant leaves can be rebuilt: each file as of
// its last sync before that instant (optionally plus a random subset of the
// 512-byte sectors written since, as a disk may have written some of them).
// Names (create, rename, remove) are durable once their directory is synced
// (SyncDirOf); of a directory's later name changes a power cut keeps none,
// or with keep_random_unsynced a random prefix of them (a journaled file
// system commits a directory's changes in order).
class TrackingFileSystem final : public FileSystem {
 public:
  explicit TrackingFileSystem(std::shared_ptr<CrashClock> clock = std::make_shared<CrashClock>())
      : clock_(std::move(clock)) {}
  Result<std::unique_ptr<File>> Create(const std::string& path) override;
  Result<std::unique_ptr<File>> Open(const std::string& path) override;
  bool Exists(const std::string& path) override;
  Status SyncDirOf(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;

  using Image = std::map<std::string, std::vector<uint8_t>>;
  // Creates the image's files, synced (a test recovering from a crash image
  // under tracking, to crash again during recovery).
  void Load(const Image& image);
  Image ImageAtTime(uint64_t time, uint64_t seed = 0, bool keep_random_unsynced = false) const;
  Image CrashImage(uint64_t seed = 0, bool keep_random_unsynced = false) const {
    return ImageAtTime(UINT64_MAX, seed, keep_random_unsynced);
  }
  uint64_t syncs() const;
  // Clock times just after each write (to files whose name, as they are
  // named now, ends with `suffix`): cutting power there finds the write not
  // yet synced (the torn-write window crash tests want to hit).
  std::vector<uint64_t> TimesAfterWrites(const std::string& suffix = "") const;
  // Clock times of each sync (of such files): cutting power there finds
  // everything before it, the sync not done.
  std::vector<uint64_t> TimesBeforeSyncs(const std::string& suffix = "") const;

 private:
  friend class TrackingFile;
  struct Node {
    size_t index = 0;
    std::vector<uint8_t> current;  // what reads see
  };
  struct Event {
    uint64_t time;
    size_t file;
    // Names change with kCreate, kRename (bytes: the new name) and kRemove;
    // kSyncDir (bytes: the directory; file unused) makes the earlier ones
    // of that directory durable.
    enum Kind { kWrite, kExtend, kSync, kCreate, kRename, kRemove, kSyncDir } kind;
    uint64_t offset;  // write offset, or the new size for kExtend
    std::vector<uint8_t> bytes;
  };
  std::vector<uint64_t> TimesOf(Event::Kind kind, uint64_t after, const std::string& suffix) const;

  std::shared_ptr<CrashClock> clock_;  // its mutex guards everything below
  std::map<std::string, std::shared_ptr<Node>> files_;
  size_t nodes_ = 0;  // files ever created; Node::index counts them
  std::vector<Event> events_;
  std::map<size_t, std::string> removed_names_;  // event index of a kRemove -> the name
  uint64_t syncs_ = 0;
};

}  // namespace subito
