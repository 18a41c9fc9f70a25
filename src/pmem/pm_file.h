// PmFile: a file mapped as the durable memory tier.
//
// What backs the mapping decides how persistence works, and Open() says which
// one it found (Describe()):
//   kDax          DAX mount, mapped with MAP_SYNC: cache-line flush + fence
//                 (libpmem) make stores durable, no page cache involved.
//   kEmulatedDram tmpfs such as /dev/shm: DRAM standing in for PM. The same
//                 flush + fence code path runs so its cost is paid as on PM;
//                 contents survive a process crash, not a power cut.
//   kBlockDevice  a regular file elsewhere: stores are made durable with msync.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "pmem/persistence.h"
#include "subito/status.h"

namespace subito::pmem {

enum class PmKind { kDax, kEmulatedDram, kBlockDevice };

const char* PmKindName(PmKind kind);

class PmFile {
 public:
  // Creates `path` with `size` bytes (zero-filled) and maps it. Fails if it exists.
  static Result<std::unique_ptr<PmFile>> Create(const std::string& path, size_t size);
  // Maps an existing file whole.
  static Result<std::unique_ptr<PmFile>> Open(const std::string& path);

  ~PmFile();
  PmFile(const PmFile&) = delete;
  PmFile& operator=(const PmFile&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  PmKind kind() const { return kind_; }
  const std::string& path() const { return path_; }
  // The persistence that fits this mapping (see PmKind).
  Persistence* DefaultPersistence() const;
  // e.g. "/dev/shm/subito/log.0: emulated PM (tmpfs, DRAM), 64 MiB, NUMA node 0"
  std::string Describe() const;

 private:
  PmFile(std::string path, uint8_t* data, size_t size, PmKind kind)
      : path_(std::move(path)), data_(data), size_(size), kind_(kind) {}
  static Result<std::unique_ptr<PmFile>> Map(const std::string& path, size_t size, bool create);

  std::string path_;
  uint8_t* data_;
  size_t size_;
  PmKind kind_;
};

}  // namespace subito::pmem
