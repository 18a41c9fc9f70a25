// WritePause: lets a backup stop the engine's writes to its files for a
// while (MariaDB's BACKUP STAGE START .. END) without stopping its work in
// memory.
//
// Writers bracket each write of a paused kind with Enter..Exit (or a
// Scope); Pause sets the pause, then waits until no writer is inside, so
// that once it returns no such write is in flight and none starts until
// Resume. Enter never blocks the pause: it either gets in before the pause
// is set (and Pause waits for its Exit) or sees it.
//
// Invariant (W1): between Pause's return and Resume, no thread is between
// Enter and Exit.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace subito::buffer {

class WritePause {
 public:
  // Returns once every writer that entered before it has exited. At most
  // one pause at a time (a second Pause before Resume changes nothing).
  void Pause() {
    std::unique_lock lock(mu_);
    if (!paused_) ++pauses_;
    paused_ = true;
    idle_.wait(lock, [&] { return inside_ == 0; });
  }
  void Resume() {
    {
      std::lock_guard lock(mu_);
      paused_ = false;
    }
    resumed_.notify_all();
  }
  bool paused() const {
    std::lock_guard lock(mu_);
    return paused_;
  }
  uint64_t pauses() const {
    std::lock_guard lock(mu_);
    return pauses_;
  }
  // Enters unless paused; false (not entered) while paused.
  bool TryEnter() {
    std::lock_guard lock(mu_);
    if (paused_) return false;
    ++inside_;
    return true;
  }
  // Enters, waiting up to `timeout` for a pause to end; false if it did not.
  bool Enter(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!resumed_.wait_for(lock, timeout, [&] { return !paused_; })) return false;
    ++inside_;
    return true;
  }
  // Waits up to `timeout` for a pause to end (without entering); whether
  // it is not paused now.
  bool AwaitResume(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return resumed_.wait_for(lock, timeout, [&] { return !paused_; });
  }
  void Exit() {
    bool last;
    {
      std::lock_guard lock(mu_);
      last = --inside_ == 0;
    }
    if (last) idle_.notify_all();
  }

  // Exits on destruction if entered.
  class Scope {
   public:
    Scope(WritePause* p, bool entered) : p_(entered ? p : nullptr) {}
    ~Scope() {
      if (p_ != nullptr) p_->Exit();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    bool entered() const { return p_ != nullptr; }

   private:
    WritePause* p_;
  };

 private:
  mutable std::mutex mu_;
  std::condition_variable idle_, resumed_;
  bool paused_ = false;
  uint64_t inside_ = 0;
  uint64_t pauses_ = 0;
};

}  // namespace subito::buffer
