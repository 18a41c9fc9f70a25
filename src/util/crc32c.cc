#include "util/crc32c.h"

#include <isa-l/crc.h>
#include <nmmintrin.h>

#include <climits>
#include <cstring>

namespace subito::crc32c {

namespace {

// Below this many bytes the SSE4.2 instruction, 8 bytes at a time, beats
// ISA-L's folding, whose fixed cost is 13-27 ns a call on this machine
// (8 bytes: 0.8 ns against 27 ns; 72 bytes: 7 against 13; 256 bytes: 25
// against 15).
constexpr size_t kSmall = 128;

uint32_t ExtendSmall(uint32_t reg, const unsigned char* p, size_t n) {
  uint64_t r = reg;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    r = _mm_crc32_u64(r, w);
  }
  reg = static_cast<uint32_t>(r);
  for (; n > 0; ++p, --n) reg = _mm_crc32_u8(reg, *p);
  return reg;
}

}  // namespace

// ISA-L's crc32_iscsi takes and returns the CRC register without the final
// inversion, so the standard pre/post inversion is applied here.
uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  if (n < kSmall) return ~ExtendSmall(reg, p, n);
  while (n > 0) {
    int chunk = n > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(n);
    reg = crc32_iscsi(p, chunk, reg);
    p += chunk;
    n -= static_cast<size_t>(chunk);
  }
  return ~reg;
}

}  // namespace subito::crc32c
