#include "log/log_options.h"

#include <algorithm>

#include "log/format.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito::log {

const char* LogWriteModeName(LogWriteMode mode) {
  return mode == LogWriteMode::kNf ? "nf" : "classic";
}

Result<LogWriteMode> ParseLogWriteMode(const std::string& name) {
  if (name == "nf") return LogWriteMode::kNf;
  if (name == "classic") return LogWriteMode::kClassic;
  return Status::InvalidArgument("log_write_mode must be 'nf' or 'classic', not '" + name + "'");
}

Status ValidateLogOptions(const LogOptions& o) {
  using ull = unsigned long long;
  if (o.dir.empty()) return Status::InvalidArgument("log_dir is empty");
  if (o.write_ahead_size < 64 || o.write_ahead_size > 8192 || !IsPowerOfTwo(o.write_ahead_size)) {
    return Status::InvalidArgument(StrFormat(
        "log_write_ahead_size=%u: must be a power of two from 64 to 8192", o.write_ahead_size));
  }
  if (o.streams < 1 || o.streams > kMaxStreams) {
    return Status::InvalidArgument(StrFormat("log_streams=%u: must be 1 to 16", o.streams));
  }
  if (o.file_size < kDataOffset + (64u << 10) || o.file_size % kStripeSize != 0) {
    return Status::InvalidArgument(
        StrFormat("log_file_size=%llu: must be a multiple of %u and at least %zu",
                  static_cast<ull>(o.file_size), kStripeSize, kDataOffset + (64u << 10)));
  }
  if (o.buffer_size < (64u << 10) || !IsPowerOfTwo(o.buffer_size) ||
      o.buffer_size < 4ull * o.write_ahead_size) {
    return Status::InvalidArgument(StrFormat(
        "log_buffer_size=%llu: must be a power of two, at least 65536 and 4 x write-ahead size",
        static_cast<ull>(o.buffer_size)));
  }
  return Status::OK();
}

}  // namespace subito::log
