#include "pmem/tracking_persistence.h"

#include <atomic>
#include <cstring>

namespace subito::pmem {

uint32_t TrackingPersistence::ThreadId() {
  static std::atomic<uint32_t> next{0};
  thread_local uint32_t id = next.fetch_add(1);
  return id;
}

void TrackingPersistence::OnMap(const std::string& name, const void* base, size_t size) {
  std::lock_guard lock(clock_->mu);
  const auto* b = static_cast<const uint8_t*>(base);
  for (Region& r : regions_) {
    if (r.name == name) {
      // Remapped (e.g. the same file reopened): the region continues. Images
      // still start from the first mapping's bytes plus every event since,
      // so all writes in between must have gone through this tracker.
      r.base = b;
      r.size = size;
      r.mapped = true;
      return;
    }
  }
  regions_.push_back(Region{name, b, size, std::vector<uint8_t>(b, b + size), true});
}

void TrackingPersistence::OnUnmap(const void* base) {
  std::lock_guard lock(clock_->mu);
  for (Region& r : regions_) {
    if (r.base == base) r.mapped = false;
  }
}

void TrackingPersistence::CopyNoDrain(void* dst, const void* src, size_t n) {
  std::memcpy(dst, src, n);
  Flush(dst, n);
}

void TrackingPersistence::FillNoDrain(void* dst, uint8_t byte, size_t n) {
  std::memset(dst, byte, n);
  Flush(dst, n);
}

void TrackingPersistence::Flush(const void* addr, size_t n) {
  if (n == 0) return;
  std::lock_guard lock(clock_->mu);
  if (frozen_) return;
  const auto* p = static_cast<const uint8_t*>(addr);
  for (uint32_t ri = 0; ri < regions_.size(); ++ri) {
    const Region& r = regions_[ri];
    if (!r.mapped || p < r.base || p + n > r.base + r.size) continue;
    uint64_t first = static_cast<uint64_t>(p - r.base) / kLineSize * kLineSize;
    uint64_t end = static_cast<uint64_t>(p - r.base) + n;
    for (uint64_t off = first; off < end; off += kLineSize) {
      uint64_t len = std::min<uint64_t>(kLineSize, r.size - off);
      RecordLine(ri, off, static_cast<uint32_t>(len));
    }
    return;
  }
  // A flush outside every tracked region is a bug in the caller: durable data
  // must live in a mapping the tracker was told about.
  std::abort();
}

void TrackingPersistence::RecordLine(uint32_t region, uint64_t offset, uint32_t length) {
  Event e{};
  e.time = clock_->next++;
  e.fence = false;
  e.thread = ThreadId();
  e.region = region;
  e.offset = offset;
  e.length = length;
  std::memcpy(e.data, regions_[region].base + offset, length);
  events_.push_back(e);
}

void TrackingPersistence::Drain() {
  std::lock_guard lock(clock_->mu);
  if (frozen_) return;
  Event e{};
  e.time = clock_->next++;
  e.fence = true;
  e.thread = ThreadId();
  events_.push_back(e);
  ++fences_;
}

size_t TrackingPersistence::EventCount() const {
  std::lock_guard lock(clock_->mu);
  return events_.size();
}

size_t TrackingPersistence::FenceCount() const {
  std::lock_guard lock(clock_->mu);
  return fences_;
}

void TrackingPersistence::Freeze() {
  std::lock_guard lock(clock_->mu);
  frozen_ = true;
}

// Applies events one at a time, keeping the durable image and, per thread,
// the lines flushed since that thread's last fence.
class TrackingPersistence::Replay {
 public:
  explicit Replay(const TrackingPersistence& t) : t_(t) {
    for (const Region& r : t.regions_) {
      image_[r.name] = r.initial;
      line_seq_[r.name].assign(r.size / kLineSize + 1, 0);
    }
  }

  void Step(size_t index) {
    const Event& e = t_.events_[index];
    if (!e.fence) {
      pending_[e.thread].push_back(index);
      return;
    }
    for (size_t i : pending_[e.thread]) Apply(i, image_);
    pending_[e.thread].clear();
  }

  const Image& image() const { return image_; }

  Image WithRandomPending(std::mt19937_64& rng) const {
    Image copy = image_;
    auto seq = line_seq_;
    for (const auto& [thread, lines] : pending_) {
      for (size_t i : lines) {
        if (rng() & 1) Apply(i, copy, seq);
      }
    }
    return copy;
  }

 private:
  using LineSeq = std::map<std::string, std::vector<uint64_t>>;

  void Apply(size_t index, Image& image) { Apply(index, image, line_seq_); }
  void Apply(size_t index, Image& image, LineSeq& line_seq) const {
    const Event& e = t_.events_[index];
    const Region& r = t_.regions_[e.region];
    uint64_t& seq = line_seq[r.name][e.offset / kLineSize];
    if (index + 1 < seq) return;  // a later flush of this line is already durable
    seq = index + 1;
    std::memcpy(image[r.name].data() + e.offset, e.data, e.length);
  }

  const TrackingPersistence& t_;
  Image image_;
  LineSeq line_seq_;
  std::map<uint32_t, std::vector<size_t>> pending_;
};

TrackingPersistence::Image TrackingPersistence::ImageAt(size_t events, std::mt19937_64* rng) const {
  std::lock_guard lock(clock_->mu);
  return ImageOfFirst(std::min(events, events_.size()), rng);
}

TrackingPersistence::Image TrackingPersistence::ImageAtTime(uint64_t time,
                                                            std::mt19937_64* rng) const {
  std::lock_guard lock(clock_->mu);
  // Events are recorded in clock order.
  size_t n = 0;
  while (n < events_.size() && events_[n].time < time) ++n;
  return ImageOfFirst(n, rng);
}

TrackingPersistence::Image TrackingPersistence::ImageOfFirst(size_t events,
                                                             std::mt19937_64* rng) const {
  Replay replay(*this);
  for (size_t i = 0; i < events; ++i) replay.Step(i);
  return rng ? replay.WithRandomPending(*rng) : replay.image();
}

void TrackingPersistence::ForEachPersistPoint(const std::function<void(size_t, const Image&)>& fn,
                                              std::mt19937_64* rng) const {
  std::lock_guard lock(clock_->mu);
  Replay replay(*this);
  auto emit = [&](size_t k) {
    if (rng) {
      Image img = replay.WithRandomPending(*rng);
      fn(k, img);
    } else {
      fn(k, replay.image());
    }
  };
  emit(0);
  for (size_t i = 0; i < events_.size(); ++i) {
    // With rng the crash lands just before each fence, when the fencing
    // thread's flushed lines are still in doubt; without, just after it.
    if (rng && events_[i].fence) emit(i);
    replay.Step(i);
    if (!rng && events_[i].fence) emit(i + 1);
  }
  if (events_.empty() || !events_.back().fence) emit(events_.size());
}

}  // namespace subito::pmem
