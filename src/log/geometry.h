// Geometry: where a logical LSN lives among the stream files (see format.h).
#pragma once

#include <cstdint>

#include "log/format.h"

namespace subito::log {

struct Geometry {
  uint32_t stream_count = 1;
  uint32_t stripe_size = kStripeSize;
  uint64_t data_size = 0;  // ring bytes per stream

  uint64_t capacity() const { return data_size * stream_count; }
  uint64_t StripeOf(Lsn lsn) const { return lsn / stripe_size; }
  uint32_t StreamOf(Lsn lsn) const { return static_cast<uint32_t>(StripeOf(lsn) % stream_count); }
  // Byte offset of lsn inside its stream file.
  uint64_t FileOffsetOf(Lsn lsn) const {
    uint64_t stripe = StripeOf(lsn);
    return kDataOffset + ((stripe / stream_count) * stripe_size + lsn % stripe_size) % data_size;
  }
  // Bytes from lsn to the end of its stripe: contiguous in one file.
  uint64_t ContiguousAt(Lsn lsn) const { return stripe_size - lsn % stripe_size; }
  // The first LSN >= lsn that stream s stores. All of s's bytes below it
  // being durable means s holds back nothing below that point.
  Lsn NextOwnedBy(uint32_t s, Lsn lsn) const {
    uint64_t stripe = StripeOf(lsn);
    uint32_t owner = static_cast<uint32_t>(stripe % stream_count);
    if (owner == s) return lsn;
    uint64_t ahead = (s + stream_count - owner) % stream_count;
    return (stripe + ahead) * stripe_size;
  }
};

}  // namespace subito::log
