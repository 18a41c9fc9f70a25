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

namespace subito {

class File {
 public:
  virtual ~File() = default;
  // Reads exactly n bytes at offset; reading past the end is an error.
  virtual Status Read(uint64_t offset, void* dst, size_t n) = 0;
  virtual Status Write(uint64_t offset, const void* src, size_t n) = 0;
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
};

// pread/pwrite/fdatasync. With direct_io, O_DIRECT is asked for and dropped
// silently where the file system refuses it (tmpfs); buffers and offsets
// must then be 4 KiB aligned.
FileSystem* PosixFileSystem(bool direct_io = false);

// Tests: files live in memory. Each file keeps its synced bytes and the
// writes since its last Sync; CrashImage() returns the synced bytes only
// (optionally with a random subset of unsynced writes applied, as a disk
// may have written some of them).
class TrackingFileSystem final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> Create(const std::string& path) override;
  Result<std::unique_ptr<File>> Open(const std::string& path) override;
  bool Exists(const std::string& path) override;

  using Image = std::map<std::string, std::vector<uint8_t>>;
  Image CrashImage(uint64_t random_seed = 0, bool keep_random_unsynced = false) const;
  // Replaces every file's content with `image` (all of it synced).
  void Restore(const Image& image);
  uint64_t syncs() const;

 private:
  friend class TrackingFile;
  struct Pending {
    uint64_t offset;
    std::vector<uint8_t> bytes;
  };
  struct Node {
    std::vector<uint8_t> current;  // what reads see
    std::vector<uint8_t> synced;   // what survives a crash
    std::vector<Pending> pending;  // writes since the last sync, in order
  };
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Node>> files_;
  uint64_t syncs_ = 0;
};

}  // namespace subito
