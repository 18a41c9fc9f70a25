// A Persistence that passes every call to a real one, for tests that hold
// up or watch one call (Drain, mostly): subclasses override that one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pmem/persistence.h"

namespace subito::test {

class ForwardingPersistence : public pmem::Persistence {
 public:
  explicit ForwardingPersistence(pmem::Persistence* inner) : inner_(inner) {}
  void CopyNoDrain(void* dst, const void* src, size_t n) override {
    inner_->CopyNoDrain(dst, src, n);
  }
  void FillNoDrain(void* dst, uint8_t byte, size_t n) override {
    inner_->FillNoDrain(dst, byte, n);
  }
  void Flush(const void* addr, size_t n) override { inner_->Flush(addr, n); }
  void Drain() override { inner_->Drain(); }
  void OnMap(const std::string& name, const void* base, size_t size) override {
    inner_->OnMap(name, base, size);
  }
  void OnUnmap(const void* base) override { inner_->OnUnmap(base); }

 protected:
  pmem::Persistence* inner() const { return inner_; }

 private:
  pmem::Persistence* const inner_;
};

}  // namespace subito::test
