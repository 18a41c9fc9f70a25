// Shared by the benchmarks.
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "util/strings.h"

namespace subito::bench {

// "CPU model, N cores, Linux release", for result headers.
inline std::string MachineDescription() {
  utsname u{};
  ::uname(&u);
  std::string cpu = "?";
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) {
      cpu = line.substr(line.find(':') + 2);
      break;
    }
  }
  return StrFormat("%s, %ld cores, Linux %s", cpu.c_str(), ::sysconf(_SC_NPROCESSORS_ONLN),
                   u.release);
}

// The value of option argv[i], which follows it (i moves past it); exits
// with status 2 if there is none.
inline std::string OptionValue(int argc, char** argv, int& i) {
  if (i + 1 >= argc) {
    std::fprintf(stderr, "%s needs a value\n", argv[i]);
    std::exit(2);
  }
  return argv[++i];
}

}  // namespace subito::bench
