// The buffer pool's side of the warm-up (pool_warmer.h) and of scans' read-
// ahead: which pages it holds, and loading listed pages into frames in
// large reads.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "buffer/buffer_pool.h"
#include "buffer/buffer_pool_frame.h"
#include "util/aligned_buffer.h"
#include "util/strings.h"

namespace subito::buffer {

std::vector<PageId> BufferPool::ResidentPages() const {
  // In slices, so that a large pool's walk does not keep misses waiting.
  constexpr size_t kSlice = 4096;
  std::vector<PageId> pages;
  for (size_t at = 0; at < frames_.size(); at += kSlice) {
    std::lock_guard lock(mu_);
    for (size_t i = at; i < std::min(frames_.size(), at + kSlice); ++i) {
      const Frame& f = *frames_[i];
      if (f.in_use && !f.loading.load(std::memory_order_relaxed)) pages.push_back(f.id);
    }
  }
  return pages;
}

Status BufferPool::Preload(uint32_t space_id, const uint32_t* pages, uint32_t n, uint8_t* scratch,
                           uint32_t* loaded, bool* pool_full) {
  Status st =
      LoadSpan(space_id, pages, n, scratch, /*evict=*/false, /*count=*/false, loaded, pool_full);
  pages_preloaded_.fetch_add(*loaded, std::memory_order_relaxed);
  return st;
}

void BufferPool::ReadAhead(PageId id, uint32_t span) {
  {
    TableShard& s = ShardOf(id);
    std::lock_guard lock(s.mu);
    if (s.map.contains(id)) return;
  }
  page::SpaceFile* space = Space(id.space);
  if (space == nullptr || id.page_no >= space->page_count()) return;
  span = std::min({span, kMaxPreloadSpan, space->page_count() - id.page_no});
  uint32_t pages[kMaxPreloadSpan];
  for (uint32_t i = 0; i < span; ++i) pages[i] = id.page_no + i;
  // The thread's scratch, kept: a scan reads ahead again and again.
  thread_local std::optional<AlignedBuffer> scratch;
  thread_local size_t scratch_bytes = 0;
  const size_t bytes = size_t{kMaxPreloadSpan} * options_.page_size;
  if (scratch_bytes < bytes) {
    Result<AlignedBuffer> b = AlignedBuffer::Allocate(bytes);
    if (!b.ok()) return;
    scratch = std::move(*b);
    scratch_bytes = bytes;
  }
  uint32_t loaded = 0;
  bool full = false;
  // A failure is the scan's own Fetch's to meet (the page is read again).
  (void)LoadSpan(id.space, pages, span, scratch->get(), /*evict=*/true, /*count=*/true, &loaded,
                 &full);
  if (loaded > 0) read_aheads_.fetch_add(1, std::memory_order_relaxed);
  pages_read_ahead_.fetch_add(loaded, std::memory_order_relaxed);
}

Status BufferPool::LoadSpan(uint32_t space_id, const uint32_t* pages, uint32_t n, uint8_t* scratch,
                            bool evict, bool count, uint32_t* loaded, bool* pool_full) {
  *loaded = 0;
  *pool_full = false;
  if (n == 0) return Status::OK();
  if (pages[n - 1] - pages[0] >= kMaxPreloadSpan) {
    return Status::InvalidArgument(
        StrFormat("preload of space %u: pages %u to %u span more than %u", space_id, pages[0],
                  pages[n - 1], kMaxPreloadSpan));
  }
  // As the redo drain: a space being dropped is either swept after this
  // load or not found by it.
  std::shared_lock unasked(unasked_fetch_mu_);
  page::SpaceFile* space = Space(space_id);
  if (space == nullptr) return Status::OK();
  const uint32_t page_count = space->page_count();
  // Frames taken as the miss path takes them (BeginLoad, T3), so that a
  // fetch of one of these pages waits for this read.
  std::vector<std::pair<uint32_t, uint32_t>> taken;  // (page_no, frame)
  uint32_t sweep = kReadAheadSweep * n;
  {
    std::lock_guard lock(mu_);
    for (uint32_t i = 0; i < n; ++i) {
      const PageId id{space_id, pages[i]};
      if (pages[i] >= page_count || FindEntry(id)) continue;
      std::optional<uint32_t> frame;
      if (!free_.empty()) {
        frame = free_.back();
        free_.pop_back();
      } else if (evict) {
        int dirty = -1;
        bool unpinned = false;
        frame = SweepForClean(&sweep, &dirty, &unpinned);
      }
      if (!frame) {
        *pool_full = true;
        break;
      }
      const uint32_t idx = *frame;
      BeginLoad(idx, id, /*referenced=*/false);
      taken.emplace_back(pages[i], idx);
    }
  }
  if (taken.empty()) return Status::OK();
  const uint32_t first = taken.front().first;
  const uint32_t span = taken.back().first - first + 1;
  const uint32_t ps = options_.page_size;
  const bool span_read = space->ReadPages(first, span, scratch, count).ok();
  if (!count) preload_pages_read_.fetch_add(span_read ? span : 0, std::memory_order_relaxed);
  Status failed;
  for (const auto& [page_no, idx] : taken) {
    Frame& f = *frames_[idx];
    const PageId id{space_id, page_no};
    Status st;
    if (span_read) {
      std::memcpy(f.data, scratch + uint64_t{page_no - first} * ps, ps);
    } else {
      st = space->ReadPages(page_no, 1, f.data, count);
      if (st.ok() && !count) preload_pages_read_.fetch_add(1, std::memory_order_relaxed);
    }
    if (st.ok()) st = space->CheckRead(page_no, f.data);
    if (st.ok()) st = AfterRead(f, idx, id);
    std::lock_guard lock(mu_);
    EndLoad(idx, id, st);
    if (!st.ok()) {
      if (failed.ok()) failed = st;
    } else {
      f.pins.fetch_sub(1, std::memory_order_release);  // no one asked for it
      ++*loaded;
    }
  }
  return failed;
}

}  // namespace subito::buffer
