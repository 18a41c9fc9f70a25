#include "subito/interrupt.h"

namespace subito {

thread_local InterruptScope::Check InterruptScope::check_ = nullptr;
thread_local void* InterruptScope::arg_ = nullptr;

}  // namespace subito
