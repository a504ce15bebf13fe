// The records of a bulk connection under TLS once its handshake is done (core/bulk_stream.h):
// psflow's own record layer, keyed from the TLS session, as DTLS-SRTP keys SRTP (RFC 5764) and
// kernel TLS takes over a session's records. It exists so that a record is decrypted where its
// bytes are meant to land (the ps's staging area, the parameter buffer) and encrypted straight
// from the caller's buffer: OpenSSL's record layer copies each record once more on both sides,
// and its one connection object serializes a reader's decryption with a writer's encryption.
//
// A record: a 4-byte big-endian length L (1..kMaxSealedRecord), L bytes of ciphertext, a 16-byte
// tag. The cipher is the AEAD the handshake chose (AES-128-GCM, AES-256-GCM or
// ChaCha20-Poly1305); the header is the additional data. Each direction has its own secret
// (32 bytes of the TLS exporter, core/bulk_stream.cc) and counts its records: record n of epoch e
// is sealed with the key and IV HKDF-SHA256 expands from the secret for epoch e, the nonce being
// the IV with n (big-endian) XORed into its last 8 bytes, as TLS 1.3 forms nonces. An epoch is
// kSealedRecordsPerEpoch records, at most 16 GiB under one key: far inside AES-GCM's safety limit
// (RFC 8446 section 5.5: about 2^38 bytes), and both ends move to the next key at the same record
// with no message. A record that is cut, too long, reordered, replayed or altered fails its tag:
// DATA_LOSS, and the connection is done with.
#ifndef PSFLOW_CORE_SEALED_RECORDS_H_
#define PSFLOW_CORE_SEALED_RECORDS_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace psflow {

enum class SealCipher { kAes128Gcm, kAes256Gcm, kChaCha20Poly1305 };

inline constexpr size_t kSealedHeaderBytes = 4;
inline constexpr size_t kSealedTagBytes = 16;
inline constexpr size_t kSealedOverhead = kSealedHeaderBytes + kSealedTagBytes;
inline constexpr size_t kMaxSealedRecord = 256 << 10;
inline constexpr uint64_t kSealedRecordsPerEpoch = uint64_t{1} << 16;
inline constexpr size_t kSealedSecretBytes = 32;

// One direction's keys and record count: seals on the sending end, opens on the receiving end.
// Not thread-safe (a direction has one writer or one reader at a time).
class SealedDirection {
 public:
  enum class Role { kSeal, kOpen };
  // INVALID_ARGUMENT unless `secret` has kSealedSecretBytes bytes; INTERNAL if OpenSSL fails.
  // `records_per_epoch`: kSealedRecordsPerEpoch but in tests.
  static absl::StatusOr<SealedDirection> Make(Role role, SealCipher cipher,
                                              absl::string_view secret,
                                              uint64_t records_per_epoch = kSealedRecordsPerEpoch);
  SealedDirection(SealedDirection&&) noexcept;
  SealedDirection& operator=(SealedDirection&&) noexcept;
  ~SealedDirection();

  // Seals the bytes of `plain`'s pieces, in order (1..kMaxSealedRecord in all), as the next
  // record into out[0, total + kSealedOverhead).
  absl::Status Seal(std::span<const iovec> plain, char* out);
  // Opens the next record in place: `data`'s pieces hold, in order, the L bytes of ciphertext
  // `header` announced, and are left holding the plaintext. When the tag does not match:
  // DATA_LOSS (saying which record), with the pieces zeroed (never bytes an attacker chose).
  absl::Status Open(const char (&header)[kSealedHeaderBytes], std::span<const iovec> data,
                    const char (&tag)[kSealedTagBytes]);

  uint64_t records() const { return records_; }

 private:
  struct Cipher;
  SealedDirection(Role role, SealCipher cipher, std::string secret, uint64_t records_per_epoch);
  // The key and IV of the epoch `records_` is in, set up when an epoch starts.
  absl::Status EnterEpoch();
  void Nonce(unsigned char (&nonce)[12]) const;

  Role role_;
  SealCipher cipher_;
  std::string secret_;
  uint64_t records_per_epoch_;
  uint64_t records_ = 0;  // sealed or opened so far
  std::unique_ptr<Cipher> state_;
};

// The record length a header announces; DATA_LOSS when it is 0 or over kMaxSealedRecord.
absl::StatusOr<size_t> SealedRecordLength(const char (&header)[kSealedHeaderBytes]);

// Pieces of kSealedOwnRecordBytes or more get records of their own (see SealedWriter).
inline constexpr size_t kSealedOwnRecordBytes = 4 << 10;

// Seals a stream's writes. How a write's pieces are cut into records: consecutive small pieces
// share a record while they fit in kMaxSealedRecord; a piece of kSealedOwnRecordBytes or more is
// sealed in records of its own (the last one short). So a reader that reads such a piece by itself
// (a payload after its headers) gets whole records for it, and small pieces (headers, an
// embedding's rows) cost few records. Sealed records are sent in batches of up to
// kSealedSendBatch bytes. Not thread-safe (one writer at a time).
inline constexpr size_t kSealedSendBatch = 2 * (kMaxSealedRecord + kSealedOverhead);
class SealedWriter {
 public:
  // Sends bytes (all of them, or an error).
  using Sink = absl::FunctionRef<absl::Status(const char* data, size_t size)>;

  explicit SealedWriter(SealedDirection sealer);
  // Seals every byte of `pieces` and sends the records; the sink's error, or INTERNAL from
  // OpenSSL. After an error the stream is done with.
  absl::Status Write(std::span<const iovec> pieces, Sink send);

 private:
  // Seals the pending record into out_ (sending out_ first when it would not fit).
  absl::Status SealPending(Sink send);

  SealedDirection sealer_;
  std::vector<char> out_;  // kSealedSendBatch bytes: [0, used_) sealed, not yet sent
  size_t used_ = 0;
  std::vector<iovec> pending_;  // the next record's pieces
  size_t pending_bytes_ = 0;
};

// Reads the plaintext of a sealed record stream. Each record that fits in what a read still
// wants (across its pieces) is received straight into the caller's pieces and opened there; a
// longer one is opened in a buffer of its own and handed out in parts. A read that succeeds gave
// only bytes whose records' tags matched. After any error the reader is done: every later read
// returns the same error (its pieces' bytes are unspecified; a record that failed its tag left
// zeros). At most 4 KiB past the record being read are taken from the source ahead of need (the
// next header, small records), so little is copied twice.
class SealedReader {
 public:
  // Reads into `pieces` some of the bytes the source has: > 0 bytes, 0 at the end of the
  // stream, DEADLINE_EXCEEDED (any message) when none came in time, or another error.
  using Source = absl::FunctionRef<absl::StatusOr<size_t>(std::span<iovec> pieces)>;

  explicit SealedReader(SealedDirection opener);

  // Fills every byte of `pieces`. Errors name `what`: UNAVAILABLE "connection closed with N
  // bytes to go" when the stream ends first (with OK and *ended set, when `ended` is not null
  // and it ends before the first byte, at a record boundary), DEADLINE_EXCEEDED "... (N bytes to
  // go)", DATA_LOSS for a record that does not open; the source's other errors as they are.
  absl::Status Read(std::span<iovec> pieces, Source source, absl::string_view what,
                    bool* ended = nullptr);
  // True while bytes read from the source wait here (so a read needs no wait for the source).
  bool buffered() const {
    return failed_.ok() && (plain_begin_ < plain_end_ || ahead_begin_ < ahead_end_);
  }

 private:
  absl::Status ReadRecords(std::span<iovec> pieces, Source source, absl::string_view what,
                           bool* ended);
  // Fills `need` (consuming it) from the ahead buffer, then from the source, letting the source
  // also fill the ahead buffer's free space (at most kAhead). `to_go`: the caller's bytes still
  // wanted, for the messages.
  absl::Status Fill(std::vector<iovec>& need, Source source, absl::string_view what, size_t to_go,
                    bool* ended);

  static constexpr size_t kAhead = 4 << 10;
  SealedDirection opener_;
  absl::Status failed_;
  std::vector<char> ahead_;  // kAhead bytes: [ahead_begin_, ahead_end_) taken, not yet used
  size_t ahead_begin_ = 0;
  size_t ahead_end_ = 0;
  std::unique_ptr<char[]> plain_;  // kMaxSealedRecord bytes, made on first use: a record's
  size_t plain_begin_ = 0;         // plaintext, [plain_begin_, plain_end_) not yet handed out
  size_t plain_end_ = 0;
  std::vector<iovec> caller_;  // the pieces of the read under way
  std::vector<iovec> record_;  // where the record being read lands
  std::vector<iovec> need_;    // what Fill still has to fill
  std::vector<iovec> source_pieces_;
};

}  // namespace psflow

#endif  // PSFLOW_CORE_SEALED_RECORDS_H_
