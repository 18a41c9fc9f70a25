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
  // The thread's state is reached once per scope: in a plugin each access
  // of a thread_local costs a call (__tls_get_addr), and the handler opens
  // a scope for every call it serves, one per row read in a scan.
  InterruptScope(Check check, void* arg) : state_(&current_), prev_(*state_) {
    *state_ = State{check, arg};
  }
  ~InterruptScope() { *state_ = prev_; }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  static bool Interrupted() {
    const State& s = current_;
    return s.check != nullptr && s.check(s.arg);
  }

 private:
  struct State {
    Check check = nullptr;
    void* arg = nullptr;
  };
  State* const state_;
  const State prev_;
  static thread_local State current_;
};

// BackupLockScope: tells the engine that this thread holds a lock a backup
// waits for (MariaDB's MDL_BACKUP_COMMIT, which BACKUP STAGE BLOCK_COMMIT
// waits on; the server holds it through a commit, a rollback after a failed
// commit, and XA ROLLBACK). Waits for the backup's end would then never
// end: a rollback goes on into the log's reserve instead of waiting near a
// full log. Scopes nest.
class BackupLockScope {
 public:
  explicit BackupLockScope(bool held) : held_(held) {
    if (held_) ++depth_;
  }
  ~BackupLockScope() {
    if (held_) --depth_;
  }
  BackupLockScope(const BackupLockScope&) = delete;
  BackupLockScope& operator=(const BackupLockScope&) = delete;

  static bool active() { return depth_ > 0; }

 private:
  bool held_;
  static thread_local int depth_;
};

}  // namespace subito
