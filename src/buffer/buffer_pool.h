// BufferPool: a fixed DRAM budget of page frames shared by every space.
//
// Frames are found through a page table, replaced by CLOCK among unpinned
// clean frames, and written by background page cleaners oldest-first (by
// the LSN that first dirtied them), in batches through the PageWriter.
// After each batch the cleaner advances the log's checkpoint.
//
// Latching: Fetch() pins a frame and takes its latch (shared or exclusive);
// PageHandle releases both. Page bytes may be changed only under the
// exclusive latch and only through a Mtr, which logs the change.
//
// Page table (T1-T3): a page found in the pool is pinned under its table
// shard's mutex alone, and unpinned without a lock, so that concurrent
// fetches of different pages share no mutex.
//   T1. An entry is added or removed only under mu_ and its shard's mutex;
//       so under mu_ alone the table may be read, not changed.
//   T2. A frame is evicted only if, under its shard's mutex, it has no pin:
//       a fetch that pins it (under the same mutex) either comes first and
//       keeps it, or finds no entry.
//   T3. An entry whose frame is loading is not pinned by the shard path; a
//       frame's loading flag clears (release) only once its bytes are read
//       and, if the read failed, its entry is gone.
//
// Checkpoint rule (C1): the checkpoint LSN never passes
//   - the first-dirtying LSN of any dirty frame,
//   - the log position at which any change in flight (BeginChange..EndChange,
//     which brackets a Mtr's append and MarkDirty) started,
//   - the log's durable LSN.
// So recovery from the checkpoint replays every change not yet in a page
// file.
//
// Log space: a Mtr may hold page latches while it appends; so that a full
// log never waits on a latch it holds, callers run LogFreeCheck() before
// latching pages: it waits (holding nothing) until at most 3/4 of the log is
// in use.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>
#include <vector>

#include "buffer/page_frame_map.h"
#include "buffer/page_log.h"
#include "buffer/page_versions.h"
#include "buffer/page_writer.h"
#include "buffer/pending_redo.h"
#include "buffer/write_pause.h"
#include "log/redo_log.h"
#include "page/space_file.h"
#include "util/striped_counter.h"

namespace subito::buffer {

enum class Latch { kShared, kExclusive };

struct BufferPoolOptions {
  uint64_t capacity_bytes = 128ull << 20;  // DRAM for frames
  uint32_t page_size = 16384;              // every space of one pool uses it
  uint32_t flush_batch = 32;               // pages per cleaner batch (<= double-write slots)
  uint32_t cleaner_threads = 1;
  double max_dirty_ratio = 0.5;  // cleaners write when more frames than this are dirty
  // ... or when the redo since the checkpoint passes this (0: only when it
  // passes half the log): it bounds the pass over the log after a crash.
  uint64_t max_checkpoint_age = 0;
  int cleaner_interval_ms = 100;
  // The pool starts with the checkpoint held, before its cleaners run,
  // until ReleaseStartHold (RecoverPages calls it once it holds the
  // checkpoint itself). Recovery needs it from the start: a cleaner's
  // checkpoint with nothing dirty yet would move the checkpoint to the log's
  // end before the redo is indexed or done, and a crash before those pages
  // are written would then lose it. The cleaners write nothing meanwhile
  // (RecoverPages releases it after the double-write repair: D4).
  bool checkpoint_held = false;
  // LogFreeCheck gives up (Busy) when the checkpoint has not moved for this
  // long (a page write that keeps failing, a transaction pinning it).
  uint32_t log_full_timeout_ms = 60000;
  // Messages for the error log: page writes failing, and writing again.
  std::function<void(const std::string&)> report;
  // NV-PPL: a dirty page whose changes since it was last written take at
  // most page_log_threshold bytes of page-log entries is not written: its
  // changes go to this store (buffer/page_log.h) and the page is clean. Null:
  // every page is written.
  PageLogStore* page_log = nullptr;
  uint32_t page_log_threshold = 256;
  // Bytes of page images kept for reads as of an LSN (page_versions.h);
  // past it the oldest epoch is cut. 0: no limit.
  uint64_t page_version_limit = 0;
};

struct BufferPoolStats {
  uint64_t frames = 0, dirty = 0;
  uint64_t hits = 0, misses = 0;
  uint64_t pages_read = 0, pages_written = 0, write_batches = 0;
  uint64_t evictions = 0, foreground_flushes = 0, checkpoints = 0;
  // NV-PPL: pages whose changes went to the page log instead of their file,
  // and the bytes of those entries; pages the page log had no room for.
  uint64_t pages_logged = 0, page_log_bytes = 0, page_log_full = 0;
  // Pages written (and their page-log blocks freed) after having entries,
  // and those the background cleaner read back to be written so.
  uint64_t pages_delogged = 0, page_log_reclaimed = 0;
  // Loaded by Preload (warm-up), not by fetches; and the pages its reads
  // took from the files (those between listed pages included).
  uint64_t pages_preloaded = 0, preload_pages_read = 0;
  // ReadAhead's reads (of spans of pages) and the pages they loaded.
  uint64_t read_aheads = 0, pages_read_ahead = 0;
  uint64_t write_failures = 0;  // page-write batches that failed (PageWriter P4)
  bool writes_failing = false;  // the last batch failed; retried until one succeeds
  // PauseFileWrites: whether paused now, and pauses since Create.
  bool file_writes_paused = false;
  uint64_t file_write_pauses = 0;
};

class BufferPool;

// A pinned, latched page. Movable, not copyable; releases on destruction.
class PageHandle {
 public:
  PageHandle() = default;
  PageHandle(PageHandle&& o) noexcept { *this = std::move(o); }
  PageHandle& operator=(PageHandle&& o) noexcept;
  ~PageHandle() { Release(); }
  PageHandle(const PageHandle&) = delete;
  PageHandle& operator=(const PageHandle&) = delete;

  uint8_t* data() const { return data_; }
  PageId id() const { return id_; }
  Latch latch() const { return latch_; }
  bool valid() const { return pool_ != nullptr || image_ != nullptr; }
  void Release();
  // Whether the page's contents were checked (by the layer that knows its
  // format) since they were read from the file; reset by every read and by
  // redo. Changes made through Mtrs by that layer keep the page valid.
  bool verified() const;
  void set_verified(bool v) const;

 private:
  friend class BufferPool;
  friend class Mtr;
  BufferPool* pool_ = nullptr;
  uint32_t frame_ = 0;
  PageId id_;
  Latch latch_ = Latch::kShared;
  uint8_t* data_ = nullptr;
  // A page as of an LSN (ReadAsOf): an image, no frame; read only.
  VersionImage image_;
};

class BufferPool {
 public:
  // dwb may be null (no torn-write protection; tests only).
  static Result<std::unique_ptr<BufferPool>> Create(const BufferPoolOptions& options,
                                                    log::RedoLog* log, DoubleWrite* dwb);
  ~BufferPool();  // stops the cleaners; does not write (call FlushAll first)
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  Status AddSpace(page::SpaceFile* space);
  page::SpaceFile* Space(uint32_t space_id) const;
  // Forgets a space and every frame of it, dirty ones unwritten (a dropped
  // table). Waits for in-flight writes of its pages; the caller guarantees
  // that no one fetches its pages any more.
  Status DropSpace(uint32_t space_id);

  // In a ReadAsOf scope, a shared fetch returns the page as of its epoch.
  Result<PageHandle> Fetch(PageId id, Latch latch);
  // A new page at the end of the space, zeroed, exclusively latched. The
  // caller formats it through a Mtr (its header is logged like any bytes).
  Result<PageHandle> Allocate(uint32_t space_id);

  // Used by Mtr: the page (exclusively latched) now holds a change logged at
  // [start, end).
  void MarkDirty(PageHandle& page, log::Lsn start, log::Lsn end) {
    MarkDirtyFrame(page.frame_, page.data(), start, end);
  }
  void MarkDirtyFrame(uint32_t frame, uint8_t* data, log::Lsn start, log::Lsn end);
  // With a page log (else a no-op), from Mtr commits and lazy redo: the page
  // (exclusively latched, or loading) changed by these edit bytes, its page
  // LSN now `end`.
  void NotePageLogEdits(uint32_t frame, log::Lsn end, const uint8_t* edits, size_t n);
  bool page_logging() const { return options_.page_log != nullptr; }
  // Whether NotePageLogEdits would keep the frame's edits (the frame
  // latched as there): a page whose changes since its last write passed
  // the threshold takes none until it is written, so a Mtr need not
  // gather them.
  bool TakesPageLogEdits(uint32_t frame) const;
  PageVersions& versions() { return versions_; }
  // Used by Mtr, holding the frame exclusively latched, its page LSN `lsn`:
  // the recipe of the page as it is now if it can be rebuilt from its file
  // image and per-page log (page_versions.h E4), else null. Null without a
  // page log.
  Recipe RecipeFor(uint32_t frame, log::Lsn lsn);
  // Recovery: the page changed other than through a Mtr; its next write
  // goes to its file.
  void StopPageLogging(PageHandle& page);
  uint64_t BeginChange();
  // Keeps the checkpoint at or before `lsn` (a record's start) until
  // EndChange(token). Used for log records that must outlive the changes'
  // pages: a transaction's undo, from its first record to its end.
  uint64_t PinCheckpoint(log::Lsn lsn);
  void EndChange(uint64_t token);
  // Waits, holding no latch, until the log has room for a Mtr. Returns at
  // once in a thread that holds a LogFreeExemption. Fails with the page
  // writer's error when pages cannot be written (a full disk: NoSpace),
  // with Interrupted when the thread's InterruptScope says so, and with Busy
  // once the checkpoint has not moved for options.log_full_timeout_ms.
  Status LogFreeCheck();
  // Between the chunks of a rollback, in place of LogFreeCheck: while a
  // backup pauses file writes the checkpoint cannot move, so once 7/8 of
  // the log is in use this waits, holding nothing, for the backup's end (a
  // rollback that filled the log would hold its transaction, which only a
  // relocation moves past its pin). Returns whether writes are still
  // paused (then LogFreeCheck could not help). In a thread that holds what
  // the backup waits for (BackupLockScope) it waits for nothing and
  // returns false.
  bool AwaitRoomWhilePaused();
  // A rollback writes into the quarter of the log that LogFreeCheck keeps
  // free: it must not wait for a checkpoint its own transaction holds back.
  class LogFreeExemption {
   public:
    LogFreeExemption() { ++depth_; }
    ~LogFreeExemption() { --depth_; }
    LogFreeExemption(const LogFreeExemption&) = delete;
    LogFreeExemption& operator=(const LogFreeExemption&) = delete;
    static bool active() { return depth_ > 0; }

   private:
    static thread_local int depth_;
  };
  // For the log's on_log_full hook: asks the cleaners to hurry.
  void OnLogFull();
  // Called (holding no latch) while LogFreeCheck waits: the owner lets go of
  // old checkpoint pins it can move (engine/: undo relocation).
  void SetLogRelief(std::function<void()> relief) { relief_ = std::move(relief); }

  // Writes every dirty page and checkpoints at the durable LSN. The caller
  // must hold no page latch.
  Status FlushAll();
  // NV-PPL: from now on pages are written, never logged; writes every dirty
  // page and every page that has page-log entries to its file, and frees
  // them (de-PPLizes every page). The caller holds no page latch. For a
  // clean shutdown: the page log may be on tmpfs, which a reboot clears.
  // A page that cannot be read (a damaged page or entry: Corruption, or an
  // IOError) keeps its entries and the others are written all the same;
  // the first such failure is returned, with the count of them.
  Status WriteLoggedPages();
  // Advances the log checkpoint as far as C1 allows.
  Status Checkpoint();
  // While held, the checkpoint does not move (recovery: pages being redone
  // are not all in the flush list yet). Nests.
  void HoldCheckpoint() { checkpoint_holds_.fetch_add(1); }
  // Bytes of redo reserved since the checkpoint (read first, so that a
  // checkpoint moving meanwhile cannot make it wrap).
  uint64_t CheckpointAge() const {
    const log::Lsn checkpoint = log_->checkpoint_lsn();
    return log_->reserved_lsn() - checkpoint;
  }
  void ReleaseCheckpoint() { checkpoint_holds_.fetch_sub(1); }
  // Releases BufferPoolOptions::checkpoint_held's hold; later calls do nothing.
  void ReleaseStartHold() {
    if (start_hold_.exchange(false)) ReleaseCheckpoint();
  }

  // Backups (write_pause.h). From PauseFileWrites' return until
  // ResumeFileWrites, no page image, double-write copy or page-log entry is
  // written or freed, and the checkpoint does not move (nor does anything
  // else write the log's checkpoint); changes go on in the frames and the
  // redo log. A fetch that finds only dirty frames to evict waits for the
  // resume (up to log_full_timeout_ms, then Busy); LogFreeCheck waits as
  // for any checkpoint that cannot move; FlushAll fails with Busy.
  void PauseFileWrites();
  void ResumeFileWrites();
  // For files the pool does not write (undo files): waits (if `wait`) up
  // to log_full_timeout_ms while writes are paused, then holds off a pause
  // until EndFileWrite. Busy if the pause lasted.
  Status BeginFileWrite(bool wait = true);
  bool file_writes_paused() const { return write_pause_.paused(); }
  void EndFileWrite() { write_pause_.Exit(); }

  // Lazy redo (pending_redo.h). StartLazyRedo holds the checkpoint (R1)
  // and takes the built index whole; from then on every page loaded from its
  // file gets its pending records. DrainPendingRedo fetches pages still
  // pending, up to `max_pages` of them (0: all), and lets the checkpoint go
  // once none is left. Returns the pages it fetched. A page that fails its
  // read with Corruption or IOError keeps its records (and the checkpoint
  // its hold) while the drain goes on past it; the first such failure is
  // returned at the end, with the count of them. Any other failure (Busy:
  // no free frame) returns at once. A bounded call goes on from where the
  // last bounded call stopped.
  PendingRedo& pending_redo() { return pending_redo_; }
  Status StartLazyRedo(PendingRedo* built);
  Result<uint64_t> DrainPendingRedo(uint64_t max_pages);
  bool lazy_redo_done() const { return !lazy_hold_.load(std::memory_order_acquire); }
  // When the last pending page was redone (the epoch if never started).
  std::chrono::steady_clock::time_point lazy_redo_done_at() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(lazy_done_at_.load(std::memory_order_acquire)));
  }
  // Pages redone on load since StartLazyRedo.
  uint64_t lazy_pages_redone() const { return lazy_pages_.load(std::memory_order_relaxed); }

  // Warm-up (buffer/pool_warmer.h). The pages in the pool now, in no order.
  std::vector<PageId> ResidentPages() const;
  // Loads the pages `pages` (n page numbers of one space, ascending, at
  // most kMaxPreloadSpan apart from first to last) that are not in the pool
  // into free frames, with one read of the span from the first to the last
  // of them into `scratch` (aligned, room for kMaxPreloadSpan pages); if
  // that read fails, each page is read alone, so that a page gets its own
  // read's outcome. A page loaded so is read and checked as a fetch would
  // (its page-log entries and pending redo applied) and is not marked
  // referenced: the CLOCK may take it at its first pass unless a query used
  // it. Never evicts: with no free frame left it stops and sets *pool_full.
  // A space not open (dropped) loads nothing. *loaded: the pages loaded;
  // returns the first page's error (the pages that fail stay out; the
  // others are loaded). These reads are not counted as the space's reads
  // (SpaceFile::stats): they are not its table's work.
  static constexpr uint32_t kMaxPreloadSpan = 64;
  Status Preload(uint32_t space_id, const uint32_t* pages, uint32_t n, uint8_t* scratch,
                 uint32_t* loaded, bool* pool_full);
  // Read-ahead for a scan that walks a space's pages in ascending order
  // (a B-tree cursor's leaf chain): if page `id` is not in the pool, loads
  // it and those of the next span - 1 pages (span <= kMaxPreloadSpan, the
  // space's end aside) that are not, as Preload does (one read, checked,
  // page-log entries and pending redo applied, not referenced), into free
  // frames or frames of clean pages the CLOCK would take next; it never
  // writes or waits for a frame, and stops when none is found quickly.
  // These reads are the space's own (counted in its stats). The scan's own
  // Fetch then finds the pages; errors are left to that Fetch, so a page
  // that failed to load is read again alone and fails there if it must.
  void ReadAhead(PageId id, uint32_t span);
  static constexpr uint32_t kReadAheadSweep = 4;

  BufferPoolStats stats() const;
  uint32_t page_size() const { return options_.page_size; }
  uint64_t frame_count() const { return frames_.size(); }  // constant after Create
  log::RedoLog* log() const { return log_; }

 private:
  friend class PageHandle;
  struct Frame;
  BufferPool(const BufferPoolOptions& options, log::RedoLog* log, DoubleWrite* dwb);
  void Unpin(uint32_t frame, Latch latch);
  // fresh: a page Allocate just handed out, past every page the space had
  // (SpaceFile::AllocatePage): its file holds nothing for it or zeros (an
  // extent grown ahead), and no redo or per-page log names it, so a miss
  // zeroes the frame instead of reading.
  Result<PageHandle> FetchFrame(PageId id, Latch latch, bool fresh = false);
  Result<PageHandle> FetchAsOf(PageId id, const PageVersions::Epoch& epoch);
  // E4: the page as of the recipe's LSN, from its file image, page-log
  // entries and the recipe's pending ones; Corruption if they do not reach
  // that LSN exactly.
  Result<VersionImage> BuildImage(PageId id, const PageRecipe& recipe);
  // A reader's build of the recipe the epoch holds for the page, installed
  // for every epoch holding it (or the image another thread built first).
  Result<VersionImage> Rebuild(const PageVersions::Epoch& epoch, PageId id);
  // Before pages are written in place: builds every recipe held for them,
  // since their file images are about to change.
  void BuildBeforeWrite(const std::vector<PageImage>& writes);
  Result<uint32_t> FindVictim(std::unique_lock<std::mutex>& lk);
  // Under mu_: moves of the CLOCK hand (at most *steps, which it counts
  // down) for an unpinned, clean frame not referenced since the hand last
  // passed, which leaves the table (referenced bits passed are cleared).
  // Notes the first dirty frame the hand passed and whether any frame was
  // unpinned, for FindVictim.
  std::optional<uint32_t> SweepForClean(uint32_t* steps, int* dirty_candidate, bool* any_unpinned);
  // Preload and ReadAhead: with `evict`, frames no longer free are taken
  // from clean pages (SweepForClean, kReadAheadSweep steps per page of the
  // span in all); `count`: the reads count as the space's (SpaceFile::stats).
  Status LoadSpan(uint32_t space_id, const uint32_t* pages, uint32_t n, uint8_t* scratch,
                  bool evict, bool count, uint32_t* loaded, bool* pool_full);
  Status FlushFrames(const std::vector<uint32_t>& candidates, bool skip_busy);
  // A page's load, in the miss path and Preload alike (T3). BeginLoad,
  // under mu_: the free frame idx will hold `id`: loading, pinned once by
  // the loader, in the table. AfterRead, outside mu_, once the page's
  // checked image is in the frame: its page-log entries and pending redo.
  // EndLoad, under mu_: the outcome; a failed load leaves the table and
  // drops the loader's pin (waiters get the error); waiters wake either
  // way, and a loaded page keeps the loader's pin.
  void BeginLoad(uint32_t idx, PageId id, bool referenced);
  Status AfterRead(Frame& f, uint32_t idx, PageId id);
  void EndLoad(uint32_t idx, PageId id, const Status& st);
  // After a page's image is read from its file: applies its page-log entries
  // newer than the image and sets up the frame's page-log state.
  Status ApplyPageLog(Frame& f, PageId id);
  // Then its pending redo records, if it has any (R2).
  // `latched`: the caller holds the frame's latch exclusively.
  Status ApplyPendingRedo(Frame& f, uint32_t idx, PageId id, bool latched);
  void FinishLazyRedoIfDone();
  // The background PPL cleaner (each cleaner round): with the page log 75%
  // full, some pages that have entries but are not in the pool are read and
  // marked dirty, to be written and their blocks freed.
  void ReclaimPageLog();
  // Reports the first failure of a run of failed page writes, and the first
  // success after one.
  void NoteWriteOutcome(const Status& st);
  void CleanerLoop();
  // Whether writing the oldest pages can move the checkpoint now.
  bool PageWritesCanMoveCheckpoint() const;
  Result<size_t> CleanBatch();  // pages written
  void LatchFrame(Frame& f, Latch latch);
  // Latches the pinned frame and wraps it in a handle.
  PageHandle LatchedHandle(uint32_t idx, PageId id, Latch latch);

  const BufferPoolOptions options_;
  log::RedoLog* const log_;
  PageVersions versions_;
  // One recipe build at a time (buffer_pool_versions.cc): a write's builds
  // end before its write, and a reader's build is never overlapped by one.
  std::mutex rebuild_mu_;
  PageWriter writer_;
  PendingRedo pending_redo_;
  // Fetches of pages nobody asked for (the drain, the PPL cleaner) take it
  // shared; DropSpace exclusive while it sweeps the space's frames, so such
  // a fetch either ends before the sweep or finds the space gone.
  std::shared_mutex unasked_fetch_mu_;
  std::atomic<bool> lazy_hold_{false};  // StartLazyRedo's checkpoint hold is taken
  std::atomic<std::chrono::steady_clock::rep> lazy_done_at_{0};
  std::mutex lazy_done_mu_;            // one release of the hold
  std::atomic<bool> log_full_{false};  // OnLogFull since the cleaners last looked
  std::atomic<uint64_t> lazy_pages_{0};
  std::vector<std::unique_ptr<Frame>> frames_;
  uint8_t* memory_ = nullptr;
  std::mutex outcome_mu_;  // changes of writes_failing_, and their reports
  std::atomic<bool> writes_failing_{false};

  // The page table, in shards (T1-T3).
  struct alignas(64) TableShard {
    std::mutex mu;
    PageFrameMap map;
  };
  static constexpr uint32_t kTableShards = 64;
  TableShard& ShardOf(PageId id) {
    return shards_[PageFrameMap::Hash(id) >> 58];  // the top 6 bits: kTableShards
  }
  // Under mu_ (T1).
  std::optional<uint32_t> FindEntry(PageId id);
  void AddEntry(PageId id, uint32_t frame);
  void RemoveEntry(PageId id);
  // Removes the entry of frame f (in use) unless it is pinned (T2).
  bool RemoveUnpinnedEntry(Frame& f);
  // Drops a waiter's or the loader's pin of a frame whose load failed; the
  // last one frees the frame.
  void DropFailedLoadPin(uint32_t idx);
  // The shard path: pins and returns the page's frame if it is loaded.
  std::optional<uint32_t> PinLoaded(PageId id);

  mutable std::mutex mu_;  // table changes (T1), frame bookkeeping, flush_list_, free_, hand_
  std::condition_variable load_cv_;
  TableShard shards_[kTableShards];
  std::set<std::pair<log::Lsn, uint32_t>> flush_list_;  // (first-dirtying LSN, frame)
  std::vector<uint32_t> free_;
  uint32_t hand_ = 0;

  mutable std::shared_mutex spaces_mu_;
  std::map<uint32_t, page::SpaceFile*> spaces_;
  // Space() without a lock for every fetch: the catalog hands out space ids
  // in order, so the first kSpaceChunk * kSpaceChunks of them index a
  // two-level table of the open spaces (chunks made under spaces_mu_, kept
  // until the pool goes); larger ids are looked up in spaces_. A pointer is
  // published (release) once its space is open and cleared when it closes;
  // as with the map, a space is closed only once no one fetches its pages.
  static constexpr uint32_t kSpaceChunk = 1024, kSpaceChunks = 4096;
  struct SpaceChunk {
    std::atomic<page::SpaceFile*> slot[kSpaceChunk] = {};
  };
  std::atomic<SpaceChunk*> space_chunks_[kSpaceChunks] = {};
  void PublishSpace(uint32_t space_id, page::SpaceFile* space);  // under spaces_mu_

  mutable std::mutex changes_mu_;
  // The tokens of the changes in progress (a mini-transaction's, a writing
  // transaction's pin), unordered: the newest are at the end, where a
  // mini-transaction's end finds its own; the oldest is looked for only
  // by checkpoints. A vector keeps its storage: no allocation per change.
  std::vector<uint64_t> active_changes_;
  std::optional<uint64_t> OldestActiveChange() const;  // caller holds changes_mu_

  std::mutex flush_mu_;  // one FlushAll/Checkpoint decision at a time
  std::mutex cleaner_mu_;
  std::condition_variable cleaner_cv_;
  bool stop_ = false;    // guarded by cleaner_mu_
  bool urgent_ = false;  // guarded by cleaner_mu_
  std::vector<std::thread> cleaners_;

  std::atomic<int> checkpoint_holds_{0};
  // Where the next bounded DrainPendingRedo starts: (space << 32) | page.
  std::atomic<uint64_t> drain_from_{0};
  std::atomic<bool> start_hold_{false};  // BufferPoolOptions::checkpoint_held, not yet released
  std::atomic<bool> age_wake_{false};    // LogFreeCheck woke the cleaners for the checkpoint age
  std::function<void()> relief_;         // set before use, then read-only
  StripedCounter hits_;
  std::atomic<uint64_t> misses_{0}, evictions_{0}, foreground_flushes_{0}, checkpoints_{0};
  std::atomic<uint64_t> pages_logged_{0}, page_log_bytes_{0}, page_log_full_{0};
  std::atomic<uint64_t> pages_delogged_{0}, page_log_reclaimed_{0};
  std::atomic<bool> reclaim_corruption_reported_{false};  // once per run
  std::atomic<uint64_t> pages_preloaded_{0}, preload_pages_read_{0};
  std::atomic<uint64_t> read_aheads_{0}, pages_read_ahead_{0};
  std::atomic<bool> no_appends_{false};  // WriteLoggedPages: every flush writes
  WritePause write_pause_;               // FlushFrames' writes and appends, BeginFileWrite
  std::mutex pause_mu_;                  // one Pause/ResumeFileWrites at a time
};

// Holds off a pause of file writes for a file the pool does not write (an
// undo file, a temporary table's DDL): BeginFileWrite at construction,
// EndFileWrite at End or destruction. A null pool holds nothing; status()
// is Busy (and nothing is held) if the pause outlasted log_full_timeout_ms.
class FileWriteScope {
 public:
  explicit FileWriteScope(BufferPool* pool, bool wait = true)
      : pool_(pool), status_(pool != nullptr ? pool->BeginFileWrite(wait) : Status::OK()) {
    if (!status_.ok()) pool_ = nullptr;
  }
  ~FileWriteScope() { End(); }
  FileWriteScope(const FileWriteScope&) = delete;
  FileWriteScope& operator=(const FileWriteScope&) = delete;
  const Status& status() const { return status_; }
  void End() {
    if (pool_ != nullptr) pool_->EndFileWrite();
    pool_ = nullptr;
  }

 private:
  BufferPool* pool_;
  Status status_;
};

}  // namespace subito::buffer
