// Status and Result: how every fallible Subito call reports failure.
//
// A Status is either OK or carries a code and a human-readable message that
// names what failed (file, offset, setting). Result<T> holds a value or a
// non-OK Status. Both are [[nodiscard]]: ignoring an error is a compile error
// under -Werror and a warning otherwise.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace subito {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // a bad setting or call argument
    kIOError,          // the operating system refused (open, mmap, write, ...)
    kCorruption,       // persistent bytes fail validation
    kNotFound,
    kBusy,      // resource held by someone else (e.g. a lock or a full log)
    kTimedOut,  // a wait exceeded its limit
    kShutdown,  // the object is closing
    kNotSupported,
    kDeadlock,        // a transaction was chosen as a deadlock victim
    kAlreadyExists,   // a duplicate key or name
    kInterrupted,     // the caller asked a wait to stop (a killed statement)
    kTooLarge,        // a value longer than the engine stores with its settings
    kNoSpace,         // the file system is full (ENOSPC, EDQUOT); retrying after
                      // space is freed succeeds
    kReadOnly,        // the engine stopped accepting writes (DatabaseStats::stopped)
    kNoMemory,        // an allocation failed
    kSnapshotTooOld,  // the snapshot was cut to keep versions within their budget
    kTooManyLocks,    // row locks would exceed their memory budget
    kTableChanged,    // the table changed since the transaction's snapshot: retry it
  };

  Status() = default;
  Status(const Status& o) : state_(o.state_ ? std::make_unique<State>(*o.state_) : nullptr) {}
  Status& operator=(const Status& o) {
    if (this != &o) state_ = o.state_ ? std::make_unique<State>(*o.state_) : nullptr;
    return *this;
  }
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;
  ~Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status IOError(std::string msg) { return {Code::kIOError, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status Busy(std::string msg) { return {Code::kBusy, std::move(msg)}; }
  static Status TimedOut(std::string msg) { return {Code::kTimedOut, std::move(msg)}; }
  static Status Shutdown(std::string msg) { return {Code::kShutdown, std::move(msg)}; }
  static Status NotSupported(std::string msg) { return {Code::kNotSupported, std::move(msg)}; }
  static Status Deadlock(std::string msg) { return {Code::kDeadlock, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {Code::kAlreadyExists, std::move(msg)}; }
  static Status Interrupted(std::string msg) { return {Code::kInterrupted, std::move(msg)}; }
  static Status TooLarge(std::string msg) { return {Code::kTooLarge, std::move(msg)}; }
  static Status NoSpace(std::string msg) { return {Code::kNoSpace, std::move(msg)}; }
  static Status ReadOnly(std::string msg) { return {Code::kReadOnly, std::move(msg)}; }
  static Status NoMemory(std::string msg) { return {Code::kNoMemory, std::move(msg)}; }
  static Status SnapshotTooOld(std::string msg) { return {Code::kSnapshotTooOld, std::move(msg)}; }

  bool ok() const { return state_ == nullptr; }
  Code code() const { return state_ ? state_->code : Code::kOk; }
  const std::string& message() const { return state_ ? state_->message : NoMessage(); }
  bool IsCorruption() const { return code() == Code::kCorruption; }
  bool IsInvalidArgument() const { return code() == Code::kInvalidArgument; }
  bool IsIOError() const { return code() == Code::kIOError; }
  bool IsTimedOut() const { return code() == Code::kTimedOut; }
  bool IsDeadlock() const { return code() == Code::kDeadlock; }
  bool IsAlreadyExists() const { return code() == Code::kAlreadyExists; }
  bool IsNotFound() const { return code() == Code::kNotFound; }
  bool IsBusy() const { return code() == Code::kBusy; }
  bool IsInterrupted() const { return code() == Code::kInterrupted; }
  bool IsTooLarge() const { return code() == Code::kTooLarge; }
  bool IsNoSpace() const { return code() == Code::kNoSpace; }
  bool IsReadOnly() const { return code() == Code::kReadOnly; }
  bool IsSnapshotTooOld() const { return code() == Code::kSnapshotTooOld; }
  static Status TooManyLocks(std::string msg) { return {Code::kTooManyLocks, std::move(msg)}; }
  bool IsTooManyLocks() const { return code() == Code::kTooManyLocks; }
  static Status TableChanged(std::string msg) { return {Code::kTableChanged, std::move(msg)}; }
  bool IsTableChanged() const { return code() == Code::kTableChanged; }

  // "Corruption: log stream 0 (/dev/shm/x/log.0) offset 8192: bad checksum"
  std::string ToString() const;

 private:
  // An OK status is a null pointer: returned, moved and destroyed at the
  // cost of one, on every call of every layer. A moved-from status (and so
  // a moved-from Result) reads as OK. Copying an error copies its message.
  struct State {
    Code code;
    std::string message;
  };
  Status(Code code, std::string msg)
      : state_(std::make_unique<State>(State{code, std::move(msg)})) {}
  static const std::string& NoMessage();
  std::unique_ptr<State> state_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok());
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T* operator->() { return &value(); }
  T& operator*() { return value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace subito

#define SUBITO_RETURN_IF_ERROR(expr) \
  do {                               \
    ::subito::Status _st = (expr);   \
    if (!_st.ok()) return _st;       \
  } while (0)
