#include "log/redo_log.h"

#include <immintrin.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "pmem/numa.h"
#include "pmem/prefaulter.h"
#include "util/coding.h"
#include "util/strings.h"
#include "util/thread_name.h"

namespace subito::log {

struct RedoLog::Stream {
  uint32_t id = 0;
  std::mutex write_mu;                    // nf: one writer at a time
  std::atomic<Lsn> written{0};            // all of this stream's bytes below are written
  std::atomic<Lsn> durable{0};            // ... and durable (nf: == written)
  Lsn zeroed_until = 0;                   // padding already zero up to here; writer-owned
  std::vector<uint8_t> staging;           // classic writer's block buffer
  std::thread writer, flusher;            // classic
  std::atomic<uint64_t> flush_events{0};  // classic: bumped by the writer; the flusher sleeps on it
  std::atomic<bool> writer_done{false};
  // Statistics, each with one writer (the stream's writer; syncs in classic:
  // the flusher).
  std::atomic<uint64_t> writes{0}, syncs{0}, persisted_bytes{0}, padding_bytes{0};
};

namespace {
constexpr int kSpinsBeforeSleep = 200;

// For counters with a single writer: readers may see a slightly old value.
void Bump(std::atomic<uint64_t>& c, uint64_t n) {
  c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}
using ull = unsigned long long;
}  // namespace

RedoLog::RedoLog(const LogOptions& options)
    : options_(options),
      write_ahead_(options.write_ahead_size),
      buffer_(new uint8_t[options.buffer_size]()),
      buffer_mask_(options.buffer_size - 1),
      link_(kFirstLsn, options.buffer_size / kRecordAlign, kRecordAlign) {}

Result<std::unique_ptr<RedoLog>> RedoLog::Open(const LogOptions& options) {
  SUBITO_RETURN_IF_ERROR(ValidateLogOptions(options));
  Result<std::unique_ptr<LogFiles>> files = LogFiles::OpenOrCreate(options);
  if (!files.ok()) return files.status();
  std::unique_ptr<RedoLog> log(new RedoLog(options));
  SUBITO_RETURN_IF_ERROR(log->Start(std::move(*files)));
  return log;
}

Status RedoLog::Start(std::unique_ptr<LogFiles> files) {
  files_ = std::move(files);
  views_ = files_->Views();
  persistence_ = files_->persistence();
  const std::vector<StreamView> views = files_->Views();
  Result<LogState> state = ScanLog(views);
  if (!state.ok()) return state.status();
  recovered_ = *state;
  geometry_ = recovered_.geometry;
  salt_ = recovered_.salt;
  if (!files_->created() && options_.expected_salt != 0 && salt_ != options_.expected_salt) {
    return Status::InvalidArgument(StrFormat(
        "the redo log in %s belongs to another database (its salt %016llx, expected %016llx): "
        "refusing to use it. Point pm_dir at this database's PM tier; if this database was "
        "shut down cleanly its log is not needed: move that directory away for a new log",
        options_.dir.c_str(), static_cast<ull>(salt_), static_cast<ull>(options_.expected_salt)));
  }
  const Lsn end = recovered_.end_lsn;
  const uint64_t stripe = geometry_.stripe_size;

  // I4: erase unacknowledged records past the end before anything is written.
  for (Lsn x = end; x < recovered_.orphan_end;) {
    uint64_t n = std::min<uint64_t>(recovered_.orphan_end - x, stripe - x % stripe);
    SUBITO_RETURN_IF_ERROR(
        files_->WriteDurably(geometry_.StreamOf(x), geometry_.FileOffsetOf(x), nullptr, n));
    x += n;
  }

  for (uint32_t i = 0; i < geometry_.stream_count; ++i) {
    auto s = std::make_unique<Stream>();
    s->id = i;
    s->written.store(end);
    s->durable.store(end);
    s->zeroed_until = end;
    streams_.push_back(std::move(s));
  }
  // The block holding `end` is rewritten whole by classic writes: seed the
  // ring with its durable bytes.
  for (Lsn x = std::max(recovered_.checkpoint_lsn, AlignDown(end, write_ahead_)); x < end; ++x) {
    buffer_[x & buffer_mask_] = views[geometry_.StreamOf(x)].data[geometry_.FileOffsetOf(x)];
  }
  link_.Reset(end);
  reserved_.store(end);
  durable_.store(end);
  checkpoint_.store(recovered_.checkpoint_lsn);
  checkpoint_sequence_ = recovered_.checkpoint_sequence;
  // I7: the newest slot names this writer's reach before its first append
  // (the orphans an earlier writer's reach allowed are erased above).
  if (recovered_.write_reach != options_.buffer_size) {
    SUBITO_RETURN_IF_ERROR(WriteCheckpointSlot(recovered_.checkpoint_lsn, false));
  }

  numa_node_ = pmem::NumaNodeOf(files_->file(0).data() + kDataOffset);
  if (!options_.defer_prefault) StartPrefault();
  if (options_.write_mode == LogWriteMode::kClassic) {
    for (auto& s : streams_) {
      Stream* sp = s.get();
      sp->writer = std::thread([this, sp] {
        NameThisThread("subito_logwrite");
        ClassicWriterLoop(*sp);
      });
      sp->flusher = std::thread([this, sp] {
        NameThisThread("subito_logflush");
        ClassicFlusherLoop(*sp);
      });
    }
  }
  started_ = true;
  return Status::OK();
}

RedoLog::~RedoLog() {
  prefaulter_.reset();  // its pacing reads reserved_, declared after it
  // A log whose Open was refused writes nothing: not even a clean-shutdown
  // slot, which could replace the newest checkpoint of a damaged log.
  if (started_ && !closed_.load()) {
    Status s = Close();
    (void)s;  // a destructor cannot report; callers who care call Close()
  }
}

uint32_t RedoLog::max_payload() const {
  uint64_t span = std::min<uint64_t>(options_.buffer_size - write_ahead_, geometry_.capacity());
  return static_cast<uint32_t>(std::min<uint64_t>(span - kRecordHeaderSize, UINT32_MAX - 8) /
                               kRecordAlign * kRecordAlign);
}

void RedoLog::Fail(const Status& s) {
  std::lock_guard lock(error_mu_);
  // A failed log stays failed until a restart: a full disk is reported as
  // an I/O error, not as NoSpace, whose callers expect writes to resume
  // once space is freed.
  if (error_.ok()) error_ = s.IsNoSpace() ? Status::IOError(s.message()) : s;
  failed_.store(true);
  WakeWaiters();
}

Status RedoLog::FirstError() {
  std::lock_guard lock(error_mu_);
  return error_;
}

void RedoLog::WakeWaiters() {
  write_epoch_.fetch_add(1, std::memory_order_acq_rel);
  write_epoch_.notify_all();
}

void RedoLog::CopyFromRing(uint8_t* dst, Lsn from, size_t n) const {
  uint64_t off = from & buffer_mask_;
  size_t first = std::min<uint64_t>(n, options_.buffer_size - off);
  std::memcpy(dst, buffer_.get() + off, first);
  std::memcpy(dst + first, buffer_.get(), n - first);
}

Result<AppendResult> RedoLog::Append(uint16_t type, const void* payload, uint32_t length) {
  if (type == kRecordInvalid) return Status::InvalidArgument("record type 0 is reserved");
  if (length > max_payload()) {
    return Status::InvalidArgument(
        StrFormat("record payload of %u bytes exceeds the largest "
                  "the log can hold (%u bytes)",
                  length, max_payload()));
  }
  if (stopping_.load(std::memory_order_relaxed)) return Status::Shutdown("log is closed");
  const uint64_t span = RecordSpan(length);
  const Lsn start = reserved_.fetch_add(span, std::memory_order_acq_rel);
  const Lsn end = start + span;
  // On failure the range is left unfilled and the ring untouched: its ring
  // bytes may still hold durable data a classic writer rewrites. The log is
  // failed or closing then, so no one waits for the range.
  SUBITO_RETURN_IF_ERROR(WaitForSpace(start, end));

  uint8_t h[kRecordHeaderSize] = {};
  EncodeFixed16(h + 4, type);
  EncodeFixed32(h + 8, length);
  EncodeFixed64(h + 16, start);
  // The durable LSN first, the cap after (both seq_cst, as BeginBackupCopy's
  // store): a hint read before the cap was set was durable before the copy
  // began.
  const Lsn durable_now = durable_.load(std::memory_order_seq_cst);
  EncodeFixed64(h + 24, std::min(durable_now, hint_cap_.load(std::memory_order_seq_cst)));
  const auto* src = static_cast<const uint8_t*>(payload);
  EncodeFixed32(h, RecordCrc(salt_, h, src, length));

  // Into the ring, which may wrap inside the record.
  auto put = [this](Lsn at, const uint8_t* bytes, size_t n) {
    uint64_t off = at & buffer_mask_;
    size_t first = std::min<uint64_t>(n, options_.buffer_size - off);
    std::memcpy(buffer_.get() + off, bytes, first);
    std::memcpy(buffer_.get(), bytes + first, n - first);
  };
  static const uint8_t kZeros[kRecordAlign] = {};
  put(start, h, sizeof h);
  if (length > 0) put(start + kRecordHeaderSize, src, length);
  put(start + kRecordHeaderSize + length, kZeros, span - kRecordHeaderSize - length);
  link_.Complete(start, end);
  counters_.appends.Add();
  counters_.append_bytes.Add(span);
  if (options_.write_mode == LogWriteMode::kClassic) {
    work_requests_.fetch_add(1, std::memory_order_release);
    work_requests_.notify_all();
  }
  return AppendResult{start, end};
}

void RedoLog::BeginBackupCopy() {
  hint_cap_.store(durable_.load(std::memory_order_seq_cst), std::memory_order_seq_cst);
  backup_.store(true, std::memory_order_seq_cst);
  // The copy's streams are read at different moments, so records of one
  // may lie far past the gap another leaves, beyond I7's reach: the slot
  // the copy holds says "reach unknown", and its recovery looks for orphans
  // (I4) over the whole lap. Slots written until EndBackupCopy say so too.
  std::lock_guard lock(checkpoint_mu_);
  if (Status st = WriteCheckpointSlot(checkpoint_.load(), false); !st.ok()) Fail(st);
}

void RedoLog::EndBackupCopy() {
  backup_.store(false, std::memory_order_release);
  hint_cap_.store(~Lsn{0}, std::memory_order_release);
}

Status RedoLog::WaitForSpace(Lsn start, Lsn end) {
  // Buffer: bytes from the write-ahead block holding durable_lsn on are still
  // needed (classic rewrites that block), so the ring holds up to B past it.
  bool counted = false;
  for (int spins = 0; end > AlignDown(durable_.load(std::memory_order_acquire), write_ahead_) +
                                options_.buffer_size;) {
    if (!counted) counters_.buffer_full_waits.fetch_add(1, std::memory_order_relaxed);
    counted = true;
    if (failed_.load()) return FirstError();
    Lsn need = std::min<Lsn>(link_.Advance(), end - options_.buffer_size + write_ahead_);
    Status s = WaitDurable(need);
    if (!s.ok()) return s;
    if (++spins > kSpinsBeforeSleep) std::this_thread::yield();
  }
  counted = false;
  Lsn last_ckpt = checkpoint_.load(std::memory_order_acquire);
  auto since = std::chrono::steady_clock::now();
  for (;;) {
    Lsn ckpt = checkpoint_.load(std::memory_order_acquire);
    if (end <= ckpt + geometry_.capacity()) return Status::OK();
    if (ckpt != last_ckpt) {
      last_ckpt = ckpt;
      since = std::chrono::steady_clock::now();
    } else if (backup_.load(std::memory_order_acquire)) {
      since = std::chrono::steady_clock::now();  // the checkpoint moves once the backup ends
    } else if (std::chrono::steady_clock::now() - since >
               std::chrono::milliseconds(options_.full_timeout_ms)) {
      // The range is reserved and can never be filled now: the log fails
      // (every later append too) rather than stall every writer for good.
      Fail(
          Status::Busy(StrFormat("the redo log has been full for %u ms: its checkpoint "
                                 "cannot advance; no more writes until a restart",
                                 options_.full_timeout_ms)));
      return FirstError();
    }
    if (failed_.load()) return FirstError();
    if (stopping_.load()) return Status::Shutdown("log closed while waiting for a checkpoint");
    if (!counted) counters_.log_full_waits.fetch_add(1, std::memory_order_relaxed);
    counted = true;
    // The owner can only checkpoint up to durable_lsn(): make everything
    // filled below this record durable first (nobody else may be committing).
    Lsn below = std::min(link_.Advance(), start);
    if (durable_.load(std::memory_order_acquire) < below) {
      SUBITO_RETURN_IF_ERROR(WaitDurable(below));
    }
    if (options_.on_log_full) options_.on_log_full();
    // Poll rather than sleep on the write epoch: a record filled meanwhile
    // by an append that nobody commits bumps no epoch, yet must be written
    // before the owner can checkpoint past it (the loop's next round does).
    // A full log is a stall state; the polling costs nothing elsewhere.
    if (checkpoint_.load(std::memory_order_acquire) == ckpt) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

// Every stream's durable value is a snapshot of the filled prefix, so it is a
// record boundary, and so is their minimum: durable_lsn() can always be a
// checkpoint.
void RedoLog::UpdateDurable() {
  // Callers have just raised a stream's mark. Two writers raising different
  // streams at once must not both read the other's old mark (store->load
  // reordering): marks are stored and read seq_cst, so at least one of them
  // sees both.
  Lsn d = UINT64_MAX;
  for (const auto& s : streams_) d = std::min(d, s->durable.load(std::memory_order_seq_cst));
  Lsn cur = durable_.load(std::memory_order_acquire);
  while (d > cur && !durable_.compare_exchange_weak(cur, d, std::memory_order_acq_rel)) {
  }
  WakeWaiters();
}

Status RedoLog::WaitDurable(Lsn lsn) {
  if (durable_.load(std::memory_order_acquire) >= lsn) return Status::OK();
  if (lsn > reserved_.load(std::memory_order_acquire)) {
    return Status::InvalidArgument(StrFormat("WaitDurable(%llu) is past the reserved end %llu",
                                             static_cast<ull>(lsn),
                                             static_cast<ull>(reserved_.load())));
  }
  counters_.durable_waits.Add();
  const bool nf = options_.write_mode == LogWriteMode::kNf;
  for (int spins = 0;;) {
    uint64_t epoch = write_epoch_.load(std::memory_order_acquire);
    if (durable_.load(std::memory_order_acquire) >= lsn) return Status::OK();
    if (failed_.load()) return FirstError();
    Lsn filled = link_.Advance();
    if (filled >= lsn && nf) {
      bool wrote = false;
      for (auto& s : streams_) {
        // A stream with no bytes below lsn still moves its durable mark.
        if (s->durable.load(std::memory_order_acquire) >= lsn || !s->write_mu.try_lock()) {
          continue;
        }
        NfWrite(*s, link_.filled());
        s->write_mu.unlock();
        wrote = true;
      }
      if (wrote) {
        UpdateDurable();
        continue;
      }
    } else if (filled >= lsn) {
      work_requests_.fetch_add(1, std::memory_order_release);
      work_requests_.notify_all();
    }
    if (++spins < kSpinsBeforeSleep) {
      _mm_pause();
    } else if (filled < lsn) {
      std::this_thread::yield();  // an appender below lsn is still copying
    } else {
      write_epoch_.wait(epoch, std::memory_order_acquire);
    }
  }
}

Result<AppendResult> RedoLog::Commit(uint16_t type, const void* payload, uint32_t length) {
  Result<AppendResult> r = Append(type, payload, length);
  if (!r.ok()) return r;
  SUBITO_RETURN_IF_ERROR(WaitDurable(r->end));
  return r;
}

void RedoLog::NfWrite(Stream& s, Lsn target) {
  const Lsn w = s.written.load(std::memory_order_relaxed);
  if (target <= w) return;
  const uint64_t stripe = geometry_.stripe_size;
  pmem::PmFile& file = files_->file(s.id);
  uint64_t copied = 0;
  for (Lsn pos = geometry_.NextOwnedBy(s.id, w); pos < target;) {
    Lsn end = std::min<Lsn>(target, (pos / stripe + 1) * stripe);
    // One stripe piece is contiguous in the file and in the ring (the ring
    // is a multiple of the stripe size).
    persistence_->CopyNoDrain(file.data() + geometry_.FileOffsetOf(pos),
                              buffer_.get() + (pos & buffer_mask_), end - pos);
    copied += end - pos;
    pos = geometry_.NextOwnedBy(s.id, end);
  }
  // Pad the partial block up to the write-ahead size, inside the stripe and
  // never into bytes of the checkpoint's lap that may still be needed. Bytes
  // already zeroed by an earlier pad are not written again.
  uint64_t padding = 0;
  if (geometry_.StreamOf(target) == s.id && target % stripe != 0) {
    Lsn pad_end = std::min({AlignUp(target, write_ahead_), (target / stripe + 1) * stripe,
                            checkpoint_.load(std::memory_order_acquire) + geometry_.capacity()});
    Lsn from = std::max(target, s.zeroed_until);
    if (from < pad_end) {
      persistence_->FillNoDrain(file.data() + geometry_.FileOffsetOf(from), 0, pad_end - from);
      padding = pad_end - from;
      s.zeroed_until = pad_end;
    }
  }
  if (copied + padding > 0) {
    // One fence orders every copied and padded line before durable is raised.
    persistence_->Drain();
  }
  s.written.store(target, std::memory_order_release);
  s.durable.store(target, std::memory_order_seq_cst);
  if (copied + padding == 0) return;
  // Single writer per stream (write_mu): plain adds, no locked instruction.
  Bump(s.writes, 1);
  Bump(s.syncs, 1);
  Bump(s.persisted_bytes, copied + padding);
  Bump(s.padding_bytes, padding);
}

Status RedoLog::ClassicWrite(Stream& s, Lsn target) {
  const Lsn w = s.written.load(std::memory_order_relaxed);
  const uint64_t stripe = geometry_.stripe_size;
  File& file = files_->writer(s.id);
  const Lsn limit = checkpoint_.load(std::memory_order_acquire) + geometry_.capacity();
  bool wrote = false;
  for (Lsn pos = geometry_.NextOwnedBy(s.id, w); pos < target;) {
    if (failed_.load()) return FirstError();
    const Lsn stripe_start = pos / stripe * stripe;
    const Lsn stripe_end = stripe_start + stripe;
    const Lsn end = std::min(target, stripe_end);
    // Whole write-ahead blocks, as InnoDB writes them: the partial block at
    // the start is rewritten from the buffer, the one at the end padded.
    const Lsn from = std::max(AlignDown(pos, write_ahead_), stripe_start);
    const Lsn to = std::max(end, std::min({AlignUp(end, write_ahead_), stripe_end, limit}));
    s.staging.assign(to - from, 0);
    CopyFromRing(s.staging.data(), from, end - from);
    SUBITO_RETURN_IF_ERROR(
        file.Write(geometry_.FileOffsetOf(from), s.staging.data(), s.staging.size()));
    wrote = true;
    Bump(s.writes, 1);
    Bump(s.persisted_bytes, to - from);
    Bump(s.padding_bytes, to - end);
    pos = geometry_.NextOwnedBy(s.id, end);
  }
  if (!wrote && s.durable.load(std::memory_order_acquire) == w) {
    // Nothing of this stream below target, and nothing waiting for a sync.
    s.written.store(target, std::memory_order_release);
    s.durable.store(target, std::memory_order_seq_cst);
    UpdateDurable();
    return Status::OK();
  }
  s.written.store(target, std::memory_order_release);
  s.flush_events.fetch_add(1, std::memory_order_release);
  s.flush_events.notify_one();
  return Status::OK();
}

void RedoLog::ClassicWriterLoop(Stream& s) {
  if (options_.numa_pin) pmem::PinCurrentThreadToNode(numa_node_);
  for (;;) {
    uint64_t req = work_requests_.load(std::memory_order_acquire);
    Lsn target = link_.Advance();
    if (target > s.written.load(std::memory_order_relaxed) && !failed_.load()) {
      Status st = ClassicWrite(s, target);
      if (!st.ok()) Fail(st);
      continue;
    }
    if (stopping_.load()) break;
    work_requests_.wait(req, std::memory_order_acquire);
  }
  s.writer_done.store(true);
  s.flush_events.fetch_add(1, std::memory_order_release);
  s.flush_events.notify_one();
}

void RedoLog::ClassicFlusherLoop(Stream& s) {
  if (options_.numa_pin) pmem::PinCurrentThreadToNode(numa_node_);
  File& file = files_->writer(s.id);
  for (;;) {
    uint64_t events = s.flush_events.load(std::memory_order_acquire);
    Lsn w = s.written.load(std::memory_order_acquire);
    if (w > s.durable.load(std::memory_order_relaxed) && !failed_.load()) {
      if (Status st = file.Sync(); !st.ok()) {
        Fail(st);
        continue;
      }
      Bump(s.syncs, 1);  // the flusher is the only one counting syncs in classic mode
      // The writer may have raised the mark past w meanwhile (nothing to
      // write for this stream): raise, never lower.
      Lsn cur = s.durable.load(std::memory_order_seq_cst);
      while (cur < w && !s.durable.compare_exchange_weak(cur, w, std::memory_order_seq_cst)) {
      }
      UpdateDurable();
      continue;
    }
    if (s.writer_done.load()) break;
    s.flush_events.wait(events, std::memory_order_acquire);
  }
}

Status RedoLog::WriteCheckpointSlot(Lsn checkpoint, bool clean) {
  CheckpointSlot slot{};
  slot.checkpoint_lsn = checkpoint;
  slot.durable_lsn = durable_.load(std::memory_order_acquire);
  slot.sequence = checkpoint_sequence_ + 1;
  slot.salt = salt_;
  slot.clean_shutdown = clean ? 1 : 0;
  slot.write_reach = backup_.load(std::memory_order_seq_cst) ? 0 : options_.buffer_size;
  SealCheckpointSlot(&slot);
  // The slot not holding the newest checkpoint is overwritten (I5).
  SUBITO_RETURN_IF_ERROR(
      files_->WriteDurably(0, kCheckpointSlotOffset[slot.sequence % 2], &slot, sizeof slot));
  checkpoint_sequence_ = slot.sequence;
  return Status::OK();
}

Status RedoLog::Checkpoint(Lsn lsn) {
  std::lock_guard lock(checkpoint_mu_);
  if (lsn > durable_.load(std::memory_order_acquire)) {
    return Status::InvalidArgument(StrFormat("checkpoint LSN %llu is past the durable LSN %llu",
                                             static_cast<ull>(lsn),
                                             static_cast<ull>(durable_.load())));
  }
  if (lsn <= checkpoint_.load(std::memory_order_relaxed)) return Status::OK();
  if (lsn % kRecordAlign != 0) {
    return Status::InvalidArgument(
        StrFormat("checkpoint LSN %llu is not a record boundary", static_cast<ull>(lsn)));
  }
  SUBITO_RETURN_IF_ERROR(WriteCheckpointSlot(lsn, false));
  checkpoint_.store(lsn, std::memory_order_release);
  WakeWaiters();
  counters_.checkpoints.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status RedoLog::Close() {
  if (closed_.exchange(true)) return Status::OK();
  // New appends fail from here on, and appends parked on a full log give up
  // (unacknowledged, their ranges stay unfilled). Everything filled becomes
  // durable.
  stopping_.store(true);
  WakeWaiters();
  Status result = WaitDurable(link_.Advance());
  if (result.ok()) {
    std::lock_guard lock(checkpoint_mu_);
    result = WriteCheckpointSlot(checkpoint_.load(), true);
  }
  work_requests_.fetch_add(1);
  work_requests_.notify_all();
  for (auto& s : streams_) {
    if (s->writer.joinable()) s->writer.join();
    if (s->flusher.joinable()) s->flusher.join();
  }
  prefaulter_.reset();
  views_.clear();
  files_.reset();
  return result;
}

Status RedoLog::ForEachRecoveredRecord(
    const std::function<Status(const LogRecordView&)>& fn) const {
  if (!files_) return Status::Shutdown("log is closed");
  // The walk trusts ScanLog's checksums: appends that could have wrapped
  // over the recovered records end that trust.
  if (reserved_.load() > recovered_.checkpoint_lsn + geometry_.capacity()) {
    return Status::InvalidArgument(
        "the recovered records may have been overwritten: the log has wrapped since its open");
  }
  return ForEachRecord(views_, recovered_, fn);
}

Status RedoLog::ReadRecoveredRecord(Lsn lsn, std::vector<uint8_t>* scratch,
                                    LogRecordView* rec) const {
  if (!files_) return Status::Shutdown("log is closed");
  return ReadRecordAt(views_, recovered_, lsn, scratch, rec);
}

LogStats RedoLog::stats() const {
  LogStats s;
  s.appends = counters_.appends.value();
  s.append_bytes = counters_.append_bytes.value();
  s.durable_waits = counters_.durable_waits.value();
  for (const auto& st : streams_) {
    s.writes += st->writes.load(std::memory_order_relaxed);
    s.syncs += st->syncs.load(std::memory_order_relaxed);
    s.persisted_bytes += st->persisted_bytes.load(std::memory_order_relaxed);
    s.padding_bytes += st->padding_bytes.load(std::memory_order_relaxed);
  }
  s.buffer_full_waits = counters_.buffer_full_waits.load();
  s.log_full_waits = counters_.log_full_waits.load();
  s.checkpoints = counters_.checkpoints.load();
  return s;
}

void RedoLog::StartPrefault() {
  std::lock_guard lock(checkpoint_mu_);  // one start only
  if (prefaulter_ || !options_.prefault || options_.write_mode != LogWriteMode::kNf) return;
  // Paced: a lead of a few log buffers (at least 64 MiB) ahead of the
  // appends since now, so that a large log mapped afresh after a restart is
  // not populated all at once while the engine needs the cores.
  const Lsn from = reserved_.load();
  const uint64_t lead = std::max<uint64_t>(64ull << 20, 4 * options_.buffer_size);
  prefaulter_ = std::make_unique<pmem::Prefaulter>(
      options_.numa_pin ? numa_node_ : -1, [this, from] { return reserved_.load() - from; }, lead);
  std::vector<pmem::Prefaulter::Region> regions;
  for (uint32_t i = 0; i < geometry_.stream_count; ++i) {
    const Lsn next = geometry_.NextOwnedBy(i, from);
    regions.push_back({files_->file(i).data() + kDataOffset, geometry_.data_size,
                       geometry_.FileOffsetOf(next) - kDataOffset});
  }
  prefaulter_->AddAll(regions);
}

void RedoLog::WaitPrefaulted() const {
  if (prefaulter_) prefaulter_->WaitIdle();
}

std::string RedoLog::Describe() const {
  const pmem::PmFile& f0 = files_->file(0);
  return StrFormat(
      "redo log %s: %u stream(s) x %llu KiB, %s, mode %s, write-ahead %u B, "
      "persistence: %s, NUMA node %d of %d",
      options_.dir.c_str(), geometry_.stream_count, static_cast<ull>(f0.size() / 1024),
      pmem::PmKindName(f0.kind()), LogWriteModeName(options_.write_mode), write_ahead_,
      options_.write_mode == LogWriteMode::kNf ? persistence_->Name() : "pwrite + fdatasync",
      numa_node_, pmem::NumaNodeCount());
}

}  // namespace subito::log
