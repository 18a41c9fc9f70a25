// AlignedBuffer: bytes aligned for O_DIRECT (4 KiB), owned. A failed
// allocation is reported (Allocate returns NoMemory), never dereferenced.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <utility>

#include "subito/status.h"
#include "util/strings.h"

namespace subito {

class AlignedBuffer {
 public:
  static constexpr size_t kAlign = 4096;

  static Result<AlignedBuffer> Allocate(size_t n) {
    const size_t rounded = (n + kAlign - 1) / kAlign * kAlign;  // aligned_alloc's rule
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded));
    if (p == nullptr) return Status::NoMemory(StrFormat("cannot allocate %zu bytes", n));
    return AlignedBuffer(p);
  }
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer() { std::free(p_); }

  uint8_t* get() const { return p_; }

 private:
  explicit AlignedBuffer(uint8_t* p) : p_(p) {}
  uint8_t* p_;
};

}  // namespace subito
