// OpenSSL's per-thread error queue as one line of text, for the errors psflow reports from it
// (certificates, the bulk channel's TLS, sealed records).
#ifndef PSFLOW_CORE_OPENSSL_ERRORS_H_
#define PSFLOW_CORE_OPENSSL_ERRORS_H_

#include <string>

namespace psflow {

// This thread's queued OpenSSL errors, oldest first, joined by "; ", and the queue cleared;
// "unknown OpenSSL error" when it is empty.
std::string OpenSslErrors();

}  // namespace psflow

#endif  // PSFLOW_CORE_OPENSSL_ERRORS_H_
