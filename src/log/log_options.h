// Settings of the redo log. Each is documented with its default, its unit and
// whether it can change between runs of one log.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "subito/status.h"

namespace subito {
class FileSystem;
}
namespace subito::pmem {
class Persistence;
}

namespace subito::log {

enum class LogWriteMode {
  // The committing thread copies from the log buffer into the mapped log with
  // non-temporal stores and persists at once (NF-log). No flusher thread.
  kNf,
  // InnoDB's way: a writer thread per stream pwrite()s through the page
  // cache, a flusher thread per stream fsync()s; commits wait for both.
  kClassic,
};

const char* LogWriteModeName(LogWriteMode mode);
Result<LogWriteMode> ParseLogWriteMode(const std::string& name);

struct LogOptions {
  // Directory of the log files (log.0 ... log.N-1) and its LOCK file. The PM
  // tier: /dev/shm emulates PM with DRAM; a DAX mount is real PM.
  std::string dir = "/dev/shm/subito";
  LogWriteMode write_mode = LogWriteMode::kNf;
  // Partial blocks are padded to this many bytes. 64 B .. 8 KiB, a power of
  // two. Default 512 B (NF-log). May change between runs.
  uint32_t write_ahead_size = 512;
  // Parallel streams, 1 .. 16. Fixed when the log is created.
  uint32_t streams = 1;
  // Bytes per stream file, including its 4 KiB header block. A multiple of
  // 4 KiB, at least 68 KiB. Fixed when the log is created.
  uint64_t file_size = 64ull << 20;
  // DRAM log buffer, a power of two, at least 64 KiB and 4 x write_ahead_size.
  uint64_t buffer_size = 8ull << 20;
  // Touch the log's pages ahead of the writers in a background thread.
  bool prefault = true;
  // ... started by RedoLog::StartPrefault() instead of at Open (an owner
  // that recovers first keeps it from competing with its recovery).
  bool defer_prefault = false;
  // Run log-writing threads on the NUMA node of the log (no-op on one node).
  bool numa_pin = true;
  // Called (from an appending thread) when the log is full and appends wait
  // for a checkpoint. The owner may call Checkpoint() from it.
  std::function<void()> on_log_full;
  // An append waiting for the checkpoint to free log space gives up (Busy)
  // once the checkpoint has not moved for this long.
  uint32_t full_timeout_ms = 60000;
  // An existing log must carry this salt (its file header's), else Open
  // refuses it before writing anything: the log of another database. 0: any.
  uint64_t expected_salt = 0;
  // Where a log made now starts (rounded up to a record boundary; at least
  // kFirstLsn): its owner passes the end of its previous log, so that no
  // page carries an LSN the new log has not reached (redo skips a record
  // whose page is as new, P3).
  uint64_t first_lsn = 0;
  // An existing log is not needed (its database shut down cleanly) and is
  // replaced by a new one starting at first_lsn, under the directory's lock.
  bool replace = false;
  // Called when Open is about to create a log (none is there), under the
  // directory's lock and before any stream file exists, with the new log's
  // salt: its owner records the salt first, so that no instant has a log
  // its owner does not know. An error stops the creation.
  std::function<Status(uint64_t salt)> on_create;
  // Tests: replaces the persistence chosen from the mapping (nf mode).
  pmem::Persistence* persistence = nullptr;
  // Tests: classic mode's writes and syncs of the stream files go through
  // this file system (one that injects faults). Null: POSIX.
  FileSystem* file_system = nullptr;
};

// Checks every setting; the message names the setting and the allowed range.
Status ValidateLogOptions(const LogOptions& options);

}  // namespace subito::log
