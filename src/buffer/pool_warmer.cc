#include "buffer/pool_warmer.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"
#include "util/thread_name.h"

namespace subito::buffer {

namespace {

bool Before(const PageId& a, const PageId& b) {
  return a.space != b.space ? a.space < b.space : a.page_no < b.page_no;
}

// Listed pages this close together are read in one span with the pages
// between them: a few pages more per read cost less than another read.
constexpr uint32_t kMaxGap = 8;

}  // namespace

Status WritePageList(FileSystem* fs, const std::string& path, uint32_t page_size,
                     std::vector<PageId> pages) {
  std::sort(pages.begin(), pages.end(), Before);
  pages.erase(std::unique(pages.begin(), pages.end()), pages.end());
  std::vector<uint8_t> bytes(kPageListHeaderSize + pages.size() * 8);
  uint8_t* e = bytes.data() + kPageListHeaderSize;
  for (const PageId& p : pages) {
    EncodeFixed32(e, p.space);
    EncodeFixed32(e + 4, p.page_no);
    e += 8;
  }
  uint8_t* h = bytes.data();
  EncodeFixed32(h, kPageListMagic);
  EncodeFixed16(h + 4, kPageListVersion);
  EncodeFixed16(h + 6, 0);
  EncodeFixed32(h + 8, page_size);
  EncodeFixed32(h + 12, static_cast<uint32_t>(pages.size()));
  EncodeFixed32(h + 16, crc32c::Value(h + kPageListHeaderSize, pages.size() * 8));
  EncodeFixed32(h + 20, crc32c::Value(h, 20));
  return ReplaceFile(fs, path, bytes.data(), bytes.size());
}

Result<std::vector<PageId>> ReadPageList(FileSystem* fs, const std::string& path,
                                         uint32_t page_size) {
  if (!fs->Exists(path)) return Status::NotFound("no page list " + path);
  Result<std::unique_ptr<File>> f = fs->Open(path);
  if (!f.ok()) return f.status();
  auto bad = [&](const std::string& what) {
    return Status::Corruption(StrFormat("page list %s: %s", path.c_str(), what.c_str()));
  };
  const uint64_t size = (*f)->Size();
  if (size < kPageListHeaderSize) return bad("shorter than its header");
  // The header is checked before anything is allocated for the entries.
  uint8_t h[kPageListHeaderSize];
  SUBITO_RETURN_IF_ERROR((*f)->Read(0, h, sizeof h));
  if (DecodeFixed32(h) != kPageListMagic) return bad("not a page list (magic)");
  if (crc32c::Value(h, 20) != DecodeFixed32(h + 20)) return bad("header checksum mismatch");
  if (DecodeFixed16(h + 4) != kPageListVersion) {
    return bad(StrFormat("format version %u, this build reads %u", DecodeFixed16(h + 4),
                         kPageListVersion));
  }
  if (DecodeFixed32(h + 8) != page_size) {
    return bad(
        StrFormat("pages of %u bytes, the database's are %u", DecodeFixed32(h + 8), page_size));
  }
  const uint64_t count = DecodeFixed32(h + 12);
  if (size != kPageListHeaderSize + count * 8) {
    return bad(StrFormat("%llu bytes for %llu entries", static_cast<unsigned long long>(size),
                         static_cast<unsigned long long>(count)));
  }
  std::vector<uint8_t> entries(count * 8);
  if (count > 0) {
    SUBITO_RETURN_IF_ERROR((*f)->Read(kPageListHeaderSize, entries.data(), entries.size()));
  }
  if (crc32c::Value(entries.data(), entries.size()) != DecodeFixed32(h + 16)) {
    return bad("entries' checksum mismatch");
  }
  std::vector<PageId> pages(count);
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t* e = entries.data() + i * 8;
    pages[i] = {DecodeFixed32(e), DecodeFixed32(e + 4)};
    if (i > 0 && !Before(pages[i - 1], pages[i])) return bad("entries out of order");
  }
  return pages;
}

PoolWarmer::PoolWarmer(BufferPool* pool, FileSystem* fs, PoolWarmerOptions options)
    : pool_(pool), fs_(fs), options_(std::move(options)) {}

void PoolWarmer::Start() {
  loading_.store(options_.load);
  thread_ = std::thread([this] {
    NameThisThread("subito_warmer");
    Run();
  });
}

void PoolWarmer::RequestStop() {
  {
    std::lock_guard lock(mu_);  // not between the thread's check and its wait
    stop_.store(true);
  }
  cv_.notify_all();
}

void PoolWarmer::Stop() {
  RequestStop();
  if (thread_.joinable()) thread_.join();
}

Status PoolWarmer::Dump() {
  std::lock_guard lock(dump_mu_);
  SUBITO_RETURN_IF_ERROR(
      WritePageList(fs_, options_.path, pool_->page_size(), pool_->ResidentPages()));
  dumps_.fetch_add(1, std::memory_order_relaxed);
  return Status::OK();
}

PoolWarmerStats PoolWarmer::stats() const {
  PoolWarmerStats s;
  s.listed = listed_.load(std::memory_order_relaxed);
  s.loaded = loaded_.load(std::memory_order_relaxed);
  s.loading = loading_.load(std::memory_order_acquire);
  s.load_seconds = load_seconds_.load(std::memory_order_relaxed);
  s.dumps = dumps_.load(std::memory_order_relaxed);
  s.load_cut_short = cut_short_.load();
  return s;
}

void PoolWarmer::Run() {
  if (options_.load) {
    const auto start = std::chrono::steady_clock::now();
    Load();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    load_seconds_.store(std::max(seconds, 1e-6), std::memory_order_relaxed);
  }
  loading_.store(false, std::memory_order_release);
  bool failing = false;
  std::unique_lock lock(mu_);
  while (!stop_.load()) {
    if (options_.dump_interval_seconds == 0) {
      cv_.wait(lock, [&] { return stop_.load(); });
      break;
    }
    if (cv_.wait_for(lock, std::chrono::seconds(options_.dump_interval_seconds),
                     [&] { return stop_.load(); })) {
      break;
    }
    lock.unlock();
    const Status st = Dump();
    // A failing write is reported once, and its end.
    if (!st.ok() && !failing && options_.note) {
      options_.note("buffer pool page list not written (tried again every interval): " +
                    st.ToString());
    } else if (st.ok() && failing && options_.note) {
      options_.note("buffer pool page list written again");
    }
    failing = !st.ok();
    lock.lock();
  }
}

void PoolWarmer::Load() {
  const auto start = std::chrono::steady_clock::now();
  Result<std::vector<PageId>> list = ReadPageList(fs_, options_.path, pool_->page_size());
  if (!list.ok()) {
    if (!list.status().IsNotFound() && options_.note) {
      options_.note("buffer pool load skipped: " + list.status().ToString() +
                    "; pages are read as queries need them");
    }
    return;
  }
  // Pages of spaces no longer open (dropped tables) are left out.
  std::vector<PageId> pages;
  pages.reserve(list->size());
  for (const PageId& p : *list) {
    if (pool_->Space(p.space) != nullptr) pages.push_back(p);
  }
  listed_.store(pages.size(), std::memory_order_relaxed);
  Result<AlignedBuffer> scratch =
      AlignedBuffer::Allocate(size_t{BufferPool::kMaxPreloadSpan} * pool_->page_size());
  if (!scratch.ok()) {
    if (options_.note) options_.note("buffer pool load skipped: " + scratch.status().ToString());
    return;
  }
  stopped_because_.clear();
  std::vector<uint32_t> span;
  for (size_t i = 0; i < pages.size();) {
    const uint32_t space = pages[i].space;
    span.assign(1, pages[i].page_no);
    size_t j = i + 1;
    while (j < pages.size() && pages[j].space == space &&
           pages[j].page_no - span.front() < BufferPool::kMaxPreloadSpan &&
           pages[j].page_no - span.back() <= kMaxGap) {
      span.push_back(pages[j].page_no);
      ++j;
    }
    if (!LoadSpan(space, span, scratch->get())) break;
    i = j;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (options_.note) {
    const uint64_t loaded = loaded_.load(std::memory_order_relaxed);
    options_.note(StrFormat(
        "buffer pool load %s: %llu of %llu listed page(s) loaded in %.2f s (%.0f MB/s)%s%s%s",
        stopped_because_.empty() ? "completed" : "ended early",
        static_cast<unsigned long long>(loaded), static_cast<unsigned long long>(pages.size()),
        seconds, seconds > 0 ? loaded * pool_->page_size() / seconds / 1e6 : 0.0,
        stopped_because_.empty() ? "" : "; ", stopped_because_.c_str(),
        damaged_ == 0 ? ""
                      : StrFormat("; %llu damaged page(s) left out",
                                  static_cast<unsigned long long>(damaged_))
                            .c_str()));
  }
}

bool PoolWarmer::LoadSpan(uint32_t space, const std::vector<uint32_t>& pages, uint8_t* scratch) {
  if (stop_.load(std::memory_order_relaxed)) {
    stopped_because_ = "the engine is closing";
    cut_short_.store(true);
    return false;
  }
  bool full = false;
  uint32_t n = 0;
  const Status st =
      pool_->Preload(space, pages.data(), static_cast<uint32_t>(pages.size()), scratch, &n, &full);
  loaded_.fetch_add(n, std::memory_order_relaxed);
  if (!st.ok()) {
    // A damaged page is left out (a query that needs it gets the same
    // error) and the load goes on; any other failure (the device) ends it.
    if (!st.IsCorruption()) {
      stopped_because_ = "a read failed: " + st.ToString();
      return false;
    }
    if (++damaged_ <= 3 && options_.note) {
      options_.note("buffer pool load: a page is left out: " + st.ToString());
    }
  }
  if (full) {
    stopped_because_ = "the pool is full";
    return false;
  }
  return true;
}

}  // namespace subito::buffer
