#include "pmem/persistence.h"

#include <libpmem.h>

#include <cstdlib>
#include <cstring>

namespace subito::pmem {
namespace {

class PmemPersistence final : public Persistence {
 public:
  void CopyNoDrain(void* dst, const void* src, size_t n) override {
    pmem_memcpy_nodrain(dst, src, n);
  }
  void FillNoDrain(void* dst, uint8_t byte, size_t n) override {
    pmem_memset_nodrain(dst, byte, n);
  }
  void Flush(const void* addr, size_t n) override { pmem_flush(addr, n); }
  void Drain() override { pmem_drain(); }
  const char* Name() const override { return "libpmem flush+fence"; }
};

// Every Flush is a synchronous msync, so Drain has nothing left to wait for.
class MsyncPersistence final : public Persistence {
 public:
  void CopyNoDrain(void* dst, const void* src, size_t n) override {
    std::memcpy(dst, src, n);
    Flush(dst, n);
  }
  void FillNoDrain(void* dst, uint8_t byte, size_t n) override {
    std::memset(dst, byte, n);
    Flush(dst, n);
  }
  void Flush(const void* addr, size_t n) override {
    // pmem_msync page-aligns the range itself. A failure here means the
    // kernel could not write the page; there is no way to report it from a
    // flush, so it is surfaced as a crash rather than a silent loss.
    if (n > 0 && pmem_msync(addr, n) != 0) std::abort();
  }
  void Drain() override {}
  const char* Name() const override { return "msync"; }
};

}  // namespace

Persistence* PmemPersistenceInstance() {
  static PmemPersistence instance;
  return &instance;
}

Persistence* MsyncPersistenceInstance() {
  static MsyncPersistence instance;
  return &instance;
}

}  // namespace subito::pmem
