// The page format shared by every page of every space file (table or index).
// docs/formats/page.md explains it; this header is the authority.
//
// Every page starts with a 32-byte header:
//
//   +0  u32 crc32c   of bytes [4, page_size), computed when the page is written
//   +4  u16 format_version (kPageFormatVersion)
//   +6  u8  page_type (PageType)
//   +7  u8  page_size_log2 (12, 13 or 14)
//   +8  u64 page_lsn  end LSN of the last log record applied to the page
//   +16 u32 space_id  the space (file) the page belongs to
//   +20 u32 page_no   its position in that file
//   +24 u64 reserved  (0)
//
// Invariants:
//  P1. A page read from a file is accepted iff it is all zeros (allocated,
//      never written: its content comes from redo) or its crc, version,
//      page size, space_id and page_no all match. space_id and page_no catch
//      misdirected writes; the crc catches torn writes and bit flips.
//  P2. Write-ahead: a page image reaches its file only after the log is
//      durable up to its page_lsn.
//  P3. Redo applies a record to a page iff the record's end LSN is greater
//      than the page's page_lsn, then sets page_lsn to that end LSN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "subito/status.h"

namespace subito::page {

inline constexpr uint16_t kPageFormatVersion = 1;
inline constexpr size_t kPageHeaderSize = 32;
inline constexpr uint32_t kMinPageSize = 4096;
inline constexpr uint32_t kMaxPageSize = 16384;

enum PageType : uint8_t {
  kPageFree = 0,  // zeroed / unused
  kPageSpaceHeader = 1,
  kPageBtreeLeaf = 2,
  kPageBtreeInternal = 3,
  kPageOverflow = 4,  // format 1 overflow chains, still read
  kPageChain = 5,     // overflow chains (btree/tree_op.h)
  kPageTest = 200,    // tests and benchmarks of this layer
};

struct PageHeader {
  uint32_t crc;
  uint16_t format_version;
  uint8_t page_type;
  uint8_t page_size_log2;
  uint64_t page_lsn;
  uint32_t space_id;
  uint32_t page_no;
  uint64_t reserved;
};
static_assert(sizeof(PageHeader) == kPageHeaderSize);
static_assert(offsetof(PageHeader, page_lsn) == 8);
static_assert(offsetof(PageHeader, page_no) == 20);

inline bool ValidPageSize(uint32_t size) {
  return size == 4096 || size == 8192 || size == 16384;
}

// Fills the header of a fresh page (zeroing the rest).
void InitPage(uint8_t* page, uint32_t page_size, PageType type, uint32_t space_id,
              uint32_t page_no);
uint64_t PageLsn(const uint8_t* page);
void SetPageLsn(uint8_t* page, uint64_t lsn);
PageType TypeOf(const uint8_t* page);
// Computes the crc into the header; done right before a page is written.
void SealPage(uint8_t* page, uint32_t page_size);
// P1. `where` names the file in the error.
Status CheckPage(const uint8_t* page, uint32_t page_size, uint32_t space_id, uint32_t page_no,
                 const std::string& where);
bool IsZeroPage(const uint8_t* page, uint32_t page_size);

}  // namespace subito::page
