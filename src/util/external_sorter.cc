#include "util/external_sorter.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <queue>

#include "util/aligned_buffer.h"
#include "util/coding.h"
#include "util/strings.h"

namespace subito {
namespace {

constexpr size_t kAlign = AlignedBuffer::kAlign;
constexpr size_t kBlock = size_t{1} << 20;           // a run is written a block at a time
constexpr size_t kMinReadBuffer = size_t{64} << 10;  // per run in a merge
constexpr size_t kMaxArena = UINT32_MAX;             // offsets are u32

std::atomic<uint64_t> next_run{0};

}  // namespace

// Reads one run's records in order through an aligned buffer.
class ExternalSorter::Reader {
 public:
  static Result<std::unique_ptr<Reader>> Open(const Run* run, size_t buffer_bytes) {
    Result<AlignedBuffer> buf = AlignedBuffer::Allocate(buffer_bytes);
    if (!buf.ok()) return buf.status();
    return std::unique_ptr<Reader>(new Reader(run, buffer_bytes, std::move(*buf)));
  }
  // Moves to the next record (false at the end of the run).
  Result<bool> Next() {
    if (read_ == run_->records) return false;
    ++read_;
    uint8_t len[4];
    SUBITO_RETURN_IF_ERROR(Take(len, 4));
    cur_.resize(DecodeFixed32(len));
    SUBITO_RETURN_IF_ERROR(Take(reinterpret_cast<uint8_t*>(cur_.data()), cur_.size()));
    return true;
  }
  const std::string& current() const { return cur_; }

 private:
  Reader(const Run* run, size_t size, AlignedBuffer buf)
      : run_(run), size_(size), buf_(std::move(buf)) {}
  Status Take(uint8_t* dst, size_t n) {
    while (n > 0) {
      if (pos_ == filled_) SUBITO_RETURN_IF_ERROR(Refill());
      const size_t k = std::min(n, filled_ - pos_);
      std::memcpy(dst, buf_.get() + pos_, k);
      pos_ += k;
      dst += k;
      n -= k;
    }
    return Status::OK();
  }
  Status Refill() {
    const uint64_t file_size = run_->file->Size();
    if (offset_ >= file_size) {
      return Status::Corruption("sort run " + run_->path + " ends before its records");
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size_, file_size - offset_));
    SUBITO_RETURN_IF_ERROR(run_->file->Read(offset_, buf_.get(), n));
    offset_ += n;
    pos_ = 0;
    filled_ = n;
    return Status::OK();
  }

  const Run* run_;
  const size_t size_;
  AlignedBuffer buf_;
  uint64_t offset_ = 0, read_ = 0;
  size_t pos_ = 0, filled_ = 0;
  std::string cur_;
};

// Appends records to a run a block at a time; Finish pads the last block.
class ExternalSorter::Writer {
 public:
  static Result<Writer> Open(Run* run) {
    Result<AlignedBuffer> block = AlignedBuffer::Allocate(kBlock);
    if (!block.ok()) return block.status();
    return Writer(run, std::move(*block));
  }
  Status Add(std::string_view s) {
    uint8_t h[4];
    EncodeFixed32(h, static_cast<uint32_t>(s.size()));
    SUBITO_RETURN_IF_ERROR(Put(h, 4));
    SUBITO_RETURN_IF_ERROR(Put(s.data(), s.size()));
    ++run_->records;
    return Status::OK();
  }
  Status Finish() {
    if (used_ == 0) return Status::OK();
    const size_t padded = (used_ + kAlign - 1) / kAlign * kAlign;
    std::memset(block_.get() + used_, 0, padded - used_);
    return run_->file->Write(offset_, block_.get(), padded);
  }

 private:
  Writer(Run* run, AlignedBuffer block) : run_(run), block_(std::move(block)) {}
  Status Put(const void* src, size_t n) {
    const auto* p = static_cast<const uint8_t*>(src);
    while (n > 0) {
      const size_t k = std::min(n, kBlock - used_);
      std::memcpy(block_.get() + used_, p, k);
      used_ += k;
      p += k;
      n -= k;
      if (used_ == kBlock) {
        SUBITO_RETURN_IF_ERROR(run_->file->Write(offset_, block_.get(), kBlock));
        offset_ += kBlock;
        used_ = 0;
      }
    }
    return Status::OK();
  }

  Run* run_;
  AlignedBuffer block_;
  size_t used_ = 0;
  uint64_t offset_ = 0;
};

ExternalSorter::ExternalSorter(FileSystem* fs, std::string dir, size_t memory_bytes)
    : fs_(fs),
      dir_(std::move(dir)),
      memory_bytes_(std::clamp<size_t>(memory_bytes, size_t{64} << 10, kMaxArena)) {}

ExternalSorter::~ExternalSorter() {
  for (Run& r : runs_) RemoveRun(r);
}

void ExternalSorter::RemoveRun(Run& run) {
  run.file.reset();
  (void)fs_->Remove(run.path);
}

void ExternalSorter::RemoveStaleRuns(const std::string& dir) {
  RemoveFilesNamed(dir, "sort-", ".run");
}

Status ExternalSorter::Fail(Status st) {
  if (error_.ok()) error_ = st;
  return st;
}

Status ExternalSorter::Add(std::string_view s) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::InvalidArgument("the sort has finished");
  if (s.size() > UINT32_MAX - 4) return Status::TooLarge("a sort key of 4 GiB or more");
  // Capacity counts: grow (doubling, as the vectors would) only within
  // the budget, else spill first.
  const size_t arena_need = arena_.size() + s.size();
  const size_t items_need = items_.size() + 1;
  size_t arena_cap = arena_.capacity(), items_cap = items_.capacity();
  if (arena_need > arena_cap) arena_cap = std::max(arena_need, arena_cap * 2);
  if (items_need > items_cap) items_cap = std::max<size_t>(64, items_cap * 2);
  const size_t bytes = arena_cap + items_cap * sizeof(items_[0]);
  if (bytes > memory_bytes_ && !items_.empty()) {
    SUBITO_RETURN_IF_ERROR(Spill());
  } else if (bytes > memory_bytes_) {
    // One string past the budget: it alone is the arena.
  } else {
    arena_.reserve(arena_cap);
    items_.reserve(items_cap);
  }
  uint8_t head[8] = {};
  std::memcpy(head, s.data(), std::min<size_t>(8, s.size()));
  items_.push_back({__builtin_bswap64(DecodeFixed64(head)), static_cast<uint32_t>(arena_.size()),
                    static_cast<uint32_t>(s.size())});
  arena_.insert(arena_.end(), s.begin(), s.end());
  ++added_;
  return Status::OK();
}

void ExternalSorter::SortArena() {
  const char* base = arena_.data();
  // Equal prefixes: the whole strings decide (a shorter string's padding
  // ties with a longer one's zero bytes).
  std::sort(items_.begin(), items_.end(), [base](const Item& a, const Item& b) {
    if (a.prefix != b.prefix) return a.prefix < b.prefix;
    return std::string_view(base + a.at, a.len) < std::string_view(base + b.at, b.len);
  });
}

Result<ExternalSorter::Run> ExternalSorter::NewRun(uint32_t level) {
  Run run;
  run.level = level;
  run.path = StrFormat("%s/sort-%ld-%llu.run", dir_.c_str(), static_cast<long>(getpid()),
                       static_cast<unsigned long long>(next_run.fetch_add(1)));
  Result<std::unique_ptr<File>> f = fs_->Create(run.path);
  if (!f.ok()) return f.status();
  run.file = std::move(*f);
  ++runs_written_;
  return run;
}

Status ExternalSorter::Spill() {
  SortArena();
  Result<Run> run = NewRun(0);
  if (!run.ok()) return Fail(run.status());
  runs_.push_back(std::move(*run));  // removed by the destructor, also on failure
  Result<Writer> w = Writer::Open(&runs_.back());
  Status st = w.status();
  for (size_t i = 0; st.ok() && i < items_.size(); ++i) {
    st = w->Add(std::string_view(arena_.data() + items_[i].at, items_[i].len));
  }
  if (st.ok()) st = w->Finish();
  if (!st.ok()) return Fail(st);
  arena_.clear();
  items_.clear();
  // Base-kMaxFanIn carry: kMaxFanIn runs of a level (the last ones) become
  // one of the next.
  for (;;) {
    const uint32_t level = runs_.back().level;
    size_t n = 0;
    while (n < runs_.size() && runs_[runs_.size() - 1 - n].level == level) ++n;
    if (n < kMaxFanIn) return Status::OK();
    SUBITO_RETURN_IF_ERROR(MergeInto(runs_.size() - n, n, level + 1));
  }
}

Status ExternalSorter::MergeInto(size_t first, size_t n, uint32_t level) {
  Result<Run> out = NewRun(level);
  if (!out.ok()) return Fail(out.status());
  Run merged = std::move(*out);
  Result<Writer> w = Writer::Open(&merged);
  Status st = w.status();
  if (st.ok()) st = Merge(first, n, [&](std::string_view s) { return w->Add(s); });
  if (st.ok()) st = w->Finish();
  if (!st.ok()) {
    RemoveRun(merged);
    return Fail(st);
  }
  for (size_t i = first; i < first + n; ++i) RemoveRun(runs_[i]);
  runs_.erase(runs_.begin() + static_cast<std::ptrdiff_t>(first),
              runs_.begin() + static_cast<std::ptrdiff_t>(first + n));
  runs_.insert(runs_.begin() + static_cast<std::ptrdiff_t>(first), std::move(merged));
  return Status::OK();
}

Status ExternalSorter::Merge(size_t first, size_t n,
                             const std::function<Status(std::string_view)>& each) {
  // The budget is shared by the runs' read buffers.
  const size_t per =
      std::clamp<size_t>(memory_bytes_ / n / kAlign * kAlign, kMinReadBuffer, kBlock);
  std::vector<std::unique_ptr<Reader>> readers;
  auto later = [&](size_t a, size_t b) { return readers[a]->current() > readers[b]->current(); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (size_t i = first; i < first + n; ++i) {
    Result<std::unique_ptr<Reader>> r = Reader::Open(&runs_[i], per);
    if (!r.ok()) return r.status();
    readers.push_back(std::move(*r));
    Result<bool> more = readers.back()->Next();
    if (!more.ok()) return more.status();
    if (*more) heap.push(readers.size() - 1);
  }
  while (!heap.empty()) {
    const size_t i = heap.top();
    heap.pop();
    SUBITO_RETURN_IF_ERROR(each(readers[i]->current()));
    Result<bool> more = readers[i]->Next();
    if (!more.ok()) return more.status();
    if (*more) heap.push(i);
  }
  return Status::OK();
}

Status ExternalSorter::Finish(const std::function<Status(std::string_view)>& each) {
  if (!error_.ok()) return error_;
  if (finished_) return Status::InvalidArgument("the sort has finished");
  finished_ = true;
  if (runs_.empty()) {
    SortArena();
    for (const Item& item : items_) {
      SUBITO_RETURN_IF_ERROR(each(std::string_view(arena_.data() + item.at, item.len)));
    }
    return Status::OK();
  }
  if (!items_.empty()) SUBITO_RETURN_IF_ERROR(Spill());
  arena_ = {};
  items_ = {};
  while (runs_.size() > kMaxFanIn) {
    const size_t n = std::min(kMaxFanIn, runs_.size() - kMaxFanIn + 1);
    SUBITO_RETURN_IF_ERROR(MergeInto(runs_.size() - n, n, runs_[runs_.size() - n].level));
  }
  Status st = Merge(0, runs_.size(), each);
  return st.ok() ? st : Fail(st);
}

}  // namespace subito
