// CRC32C (Castagnoli), the checksum of every persistent Subito structure.
// Backed by Intel ISA-L's crc32_iscsi (hardware-accelerated).
#pragma once

#include <cstddef>
#include <cstdint>

namespace subito::crc32c {

// Extends `crc` (the value returned for the preceding bytes, 0 for none) over
// data[0, n). Value(s) == Extend(0, s): the standard CRC32C of s.
uint32_t Extend(uint32_t crc, const void* data, size_t n);

inline uint32_t Value(const void* data, size_t n) {
  return Extend(0, data, n);
}

}  // namespace subito::crc32c
