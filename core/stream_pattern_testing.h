// Byte-exact checks of a BulkStream for the tests of its kinds (TLS, shared memory): a patterned
// stream written in gathered writes of varied sizes and read back in other sizes.
#ifndef PSFLOW_CORE_STREAM_PATTERN_TESTING_H_
#define PSFLOW_CORE_STREAM_PATTERN_TESTING_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "core/bulk_stream.h"

namespace psflow::testing {

// Two connected ends of one kind.
struct StreamPair {
  std::unique_ptr<BulkStream> client;
  std::unique_ptr<BulkStream> server;
};

// Now plus `d`.
SteadyTime In(std::chrono::milliseconds d);

// Byte i of a stream seeded `seed`.
uint8_t Pattern(uint64_t i, uint8_t seed);

// Writes `total` bytes of the pattern in gathered writes of varied sizes (up to 250,000 bytes,
// each with a 20 s deadline); the first error, or OK, in *result.
void SendPattern(BulkStream& s, size_t total, uint8_t seed, absl::Status* result);

// Reads `total` bytes in other sizes, checking each against the pattern: DATA_LOSS naming the
// first byte that differs, a read's error, or OK, in *result.
void ReceivePattern(BulkStream& s, size_t total, uint8_t seed, absl::Status* result);

// `bytes` of the pattern each way at once (a writer and a reader thread per direction): the
// first failure among client->server and server->client, or OK.
absl::Status BothWaysAtOnce(StreamPair& p, size_t bytes);

}  // namespace psflow::testing

#endif  // PSFLOW_CORE_STREAM_PATTERN_TESTING_H_
