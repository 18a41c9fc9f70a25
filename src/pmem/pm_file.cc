#include "pmem/pm_file.h"

#include <libpmem.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>

#include <cerrno>
#include <cstring>

#include "pmem/numa.h"
#include "util/strings.h"

namespace subito::pmem {

const char* PmKindName(PmKind kind) {
  switch (kind) {
    case PmKind::kDax:
      return "PM (DAX, MAP_SYNC)";
    case PmKind::kEmulatedDram:
      return "emulated PM (tmpfs, DRAM)";
    case PmKind::kBlockDevice:
      return "regular file (msync)";
  }
  return "?";
}

Result<std::unique_ptr<PmFile>> PmFile::Create(const std::string& path, size_t size) {
  if (size == 0) return Status::InvalidArgument("cannot create empty PM file " + path);
  return Map(path, size, true);
}

Result<std::unique_ptr<PmFile>> PmFile::Open(const std::string& path) {
  return Map(path, 0, false);
}

Result<std::unique_ptr<PmFile>> PmFile::Map(const std::string& path, size_t size, bool create) {
  if (!create) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      return Status::IOError(StrFormat("%s: %s", path.c_str(), std::strerror(errno)));
    }
    if (st.st_size == 0) return Status::Corruption(path + ": file is empty (truncated?)");
    // A link is never mapped (files are created with O_EXCL, which refuses
    // links, and the PM directory is the server user's alone).
    struct stat lst {};
    if (::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode)) {
      return Status::InvalidArgument(path + " is a symbolic link; refusing to map it");
    }
  }
  size_t mapped_len = 0;
  int is_pmem = 0;
  int flags = create ? (PMEM_FILE_CREATE | PMEM_FILE_EXCL) : 0;
  void* addr = pmem_map_file(path.c_str(), create ? size : 0, flags, 0600, &mapped_len, &is_pmem);
  if (addr == nullptr) {
    return Status::IOError(StrFormat("cannot map %s: %s", path.c_str(), pmem_errormsg()));
  }
  PmKind kind = PmKind::kBlockDevice;
  if (is_pmem) {
    kind = PmKind::kDax;
  } else {
    struct statfs fs {};
    if (::statfs(path.c_str(), &fs) == 0 && fs.f_type == TMPFS_MAGIC) kind = PmKind::kEmulatedDram;
  }
  return std::unique_ptr<PmFile>(new PmFile(path, static_cast<uint8_t*>(addr), mapped_len, kind));
}

PmFile::~PmFile() {
  pmem_unmap(data_, size_);
}

Persistence* PmFile::DefaultPersistence() const {
  return kind_ == PmKind::kBlockDevice ? MsyncPersistenceInstance() : PmemPersistenceInstance();
}

std::string PmFile::Describe() const {
  int node = NumaNodeOf(data_);
  std::string where = node >= 0 ? StrFormat(", NUMA node %d", node) : "";
  return StrFormat("%s: %s, %zu KiB%s", path_.c_str(), PmKindName(kind_), size_ / 1024,
                   where.c_str());
}

}  // namespace subito::pmem
