#include "btree/key_encoding.h"

#include <cassert>

#include "util/strings.h"

namespace subito::btree {
namespace {
constexpr uint8_t kNullByte = 0x00, kValueByte = 0x01;
constexpr uint8_t kEscape = 0x00, kEscapedZero = 0xFF, kTerminator = 0x01;

Status Truncated(const char* what, size_t pos) {
  return Status::Corruption(StrFormat("key ends inside %s at byte %zu", what, pos));
}
}  // namespace

KeyEncoder& KeyEncoder::Null() {
  out_.push_back(static_cast<char>(kNullByte));
  return *this;
}

KeyEncoder& KeyEncoder::NotNull() {
  out_.push_back(static_cast<char>(kValueByte));
  return *this;
}

KeyEncoder& KeyEncoder::Unsigned(uint64_t v, int width) {
  assert(width >= 1 && width <= 8);
  for (int i = width - 1; i >= 0; --i) out_.push_back(static_cast<char>(v >> (8 * i)));
  return *this;
}

KeyEncoder& KeyEncoder::Signed(int64_t v, int width) {
  assert(width >= 1 && width <= 8);
  const uint64_t sign = uint64_t{1} << (8 * width - 1);
  return Unsigned((static_cast<uint64_t>(v) ^ sign) & (width == 8 ? ~uint64_t{0} : sign * 2 - 1),
                  width);
}

KeyEncoder& KeyEncoder::Bytes(std::string_view s) {
  out_.reserve(out_.size() + s.size() + 2);
  for (size_t at = s.find(static_cast<char>(kEscape)); at != std::string_view::npos;
       at = s.find(static_cast<char>(kEscape))) {
    out_.append(s.data(), at + 1);
    out_.push_back(static_cast<char>(kEscapedZero));
    s.remove_prefix(at + 1);
  }
  out_.append(s);
  out_.push_back(static_cast<char>(kEscape));
  out_.push_back(static_cast<char>(kTerminator));
  return *this;
}

KeyEncoder& KeyEncoder::Invert(size_t from) {
  assert(from <= out_.size());
  for (size_t i = from; i < out_.size(); ++i) out_[i] = static_cast<char>(~out_[i]);
  return *this;
}

Result<bool> KeyDecoder::IsNull() {
  if (pos_ >= in_.size()) return Truncated("a NULL marker", pos_);
  const uint8_t b = Next();
  if (b == kNullByte) return true;
  if (b == kValueByte) return false;
  return Status::Corruption(StrFormat("bad NULL marker 0x%02x at byte %zu", b, pos_ - 1));
}

Result<uint64_t> KeyDecoder::Unsigned(int width) {
  if (width < 1 || width > 8) return Status::InvalidArgument("integer width must be 1 to 8");
  if (in_.size() - pos_ < static_cast<size_t>(width)) return Truncated("an integer", pos_);
  uint64_t v = 0;
  for (int i = 0; i < width; ++i) v = (v << 8) | Next();
  return v;
}

Result<int64_t> KeyDecoder::Signed(int width) {
  Result<uint64_t> u = Unsigned(width);
  if (!u.ok()) return u.status();
  const uint64_t sign = uint64_t{1} << (8 * width - 1);
  uint64_t v = *u ^ sign;
  if (width < 8 && (v & sign)) v |= ~(sign * 2 - 1);  // sign-extend
  return static_cast<int64_t>(v);
}

Result<std::string> KeyDecoder::Bytes() {
  std::string s;
  for (;;) {
    if (pos_ >= in_.size()) return Truncated("a string", pos_);
    const uint8_t b = Next();
    if (b != kEscape) {
      s.push_back(static_cast<char>(b));
      continue;
    }
    if (pos_ >= in_.size()) return Truncated("a string escape", pos_);
    const uint8_t next = Next();
    if (next == kTerminator) return s;
    if (next != kEscapedZero) {
      return Status::Corruption(
          StrFormat("bad string escape 0x00 0x%02x at byte %zu", next, pos_ - 2));
    }
    s.push_back('\0');
  }
}

}  // namespace subito::btree
