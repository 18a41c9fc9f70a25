#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

namespace subito {

// printf-style formatting into a std::string (GCC 12 has no std::format).
__attribute__((format(printf, 1, 2))) inline std::string StrFormat(const char* fmt, ...) {
  char small[256];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return {};
  if (static_cast<size_t>(n) < sizeof small) return std::string(small, static_cast<size_t>(n));
  std::string out(static_cast<size_t>(n), '\0');
  va_start(ap, fmt);
  std::vsnprintf(out.data(), out.size() + 1, fmt, ap);
  va_end(ap);
  return out;
}

}  // namespace subito
