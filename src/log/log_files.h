// LogFiles: the set of stream files of one log directory: creating them
// atomically, opening and locking them, and writing their durable bytes
// through the path the write mode uses (mapped + Persistence for nf, pwrite +
// fdatasync for classic).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "log/format.h"
#include "log/log_options.h"
#include "log/log_reader.h"
#include "pmem/pm_file.h"
#include "subito/status.h"
#include "util/file_io.h"

namespace subito::log {

class LogFiles {
 public:
  // Opens the log in options.dir, creating it if there is none. Holds the
  // directory's LOCK file until destroyed.
  static Result<std::unique_ptr<LogFiles>> OpenOrCreate(const LogOptions& options);
  ~LogFiles();
  LogFiles(const LogFiles&) = delete;
  LogFiles& operator=(const LogFiles&) = delete;

  size_t count() const { return files_.size(); }
  pmem::PmFile& file(size_t i) const { return *files_[i]; }
  // Classic mode: the handle stream i's pwrites and fdatasyncs go through.
  File& writer(size_t i) const { return *writers_[i]; }
  pmem::Persistence* persistence() const { return persistence_; }
  bool created() const { return created_; }
  std::vector<StreamView> Views() const;
  static std::string StreamPath(const std::string& dir, size_t i);

  // Makes [offset, offset + n) of stream i hold src (or zeros if src is
  // null), durably, before returning.
  Status WriteDurably(size_t i, uint64_t offset, const void* src, size_t n);

 private:
  LogFiles(const LogOptions& options) : options_(options) {}
  Status Lock();
  Status Create();
  Status OpenExisting(size_t count);

  const LogOptions options_;
  int lock_fd_ = -1;
  bool created_ = false;
  std::vector<std::unique_ptr<pmem::PmFile>> files_;
  std::vector<std::unique_ptr<File>> writers_;  // classic mode only
  pmem::Persistence* persistence_ = nullptr;
};

}  // namespace subito::log
