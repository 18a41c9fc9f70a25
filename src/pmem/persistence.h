// Persistence: the one interface through which bytes in a mapped PM region
// become durable.
//
// Model (x86 with ADR): a store reaches the persistence domain only after its
// cache line is written back (Flush: clwb/clflushopt, or a non-temporal store)
// and the writing thread has fenced (Drain: sfence). Lines that were stored but
// not flushed, or flushed but not drained, may or may not survive power loss.
// Callers therefore:
//   1. write payload bytes (CopyNoDrain / FillNoDrain / plain stores + Flush),
//   2. Drain() once to order them before anything that makes them valid,
//   3. then write and persist the bytes that publish them (a checksum, a header).
//
// Implementations: PmemPersistence (libpmem, for DAX and the /dev/shm
// emulation), MsyncPersistence (a mapped file on a block device), and
// TrackingPersistence (tests: records every flush and fence and can build the
// image a power cut would leave).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace subito::pmem {

class Persistence {
 public:
  virtual ~Persistence() = default;

  // Copies n bytes to dst (non-temporal stores for large copies) and starts
  // their write-back. Not ordered with later stores until Drain().
  virtual void CopyNoDrain(void* dst, const void* src, size_t n) = 0;
  // Sets n bytes at dst to `byte` and starts their write-back.
  virtual void FillNoDrain(void* dst, uint8_t byte, size_t n) = 0;
  // Starts write-back of the cache lines covering [addr, addr + n).
  virtual void Flush(const void* addr, size_t n) = 0;
  // Returns once every write-back started by this thread is durable.
  virtual void Drain() = 0;

  void Persist(const void* addr, size_t n) {
    Flush(addr, n);
    Drain();
  }

  // A mapping of `size` bytes at `base`, named `name`, now holds durable data
  // that this object will persist. Trackers snapshot it; others ignore it.
  virtual void OnMap(const std::string& name, const void* base, size_t size) {
    (void)name, (void)base, (void)size;
  }
  virtual void OnUnmap(const void* base) { (void)base; }

  virtual const char* Name() const = 0;
};

// libpmem's flush/fence path: clwb or clflushopt + sfence, movnt for copies.
// Correct for DAX mappings made with MAP_SYNC; on /dev/shm it pays the same
// instruction costs against DRAM (the emulated PM tier).
Persistence* PmemPersistenceInstance();

// msync(MS_SYNC) of the touched pages: for a mapping of a regular file on a
// block device, where cache flushes alone do not reach the medium.
Persistence* MsyncPersistenceInstance();

}  // namespace subito::pmem
