// Little-endian fixed-width encoding for on-media integers. Every persistent
// Subito format is little-endian; these helpers never assume alignment.
#pragma once

#include <cstdint>
#include <cstring>

namespace subito {

inline void EncodeFixed16(void* dst, uint16_t v) {
  std::memcpy(dst, &v, sizeof v);
}
inline void EncodeFixed32(void* dst, uint32_t v) {
  std::memcpy(dst, &v, sizeof v);
}
inline void EncodeFixed64(void* dst, uint64_t v) {
  std::memcpy(dst, &v, sizeof v);
}

inline uint16_t DecodeFixed16(const void* src) {
  uint16_t v;
  std::memcpy(&v, src, sizeof v);
  return v;
}
inline uint32_t DecodeFixed32(const void* src) {
  uint32_t v;
  std::memcpy(&v, src, sizeof v);
  return v;
}
inline uint64_t DecodeFixed64(const void* src) {
  uint64_t v;
  std::memcpy(&v, src, sizeof v);
  return v;
}

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "on-media formats assume little-endian");

constexpr uint64_t AlignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}
constexpr uint64_t AlignDown(uint64_t v, uint64_t a) {
  return v / a * a;
}
constexpr bool IsPowerOfTwo(uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

}  // namespace subito
