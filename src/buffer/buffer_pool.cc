#include "buffer/buffer_pool.h"

#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "buffer/buffer_pool_frame.h"
#include "buffer/mtr.h"
#include "page/page_format.h"
#include "subito/interrupt.h"
#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/strings.h"
#include "util/thread_name.h"

namespace subito::buffer {

namespace {
constexpr const char* kWritesPausedMessage = "page writes are paused for a backup (BACKUP STAGE)";
// FlushFrames' refusal while a backup pauses writes (not a write failure).
bool IsWritesPaused(const Status& st) {
  return st.IsBusy() && st.message() == kWritesPausedMessage;
}
}  // namespace

namespace {

// Drops the pending page-log entries up to `done`.
void TrimPending(std::vector<uint8_t>& pending, log::Lsn done) {
  size_t off = 0;
  while (off < pending.size() && DecodeFixed64(pending.data() + off) <= done) {
    off += 12 + DecodeFixed32(pending.data() + off + 8);
  }
  pending.erase(pending.begin(), pending.begin() + static_cast<std::ptrdiff_t>(off));
}

// The pages a pass over many pages went on past because they could not be
// read (a damaged page or entry: Corruption, or an IOError): the first
// failure, and how many.
class UnreadablePages {
 public:
  // False for any other failure, which the pass returns at once.
  bool Skip(const Status& failed) {
    if (!failed.IsCorruption() && !failed.IsIOError()) return false;
    if (count_++ == 0) first_ = failed;
    return true;
  }
  bool any() const { return count_ > 0; }
  // The first failure, with the count and `what` of those pages.
  Status Summary(const char* what) const {
    std::string why = StrFormat("%s (%llu page(s) %s)", first_.message().c_str(),
                                static_cast<unsigned long long>(count_), what);
    return first_.IsCorruption() ? Status::Corruption(std::move(why))
                                 : Status::IOError(std::move(why));
  }

 private:
  uint64_t count_ = 0;
  Status first_;
};

}  // namespace

bool PageHandle::verified() const {
  if (image_) return false;
  return pool_->frames_[frame_]->verified.load(std::memory_order_acquire);
}
void PageHandle::set_verified(bool v) const {
  if (image_) return;
  pool_->frames_[frame_]->verified.store(v, std::memory_order_release);
}

PageHandle& PageHandle::operator=(PageHandle&& o) noexcept {
  if (this != &o) {
    Release();
    pool_ = o.pool_;
    frame_ = o.frame_;
    id_ = o.id_;
    latch_ = o.latch_;
    data_ = o.data_;
    image_ = std::move(o.image_);
    o.pool_ = nullptr;
  }
  return *this;
}

void PageHandle::Release() {
  image_.reset();
  if (pool_ == nullptr) return;
  BufferPool* p = pool_;
  pool_ = nullptr;
  p->Unpin(frame_, latch_);
}

BufferPool::BufferPool(const BufferPoolOptions& options, log::RedoLog* log, DoubleWrite* dwb)
    : options_(options),
      log_(log),
      versions_(options.page_size, options.page_version_limit),
      writer_(log, dwb) {}

Result<std::unique_ptr<BufferPool>> BufferPool::Create(const BufferPoolOptions& o,
                                                       log::RedoLog* log, DoubleWrite* dwb) {
  if (!page::ValidPageSize(o.page_size)) {
    return Status::InvalidArgument(
        StrFormat("page size %u: must be 4096, 8192 or 16384", o.page_size));
  }
  const uint64_t frames = o.capacity_bytes / o.page_size;
  if (frames < 8) {
    return Status::InvalidArgument(
        StrFormat("buffer pool of %llu bytes holds %llu pages of %u bytes; at least 8 are needed",
                  static_cast<unsigned long long>(o.capacity_bytes),
                  static_cast<unsigned long long>(frames), o.page_size));
  }
  if (dwb && dwb->page_size() != o.page_size) {
    return Status::InvalidArgument("double-write area and buffer pool page sizes differ");
  }
  std::unique_ptr<BufferPool> pool(new BufferPool(o, log, dwb));
  if (o.flush_batch == 0 || o.flush_batch > pool->writer_.max_batch()) {
    return Status::InvalidArgument(
        StrFormat("flush batch %u: must be 1 to %u", o.flush_batch, pool->writer_.max_batch()));
  }
  pool->memory_ = static_cast<uint8_t*>(std::aligned_alloc(4096, frames * o.page_size));
  if (pool->memory_ == nullptr) return Status::IOError("cannot allocate the buffer pool");
  for (uint64_t i = 0; i < frames; ++i) {
    auto f = std::make_unique<Frame>();
    f->data = pool->memory_ + i * o.page_size;
    pool->frames_.push_back(std::move(f));
    pool->free_.push_back(static_cast<uint32_t>(frames - 1 - i));
  }
  if (o.checkpoint_held) {
    pool->start_hold_.store(true);
    pool->HoldCheckpoint();
  }
  for (uint32_t i = 0; i < o.cleaner_threads; ++i) {
    pool->cleaners_.emplace_back([p = pool.get()] {
      NameThisThread("subito_cleaner");
      p->CleanerLoop();
    });
  }
  return pool;
}

BufferPool::~BufferPool() {
  {
    std::lock_guard lock(cleaner_mu_);
    stop_ = true;
  }
  cleaner_cv_.notify_all();
  for (auto& t : cleaners_) t.join();
  std::free(memory_);
  for (std::atomic<SpaceChunk*>& c : space_chunks_) delete c.load(std::memory_order_relaxed);
}

void BufferPool::PublishSpace(uint32_t space_id, page::SpaceFile* space) {
  if (space_id / kSpaceChunk >= kSpaceChunks) return;
  std::atomic<SpaceChunk*>& chunk = space_chunks_[space_id / kSpaceChunk];
  SpaceChunk* c = chunk.load(std::memory_order_relaxed);
  if (c == nullptr) {
    if (space == nullptr) return;
    c = new SpaceChunk;
    chunk.store(c, std::memory_order_release);
  }
  c->slot[space_id % kSpaceChunk].store(space, std::memory_order_release);
}

Status BufferPool::AddSpace(page::SpaceFile* space) {
  if (space->page_size() != options_.page_size) {
    return Status::InvalidArgument(StrFormat("space %s has %u-byte pages, the pool %u-byte",
                                             space->path().c_str(), space->page_size(),
                                             options_.page_size));
  }
  std::unique_lock lock(spaces_mu_);
  if (!spaces_.emplace(space->space_id(), space).second) {
    return Status::InvalidArgument(StrFormat("space id %u is already open", space->space_id()));
  }
  PublishSpace(space->space_id(), space);
  return Status::OK();
}

Status BufferPool::DropSpace(uint32_t space_id) {
  std::unique_lock unasked(unasked_fetch_mu_);
  for (int spins = 0;; ++spins) {
    {
      std::lock_guard lock(mu_);
      bool busy = false;
      for (uint32_t i = 0; i < frames_.size(); ++i) {
        Frame& f = *frames_[i];
        if (!f.in_use || f.id.space != space_id) continue;
        // Pinned: the pool's own fetches (ReclaimPageLog) may pin it meanwhile.
        if (f.loading.load(std::memory_order_relaxed) || !RemoveUnpinnedEntry(f)) {
          busy = true;
          continue;
        }
        if (f.dirty) flush_list_.erase({f.oldest_lsn, i});
        f.dirty = false;
        f.in_use = false;
        free_.push_back(i);
      }
      if (!busy) break;
    }
    if (spins > 10000) return Status::Busy(StrFormat("space %u: pages still in use", space_id));
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  {
    std::unique_lock lock(spaces_mu_);
    spaces_.erase(space_id);
    PublishSpace(space_id, nullptr);
  }
  unasked.unlock();
  // After the erase no new batch finds the space; this waits out one that
  // did, and drops the space's pages from a failed batch (P4).
  writer_.ForgetSpace(space_id);
  pending_redo_.DropSpace(space_id);  // R3
  FinishLazyRedoIfDone();
  if (options_.page_log != nullptr) options_.page_log->FreeSpace(space_id);
  versions_.DropSpace(space_id);
  return Status::OK();
}

page::SpaceFile* BufferPool::Space(uint32_t space_id) const {
  if (space_id / kSpaceChunk < kSpaceChunks) {
    const SpaceChunk* c = space_chunks_[space_id / kSpaceChunk].load(std::memory_order_acquire);
    return c == nullptr ? nullptr : c->slot[space_id % kSpaceChunk].load(std::memory_order_acquire);
  }
  std::shared_lock lock(spaces_mu_);
  auto it = spaces_.find(space_id);
  return it == spaces_.end() ? nullptr : it->second;
}

void BufferPool::LatchFrame(Frame& f, Latch latch) {
  // A page latch is held for microseconds: a short spin takes a busy one
  // without the two context switches of sleeping on it (every inserter at
  // the right edge of an ascending index latches the same leaf in turn).
  constexpr int kSpins = 64;
  if (latch == Latch::kExclusive) {
    for (int i = 0; i < kSpins; ++i) {
      if (f.latch.try_lock()) return;
      _mm_pause();
    }
    f.latch.lock();
  } else {
    for (int i = 0; i < kSpins; ++i) {
      if (f.latch.try_lock_shared()) return;
      _mm_pause();
    }
    f.latch.lock_shared();
  }
}

PageHandle BufferPool::LatchedHandle(uint32_t idx, PageId id, Latch latch) {
  Frame& f = *frames_[idx];  // pinned by the caller
  LatchFrame(f, latch);
  PageHandle h;
  h.pool_ = this;
  h.frame_ = idx;
  h.id_ = id;
  h.latch_ = latch;
  h.data_ = f.data;
  return h;
}

void BufferPool::Unpin(uint32_t frame, Latch latch) {
  Frame& f = *frames_[frame];
  if (latch == Latch::kExclusive) {
    f.latch.unlock();
  } else {
    f.latch.unlock_shared();
  }
  f.pins.fetch_sub(1, std::memory_order_release);  // no lock: T2
}

Result<PageHandle> BufferPool::Fetch(PageId id, Latch latch) {
  if (latch == Latch::kShared) {
    if (const PageVersions::Epoch* epoch = ReadAsOf::current()) return FetchAsOf(id, *epoch);
  }
  return FetchFrame(id, latch);
}

std::optional<uint32_t> BufferPool::FindEntry(PageId id) {
  return ShardOf(id).map.Find(id);
}

void BufferPool::AddEntry(PageId id, uint32_t frame) {
  TableShard& s = ShardOf(id);
  std::lock_guard lock(s.mu);
  s.map.Put(id, frame);
}

bool BufferPool::RemoveUnpinnedEntry(Frame& f) {
  TableShard& s = ShardOf(f.id);
  std::lock_guard lock(s.mu);
  if (f.pins.load(std::memory_order_acquire) > 0) return false;  // T2
  s.map.Erase(f.id);
  return true;
}

void BufferPool::DropFailedLoadPin(uint32_t idx) {
  Frame& f = *frames_[idx];
  if (f.pins.fetch_sub(1, std::memory_order_relaxed) != 1) return;
  f.in_use = false;
  f.load_error = Status::OK();
  free_.push_back(idx);
}

void BufferPool::RemoveEntry(PageId id) {
  TableShard& s = ShardOf(id);
  std::lock_guard lock(s.mu);
  s.map.Erase(id);
}

std::optional<uint32_t> BufferPool::PinLoaded(PageId id) {
  TableShard& s = ShardOf(id);
  std::lock_guard lock(s.mu);
  const std::optional<uint32_t> idx = s.map.Find(id);
  if (!idx) return std::nullopt;
  Frame& f = *frames_[*idx];
  if (f.loading.load(std::memory_order_acquire)) return std::nullopt;  // T3
  f.pins.fetch_add(1, std::memory_order_relaxed);                      // T2
  if (!f.referenced.load(std::memory_order_relaxed))
    f.referenced.store(true, std::memory_order_relaxed);
  return idx;
}

Result<PageHandle> BufferPool::FetchFrame(PageId id, Latch latch, bool fresh) {
  page::SpaceFile* space = Space(id.space);
  if (space == nullptr) return Status::NotFound(StrFormat("space %u is not open", id.space));
  if (std::optional<uint32_t> idx = PinLoaded(id)) {
    hits_.Add();
    space->CountLookup(true);
    return LatchedHandle(*idx, id, latch);
  }
  std::unique_lock lk(mu_);
  if (std::optional<uint32_t> found = FindEntry(id)) {
    const uint32_t idx = *found;
    Frame& f = *frames_[idx];
    f.pins.fetch_add(1, std::memory_order_relaxed);
    f.referenced.store(true, std::memory_order_relaxed);
    load_cv_.wait(lk, [&] { return !f.loading.load(std::memory_order_acquire); });
    if (!f.load_error.ok()) {
      Status err = f.load_error;
      DropFailedLoadPin(idx);
      return err;
    }
    lk.unlock();
    hits_.Add();
    space->CountLookup(true);
    return LatchedHandle(idx, id, latch);
  }
  Result<uint32_t> victim = FindVictim(lk);
  if (!victim.ok()) return victim.status();
  // FindVictim may have released the lock: someone else may have loaded it.
  if (FindEntry(id)) {
    free_.push_back(*victim);
    lk.unlock();
    return FetchFrame(id, latch, fresh);
  }
  const uint32_t idx = *victim;
  Frame& f = *frames_[idx];
  BeginLoad(idx, id, /*referenced=*/true);
  lk.unlock();
  Status st;
  if (fresh) {
    std::memset(f.data, 0, options_.page_size);  // what a read of it gives
  } else {
    st = space->ReadPage(id.page_no, f.data);
  }
  if (st.ok()) st = AfterRead(f, idx, id);
  lk.lock();
  EndLoad(idx, id, st);
  if (!st.ok()) return st;
  lk.unlock();
  if (!fresh) {  // a new page is neither found in the pool nor read
    misses_.fetch_add(1, std::memory_order_relaxed);
    space->CountLookup(false);
  }
  return LatchedHandle(idx, id, latch);
}

void BufferPool::BeginLoad(uint32_t idx, PageId id, bool referenced) {
  Frame& f = *frames_[idx];
  f.id = id;
  f.in_use = true;
  f.loading.store(true, std::memory_order_relaxed);  // before the entry: T3
  f.referenced.store(referenced, std::memory_order_relaxed);
  f.pins.store(1, std::memory_order_relaxed);
  f.dirty = false;
  f.verified.store(false, std::memory_order_relaxed);
  AddEntry(id, idx);
}

Status BufferPool::AfterRead(Frame& f, uint32_t idx, PageId id) {
  SUBITO_RETURN_IF_ERROR(ApplyPageLog(f, id));
  if (pending_redo_.empty()) return Status::OK();
  return ApplyPendingRedo(f, idx, id, false);
}

void BufferPool::EndLoad(uint32_t idx, PageId id, const Status& st) {
  Frame& f = *frames_[idx];
  if (!st.ok()) {
    RemoveEntry(id);  // before loading clears: T3
    f.load_error = st;
    f.loading.store(false, std::memory_order_release);
    DropFailedLoadPin(idx);
  } else {
    f.loading.store(false, std::memory_order_release);
  }
  load_cv_.notify_all();
}

std::optional<uint32_t> BufferPool::SweepForClean(uint32_t* steps, int* dirty_candidate,
                                                  bool* any_unpinned) {
  const uint32_t n = static_cast<uint32_t>(frames_.size());
  for (; *steps > 0; --*steps) {
    hand_ = (hand_ + 1) % n;
    Frame& f = *frames_[hand_];
    if (f.pins.load(std::memory_order_relaxed) > 0 || f.loading.load(std::memory_order_relaxed)) {
      continue;
    }
    *any_unpinned = true;
    if (f.referenced.exchange(false, std::memory_order_relaxed)) continue;
    if (f.dirty || f.flushing) {
      if (*dirty_candidate < 0 && !f.flushing) *dirty_candidate = static_cast<int>(hand_);
      continue;
    }
    // Pinned on the shard path since the check above: kept.
    if (f.in_use && !RemoveUnpinnedEntry(f)) continue;
    f.in_use = false;
    evictions_.fetch_add(1, std::memory_order_relaxed);
    return hand_;
  }
  return std::nullopt;
}

Result<uint32_t> BufferPool::FindVictim(std::unique_lock<std::mutex>& lk) {
  const uint32_t n = static_cast<uint32_t>(frames_.size());
  std::optional<std::chrono::steady_clock::time_point> paused_since;
  for (int attempt = 0;; ++attempt) {
    if (!free_.empty()) {
      uint32_t idx = free_.back();
      free_.pop_back();
      return idx;
    }
    int dirty_candidate = -1;
    bool any_unpinned = false;
    uint32_t steps = 2 * n;
    if (std::optional<uint32_t> idx = SweepForClean(&steps, &dirty_candidate, &any_unpinned)) {
      return *idx;
    }
    if (!any_unpinned) {
      if (attempt > 1000) {
        return Status::Busy(StrFormat("buffer pool: all %u frames are pinned", n));
      }
      lk.unlock();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      lk.lock();
      continue;
    }
    if (dirty_candidate >= 0 && write_pause_.paused()) {
      // A backup pauses page writes: wait for a clean frame or the resume.
      const auto now = std::chrono::steady_clock::now();
      if (!paused_since) {
        paused_since = now;
      } else if (now - *paused_since > std::chrono::milliseconds(options_.log_full_timeout_ms)) {
        return Status::Busy(StrFormat(
            "buffer pool: every frame free to take holds a change not yet written, and a backup "
            "(BACKUP STAGE) has paused page writes for %u ms",
            options_.log_full_timeout_ms));
      }
      lk.unlock();
      write_pause_.AwaitResume(std::chrono::milliseconds(1));
      lk.lock();
      continue;
    }
    if (dirty_candidate >= 0) {
      {  // the cleaners are behind: wake them
        std::lock_guard c(cleaner_mu_);
        urgent_ = true;
      }
      cleaner_cv_.notify_all();
      // Every unpinned frame is dirty: write one here rather than wait.
      const uint32_t idx = static_cast<uint32_t>(dirty_candidate);
      frames_[idx]->pins.fetch_add(1, std::memory_order_relaxed);
      frames_[idx]->flushing = true;
      lk.unlock();
      // Only try its latch: once mu_ is released another thread may pin and
      // latch it, and this thread may hold a latch that one is waiting for.
      Status st = FlushFrames({idx}, /*skip_busy=*/true);
      lk.lock();
      frames_[idx]->pins.fetch_sub(1, std::memory_order_release);
      frames_[idx]->flushing = false;
      foreground_flushes_.fetch_add(1, std::memory_order_relaxed);
      if (IsWritesPaused(st)) continue;  // paused since the check above: wait as there
      if (!st.ok()) return st;
    }
  }
}

Status BufferPool::ApplyPageLog(Frame& f, PageId id) {
  // The frame is loading: no one else reads or changes it.
  f.log_pending.clear();
  f.log_bytes = 0;
  f.log_off = true;
  log::Lsn lsn = page::PageLsn(f.data);
  // Every page change is logged first (P2): a page newer than the log's end
  // was written under another log, and redo would skip what this one holds
  // for it (P3).
  if (log_ != nullptr && lsn > log_->reserved_lsn()) {
    return Status::Corruption(StrFormat(
        "page %u of space %u carries LSN %llu, beyond the redo log's end (%llu): the page "
        "files are newer than the log, which belongs to another run or database",
        id.page_no, id.space, static_cast<unsigned long long>(lsn),
        static_cast<unsigned long long>(log_->reserved_lsn())));
  }
  PageLogStore* store = options_.page_log;
  if (store != nullptr) {
    // Entries the file's image holds already are skipped.
    SUBITO_RETURN_IF_ERROR(
        ApplyStoredEntries(*store, f.data, options_.page_size, id.space, id.page_no, &lsn));
    // After the entries' check, which keeps or drops those the open found
    // past `used` (G2).
    const uint32_t used = store->Used(id.space, id.page_no);
    f.log_bytes = used;
    // A page with no image in its file (never written: page LSN 0) is
    // written before its changes may go to the page log.
    f.log_off = used > options_.page_log_threshold || lsn == 0;
  }
  f.log_done_lsn.store(lsn, std::memory_order_relaxed);
  return Status::OK();
}

Status BufferPool::ApplyPendingRedo(Frame& f, uint32_t idx, PageId id, bool latched) {
  std::vector<log::Lsn> records;
  if (!pending_redo_.Find(id, &records)) return Status::OK();
  // Exclusive: a cleaner may find the frame in the flush list once it is
  // dirty below, and must not copy it before every record is in (R2).
  std::unique_lock latch(f.latch, std::defer_lock);
  if (!latched) latch.lock();
  std::vector<uint8_t> scratch;
  std::vector<PageRedo> pages;
  log::LogRecordView rec{};
  std::vector<uint8_t> edits;
  log::Lsn first = 0, last = 0;
  for (log::Lsn at : records) {
    SUBITO_RETURN_IF_ERROR(log_->ReadRecoveredRecord(at, &scratch, &rec));
    SUBITO_RETURN_IF_ERROR(ParseRedoRecord(rec, options_.page_size, &pages));
    if (page::PageLsn(f.data) >= rec.end) continue;  // P3: already in the page
    for (const PageRedo& p : pages) {
      if (p.id == id) ApplyRedoEdits(f.data, p.edits);
    }
    page::SetPageLsn(f.data, rec.end);
    // NV-PPL: the record's edits of this page are what its Mtr handed the
    // page log before the crash, so the page's next write may be an entry
    // of its per-page log as well (docs/formats/ppl.md, "Lazy redo").
    if (!f.log_off) {
      edits.clear();
      AppendPageLogEdits(rec.payload, rec.length, id, &edits);
      NotePageLogEdits(idx, rec.end, edits.data(), edits.size());
    }
    if (first == 0) first = rec.lsn;
    last = rec.end;
  }
  if (first != 0) {
    MarkDirtyFrame(idx, f.data, first, last);
    f.verified.store(false, std::memory_order_release);  // changed by redo: checked again
  }
  if (!latched) latch.unlock();
  pending_redo_.Erase(id, records.size());
  lazy_pages_.fetch_add(1, std::memory_order_relaxed);
  FinishLazyRedoIfDone();
  return Status::OK();
}

Status BufferPool::StartLazyRedo(PendingRedo* built) {
  // Hold, install, then say so: a drain that runs before the install must
  // not find the index empty with the hold taken and let the hold go.
  HoldCheckpoint();
  pending_redo_.InstallFrom(*built);
  {
    std::lock_guard lock(lazy_done_mu_);
    lazy_hold_.store(true, std::memory_order_release);
  }
  // Pages loaded before the install (the PPL cleaner's) get their records
  // now, or R2 would not hold. A frame still loading is waited for by the
  // fetch; one evicted meanwhile got them at its next load.
  std::vector<PageId> resident;
  std::vector<log::Lsn> ignored;
  {
    std::lock_guard lock(mu_);
    for (const auto& f : frames_) {
      if (f->in_use && pending_redo_.Find(f->id, &ignored)) resident.push_back(f->id);
    }
  }
  for (PageId id : resident) {
    Result<PageHandle> page = Fetch(id, Latch::kExclusive);
    if (!page.ok()) return page.status();
    SUBITO_RETURN_IF_ERROR(ApplyPendingRedo(*frames_[page->frame_], page->frame_, id, true));
  }
  FinishLazyRedoIfDone();
  return Status::OK();
}

void BufferPool::FinishLazyRedoIfDone() {
  if (!pending_redo_.empty() || !lazy_hold_.load(std::memory_order_acquire)) return;
  std::lock_guard lock(lazy_done_mu_);
  if (!lazy_hold_.load(std::memory_order_acquire)) return;
  // The time first: lazy_redo_done() then implies lazy_redo_done_at().
  lazy_done_at_.store(std::chrono::steady_clock::now().time_since_epoch().count(),
                      std::memory_order_release);
  lazy_hold_.store(false, std::memory_order_release);
  ReleaseCheckpoint();
}

Result<uint64_t> BufferPool::DrainPendingRedo(uint64_t max_pages) {
  uint64_t fetched = 0, handled = 0;
  UnreadablePages unreadable;
  // A bounded call (a writer or cleaner helping) goes on where the last one
  // stopped, so that pages it cannot read do not hold the next one up; a
  // whole drain starts at the first page.
  const bool bounded = max_pages != 0;
  std::optional<PageId> from = PageId{};
  if (bounded) {
    const uint64_t at = drain_from_.load(std::memory_order_relaxed);
    from = PageId{static_cast<uint32_t>(at >> 32), static_cast<uint32_t>(at)};
  }
  std::vector<log::Lsn> left;
  while (!bounded || handled < max_pages) {
    const uint64_t room = bounded ? std::min<uint64_t>(64, max_pages - handled) : 64;
    std::vector<PageId> next;
    if (from) next = pending_redo_.Next(room, *from);
    if (next.empty()) {
      // Past the last page. Left behind: pages that cannot be read, and
      // pages of spaces being dropped, whose entries go in a moment.
      if (bounded || unreadable.any() || pending_redo_.empty()) {
        from.reset();
        break;
      }
      from = PageId{};
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    const PageId last = next.back();
    from = last.page_no != UINT32_MAX ? std::optional(PageId{last.space, last.page_no + 1})
           : last.space != UINT32_MAX ? std::optional(PageId{last.space + 1, 0})
                                      : std::nullopt;
    for (PageId id : next) {
      std::shared_lock unasked(unasked_fetch_mu_);
      // Dropped: DropSpace takes its entries (R3), once it has swept its frames.
      if (Space(id.space) == nullptr) continue;
      ++handled;
      // Loaded meanwhile (its records applied): do not wait for its latch.
      if (!pending_redo_.Find(id, &left)) continue;
      Result<PageHandle> page = Fetch(id, Latch::kShared);
      if (!page.ok()) {
        // A damaged page (or an unreadable sector) keeps its records, and
        // the checkpoint its hold (R1), but not the other pages from theirs.
        // Anything else (no free frame) is for the caller to try again.
        if (!unreadable.Skip(page.status())) return page.status();
        continue;
      }
      if (pending_redo_.Find(id, &left)) {
        // R2 says a fetch applies a page's records; one that did not would
        // make this loop spin.
        return Status::Corruption(
            StrFormat("page %u of space %u: its pending redo stays pending after a read",
                      id.page_no, id.space));
      }
      ++fetched;
    }
  }
  if (bounded) {
    drain_from_.store(from ? uint64_t{from->space} << 32 | from->page_no : 0,
                      std::memory_order_relaxed);
  }
  FinishLazyRedoIfDone();
  if (unreadable.any()) {
    return unreadable.Summary(bounded
                                  ? "with pending redo could not be read"
                                  : "with pending redo could not be read; the others were redone");
  }
  return fetched;
}

void BufferPool::NotePageLogEdits(uint32_t frame, log::Lsn end, const uint8_t* edits, size_t n) {
  if (!TakesPageLogEdits(frame)) return;
  Frame& f = *frames_[frame];
  TrimPending(f.log_pending, f.log_done_lsn.load(std::memory_order_relaxed));
  const uint32_t add = options_.page_log->EntrySize(n);
  if (n == 0 || n > UINT16_MAX || f.log_bytes + add > options_.page_log_threshold) {
    f.log_off = true;
    f.log_pending.clear();
    return;
  }
  f.log_bytes += add;
  uint8_t h[12];
  EncodeFixed64(h, end);
  EncodeFixed32(h + 8, static_cast<uint32_t>(n));
  f.log_pending.insert(f.log_pending.end(), h, h + sizeof h);
  f.log_pending.insert(f.log_pending.end(), edits, edits + n);
}

bool BufferPool::TakesPageLogEdits(uint32_t frame) const {
  return options_.page_log != nullptr && !frames_[frame]->log_off;
}

void BufferPool::StopPageLogging(PageHandle& page) {
  Frame& f = *frames_[page.frame_];
  f.log_off = true;
  f.log_pending.clear();
}

Result<PageHandle> BufferPool::Allocate(uint32_t space_id) {
  page::SpaceFile* space = Space(space_id);
  if (space == nullptr) return Status::NotFound(StrFormat("space %u is not open", space_id));
  Result<uint32_t> no = space->AllocatePage();
  if (!no.ok()) return no.status();
  return FetchFrame({space_id, *no}, Latch::kExclusive, /*fresh=*/true);
}

void BufferPool::MarkDirtyFrame(uint32_t frame, uint8_t* data, log::Lsn start, log::Lsn end) {
  page::SetPageLsn(data, end);
  std::lock_guard lock(mu_);
  Frame& f = *frames_[frame];
  if (!f.dirty) {
    f.dirty = true;
    f.oldest_lsn = start;
    flush_list_.insert({start, frame});
  }
}

uint64_t BufferPool::BeginChange() {
  std::lock_guard lock(changes_mu_);
  uint64_t token = log_->reserved_lsn();
  active_changes_.push_back(token);
  return token;
}

uint64_t BufferPool::PinCheckpoint(log::Lsn lsn) {
  std::lock_guard lock(changes_mu_);
  active_changes_.push_back(lsn);
  return lsn;
}

void BufferPool::EndChange(uint64_t token) {
  std::lock_guard lock(changes_mu_);
  // From the end: a mini-transaction's token is among the newest.
  for (auto it = active_changes_.rbegin(); it != active_changes_.rend(); ++it) {
    if (*it != token) continue;
    *it = active_changes_.back();
    active_changes_.pop_back();
    return;
  }
}

std::optional<uint64_t> BufferPool::OldestActiveChange() const {
  if (active_changes_.empty()) return std::nullopt;
  return *std::min_element(active_changes_.begin(), active_changes_.end());
}

thread_local int BufferPool::LogFreeExemption::depth_ = 0;

Status BufferPool::LogFreeCheck() {
  // Past the checkpoint-age bound the cleaners are woken at once, not at
  // their next round: a fast writer makes megabytes of redo in one interval.
  if (options_.max_checkpoint_age != 0 && !age_wake_.load(std::memory_order_relaxed) &&
      CheckpointAge() > options_.max_checkpoint_age && !age_wake_.exchange(true)) {
    {
      std::lock_guard lock(cleaner_mu_);
      urgent_ = true;
    }
    cleaner_cv_.notify_all();
  }
  if (LogFreeExemption::active()) return Status::OK();
  const uint64_t limit = log_->capacity() / 4 * 3;
  log::Lsn ckpt = log_->checkpoint_lsn();
  auto since = std::chrono::steady_clock::now();
  for (int spins = 0; CheckpointAge() > limit; ++spins) {
    OnLogFull();
    if (relief_ && !write_pause_.paused()) relief_();  // paused: the checkpoint is held
    // Write the oldest pages here too: there may be no cleaner thread, and
    // this thread holds no latch. A failed write (a full disk) fails the
    // caller now: it is retried by the next caller and by the cleaners.
    // Lazy redo holds the checkpoint until its last page is redone: help it.
    bool redoing = false;
    if (!lazy_redo_done()) {
      Result<uint64_t> drained = DrainPendingRedo(16);
      if (!drained.ok()) return drained.status();
      redoing = *drained != 0;
    }
    // While a backup pauses page writes, wait as for any checkpoint that
    // cannot move.
    Status cleaned = CleanBatch().status();
    if (!cleaned.ok() && !IsWritesPaused(cleaned)) return cleaned;
    SUBITO_RETURN_IF_ERROR(Checkpoint());
    if (CheckpointAge() <= limit) break;
    if (InterruptScope::Interrupted()) {
      return Status::Interrupted("interrupted while waiting for space in the redo log");
    }
    const auto now = std::chrono::steady_clock::now();
    if (log_->checkpoint_lsn() != ckpt || redoing) {
      ckpt = log_->checkpoint_lsn();
      since = now;
    } else if (now - since > std::chrono::milliseconds(options_.log_full_timeout_ms)) {
      return Status::Busy(
          StrFormat("the redo log has been 3/4 full for %u ms and its checkpoint cannot advance "
                    "(%s)",
                    options_.log_full_timeout_ms,
                    write_pause_.paused()
                        ? "a backup (BACKUP STAGE) has paused page writes"
                        : "a transaction open since before it, or pages that cannot be written"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(spins < 100 ? 50 : 1000));
  }
  return Status::OK();
}

bool BufferPool::AwaitRoomWhilePaused() {
  if (!write_pause_.paused() || BackupLockScope::active()) return false;
  while (CheckpointAge() > log_->capacity() / 8 * 7 &&
         !write_pause_.AwaitResume(std::chrono::milliseconds(100))) {
  }
  return write_pause_.paused();
}

void BufferPool::OnLogFull() {
  log_full_.store(true);
  {
    std::lock_guard lock(cleaner_mu_);
    urgent_ = true;
  }
  cleaner_cv_.notify_all();
}

Status BufferPool::FlushFrames(const std::vector<uint32_t>& candidates, bool skip_busy) {
  // Frames are pinned by the caller. Images are copied under the shared
  // latch (no Mtr can change them meanwhile) and sealed in the copy. With
  // skip_busy, a frame whose latch is held is left for a later round: a
  // cleaner holding pins must never wait for a latch whose holder may be
  // waiting for a free frame.
  WritePause::Scope writing(&write_pause_, write_pause_.TryEnter());
  if (!writing.entered()) return Status::Busy(kWritesPausedMessage);
  const uint32_t ps = options_.page_size;
  PageLogStore* const store = options_.page_log;
  Result<AlignedBuffer> copies = AlignedBuffer::Allocate(candidates.size() * ps);
  if (!copies.ok()) return copies.status();
  uint8_t* const buf = copies->get();
  std::vector<PageImage> batch;
  std::vector<log::Lsn> lsns;
  std::vector<uint32_t> frames;
  struct ToLog {
    size_t i;  // in batch
    std::vector<uint8_t> edits;
  };
  std::vector<ToLog> to_log;
  // Foreground reclamation: with the page log 90% full, pages whose entries
  // use half their room or more are written (their blocks freed) instead.
  const bool log_pressed = store != nullptr && store->PagesUsed() * 10 >= store->PageCapacity() * 9;
  for (uint32_t idx : candidates) {
    Frame& f = *frames_[idx];
    std::shared_lock latch(f.latch, std::defer_lock);
    if (skip_busy) {
      if (!latch.try_lock()) continue;
    } else {
      latch.lock();
    }
    const size_t i = frames.size();
    frames.push_back(idx);
    uint8_t* copy = buf + i * ps;
    std::memcpy(copy, f.data, ps);
    page::SealPage(copy, ps);
    PageId id;
    {
      std::lock_guard lock(mu_);
      id = f.id;
    }
    batch.push_back({id.space, id.page_no, page::PageLsn(copy), copy});
    lsns.push_back(page::PageLsn(copy));
    if (store != nullptr && !f.log_off && f.log_bytes <= options_.page_log_threshold &&
        !f.log_blocked.load(std::memory_order_relaxed) &&
        !no_appends_.load(std::memory_order_relaxed) &&
        !(log_pressed && f.log_bytes * 2 >= options_.page_log_threshold)) {
      // NV-PPL: the changes since the page log's last entry, as one entry.
      const log::Lsn done = f.log_done_lsn.load(std::memory_order_relaxed);
      std::vector<uint8_t> edits;
      log::Lsn last = 0;
      ForEachPendingEntry(f.log_pending,
                          [&](uint64_t end, const uint8_t*, const uint8_t* e, uint32_t n) {
                            if (end <= done) return;
                            edits.insert(edits.end(), e, e + n);
                            last = end;
                          });
      if (!edits.empty() && edits.size() <= UINT16_MAX && last == lsns.back()) {
        to_log.push_back({i, std::move(edits)});
      }
    }
  }
  std::vector<bool> logged(batch.size(), false);
  Status append_error;
  if (!to_log.empty()) {
    // WAL, as for a page write (P2): the log holds every change first.
    log::Lsn max_lsn = 0;
    for (const ToLog& t : to_log) max_lsn = std::max(max_lsn, lsns[t.i]);
    SUBITO_RETURN_IF_ERROR(log_->WaitDurable(std::min(max_lsn, log_->reserved_lsn())));
    if (max_lsn > log_->durable_lsn()) {
      return Status::Corruption(StrFormat("page LSN %llu is past the log's end %llu",
                                          static_cast<unsigned long long>(max_lsn),
                                          static_cast<unsigned long long>(log_->durable_lsn())));
    }
    for (const ToLog& t : to_log) {
      const PageImage& p = batch[t.i];
      Status a = store->Append(p.space_id, p.page_no, lsns[t.i], t.edits.data(), t.edits.size());
      if (a.ok()) {
        logged[t.i] = true;
        pages_logged_.fetch_add(1, std::memory_order_relaxed);
        page_log_bytes_.fetch_add(store->EntrySize(t.edits.size()), std::memory_order_relaxed);
        if (page::SpaceFile* space = Space(p.space_id)) {
          space->CountPplAppend(store->EntrySize(t.edits.size()));
        }
      } else if (a.IsNoSpace()) {
        page_log_full_.fetch_add(1, std::memory_order_relaxed);  // written instead
      } else {
        append_error = a;  // this page and the rest are written instead
        break;
      }
    }
  }
  std::vector<PageImage> writes;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!logged[i]) writes.push_back(batch[i]);
  }
  BuildBeforeWrite(writes);  // page_versions.h E4: their file images change now
  Status st = writer_.Write(writes, [this](uint32_t s) { return Space(s); });
  if (!writes.empty()) NoteWriteOutcome(st);
  for (size_t i = 0; i < frames.size(); ++i) {
    Frame& f = *frames_[frames[i]];
    if (!logged[i] && !st.ok()) {
      f.log_blocked.store(true, std::memory_order_relaxed);
      continue;
    }
    // The image or its page-log entries are durable: pending entries up to
    // it are done. A written page's entries are all in its file (G4).
    if (!logged[i] && store != nullptr && store->Free(batch[i].space_id, batch[i].page_no)) {
      pages_delogged_.fetch_add(1, std::memory_order_relaxed);
    }
    log::Lsn done = f.log_done_lsn.load(std::memory_order_relaxed);
    while (done < lsns[i] && !f.log_done_lsn.compare_exchange_weak(done, lsns[i])) {
    }
    // Never wait here either (the caller may hold latches). A page whose
    // latch is busy, or that changed since the copy, stays dirty and is
    // written again later; but its image up to lsns[i] is durable now, and
    // any later change appends at or after lsns[i] (under the exclusive
    // latch, after the copy's shared one), so its place in the flush list
    // moves there: a page that never stops changing holds the checkpoint
    // back no further than its last write (C1).
    std::shared_lock latch(f.latch, std::try_to_lock);
    if (!latch.owns_lock() || page::PageLsn(f.data) != lsns[i]) {
      std::lock_guard lock(mu_);
      if (f.dirty && f.oldest_lsn < lsns[i]) {
        flush_list_.erase({f.oldest_lsn, frames[i]});
        f.oldest_lsn = lsns[i];
        flush_list_.insert({f.oldest_lsn, frames[i]});
      }
      continue;
    }
    if (store != nullptr) {
      f.log_pending.clear();
      if (logged[i]) {
        f.log_bytes = store->Used(batch[i].space_id, batch[i].page_no);
      } else {
        f.log_bytes = 0;
        f.log_off = false;  // the file holds this image now
        f.log_blocked.store(false, std::memory_order_relaxed);
      }
    }
    std::lock_guard lock(mu_);
    if (f.dirty) {
      flush_list_.erase({f.oldest_lsn, frames[i]});
      f.dirty = false;
    }
  }
  return st.ok() ? append_error : st;
}

void BufferPool::NoteWriteOutcome(const Status& st) {
  if (st.ok() == !writes_failing_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(outcome_mu_);  // held while reporting: reports stay in order
  if (st.ok() == !writes_failing_.load(std::memory_order_relaxed)) return;
  writes_failing_.store(!st.ok(), std::memory_order_relaxed);
  if (!options_.report) return;
  options_.report(st.ok() ? StrFormat("page writes succeed again (%llu failed batches before)",
                                      static_cast<unsigned long long>(writer_.failures()))
                          : "page writes fail: " + st.ToString() +
                                "; the pages stay dirty in the buffer pool and are written "
                                "again until a write succeeds");
}

Result<size_t> BufferPool::CleanBatch() {
  std::vector<uint32_t> picked;
  // Never pin more than a quarter of the pool for writing.
  const size_t limit =
      std::max<size_t>(1, std::min<size_t>(options_.flush_batch, frames_.size() / 4));
  {
    std::lock_guard lock(mu_);
    for (auto it = flush_list_.begin(); it != flush_list_.end() && picked.size() < limit; ++it) {
      Frame& f = *frames_[it->second];
      if (f.flushing) continue;
      f.pins.fetch_add(1, std::memory_order_relaxed);
      f.flushing = true;
      picked.push_back(it->second);
    }
  }
  if (picked.empty()) return size_t{0};
  Status st = FlushFrames(picked, /*skip_busy=*/true);
  {
    std::lock_guard lock(mu_);
    for (uint32_t idx : picked) {
      frames_[idx]->pins.fetch_sub(1, std::memory_order_release);
      frames_[idx]->flushing = false;
    }
  }
  if (!st.ok()) return st;
  return picked.size();
}

Status BufferPool::Checkpoint() {
  std::lock_guard serial(flush_mu_);
  if (checkpoint_holds_.load() > 0) return Status::OK();
  // C1. The order of the reads matters: any change that starts after the
  // first read appends at or after `bound`; any change that started before
  // is in active_changes_, or its page is in the flush list (read last).
  log::Lsn bound = log_->reserved_lsn();
  {
    std::lock_guard lock(changes_mu_);
    if (std::optional<uint64_t> oldest = OldestActiveChange()) bound = std::min(bound, *oldest);
  }
  {
    std::lock_guard lock(mu_);
    if (!flush_list_.empty()) bound = std::min(bound, flush_list_.begin()->first);
  }
  bound = std::min(bound, log_->durable_lsn());
  if (bound <= log_->checkpoint_lsn()) return Status::OK();
  SUBITO_RETURN_IF_ERROR(log_->Checkpoint(bound));
  checkpoints_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

Status BufferPool::FlushAll() {
  for (;;) {
    bool empty;
    {
      std::lock_guard lock(mu_);
      empty = flush_list_.empty();
    }
    if (empty) break;
    SUBITO_RETURN_IF_ERROR(CleanBatch().status());
    std::this_thread::yield();  // pages being written by a cleaner, or latched: let them finish
  }
  return Checkpoint();
}

Status BufferPool::WriteLoggedPages() {
  PageLogStore* const store = options_.page_log;
  if (store == nullptr) return Status::OK();
  // From here on every flush writes pages to their files.
  no_appends_.store(true);
  SUBITO_RETURN_IF_ERROR(FlushAll());
  UnreadablePages unreadable;
  for (const auto& [space, page_no] : store->LoggedPages()) {
    if (Space(space) == nullptr) continue;  // dropped: DropSpace frees its entries
    Result<PageHandle> page = Fetch({space, page_no}, Latch::kExclusive);
    if (!page.ok()) {
      if (!unreadable.Skip(page.status())) return page.status();
      continue;
    }
    StopPageLogging(*page);
    const log::Lsn lsn = page::PageLsn(page->data());
    MarkDirty(*page, lsn, lsn);
  }
  SUBITO_RETURN_IF_ERROR(FlushAll());
  if (unreadable.any()) {
    return unreadable.Summary(
        "with per-page log entries could not be read; the others were written");
  }
  for (const auto& [space, page_no] : store->LoggedPages()) {
    if (Space(space) != nullptr) {
      return Status::IOError(StrFormat(
          "page %u of space %u still has per-page log entries after every page was written",
          page_no, space));
    }
  }
  return Status::OK();
}

bool BufferPool::PageWritesCanMoveCheckpoint() const {
  // Not while recovery holds it, nor while a change or transaction pins it
  // where it is (page writes then only cost I/O).
  if (checkpoint_holds_.load() > 0) return false;
  const log::Lsn checkpoint = log_->checkpoint_lsn();
  std::lock_guard lock(changes_mu_);
  const std::optional<uint64_t> oldest = OldestActiveChange();
  return !oldest || *oldest > checkpoint;
}

void BufferPool::CleanerLoop() {
  const uint64_t frames = frames_.size();
  for (;;) {
    bool urgent;
    {
      std::unique_lock lock(cleaner_mu_);
      cleaner_cv_.wait_for(lock, std::chrono::milliseconds(options_.cleaner_interval_ms),
                           [&] { return stop_ || urgent_; });
      if (stop_) return;
      urgent = urgent_;
      urgent_ = false;
    }
    age_wake_.store(false);
    // Nothing is written before recovery has put the double-write area's
    // copies back (BufferPoolOptions::checkpoint_held): a batch would take
    // the slots of a torn page's copy (D4).
    if (start_hold_.load()) continue;
    // A full log waits for lazy redo's checkpoint hold: help it (not when
    // the urgency is a want of clean frames, which a drain makes worse).
    if (log_full_.exchange(false) && !lazy_redo_done()) {
      (void)DrainPendingRedo(4 * uint64_t{options_.flush_batch});
    }
    // Batches back to back while there is pressure: a write-heavy load
    // dirties far more than one batch per interval, and evictions must find
    // clean frames (a dirty victim costs the fetching thread a write).
    for (int batches = 0; batches < 64; ++batches) {  // then a wait: busy frames may not move
      uint64_t dirty;
      {
        std::lock_guard lock(mu_);
        dirty = flush_list_.size();
      }
      const uint64_t age = CheckpointAge();
      const bool log_pressure = age > log_->capacity() / 2 || (options_.max_checkpoint_age != 0 &&
                                                               age > options_.max_checkpoint_age &&
                                                               PageWritesCanMoveCheckpoint());
      const bool too_dirty = dirty > options_.max_dirty_ratio * static_cast<double>(frames);
      if (!(dirty > 0 && ((urgent && batches == 0) || log_pressure || too_dirty))) break;
      Result<size_t> flushed = CleanBatch();
      // A failed write leaves the pages dirty; the next round retries.
      if (!flushed.ok() || *flushed == 0) break;
      if (batches % 8 == 7) {
        Status st = Checkpoint();
        (void)st;
      }
      std::lock_guard lock(cleaner_mu_);
      if (stop_) return;
    }
    ReclaimPageLog();
    Status st = Checkpoint();
    (void)st;
  }
}

void BufferPool::PauseFileWrites() {
  std::lock_guard once(pause_mu_);
  if (write_pause_.paused()) return;
  // Writers in flight end first (one may be waiting for log space, which a
  // checkpoint held already would never give), then the checkpoint stays.
  write_pause_.Pause();
  HoldCheckpoint();
  { std::lock_guard serial(flush_mu_); }  // a checkpoint that began before the hold
  log_->BeginBackupCopy();
}

void BufferPool::ResumeFileWrites() {
  std::lock_guard once(pause_mu_);
  if (!write_pause_.paused()) return;
  log_->EndBackupCopy();
  write_pause_.Resume();
  ReleaseCheckpoint();
  {
    std::lock_guard lock(cleaner_mu_);
    urgent_ = true;
  }
  cleaner_cv_.notify_all();
}

Status BufferPool::BeginFileWrite(bool wait) {
  if (wait ? write_pause_.Enter(std::chrono::milliseconds(options_.log_full_timeout_ms))
           : write_pause_.TryEnter()) {
    return Status::OK();
  }
  return Status::Busy(StrFormat("a backup (BACKUP STAGE) has paused file writes for %u ms",
                                options_.log_full_timeout_ms));
}

void BufferPool::ReclaimPageLog() {
  PageLogStore* const store = options_.page_log;
  if (store == nullptr || no_appends_.load() || write_pause_.paused() ||
      store->PagesUsed() * 4 < store->PageCapacity() * 3) {
    return;
  }
  // The background PPL cleaner: pages with entries that are not in the pool
  // are read (their entries applied) and marked to be written, which frees
  // their blocks once the write is synced.
  size_t picked = 0;
  for (const auto& [space, page_no] : store->LoggedPages(4 * size_t{options_.flush_batch})) {
    if (picked == options_.flush_batch) break;
    {
      std::lock_guard lock(mu_);
      if (FindEntry({space, page_no})) continue;  // in the pool: written when flushed
    }
    std::shared_lock unasked(unasked_fetch_mu_);
    Result<PageHandle> page = Fetch({space, page_no}, Latch::kExclusive);
    if (!page.ok()) {
      // Dropped meanwhile, or no free frame now: a later round. A damaged
      // page (or per-page log entry) stays where it is, said once.
      if (page.status().IsCorruption() && options_.report &&
          !reclaim_corruption_reported_.exchange(true)) {
        options_.report("per-page log reclamation skips a page it cannot read: " +
                        page.status().ToString());
      }
      continue;
    }
    StopPageLogging(*page);
    const log::Lsn lsn = page::PageLsn(page->data());
    MarkDirty(*page, lsn, lsn);
    ++picked;
    page_log_reclaimed_.fetch_add(1, std::memory_order_relaxed);
  }
}

BufferPoolStats BufferPool::stats() const {
  BufferPoolStats s;
  s.frames = frames_.size();
  {
    std::lock_guard lock(mu_);
    s.dirty = flush_list_.size();
  }
  s.hits = hits_.value();
  s.misses = misses_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.foreground_flushes = foreground_flushes_.load(std::memory_order_relaxed);
  s.checkpoints = checkpoints_.load(std::memory_order_relaxed);
  s.pages_written = writer_.pages_written();
  s.write_batches = writer_.batches();
  s.write_failures = writer_.failures();
  s.file_writes_paused = write_pause_.paused();
  s.file_write_pauses = write_pause_.pauses();
  s.pages_logged = pages_logged_.load(std::memory_order_relaxed);
  s.page_log_bytes = page_log_bytes_.load(std::memory_order_relaxed);
  s.page_log_full = page_log_full_.load(std::memory_order_relaxed);
  s.pages_delogged = pages_delogged_.load(std::memory_order_relaxed);
  s.page_log_reclaimed = page_log_reclaimed_.load(std::memory_order_relaxed);
  s.pages_preloaded = pages_preloaded_.load(std::memory_order_relaxed);
  s.preload_pages_read = preload_pages_read_.load(std::memory_order_relaxed);
  s.read_aheads = read_aheads_.load(std::memory_order_relaxed);
  s.pages_read_ahead = pages_read_ahead_.load(std::memory_order_relaxed);
  s.writes_failing = writes_failing_.load(std::memory_order_relaxed);
  std::shared_lock lock(spaces_mu_);
  for (auto& [id, sp] : spaces_) s.pages_read += sp->stats().pages_read;
  return s;
}

}  // namespace subito::buffer
