#include "util/fault_file_system.h"

namespace subito {
namespace {

class FaultFile final : public File {
 public:
  FaultFile(FaultInjectingFileSystem* fs, std::unique_ptr<File> base)
      : fs_(fs), base_(std::move(base)) {}

  Status Read(uint64_t offset, void* dst, size_t n) override {
    if (int err = fs_->Decide(kFaultRead, path(), nullptr)) {
      return StatusFromErrno(err, "read", path());
    }
    return base_->Read(offset, dst, n);
  }
  Status Write(uint64_t offset, const void* src, size_t n) override {
    bool short_write = false;
    if (int err = fs_->Decide(kFaultWrite, path(), &short_write)) {
      if (short_write && n > 1) SUBITO_RETURN_IF_ERROR(base_->Write(offset, src, n / 2));
      return StatusFromErrno(err, "write", path());
    }
    return base_->Write(offset, src, n);
  }
  Status Sync() override {
    if (int err = fs_->Decide(kFaultSync, path(), nullptr)) {
      return StatusFromErrno(err, "sync", path());
    }
    return base_->Sync();
  }
  Status Extend(uint64_t size) override {
    if (size > Size()) {
      if (int err = fs_->Decide(kFaultExtend, path(), nullptr)) {
        return StatusFromErrno(err, "extend", path());
      }
    }
    return base_->Extend(size);
  }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  FaultInjectingFileSystem* const fs_;
  std::unique_ptr<File> base_;
};

}  // namespace

void FaultInjectingFileSystem::Add(const FaultRule& rule) {
  std::lock_guard lock(mu_);
  rules_.push_back({rule});
}

void FaultInjectingFileSystem::Clear() {
  std::lock_guard lock(mu_);
  rules_.clear();
}

uint64_t FaultInjectingFileSystem::injected() const {
  std::lock_guard lock(mu_);
  return injected_;
}

int FaultInjectingFileSystem::Decide(FaultOp op, const std::string& path, bool* short_write) {
  std::lock_guard lock(mu_);
  for (Armed& a : rules_) {
    const FaultRule& r = a.rule;
    if ((r.ops & op) == 0 || path.find(r.path_contains) == std::string::npos) continue;
    if (a.failed >= r.times) continue;
    if (a.seen++ < r.skip) continue;
    if (r.probability < 1.0 &&
        std::uniform_real_distribution<double>(0, 1)(rng_) >= r.probability) {
      continue;
    }
    ++a.failed;
    ++injected_;
    if (short_write) *short_write = r.short_write;
    return r.error;
  }
  return 0;
}

Result<std::unique_ptr<File>> FaultInjectingFileSystem::Create(const std::string& path) {
  if (int err = Decide(kFaultCreate, path, nullptr)) {
    return StatusFromErrno(err, "cannot create", path);
  }
  Result<std::unique_ptr<File>> f = base_->Create(path);
  if (!f.ok()) return f.status();
  return std::unique_ptr<File>(new FaultFile(this, std::move(*f)));
}

Result<std::unique_ptr<File>> FaultInjectingFileSystem::Open(const std::string& path) {
  if (int err = Decide(kFaultOpen, path, nullptr)) {
    return StatusFromErrno(err, "cannot open", path);
  }
  Result<std::unique_ptr<File>> f = base_->Open(path);
  if (!f.ok()) return f.status();
  return std::unique_ptr<File>(new FaultFile(this, std::move(*f)));
}

Status FaultInjectingFileSystem::SyncDirOf(const std::string& path) {
  if (int err = Decide(kFaultSyncDir, path, nullptr)) {
    return StatusFromErrno(err, "fsync of the directory of", path);
  }
  return base_->SyncDirOf(path);
}

Status FaultInjectingFileSystem::Rename(const std::string& from, const std::string& to) {
  if (int err = Decide(kFaultRename, from, nullptr)) {
    return StatusFromErrno(err, "cannot rename", from);
  }
  return base_->Rename(from, to);
}

Status FaultInjectingFileSystem::Remove(const std::string& path) {
  if (int err = Decide(kFaultRemove, path, nullptr)) {
    return StatusFromErrno(err, "cannot remove", path);
  }
  return base_->Remove(path);
}

}  // namespace subito
