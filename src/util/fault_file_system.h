// FaultInjectingFileSystem: a FileSystem that passes every call to another
// one (Posix or Tracking) and makes chosen calls fail, so tests can show
// what the engine does when a disk fills up or a device errs.
//
// A rule names operations (a mask of FaultOp), a substring of the path, the
// errno to report, how many matching calls to let through first, how many
// to fail, and a probability (seeded, so a failing run repeats). A failing
// write may first write part of its bytes (a short write, as a device that
// filled up midway leaves). The first matching rule that fires decides.
#pragma once

#include <cerrno>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "util/file_io.h"

namespace subito {

enum FaultOp : uint32_t {
  kFaultRead = 1u << 0,
  kFaultWrite = 1u << 1,
  kFaultSync = 1u << 2,
  kFaultExtend = 1u << 3,
  kFaultCreate = 1u << 4,
  kFaultOpen = 1u << 5,
  kFaultRename = 1u << 6,
  kFaultRemove = 1u << 7,
  kFaultSyncDir = 1u << 8,
  kFaultAnyWrite = kFaultWrite | kFaultSync | kFaultExtend | kFaultCreate | kFaultRename |
                   kFaultRemove | kFaultSyncDir,
};

struct FaultRule {
  uint32_t ops = kFaultAnyWrite;
  std::string path_contains;  // empty: every path
  int error = ENOSPC;
  uint64_t skip = 0;         // matching calls let through before failing
  uint64_t times = 1;        // failures before the rule is spent (UINT64_MAX: never)
  double probability = 1.0;  // of failing each matching call once past `skip`
  bool short_write = false;  // a failing write first writes half its bytes
};

class FaultInjectingFileSystem final : public FileSystem {
 public:
  explicit FaultInjectingFileSystem(FileSystem* base, uint64_t seed = 1)
      : base_(base), rng_(seed) {}

  void Add(const FaultRule& rule);
  void Clear();
  // Calls failed so far.
  uint64_t injected() const;

  Result<std::unique_ptr<File>> Create(const std::string& path) override;
  Result<std::unique_ptr<File>> Open(const std::string& path) override;
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status SyncDirOf(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status Remove(const std::string& path) override;
  DescriptorStats descriptors() const override { return base_->descriptors(); }
  uint64_t cached_files() const override { return base_->cached_files(); }

  // The errno a call of `op` on `path` is to fail with, or 0 (and whether
  // a failing write is short).
  int Decide(FaultOp op, const std::string& path, bool* short_write);

 private:
  struct Armed {
    FaultRule rule;
    uint64_t seen = 0, failed = 0;
  };
  FileSystem* const base_;
  mutable std::mutex mu_;
  std::vector<Armed> rules_;  // guarded by mu_
  std::mt19937_64 rng_;       // guarded by mu_
  uint64_t injected_ = 0;     // guarded by mu_
};

}  // namespace subito
