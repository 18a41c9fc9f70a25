// Memcomparable key encoding: index keys are byte strings whose memcmp order
// is the order of the values they encode, so B-tree code compares keys with
// memcmp only (the idea of MyRocks' rdb_datadic). Composite keys are the
// concatenation of their parts.
//
// Part encodings:
//   nullable part   one byte 0x00 for NULL (nothing follows; NULLs sort
//                   first), 0x01 before a value
//   unsigned int    width bytes (1..8), big-endian
//   signed int      width bytes, big-endian, sign bit flipped
//   binary string   each 0x00 byte written as 0x00 0xFF, then 0x00 0x01:
//                   prefix-free, so a shorter string sorts first and the
//                   next part starts right after it
// Strings in non-binary collations are encoded from the collation's sort key
// (the MariaDB plugin will pass the server's own sort keys here).
//
// A descending part is its ascending encoding with every byte inverted
// (x ^ 0xFF). Each part's encoding is prefix-free, so two keys first differ
// inside one part's bytes, where inverting reverses the order; NULLs (0x00
// -> 0xFF) then sort last.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "subito/status.h"

namespace subito::btree {

class KeyEncoder {
 public:
  KeyEncoder& Null();
  KeyEncoder& NotNull();  // before the value of a nullable part
  KeyEncoder& Unsigned(uint64_t v, int width);
  KeyEncoder& Signed(int64_t v, int width);
  KeyEncoder& Bytes(std::string_view s);
  void Reserve(size_t bytes) { out_.reserve(bytes); }
  // Inverts the bytes from `from` (a size() taken before a part) to the end:
  // that part becomes descending.
  KeyEncoder& Invert(size_t from);
  size_t size() const { return out_.size(); }
  const std::string& key() const { return out_; }
  std::string Release() { return std::move(out_); }

 private:
  std::string out_;
};

// Reads parts back in the order they were encoded. Keys come from pages,
// which may be damaged: every read is bounds-checked and reports Corruption.
class KeyDecoder {
 public:
  // Reads `key` in place: the bytes must outlive the decoder.
  explicit KeyDecoder(std::string_view key) : in_(key) {}
  explicit KeyDecoder(std::string&&) = delete;  // would dangle
  // For a nullable part: true if NULL (consumed), false if a value follows.
  Result<bool> IsNull();
  Result<uint64_t> Unsigned(int width);
  Result<int64_t> Signed(int width);
  Result<std::string> Bytes();
  // The parts read from now on are descending (inverted) or ascending.
  void SetDescending(bool descending) { mask_ = descending ? 0xFF : 0x00; }
  bool done() const { return pos_ == in_.size(); }
  size_t consumed() const { return pos_; }

 private:
  uint8_t Next() { return static_cast<uint8_t>(in_[pos_++]) ^ mask_; }

  std::string_view in_;
  size_t pos_ = 0;
  uint8_t mask_ = 0x00;
};

}  // namespace subito::btree
