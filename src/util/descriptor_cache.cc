#include "util/descriptor_cache.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace subito {

DescriptorCache::~DescriptorCache() {
  for (auto& [id, e] : files_) {
    if (e.fd >= 0) ::close(e.fd);
  }
}

uint64_t DescriptorCache::Register(Opener open) {
  std::lock_guard lk(mu_);
  const uint64_t id = next_id_++;
  files_[id].open = std::move(open);
  return id;
}

void DescriptorCache::Unregister(uint64_t file) {
  std::unique_lock lk(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return;
  Entry& e = it->second;  // a reference survives a rehash during the wait; `it` may not
  while (e.opening || e.closing) Wait(lk);
  if (e.fd >= 0) {
    idle_.erase(e.node);
    ::close(e.fd);
    --stats_.open;
  }
  files_.erase(file);
  cv_.notify_all();
}

void DescriptorCache::CloseOldest(std::unique_lock<std::mutex>& lk) {
  const uint64_t id = idle_.back();
  Entry& e = files_.at(id);
  idle_.erase(e.node);  // references into the map survive rehashing
  e.closing = true;
  const int fd = e.fd;
  const uint64_t writes = e.writes;
  const bool dirty = writes != e.synced;
  lk.unlock();
  int err = 0;
  if (dirty && ::fdatasync(fd) != 0) err = errno;
  ::close(fd);
  lk.lock();
  e.closing = false;
  e.fd = -1;
  if (err != 0) {
    e.deferred = Status::IOError(std::string("fdatasync before closing a descriptor: ") +
                                 std::strerror(err));
  } else {
    e.synced = writes;
  }
  --stats_.open;
  ++stats_.closes;
  cv_.notify_all();
}

Result<int> DescriptorCache::Pin(uint64_t file) {
  std::unique_lock lk(mu_);
  Entry& e = files_.at(file);
  for (;;) {
    if (e.fd >= 0 && !e.closing) {
      if (e.pins++ == 0) pinned_.splice(pinned_.end(), idle_, e.node);
      return e.fd;
    }
    if (e.opening || e.closing) {  // D3
      Wait(lk);
      continue;
    }
    if (limit_ == 0 || stats_.open < limit_) {  // D1: count it before opening
      e.opening = true;
      ++stats_.open;
      lk.unlock();
      Result<int> fd = e.open();
      const int err = fd.ok() ? 0 : errno;
      lk.lock();
      e.opening = false;
      cv_.notify_all();
      if (!fd.ok()) {
        --stats_.open;
        // The process ran out of descriptors elsewhere: give one of ours up.
        if ((err == EMFILE || err == ENFILE) && !idle_.empty()) {
          CloseOldest(lk);
          continue;
        }
        return fd.status();
      }
      if (e.ever_opened) ++stats_.opens;
      e.ever_opened = true;
      e.fd = *fd;
      e.pins = 1;
      e.node = pinned_.insert(pinned_.end(), file);
      return e.fd;
    }
    if (!idle_.empty()) {
      CloseOldest(lk);
      continue;
    }
    ++stats_.waits;
    Wait(lk);
  }
}

void DescriptorCache::Unpin(uint64_t file, bool writes) {
  std::lock_guard lk(mu_);
  Entry& e = files_.at(file);
  if (writes) ++e.writes;
  if (--e.pins == 0) {
    idle_.splice(idle_.begin(), pinned_, e.node);
    if (waiters_ > 0) cv_.notify_all();
  }
}

Status DescriptorCache::Sync(uint64_t file, const std::string& path) {
  uint64_t writes = 0;
  {
    std::lock_guard lk(mu_);
    Entry& e = files_.at(file);
    if (!e.deferred.ok()) return e.deferred;  // for good: D2
    // Closed after a successful sync of every write (D2): nothing to do.
    if (e.fd < 0 && !e.opening && !e.closing && e.writes == e.synced) return Status::OK();
    writes = e.writes;
  }
  Status s = Use(file, false, [&](int fd) {
    if (::fdatasync(fd) != 0) {
      return Status::IOError("fdatasync " + path + ": " + std::strerror(errno));
    }
    return Status::OK();
  });
  std::lock_guard lk(mu_);
  Entry& e = files_.at(file);
  if (!s.ok()) return s;
  if (!e.deferred.ok()) return e.deferred;
  if (writes > e.synced) e.synced = writes;
  return Status::OK();
}

DescriptorStats DescriptorCache::stats() const {
  std::lock_guard lk(mu_);
  DescriptorStats s = stats_;
  s.limit = limit_;
  return s;
}

}  // namespace subito
