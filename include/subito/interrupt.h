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
