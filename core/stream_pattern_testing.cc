#include "core/stream_pattern_testing.h"

#include <sys/uio.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

namespace psflow::testing {

SteadyTime In(std::chrono::milliseconds d) { return SteadyTime::clock::now() + d; }

uint8_t Pattern(uint64_t i, uint8_t seed) { return static_cast<uint8_t>((i * 131 + seed) >> 3); }

void SendPattern(BulkStream& s, size_t total, uint8_t seed, absl::Status* result) {
  std::vector<uint8_t> buffer(300000);
  size_t sent = 0;
  size_t round = 0;
  while (sent < total) {
    const size_t a = std::min(total - sent, size_t{1} + (round * 7919) % 100000);
    const size_t b = std::min(total - sent - a, (round * 104729) % 150000);
    for (size_t i = 0; i < a + b; ++i) buffer[i] = Pattern(sent + i, seed);
    iovec pieces[2] = {{buffer.data(), a}, {buffer.data() + a, b}};
    *result = s.WriteAll(pieces, In(std::chrono::milliseconds(20000)), "send");
    if (!result->ok()) return;
    sent += a + b;
    ++round;
  }
}

void ReceivePattern(BulkStream& s, size_t total, uint8_t seed, absl::Status* result) {
  std::vector<uint8_t> buffer(200000);
  size_t got = 0;
  size_t round = 0;
  while (got < total) {
    const size_t n = std::min(total - got, size_t{1} + (round * 48611) % 200000);
    *result = s.ReadAll(buffer.data(), n, In(std::chrono::milliseconds(20000)), "receive");
    if (!result->ok()) return;
    for (size_t i = 0; i < n; ++i) {
      if (buffer[i] != Pattern(got + i, seed)) {
        *result = absl::DataLossError("byte " + std::to_string(got + i) + " differs");
        return;
      }
    }
    got += n;
    ++round;
  }
}

absl::Status BothWaysAtOnce(StreamPair& p, size_t bytes) {
  absl::Status up_sent, up_got, down_sent, down_got;
  std::thread a([&] { SendPattern(*p.client, bytes, 1, &up_sent); });
  std::thread b([&] { ReceivePattern(*p.server, bytes, 1, &up_got); });
  std::thread c([&] { SendPattern(*p.server, bytes, 2, &down_sent); });
  std::thread d([&] { ReceivePattern(*p.client, bytes, 2, &down_got); });
  a.join();
  b.join();
  c.join();
  d.join();
  for (const absl::Status* s : {&up_sent, &up_got, &down_sent, &down_got}) {
    if (!s->ok()) return *s;
  }
  return absl::OkStatus();
}

}  // namespace psflow::testing
