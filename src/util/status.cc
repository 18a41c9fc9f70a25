#include "subito/status.h"

namespace subito {

const std::string& Status::NoMessage() {
  static const std::string empty;
  return empty;
}

std::string Status::ToString() const {
  const char* name = "OK";
  switch (code()) {
    case Code::kOk:  // the only case without state_
      return "OK";
    case Code::kInvalidArgument:
      name = "Invalid argument";
      break;
    case Code::kIOError:
      name = "IO error";
      break;
    case Code::kCorruption:
      name = "Corruption";
      break;
    case Code::kNotFound:
      name = "Not found";
      break;
    case Code::kBusy:
      name = "Busy";
      break;
    case Code::kTimedOut:
      name = "Timed out";
      break;
    case Code::kShutdown:
      name = "Shutdown";
      break;
    case Code::kNotSupported:
      name = "Not supported";
      break;
    case Code::kDeadlock:
      name = "Deadlock";
      break;
    case Code::kAlreadyExists:
      name = "Already exists";
      break;
    case Code::kInterrupted:
      name = "Interrupted";
      break;
    case Code::kTooLarge:
      name = "Too large";
      break;
    case Code::kNoSpace:
      name = "No space";
      break;
    case Code::kReadOnly:
      name = "Read only";
      break;
    case Code::kNoMemory:
      name = "Out of memory";
      break;
    case Code::kSnapshotTooOld:
      name = "Snapshot too old";
      break;
    case Code::kTooManyLocks:
      name = "Too many locks";
      break;
    case Code::kTableChanged:
      name = "Table changed";
      break;
  }
  return std::string(name) + ": " + state_->message;
}

}  // namespace subito
