// RedoLog: the write-ahead log of a Subito database.
//
// Threads Append() records concurrently: each reserves its bytes with one
// atomic add on the reserved LSN, copies its record into the DRAM log buffer
// and marks it filled (LinkBuf); nothing is locked. WaitDurable(lsn) returns
// once every byte below lsn is durable in every stream (group commit: one
// write covers all records filled so far).
//
// Streams: the logical log is striped in 4 KiB stripes over the stream files
// (format.h); each stream is written by its own writer, in parallel.
//
// Commit rule: a record ending at LSN e is acknowledged only when every
// stream has made durable all of its bytes below some record boundary >= e.
// durable_lsn() is the minimum over the streams of that boundary (so it is
// itself a record boundary). Recovery then finds every acknowledged record,
// because the chain it follows (I2) is the log's bytes in LSN order, and none
// of them below durable_lsn() is missing from any stream.
//
// Write modes (LogWriteMode): in `nf` the thread that waits does the writing
// (non-temporal copy from the buffer into the mapped stream files, pad the
// partial block with zeros up to the write-ahead size, one fence); in
// `classic` a writer thread per stream pwrite()s whole write-ahead blocks and
// a flusher thread per stream fdatasync()s.
//
// Space: appends wait while the log buffer is full (until writes catch up)
// or while the log is full (until the owner's Checkpoint(); on_log_full is
// called then). A wait never drops or overwrites needed bytes.
//
// Thread safety: Append, WaitDurable, Commit, Checkpoint and the getters may
// be called from any thread. Close() must not race with appends.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "log/format.h"
#include "log/geometry.h"
#include "log/link_buf.h"
#include "log/log_files.h"
#include "log/log_options.h"
#include "log/log_reader.h"
#include "subito/status.h"
#include "util/striped_counter.h"

namespace subito::pmem {
class Prefaulter;
}

namespace subito::log {

struct AppendResult {
  Lsn start;
  Lsn end;  // wait for this to be durable
};

// Counters since Open.
struct LogStats {
  uint64_t appends = 0;
  uint64_t append_bytes = 0;     // record bytes (headers included)
  uint64_t durable_waits = 0;    // WaitDurable calls the durable LSN had not yet passed
  uint64_t writes = 0;           // nf: persist batches; classic: pwrite calls
  uint64_t syncs = 0;            // fences (nf) or fdatasync calls (classic)
  uint64_t persisted_bytes = 0;  // bytes written to the log files, padding included
  uint64_t padding_bytes = 0;
  uint64_t buffer_full_waits = 0;
  uint64_t log_full_waits = 0;
  uint64_t checkpoints = 0;
};

class RedoLog {
 public:
  // Opens (creating if needed) the log in options.dir and recovers it: the
  // durable end is found, damage is refused with Corruption, and records past
  // the end that were never acknowledged are erased (I4).
  static Result<std::unique_ptr<RedoLog>> Open(const LogOptions& options);
  ~RedoLog();
  RedoLog(const RedoLog&) = delete;
  RedoLog& operator=(const RedoLog&) = delete;

  // Adds a record. `length` may be 0. Returns its LSN range.
  Result<AppendResult> Append(uint16_t type, const void* payload, uint32_t length);
  // Returns once every byte below `lsn` is durable in every stream.
  Status WaitDurable(Lsn lsn);
  // Append + WaitDurable.
  Result<AppendResult> Commit(uint16_t type, const void* payload, uint32_t length);
  // Recovery may start at `lsn` from now on: it must be a record's start LSN
  // (or the durable end) and at most durable_lsn(). Older LSNs are ignored.
  Status Checkpoint(Lsn lsn);
  // Makes every filled record durable, records a clean shutdown and stops the
  // threads. Appends waiting on a full log fail with Shutdown.
  Status Close();
  // A backup copies the log files while records are appended (BACKUP STAGE,
  // buffer/write_pause.h), so the copy may hold a gap (a record written
  // after the copier passed its place) followed by later records. From
  // BeginBackupCopy to EndBackupCopy, records carry as durable hint at most
  // the durable LSN of the moment it was called (format.h I3): every byte
  // below it was in the files before the copy began, so no hint in a copy
  // points past a gap, and the copy opens as a torn tail there, not as
  // damage. (The price: damage in records appended meanwhile is told from
  // a torn tail only by the records' own checks.) Checkpoint slots written
  // meanwhile name no reach (format.h I7), so the copy's recovery erases
  // the records past its gap over the whole lap (I4). A full log waits for
  // its checkpoint however long, rather than failing: the checkpoint is
  // held until the backup ends. A failed slot write fails the log.
  void BeginBackupCopy();
  void EndBackupCopy();

  // The log as Open found it, and its records from the checkpoint to the end
  // (log_reader.h ForEachRecord: during recovery, the checkpoint held).
  const LogState& recovered() const { return recovered_; }
  Status ForEachRecoveredRecord(const std::function<Status(const LogRecordView&)>& fn) const;
  // One of those records, by its start LSN (log_reader.h ReadRecordAt). Valid
  // while the checkpoint has not moved past it.
  Status ReadRecoveredRecord(Lsn lsn, std::vector<uint8_t>* scratch, LogRecordView* rec) const;

  // Whether the log failed (every append fails with error()).
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  Status error() { return FirstError(); }
  Lsn durable_lsn() const { return durable_.load(std::memory_order_acquire); }
  Lsn reserved_lsn() const { return reserved_.load(std::memory_order_acquire); }
  // reserved_lsn(), read by a read-modify-write: an Append whose LSNs it
  // does not count reserves after it, and sees every write the caller made
  // before the call (buffer/page_versions.h E1).
  Lsn reserved_lsn_ordered() { return reserved_.fetch_add(0, std::memory_order_acq_rel); }
  Lsn checkpoint_lsn() const { return checkpoint_.load(std::memory_order_acquire); }
  uint64_t capacity() const { return geometry_.capacity(); }
  // Random at the log's creation (file header): names this log.
  uint64_t salt() const { return salt_; }
  // The largest payload one record may carry.
  uint32_t max_payload() const;
  LogStats stats() const;
  const LogOptions& options() const { return options_; }
  // Starts the pre-fault thread (LogOptions::defer_prefault; else Open
  // did); a no-op if it runs, or if prefault is off.
  void StartPrefault();
  // Blocks until the pre-fault thread has mapped in every log page.
  void WaitPrefaulted() const;
  // One line: where the log lives, what backs it, how it is written.
  std::string Describe() const;

 private:
  struct Stream;
  explicit RedoLog(const LogOptions& options);
  Status Start(std::unique_ptr<LogFiles> files);
  Status WaitForSpace(Lsn start, Lsn end);
  void UpdateDurable();
  void WakeWaiters();
  // nf: writes stream s's bytes below target; caller holds s.write_mu.
  void NfWrite(Stream& s, Lsn target);
  // classic: the per-stream threads.
  void ClassicWriterLoop(Stream& s);
  void ClassicFlusherLoop(Stream& s);
  Status ClassicWrite(Stream& s, Lsn target);
  Status WriteCheckpointSlot(Lsn checkpoint, bool clean);
  void CopyFromRing(uint8_t* dst, Lsn from, size_t n) const;
  void Fail(const Status& s);
  Status FirstError();

  const LogOptions options_;
  Geometry geometry_;
  uint64_t salt_ = 0;
  uint32_t write_ahead_ = 512;
  std::unique_ptr<LogFiles> files_;
  std::vector<StreamView> views_;  // files_->Views(), for reads of recovered records
  pmem::Persistence* persistence_ = nullptr;
  std::vector<std::unique_ptr<Stream>> streams_;
  LogState recovered_;
  int numa_node_ = -1;
  std::unique_ptr<pmem::Prefaulter> prefaulter_;

  // The DRAM log buffer: a ring; LSN x lives at x & buffer_mask_.
  std::unique_ptr<uint8_t[]> buffer_;
  uint64_t buffer_mask_ = 0;
  LinkBuf link_;

  std::atomic<Lsn> reserved_{0};
  std::atomic<Lsn> durable_{0};
  std::atomic<Lsn> checkpoint_{0};
  std::atomic<uint64_t> write_epoch_{0};    // bumped after every write/sync; waiters sleep on it
  std::atomic<uint64_t> work_requests_{0};  // classic: wakes the writer threads
  std::atomic<bool> stopping_{false};
  std::atomic<bool> closed_{false};
  bool started_ = false;  // Start() succeeded; only then may anything be written

  std::mutex checkpoint_mu_;
  uint64_t checkpoint_sequence_ = 0;  // guarded by checkpoint_mu_

  std::mutex error_mu_;
  Status error_;  // first I/O failure; guarded by error_mu_
  std::atomic<bool> failed_{false};
  std::atomic<Lsn> hint_cap_{~Lsn{0}};  // BeginBackupCopy
  std::atomic<bool> backup_{false};     // BeginBackupCopy: a full log waits

  struct Counters {
    // Every commit adds to these: striped, so that threads on different
    // cores do not pass one cache line back and forth.
    StripedCounter appends, append_bytes, durable_waits;
    std::atomic<uint64_t> buffer_full_waits{0}, log_full_waits{0}, checkpoints{0};
  };
  mutable Counters counters_;
};

}  // namespace subito::log
