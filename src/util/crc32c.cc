#include "util/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace subito::crc32c {

// ISA-L's crc32_iscsi takes and returns the CRC register without the final
// inversion, so the standard pre/post inversion is applied here.
uint32_t Extend(uint32_t crc, const void* data, size_t n) {
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  while (n > 0) {
    int chunk = n > static_cast<size_t>(INT_MAX) ? INT_MAX : static_cast<int>(n);
    reg = crc32_iscsi(p, chunk, reg);
    p += chunk;
    n -= static_cast<size_t>(chunk);
  }
  return ~reg;
}

}  // namespace subito::crc32c
