// Sealed records (core/sealed_records.h): the exact bytes against an independent implementation,
// the round trip in any split, and every way a record stream can be wrong.
#include "core/sealed_records.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

using Role = SealedDirection::Role;

std::string Secret(char first = 0) {
  std::string s(kSealedSecretBytes, '\0');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(first + i);
  return s;
}

SealedDirection Make(Role role, SealCipher cipher = SealCipher::kAes128Gcm,
                     const std::string& secret = Secret(),
                     uint64_t per_epoch = kSealedRecordsPerEpoch) {
  absl::StatusOr<SealedDirection> d = SealedDirection::Make(role, cipher, secret, per_epoch);
  EXPECT_TRUE(d.ok()) << d.status();
  return *std::move(d);
}

// The records of `plain`, one per element, as the wire holds them.
std::string SealAll(SealedDirection& sealer, const std::vector<std::string>& plain) {
  std::string wire;
  for (const std::string& p : plain) {
    std::string record(p.size() + kSealedOverhead, '\0');
    iovec piece{const_cast<char*>(p.data()), p.size()};
    EXPECT_TRUE(sealer.Seal(std::span<const iovec>(&piece, 1), record.data()).ok());
    wire += record;
  }
  return wire;
}

// A source over `wire` that hands out at most `step` bytes per call (the whole rest with 0),
// remembering where each call's first piece pointed.
struct MemorySource {
  MemorySource(std::string w, size_t s) : wire(std::move(w)), step(s) {}
  std::string wire;
  size_t step;
  size_t at = 0;
  std::vector<const void*> first_pieces;
  absl::StatusOr<size_t> operator()(std::span<iovec> pieces) {
    first_pieces.push_back(pieces.front().iov_base);
    size_t budget = step == 0 ? wire.size() - at : std::min(step, wire.size() - at);
    size_t n = 0;
    for (const iovec& p : pieces) {
      const size_t k = std::min(budget, p.iov_len);
      std::memcpy(p.iov_base, wire.data() + at, k);
      at += k;
      n += k;
      budget -= k;
    }
    return n;
  }
};

absl::Status ReadInto(SealedReader& reader, MemorySource& source, std::string& out,
                      bool* ended = nullptr) {
  iovec piece{out.data(), out.size()};
  return reader.Read(
      std::span<iovec>(&piece, 1), [&](std::span<iovec> p) { return source(p); }, "r", ended);
}

// Records sealed as an independent implementation (Python's `cryptography`: HKDFExpand with
// SHA-256, AESGCM, ChaCha20Poly1305) seals them, from the secret 00 01 .. 1f.
TEST(SealedRecords, BytesAreThoseOfTheSpecification) {
  struct Case {
    SealCipher cipher;
    uint64_t per_epoch;
    std::vector<std::string> hex;  // records 0, 1, ... of "psflow", "sealed"
  };
  const Case cases[] = {
      {SealCipher::kAes128Gcm,
       kSealedRecordsPerEpoch,
       {"00000006ba6e4d09b7c94272e173bab62f32925341327af3a42c",
        "000000065b46d9263480dee5e7d8b48d5f75305f5cd0fc2224ec"}},
      // One record per epoch: record 1 is record 0 of epoch 1, under the next key.
      {SealCipher::kAes128Gcm,
       1,
       {"00000006ba6e4d09b7c94272e173bab62f32925341327af3a42c",
        "00000006c0085053503584760e7a58161a397f8661adf8aeb8b3"}},
      {SealCipher::kAes256Gcm,
       kSealedRecordsPerEpoch,
       {"000000064d869c72cf30c41a65982e6944d54022f5ca5c29e702"}},
      {SealCipher::kChaCha20Poly1305,
       kSealedRecordsPerEpoch,
       {"00000006e742a9ca4aa8b2345c361433a6ab33fc76324cec623d"}},
  };
  const std::vector<std::string> plain = {"psflow", "sealed"};
  for (const Case& c : cases) {
    SealedDirection sealer = Make(Role::kSeal, c.cipher, Secret(), c.per_epoch);
    SealedDirection opener = Make(Role::kOpen, c.cipher, Secret(), c.per_epoch);
    for (size_t i = 0; i < c.hex.size(); ++i) {
      std::string record = SealAll(sealer, {plain[i]});
      EXPECT_EQ(absl::BytesToHexString(record), c.hex[i]) << "record " << i;
      char header[kSealedHeaderBytes], tag[kSealedTagBytes];
      std::memcpy(header, record.data(), sizeof(header));
      std::memcpy(tag, record.data() + record.size() - sizeof(tag), sizeof(tag));
      iovec data{record.data() + kSealedHeaderBytes, plain[i].size()};
      ASSERT_TRUE(opener.Open(header, std::span<const iovec>(&data, 1), tag).ok())
          << "record " << i;
      EXPECT_EQ(std::string(static_cast<char*>(data.iov_base), data.iov_len), plain[i]);
    }
  }
}

// Records of many sizes (some longer than a read, some spanning reads), read in other sizes, the
// source handing out the wire in pieces of several sizes: every byte as written, for each cipher
// and across epochs.
TEST(SealedRecords, ReadsGiveEveryByteInAnySplit) {
  std::mt19937 rng(7);
  for (SealCipher cipher :
       {SealCipher::kAes128Gcm, SealCipher::kAes256Gcm, SealCipher::kChaCha20Poly1305}) {
    for (size_t step : {size_t{0}, size_t{1}, size_t{3000}, size_t{70000}}) {
      SealedDirection sealer = Make(Role::kSeal, cipher, Secret(), 3);
      std::vector<std::string> records;
      std::string stream;
      for (size_t size : {size_t{1}, size_t{5}, size_t{4096}, kMaxSealedRecord, size_t{100},
                          size_t{70000}, size_t{2}, kMaxSealedRecord - 1}) {
        std::string r(size, '\0');
        for (char& c : r) c = static_cast<char>(rng());
        stream += r;
        records.push_back(r);
      }
      MemorySource source{SealAll(sealer, records), step};
      SealedReader reader(Make(Role::kOpen, cipher, Secret(), 3));
      std::string got;
      for (size_t size : {size_t{3}, size_t{1}, size_t{4096}, size_t{300000}, size_t{7}}) {
        std::string part(std::min(size, stream.size() - got.size()), '\0');
        ASSERT_TRUE(ReadInto(reader, source, part).ok());
        got += part;
      }
      std::string rest(stream.size() - got.size(), '\0');
      ASSERT_TRUE(ReadInto(reader, source, rest).ok());
      got += rest;
      EXPECT_EQ(got, stream) << "step " << step;
      EXPECT_FALSE(reader.buffered());
    }
  }
}

// A read that wants a whole record gets it straight from the source into its own buffer.
TEST(SealedRecords, ARecordThatFitsLandsInTheCallersBuffer) {
  SealedDirection sealer = Make(Role::kSeal);
  std::string big(kMaxSealedRecord, 'b');
  MemorySource source{SealAll(sealer, {"small", big}), 0};
  SealedReader reader(Make(Role::kOpen));
  std::string first(5, '\0');
  ASSERT_TRUE(ReadInto(reader, source, first).ok());
  std::string second(kMaxSealedRecord, '\0');
  source.first_pieces.clear();
  ASSERT_TRUE(ReadInto(reader, source, second).ok());
  EXPECT_EQ(second, big);
  ASSERT_EQ(source.first_pieces.size(), 1u);
  const char* at = static_cast<const char*>(source.first_pieces[0]);
  EXPECT_GE(at, second.data());  // the bytes the 4 KiB taken ahead did not hold
  EXPECT_LT(at, second.data() + second.size());
}

// One byte changed anywhere in a record, records swapped or repeated, another key, another
// epoch length: DATA_LOSS at that record, never its bytes as if they were right.
TEST(SealedRecords, AnAlteredStreamFailsAtTheRecordItAltered) {
  SealedDirection sealer = Make(Role::kSeal);
  const std::string a(100, 'a'), b(200, 'b');
  const std::string wire = SealAll(sealer, {a, b});
  const std::string record0 = wire.substr(0, a.size() + kSealedOverhead);
  const std::string record1 = wire.substr(record0.size());
  struct Case {
    std::string name;
    std::string wire;
    std::string secret = Secret();
    uint64_t per_epoch = kSealedRecordsPerEpoch;
    std::string message;
  };
  std::vector<Case> cases = {
      {"swapped", record1 + record0, Secret(), kSealedRecordsPerEpoch, "record 0 does not open"},
      {"repeated", record0 + record0, Secret(), kSealedRecordsPerEpoch, "record 1 does not open"},
      {"another key", wire, Secret(1), kSealedRecordsPerEpoch, "record 0 does not open"},
      {"another epoch length", wire, Secret(), 1, "record 1 does not open"},
  };
  // (A length made longer than the stream is a cut stream: TheEndAndTheDeadlineAreToldApart.)
  std::string too_long = wire;
  too_long[0] ^= 0x01;
  cases.push_back({"byte 0", too_long, Secret(), kSealedRecordsPerEpoch, "not a sealed record"});
  for (size_t i : {size_t{3}, size_t{4}, size_t{50}, a.size() + 4, a.size() + 19}) {
    std::string w = wire;
    w[i] ^= 0x01;
    cases.push_back({"byte " + std::to_string(i), w, Secret(), kSealedRecordsPerEpoch,
                     "record 0 does not open"});
  }
  std::string w = wire;
  w[record0.size() + 10] ^= 0x80;
  cases.push_back(
      {"record 1's byte 10", w, Secret(), kSealedRecordsPerEpoch, "record 1 does not open"});
  for (const Case& c : cases) {
    MemorySource source{c.wire, 0};
    SealedReader reader(Make(Role::kOpen, SealCipher::kAes128Gcm, c.secret, c.per_epoch));
    std::string got(a.size() + b.size(), '\0');
    const absl::Status s = ReadInto(reader, source, got);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.name << ": " << s;
    EXPECT_TRUE(absl::StrContains(s.message(), c.message)) << c.name << ": " << s;
  }
}

// A header announcing no bytes or more than a record may hold is refused before any is read.
TEST(SealedRecords, AHeaderOutOfRangeIsRefused) {
  for (uint32_t size : {0u, uint32_t{kMaxSealedRecord} + 1, 0xffffffffu}) {
    std::string wire(64, 'x');
    for (int i = 0; i < 4; ++i) wire[i] = static_cast<char>(size >> (24 - 8 * i));
    MemorySource source{wire, 0};
    SealedReader reader(Make(Role::kOpen));
    std::string got(10, '\0');
    const absl::Status s = ReadInto(reader, source, got);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("a record of ", size, " bytes"))) << s;
  }
}

// The stream's end: before a record, the end (when the caller allows it); inside one, an error
// that says how many of the caller's bytes are missing; a source with nothing in time, a
// deadline error saying the same.
TEST(SealedRecords, TheEndAndTheDeadlineAreToldApart) {
  SealedDirection sealer = Make(Role::kSeal);
  const std::string wire = SealAll(sealer, {std::string(1000, 'x')});
  {
    MemorySource source{"", 0};
    SealedReader reader(Make(Role::kOpen));
    std::string got(4, '\0');
    bool ended = false;
    EXPECT_TRUE(ReadInto(reader, source, got, &ended).ok());
    EXPECT_TRUE(ended);
  }
  for (size_t cut : {size_t{2}, size_t{500}, wire.size() - 1}) {
    MemorySource source{wire.substr(0, cut), 0};
    SealedReader reader(Make(Role::kOpen));
    std::string got(600, '\0');
    bool ended = false;
    const absl::Status s = ReadInto(reader, source, got, &ended);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "closed with 600 bytes to go")) << s;
    EXPECT_FALSE(ended);
  }
  {
    // 600 of the record's 1000 bytes, then 500: 400 of them and the end.
    MemorySource source{wire, 0};
    SealedReader reader(Make(Role::kOpen));
    std::string got(600, '\0');
    ASSERT_TRUE(ReadInto(reader, source, got).ok());
    EXPECT_TRUE(reader.buffered());
    got.assign(500, '\0');
    const absl::Status s = ReadInto(reader, source, got);
    EXPECT_TRUE(absl::StrContains(s.message(), "closed with 100 bytes to go")) << s;
  }
  {
    SealedReader reader(Make(Role::kOpen));
    char byte;
    iovec piece{&byte, 1};
    const absl::Status s = reader.Read(
        std::span<iovec>(&piece, 1),
        [](std::span<iovec>) -> absl::StatusOr<size_t> {
          return absl::DeadlineExceededError("late");
        },
        "r");
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "(1 bytes to go)")) << s;
  }
}

// The record lengths of a wire of records.
std::vector<size_t> RecordLengths(const std::string& wire) {
  std::vector<size_t> out;
  for (size_t at = 0; at + kSealedHeaderBytes <= wire.size();) {
    char header[kSealedHeaderBytes];
    std::memcpy(header, wire.data() + at, sizeof(header));
    absl::StatusOr<size_t> n = SealedRecordLength(header);
    if (!n.ok()) break;
    out.push_back(*n);
    at += *n + kSealedOverhead;
  }
  return out;
}

// A writer's cut: small pieces share records, a piece of 4 KiB or more has records of its own;
// every send at most a batch. Read back in the writer's own pieces, each record lands straight in
// them, and in any other split the bytes are the same.
TEST(SealedRecords, AWriterCutsSmallPiecesTogetherAndLargeOnesApart) {
  struct Case {
    std::vector<size_t> pieces;
    std::vector<size_t> records;
  };
  const std::vector<size_t> ten_rows(10, 800);
  std::vector<size_t> rows_and_payload = {16, 100, 64 << 10};
  rows_and_payload.insert(rows_and_payload.end(), ten_rows.begin(), ten_rows.end());
  rows_and_payload.push_back(5000);
  const Case cases[] = {
      {rows_and_payload, {116, 64 << 10, 8000, 5000}},
      {{600 << 10}, {kMaxSealedRecord, kMaxSealedRecord, 88 << 10}},
      {std::vector<size_t>(400, 1000), {kMaxSealedRecord, 400000 - kMaxSealedRecord}},
      {{0, 3, 0, 4096, 0}, {3, 4096}},
  };
  std::mt19937 rng(3);
  for (const Case& c : cases) {
    std::vector<std::string> buffers;
    std::vector<iovec> pieces;
    std::string stream;
    for (size_t n : c.pieces) {
      std::string b(n, '\0');
      for (char& ch : b) ch = static_cast<char>(rng());
      stream += b;
      buffers.push_back(std::move(b));
    }
    for (std::string& b : buffers) pieces.push_back({b.data(), b.size()});
    SealedWriter writer(Make(Role::kSeal));
    std::string wire;
    size_t most = 0;
    ASSERT_TRUE(writer
                    .Write(pieces,
                           [&](const char* data, size_t size) {
                             wire.append(data, size);
                             most = std::max(most, size);
                             return absl::OkStatus();
                           })
                    .ok());
    EXPECT_EQ(RecordLengths(wire), c.records);
    EXPECT_LE(most, kSealedSendBatch);
    // Into pieces shaped as the writer's: every record straight into them.
    std::vector<std::string> got(buffers.size());
    std::vector<iovec> into;
    for (size_t i = 0; i < buffers.size(); ++i) {
      got[i].assign(buffers[i].size(), '\0');
      into.push_back({got[i].data(), got[i].size()});
    }
    MemorySource source(wire, 0);
    SealedReader reader(Make(Role::kOpen));
    ASSERT_TRUE(reader
                    .Read(
                        into, [&](std::span<iovec> p) { return source(p); }, "r")
                    .ok());
    EXPECT_EQ(got, buffers);
    EXPECT_FALSE(reader.buffered());
  }
}

// After any error a reader is done: the same error again, nothing buffered handed out.
TEST(SealedRecords, AReaderStaysFailedAfterAnError) {
  SealedDirection sealer = Make(Role::kSeal);
  const std::string wire = SealAll(sealer, {std::string(1000, 'x'), std::string(10, 'y')});
  for (size_t cut : {size_t{2}, size_t{500}}) {
    // The source gives `cut` bytes, then nothing in time, then the rest.
    size_t at = 0;
    bool late = false;
    auto source = [&](std::span<iovec> pieces) -> absl::StatusOr<size_t> {
      if (at == cut && !late) {
        late = true;
        return absl::DeadlineExceededError("late");
      }
      size_t n = 0;
      const size_t end = late ? wire.size() : cut;
      for (const iovec& p : pieces) {
        const size_t k = std::min(p.iov_len, end - at);
        std::memcpy(p.iov_base, wire.data() + at, k);
        at += k;
        n += k;
      }
      return n;
    };
    SealedReader reader(Make(Role::kOpen));
    std::string got(600, '\0');
    iovec piece{got.data(), got.size()};
    const absl::Status first = reader.Read(std::span<iovec>(&piece, 1), source, "r");
    EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
    const absl::Status again = reader.Read(std::span<iovec>(&piece, 1), source, "r");
    EXPECT_EQ(again, first);
    EXPECT_FALSE(reader.buffered());
  }
  // A record that does not open leaves zeros where its bytes were to land, not what an attacker
  // flipped.
  std::string altered = wire;
  altered[kSealedHeaderBytes + 7] ^= 0x40;
  MemorySource source(altered, 0);
  SealedReader reader(Make(Role::kOpen));
  std::string got(1000, '?');
  const absl::Status s = ReadInto(reader, source, got);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(got, std::string(1000, '\0'));
  EXPECT_EQ(ReadInto(reader, source, got), s);
}

// Keys change at the epoch's first record on both ends: a record altered there, or just before,
// fails as itself, and the records around it open.
TEST(SealedRecords, TheEpochBoundaryHoldsBothWays) {
  for (size_t altered : {size_t{1}, size_t{2}}) {
    SealedDirection sealer = Make(Role::kSeal, SealCipher::kAes128Gcm, Secret(), 2);
    const std::vector<std::string> plain = {"r0", "r1", "r2", "r3"};
    std::string wire = SealAll(sealer, plain);
    const size_t record = 2 + kSealedOverhead;
    wire[altered * record + kSealedHeaderBytes] ^= 1;
    MemorySource source(wire, 0);
    SealedReader reader(Make(Role::kOpen, SealCipher::kAes128Gcm, Secret(), 2));
    std::string got(2 * altered, '\0');
    ASSERT_TRUE(ReadInto(reader, source, got).ok());
    got.assign(2, '\0');
    const absl::Status s = ReadInto(reader, source, got);
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("record ", altered, " does not open")))
        << s;
  }
}

TEST(SealedRecords, ASecretOfTheWrongSizeIsRefused) {
  absl::StatusOr<SealedDirection> d =
      SealedDirection::Make(Role::kSeal, SealCipher::kAes128Gcm, "short");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow
