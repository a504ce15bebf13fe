#include "core/openssl_errors.h"

#include <openssl/err.h>

#include "absl/strings/str_cat.h"

namespace psflow {

std::string OpenSslErrors() {
  std::string out;
  for (unsigned long e = ERR_get_error(); e != 0; e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    absl::StrAppend(&out, out.empty() ? "" : "; ", buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

}  // namespace psflow
