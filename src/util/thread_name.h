// Names the calling thread as ps, top, perf and gdb show it, so that a
// profile tells the engine's background threads apart from the server's
// (Linux keeps 15 characters; a longer name is left unset).
#pragma once

#include <pthread.h>

namespace subito {

inline void NameThisThread(const char* name) {
  (void)pthread_setname_np(pthread_self(), name);
}

}  // namespace subito
