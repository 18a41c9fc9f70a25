#include "util/external_sorter.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <queue>

#include "util/coding.h"
#include "util/strings.h"

namespace subito {
namespace {

constexpr size_t kAlign = 4096;
constexpr size_t kWriteBlock = size_t{1} << 20;
constexpr size_t kMaxArena = size_t{1} << 31;  // offsets are u32

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<uint8_t, AlignedFree>;

AlignedBuffer NewAligned(size_t n) {
  return AlignedBuffer(static_cast<uint8_t*>(std::aligned_alloc(kAlign, n)));
}

std::atomic<uint64_t> next_run{0};

}  // namespace

// Reads one run's records in order through an aligned buffer.
class ExternalSorter::Reader {
 public:
  Reader(const Run* run, size_t buffer_bytes)
      : run_(run), size_(buffer_bytes), buf_(NewAligned(buffer_bytes)) {}
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

ExternalSorter::ExternalSorter(FileSystem* fs, std::string dir, size_t memory_bytes)
    : fs_(fs),
      dir_(std::move(dir)),
      memory_bytes_(std::clamp<size_t>(memory_bytes, size_t{64} << 10, kMaxArena)) {}

ExternalSorter::~ExternalSorter() {
  for (Run& r : runs_) {
    r.file.reset();
    (void)fs_->Remove(r.path);
  }
}

void ExternalSorter::RemoveStaleRuns(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("sort-", 0) == 0 && e.path().extension() == ".run") {
      std::filesystem::remove(e.path(), ec);
    }
  }
}

Status ExternalSorter::Add(std::string_view s) {
  if (finished_) return Status::InvalidArgument("the sort has finished");
  if (s.size() > UINT32_MAX - 4) return Status::TooLarge("a sort key of 4 GiB or more");
  // Each item costs its bytes and its (offset, length) entry.
  const size_t after = arena_.size() + s.size() + (items_.size() + 1) * sizeof(items_[0]);
  if (!items_.empty() && after > memory_bytes_) SUBITO_RETURN_IF_ERROR(Spill());
  items_.emplace_back(static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(s.size()));
  arena_.insert(arena_.end(), s.begin(), s.end());
  ++added_;
  return Status::OK();
}

void ExternalSorter::SortArena() {
  const char* base = arena_.data();
  std::sort(items_.begin(), items_.end(), [base](const auto& a, const auto& b) {
    return std::string_view(base + a.first, a.second) < std::string_view(base + b.first, b.second);
  });
}

Status ExternalSorter::Spill() {
  SortArena();
  Run run;
  run.path = StrFormat("%s/sort-%llu.run", dir_.c_str(),
                       static_cast<unsigned long long>(next_run.fetch_add(1)));
  Result<std::unique_ptr<File>> f = fs_->Create(run.path);
  if (!f.ok()) return f.status();
  run.file = std::move(*f);
  AlignedBuffer block = NewAligned(kWriteBlock);
  size_t used = 0;
  uint64_t offset = 0;
  auto put = [&](const void* src, size_t n) -> Status {
    const auto* p = static_cast<const uint8_t*>(src);
    while (n > 0) {
      const size_t k = std::min(n, kWriteBlock - used);
      std::memcpy(block.get() + used, p, k);
      used += k;
      p += k;
      n -= k;
      if (used == kWriteBlock) {
        SUBITO_RETURN_IF_ERROR(run.file->Write(offset, block.get(), kWriteBlock));
        offset += kWriteBlock;
        used = 0;
      }
    }
    return Status::OK();
  };
  Status st;
  for (const auto& [at, len] : items_) {
    uint8_t h[4];
    EncodeFixed32(h, len);
    st = put(h, 4);
    if (st.ok()) st = put(arena_.data() + at, len);
    if (!st.ok()) break;
    run.bytes += 4 + len;
  }
  if (st.ok() && used > 0) {
    const size_t padded = (used + kAlign - 1) / kAlign * kAlign;
    std::memset(block.get() + used, 0, padded - used);
    st = run.file->Write(offset, block.get(), padded);
  }
  run.records = items_.size();
  runs_.push_back(std::move(run));  // removed by the destructor, also on failure
  if (!st.ok()) return st;
  arena_.clear();
  items_.clear();
  return Status::OK();
}

Status ExternalSorter::Finish(const std::function<Status(std::string_view)>& each) {
  if (finished_) return Status::InvalidArgument("the sort has finished");
  finished_ = true;
  if (runs_.empty()) {
    SortArena();
    for (const auto& [at, len] : items_) {
      SUBITO_RETURN_IF_ERROR(each(std::string_view(arena_.data() + at, len)));
    }
    return Status::OK();
  }
  if (!items_.empty()) SUBITO_RETURN_IF_ERROR(Spill());
  arena_ = {};
  items_ = {};
  // The memory budget is shared by the runs' read buffers.
  const size_t per =
      std::clamp<size_t>(memory_bytes_ / runs_.size() / kAlign * kAlign, kAlign, kWriteBlock);
  std::vector<std::unique_ptr<Reader>> readers;
  auto later = [&](size_t a, size_t b) { return readers[a]->current() > readers[b]->current(); };
  std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
  for (const Run& r : runs_) {
    readers.push_back(std::make_unique<Reader>(&r, per));
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

}  // namespace subito
