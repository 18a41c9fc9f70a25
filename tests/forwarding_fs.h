// Test file systems that change one or two calls of a real one: a
// ForwardingFileSystem passes every call to its base and wraps each file it
// creates or opens with MakeFile, whose ForwardingFile passes every call to
// the base file; subclasses override what they watch or hold up.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "util/file_io.h"

namespace subito::test {

class ForwardingFile : public File {
 public:
  explicit ForwardingFile(std::unique_ptr<File> base) : base_(std::move(base)) {}
  Status Read(uint64_t offset, void* dst, size_t n) override { return base_->Read(offset, dst, n); }
  Status Write(uint64_t offset, const void* src, size_t n) override {
    return base_->Write(offset, src, n);
  }
  Status WriteGather(uint64_t offset, const uint8_t* const* pieces, size_t n,
                     size_t each) override {
    return base_->WriteGather(offset, pieces, n, each);
  }
  Status Sync() override { return base_->Sync(); }
  Status Extend(uint64_t size) override { return base_->Extend(size); }
  uint64_t Size() const override { return base_->Size(); }
  const std::string& path() const override { return base_->path(); }

 private:
  std::unique_ptr<File> base_;
};

class ForwardingFileSystem : public FileSystem {
 public:
  explicit ForwardingFileSystem(FileSystem* base) : base_(base) {}
  Result<std::unique_ptr<File>> Create(const std::string& path) override {
    return Wrap(base_->Create(path));
  }
  Result<std::unique_ptr<File>> Open(const std::string& path) override {
    return Wrap(base_->Open(path));
  }
  bool Exists(const std::string& path) override { return base_->Exists(path); }
  Status SyncDirOf(const std::string& path) override { return base_->SyncDirOf(path); }
  Status Rename(const std::string& from, const std::string& to) override {
    return base_->Rename(from, to);
  }
  Status Remove(const std::string& path) override { return base_->Remove(path); }

 protected:
  // The file handed out for `base` (a ForwardingFile, or one of its kind).
  virtual std::unique_ptr<File> MakeFile(std::unique_ptr<File> base) = 0;

 private:
  Result<std::unique_ptr<File>> Wrap(Result<std::unique_ptr<File>> f) {
    if (!f.ok()) return f.status();
    return MakeFile(std::move(*f));
  }
  FileSystem* const base_;
};

}  // namespace subito::test
