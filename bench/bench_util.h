// Shared by the benchmarks.
#pragma once

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

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

// The q-quantile (0..1) of latencies in ns, in µs; 0 if there are none.
// Reorders `ns` (nth_element).
inline double QuantileUs(std::vector<uint32_t>& ns, double q) {
  if (ns.empty()) return 0.0;
  const size_t k = std::min(ns.size() - 1, static_cast<size_t>(q * static_cast<double>(ns.size())));
  std::nth_element(ns.begin(), ns.begin() + static_cast<long>(k), ns.end());
  return ns[k] / 1000.0;
}

// "a,b,,c" -> {"a", "b", "c"}.
inline std::vector<std::string> SplitCommas(const std::string& s) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= s.size();) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

}  // namespace subito::bench
