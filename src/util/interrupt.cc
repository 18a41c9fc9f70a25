#include "subito/interrupt.h"

namespace subito {

thread_local InterruptScope::Check InterruptScope::check_ = nullptr;
thread_local void* InterruptScope::arg_ = nullptr;
thread_local int BackupLockScope::depth_ = 0;

}  // namespace subito
