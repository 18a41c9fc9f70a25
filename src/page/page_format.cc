#include "page/page_format.h"

#include <cstring>

#include "util/coding.h"
#include "util/crc32c.h"
#include "util/strings.h"

namespace subito::page {
namespace {
uint8_t Log2(uint32_t size) {
  return static_cast<uint8_t>(__builtin_ctz(size));
}
}  // namespace

void InitPage(uint8_t* page, uint32_t page_size, PageType type, uint32_t space_id,
              uint32_t page_no) {
  std::memset(page, 0, page_size);
  EncodeFixed16(page + 4, kPageFormatVersion);
  page[6] = type;
  page[7] = Log2(page_size);
  EncodeFixed32(page + 16, space_id);
  EncodeFixed32(page + 20, page_no);
}

uint64_t PageLsn(const uint8_t* page) {
  return DecodeFixed64(page + 8);
}
void SetPageLsn(uint8_t* page, uint64_t lsn) {
  EncodeFixed64(page + 8, lsn);
}
PageType TypeOf(const uint8_t* page) {
  return static_cast<PageType>(page[6]);
}

void SealPage(uint8_t* page, uint32_t page_size) {
  EncodeFixed32(page, crc32c::Value(page + 4, page_size - 4));
}

bool IsZeroPage(const uint8_t* page, uint32_t page_size) {
  static const uint8_t kZeros[kMaxPageSize] = {};
  return std::memcmp(page, kZeros, page_size) == 0;
}

Status CheckPage(const uint8_t* page, uint32_t page_size, uint32_t space_id, uint32_t page_no,
                 const std::string& where) {
  if (IsZeroPage(page, page_size)) return Status::OK();
  auto bad = [&](const std::string& what) {
    return Status::Corruption(StrFormat("%s page %u (offset %llu): %s", where.c_str(), page_no,
                                        static_cast<unsigned long long>(page_no) * page_size,
                                        what.c_str()));
  };
  if (crc32c::Value(page + 4, page_size - 4) != DecodeFixed32(page)) {
    return bad("checksum mismatch (torn write or damaged bytes)");
  }
  if (DecodeFixed16(page + 4) != kPageFormatVersion) {
    return bad(StrFormat("page format version %u, this build reads %u", DecodeFixed16(page + 4),
                         kPageFormatVersion));
  }
  if (page[7] != Log2(page_size)) return bad("page size differs from the file's");
  if (DecodeFixed32(page + 16) != space_id || DecodeFixed32(page + 20) != page_no) {
    return bad(StrFormat("holds page %u of space %u (misdirected write)", DecodeFixed32(page + 20),
                         DecodeFixed32(page + 16)));
  }
  return Status::OK();
}

}  // namespace subito::page
