// InterruptScope: tells the engine's long waits on this thread (for log
// space, for a checkpoint) that their caller has given up, as a killed
// statement has: they then fail with Interrupted. The MariaDB handler opens
// one per call, checking the connection's kill flag. Scopes nest; outside
// any scope nothing interrupts.
#pragma once

namespace subito {

class InterruptScope {
 public:
  using Check = bool (*)(void* arg);
  InterruptScope(Check check, void* arg) : prev_check_(check_), prev_arg_(arg_) {
    check_ = check;
    arg_ = arg;
  }
  ~InterruptScope() {
    check_ = prev_check_;
    arg_ = prev_arg_;
  }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  static bool Interrupted() { return check_ != nullptr && check_(arg_); }

 private:
  Check prev_check_;
  void* prev_arg_;
  static thread_local Check check_;
  static thread_local void* arg_;
};

}  // namespace subito
