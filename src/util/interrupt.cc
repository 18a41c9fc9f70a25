#include "subito/interrupt.h"

namespace subito {

thread_local InterruptScope::State InterruptScope::current_;
thread_local int BackupLockScope::depth_ = 0;

}  // namespace subito
