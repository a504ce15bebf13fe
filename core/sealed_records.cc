#include "core/sealed_records.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/openssl_errors.h"
#include "core/socket.h"
#include "core/status_macros.h"

namespace psflow {
namespace {

const EVP_CIPHER* EvpCipher(SealCipher cipher) {
  switch (cipher) {
    case SealCipher::kAes128Gcm:
      return EVP_aes_128_gcm();
    case SealCipher::kAes256Gcm:
      return EVP_aes_256_gcm();
    case SealCipher::kChaCha20Poly1305:
      return EVP_chacha20_poly1305();
  }
  return nullptr;
}

size_t KeyBytes(SealCipher cipher) { return cipher == SealCipher::kAes128Gcm ? 16 : 32; }

constexpr size_t kIvBytes = 12;

// HKDF-Expand (SHA-256) of `secret` with info "psflow sealed records, epoch " and the epoch as 8
// big-endian bytes: the epoch's key, then its IV.
absl::Status ExpandEpoch(absl::string_view secret, uint64_t epoch, unsigned char* out,
                         size_t size) {
  std::string info = "psflow sealed records, epoch ";
  for (int i = 7; i >= 0; --i) info.push_back(static_cast<char>((epoch >> (8 * i)) & 0xff));
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, "HKDF", nullptr);
  EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  if (ctx == nullptr) return absl::InternalError("HKDF: " + OpenSslErrors());
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0),
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<char*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info.data(), info.size()),
      OSSL_PARAM_construct_end()};
  const int ok = EVP_KDF_derive(ctx, out, size, params);
  EVP_KDF_CTX_free(ctx);
  if (ok != 1) return absl::InternalError("HKDF: " + OpenSslErrors());
  return absl::OkStatus();
}

uint32_t BigEndian32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

}  // namespace

struct SealedDirection::Cipher {
  EVP_CIPHER_CTX* ctx = nullptr;
  unsigned char iv[kIvBytes] = {};
  ~Cipher() { EVP_CIPHER_CTX_free(ctx); }
};

SealedDirection::SealedDirection(Role role, SealCipher cipher, std::string secret,
                                 uint64_t records_per_epoch)
    : role_(role),
      cipher_(cipher),
      secret_(std::move(secret)),
      records_per_epoch_(records_per_epoch),
      state_(std::make_unique<Cipher>()) {}
SealedDirection::SealedDirection(SealedDirection&&) noexcept = default;
SealedDirection& SealedDirection::operator=(SealedDirection&&) noexcept = default;
SealedDirection::~SealedDirection() { OPENSSL_cleanse(secret_.data(), secret_.size()); }

absl::StatusOr<SealedDirection> SealedDirection::Make(Role role, SealCipher cipher,
                                                      absl::string_view secret,
                                                      uint64_t records_per_epoch) {
  if (records_per_epoch == 0) {
    return absl::InvalidArgumentError("sealed records: an epoch of 0 records");
  }
  if (secret.size() != kSealedSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat("sealed records: a secret of ", secret.size(),
                                                   " bytes (", kSealedSecretBytes, " wanted)"));
  }
  SealedDirection d(role, cipher, std::string(secret), records_per_epoch);
  d.state_->ctx = EVP_CIPHER_CTX_new();
  if (d.state_->ctx == nullptr) return absl::InternalError("sealed records: " + OpenSslErrors());
  RETURN_IF_ERROR(d.EnterEpoch());
  return d;
}

absl::Status SealedDirection::EnterEpoch() {
  const size_t key_bytes = KeyBytes(cipher_);
  unsigned char material[32 + kIvBytes];
  RETURN_IF_ERROR(
      ExpandEpoch(secret_, records_ / records_per_epoch_, material, key_bytes + kIvBytes));
  const int enc = role_ == Role::kSeal ? 1 : 0;
  const bool ok =
      EVP_CipherInit_ex(state_->ctx, EvpCipher(cipher_), nullptr, nullptr, nullptr, enc) == 1 &&
      EVP_CIPHER_CTX_ctrl(state_->ctx, EVP_CTRL_AEAD_SET_IVLEN, kIvBytes, nullptr) == 1 &&
      EVP_CipherInit_ex(state_->ctx, nullptr, nullptr, material, nullptr, enc) == 1;
  std::memcpy(state_->iv, material + key_bytes, kIvBytes);
  OPENSSL_cleanse(material, sizeof(material));
  if (!ok) return absl::InternalError("sealed records: " + OpenSslErrors());
  return absl::OkStatus();
}

void SealedDirection::Nonce(unsigned char (&nonce)[12]) const {
  std::memcpy(nonce, state_->iv, kIvBytes);
  const uint64_t n = records_ % records_per_epoch_;
  for (int i = 0; i < 8; ++i) nonce[kIvBytes - 1 - i] ^= static_cast<unsigned char>(n >> (8 * i));
}

absl::Status SealedDirection::Seal(std::span<const iovec> plain, char* out) {
  const size_t size = TotalBytes(plain);
  if (size == 0 || size > kMaxSealedRecord) {
    return absl::InvalidArgumentError(absl::StrCat("sealed records: a record of ", size, " bytes"));
  }
  if (records_ % records_per_epoch_ == 0 && records_ > 0) RETURN_IF_ERROR(EnterEpoch());
  out[0] = static_cast<char>(size >> 24);
  out[1] = static_cast<char>(size >> 16);
  out[2] = static_cast<char>(size >> 8);
  out[3] = static_cast<char>(size);
  unsigned char nonce[kIvBytes];
  Nonce(nonce);
  auto* u = reinterpret_cast<unsigned char*>(out);
  ERR_clear_error();
  int len = 0;
  bool ok = EVP_EncryptInit_ex(state_->ctx, nullptr, nullptr, nullptr, nonce) == 1 &&
            EVP_EncryptUpdate(state_->ctx, nullptr, &len, u, kSealedHeaderBytes) == 1;
  unsigned char* at = u + kSealedHeaderBytes;
  for (const iovec& p : plain) {
    if (!ok || p.iov_len == 0) continue;
    ok = EVP_EncryptUpdate(state_->ctx, at, &len, static_cast<const unsigned char*>(p.iov_base),
                           static_cast<int>(p.iov_len)) == 1;
    at += len;
  }
  ok = ok && EVP_EncryptFinal_ex(state_->ctx, at, &len) == 1 &&
       EVP_CIPHER_CTX_ctrl(state_->ctx, EVP_CTRL_AEAD_GET_TAG, kSealedTagBytes,
                           u + kSealedHeaderBytes + size) == 1;
  if (!ok) return absl::InternalError("sealed records: " + OpenSslErrors());
  ++records_;
  return absl::OkStatus();
}

absl::Status SealedDirection::Open(const char (&header)[kSealedHeaderBytes],
                                   std::span<const iovec> data,
                                   const char (&tag)[kSealedTagBytes]) {
  ASSIGN_OR_RETURN(const size_t size, SealedRecordLength(header));
  const size_t total = TotalBytes(data);
  if (total != size) {
    return absl::InternalError(
        absl::StrCat("sealed records: ", total, " bytes to open a record of ", size));
  }
  if (records_ % records_per_epoch_ == 0 && records_ > 0) RETURN_IF_ERROR(EnterEpoch());
  unsigned char nonce[kIvBytes];
  Nonce(nonce);
  unsigned char tag_copy[kSealedTagBytes];
  std::memcpy(tag_copy, tag, kSealedTagBytes);
  ERR_clear_error();
  int len = 0;
  bool ok =
      EVP_DecryptInit_ex(state_->ctx, nullptr, nullptr, nullptr, nonce) == 1 &&
      EVP_DecryptUpdate(state_->ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(header),
                        kSealedHeaderBytes) == 1;
  // Piece by piece, in place; GCM and Poly1305 carry a partial block across calls, so a piece
  // may end anywhere.
  for (const iovec& p : data) {
    if (!ok || p.iov_len == 0) continue;
    auto* u = static_cast<unsigned char*>(p.iov_base);
    ok = EVP_DecryptUpdate(state_->ctx, u, &len, u, static_cast<int>(p.iov_len)) == 1 &&
         static_cast<size_t>(len) == p.iov_len;
  }
  ok =
      ok && EVP_CIPHER_CTX_ctrl(state_->ctx, EVP_CTRL_AEAD_SET_TAG, kSealedTagBytes, tag_copy) == 1;
  unsigned char none[16];
  if (ok && EVP_DecryptFinal_ex(state_->ctx, none, &len) == 1) {
    ++records_;
    return absl::OkStatus();
  }
  for (const iovec& p : data) std::memset(p.iov_base, 0, p.iov_len);
  ERR_clear_error();
  return absl::DataLossError(
      absl::StrCat("record ", records_,
                   " does not open: its bytes were altered, cut or reordered, or the "
                   "ends hold different keys"));
}

absl::StatusOr<size_t> SealedRecordLength(const char (&header)[kSealedHeaderBytes]) {
  const uint32_t size = BigEndian32(header);
  if (size == 0 || size > kMaxSealedRecord) {
    return absl::DataLossError(absl::StrCat("a record of ", size, " bytes (1 to ", kMaxSealedRecord,
                                            " allowed): not a sealed record"));
  }
  return size;
}

SealedWriter::SealedWriter(SealedDirection sealer)
    : sealer_(std::move(sealer)), out_(kSealedSendBatch) {}

absl::Status SealedWriter::SealPending(Sink send) {
  if (pending_bytes_ == 0) return absl::OkStatus();
  if (used_ + pending_bytes_ + kSealedOverhead > out_.size()) {
    RETURN_IF_ERROR(send(out_.data(), used_));
    used_ = 0;
  }
  RETURN_IF_ERROR(sealer_.Seal(pending_, out_.data() + used_));
  used_ += pending_bytes_ + kSealedOverhead;
  pending_.clear();
  pending_bytes_ = 0;
  return absl::OkStatus();
}

absl::Status SealedWriter::Write(std::span<const iovec> pieces, Sink send) {
  for (const iovec& piece : pieces) {
    const char* p = static_cast<const char*>(piece.iov_base);
    size_t left = piece.iov_len;
    const bool own = left >= kSealedOwnRecordBytes;
    if (own) RETURN_IF_ERROR(SealPending(send));
    while (left > 0) {
      const size_t take = std::min(left, kMaxSealedRecord - pending_bytes_);
      pending_.push_back({const_cast<char*>(p), take});
      pending_bytes_ += take;
      p += take;
      left -= take;
      if (pending_bytes_ == kMaxSealedRecord) RETURN_IF_ERROR(SealPending(send));
    }
    if (own) RETURN_IF_ERROR(SealPending(send));
  }
  RETURN_IF_ERROR(SealPending(send));
  const size_t used = std::exchange(used_, 0);
  return used > 0 ? send(out_.data(), used) : absl::OkStatus();
}

SealedReader::SealedReader(SealedDirection opener) : opener_(std::move(opener)), ahead_(kAhead) {}

namespace {

// The first `n` bytes of `pieces` into `out` (as pieces, none empty), and `pieces` advanced past
// them (the first iovec adjusted in place; fully used ones dropped).
std::span<iovec> Take(std::span<iovec> pieces, size_t n, std::vector<iovec>* out) {
  while (n > 0 && !pieces.empty()) {
    iovec& front = pieces.front();
    const size_t k = std::min(n, front.iov_len);
    if (k > 0 && out != nullptr) out->push_back({front.iov_base, k});
    front.iov_base = static_cast<char*>(front.iov_base) + k;
    front.iov_len -= k;
    n -= k;
    if (front.iov_len == 0) pieces = pieces.subspan(1);
  }
  while (!pieces.empty() && pieces.front().iov_len == 0) pieces = pieces.subspan(1);
  return pieces;
}

}  // namespace

absl::Status SealedReader::Fill(std::vector<iovec>& need, Source source, absl::string_view what,
                                size_t to_go, bool* ended) {
  const size_t wanted = TotalBytes(need);
  std::span<iovec> rest(need);
  size_t got = 0;
  while (ahead_begin_ < ahead_end_ && !rest.empty()) {
    const size_t n = std::min(ahead_end_ - ahead_begin_, rest.front().iov_len);
    std::memcpy(rest.front().iov_base, ahead_.data() + ahead_begin_, n);
    ahead_begin_ += n;
    got += n;
    rest = Take(rest, n, nullptr);
  }
  if (ahead_begin_ == ahead_end_) ahead_begin_ = ahead_end_ = 0;
  while (!rest.empty()) {
    // Everything ahead was used, so the whole ahead buffer is free; it takes bytes only once
    // every piece of `need` is full.
    source_pieces_.assign(rest.begin(), rest.end());
    source_pieces_.push_back({ahead_.data(), kAhead});
    absl::StatusOr<size_t> n = source(std::span<iovec>(source_pieces_));
    if (!n.ok()) {
      if (absl::IsDeadlineExceeded(n.status())) {
        return absl::DeadlineExceededError(absl::StrCat(
            what, ": it did not all arrive by the deadline (", to_go, " bytes to go)"));
      }
      return n.status();
    }
    if (*n == 0) {
      if (ended != nullptr && got == 0 && wanted > 0) {
        *ended = true;
        return absl::OkStatus();
      }
      return absl::UnavailableError(
          absl::StrCat(what, ": connection closed with ", to_go, " bytes to go"));
    }
    const size_t into_need = std::min(*n, TotalBytes(rest));
    got += into_need;
    rest = Take(rest, into_need, nullptr);
    ahead_end_ = *n - into_need;
  }
  return absl::OkStatus();
}

absl::Status SealedReader::Read(std::span<iovec> pieces, Source source, absl::string_view what,
                                bool* ended) {
  if (!failed_.ok()) return failed_;
  absl::Status s = ReadRecords(pieces, source, what, ended);
  if (!s.ok()) {
    failed_ = s;
    plain_begin_ = plain_end_ = ahead_begin_ = ahead_end_ = 0;
  }
  return s;
}

absl::Status SealedReader::ReadRecords(std::span<iovec> caller, Source source,
                                       absl::string_view what, bool* ended) {
  // A copy of the caller's iovecs, consumed as bytes are handed out.
  caller_.assign(caller.begin(), caller.end());
  std::span<iovec> pieces = Take(std::span<iovec>(caller_), 0, nullptr);
  const size_t total = TotalBytes(pieces);
  size_t done = 0;
  auto failed = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
  };
  while (!pieces.empty()) {
    if (plain_begin_ < plain_end_) {
      size_t n = std::min(plain_end_ - plain_begin_, TotalBytes(pieces));
      record_.clear();
      pieces = Take(pieces, n, &record_);
      for (const iovec& p : record_) {
        std::memcpy(p.iov_base, plain_.get() + plain_begin_, p.iov_len);
        plain_begin_ += p.iov_len;
      }
      done += n;
      continue;
    }
    char header[kSealedHeaderBytes];
    need_.assign(1, iovec{header, sizeof(header)});
    bool at_end = false;
    RETURN_IF_ERROR(
        Fill(need_, source, what, total - done, done == 0 && ended != nullptr ? &at_end : nullptr));
    if (at_end) {
      *ended = true;
      return absl::OkStatus();
    }
    absl::StatusOr<size_t> length = SealedRecordLength(header);
    if (!length.ok()) return failed(length.status());
    char tag[kSealedTagBytes];
    // A record that fits lands where it is wanted; a longer one in plain_, handed out in parts.
    record_.clear();
    const bool direct = *length <= TotalBytes(pieces);
    if (direct) {
      pieces = Take(pieces, *length, &record_);
      done += *length;
    } else {
      if (plain_ == nullptr) plain_ = std::make_unique_for_overwrite<char[]>(kMaxSealedRecord);
      record_.push_back({plain_.get(), *length});
      plain_begin_ = 0;
      plain_end_ = *length;
    }
    need_.assign(record_.begin(), record_.end());
    need_.push_back({tag, sizeof(tag)});
    RETURN_IF_ERROR(Fill(need_, source, what, total - done + (direct ? *length : 0), nullptr));
    if (absl::Status s = opener_.Open(header, record_, tag); !s.ok()) return failed(s);
  }
  return absl::OkStatus();
}

}  // namespace psflow
