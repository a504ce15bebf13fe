#include "worker/data/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "worker/data/input_file.h"

namespace psflow::data {
namespace {

// ZIP's records (PKWARE's APPNOTE.TXT, sections 4.3 and 4.5), each beginning with its signature.
constexpr absl::string_view kEndSignature("PK\x05\x06", 4);
constexpr absl::string_view kZip64LocatorSignature("PK\x06\x07", 4);
constexpr absl::string_view kZip64EndSignature("PK\x06\x06", 4);
constexpr absl::string_view kCentralSignature("PK\x01\x02", 4);
constexpr absl::string_view kLocalSignature("PK\x03\x04", 4);
constexpr uint64_t kEndBytes = 22, kZip64LocatorBytes = 20, kZip64EndBytes = 56;
constexpr uint64_t kCentralBytes = 46, kLocalBytes = 30;
constexpr uint32_t kSaturated32 = 0xFFFFFFFF;

struct ZipEntry {
  std::string name;
  uint16_t flags = 0;
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_offset = 0;
};

struct CentralDirectory {
  std::vector<ZipEntry> entries;
  uint64_t offset = 0;  // where it begins: every member's data lies before it
};

// The ZIP64 extra field (id 1) of a central directory entry: the 64-bit values of the fields
// that hold 0xFFFFFFFF, in the order uncompressed, compressed, local header offset.
absl::Status ReadZip64Extra(absl::string_view extra, uint64_t at, ZipEntry& e,
                            absl::string_view what) {
  const bool need[3] = {e.uncompressed == kSaturated32, e.compressed == kSaturated32,
                        e.local_offset == kSaturated32};
  if (!need[0] && !need[1] && !need[2]) return absl::OkStatus();
  while (extra.size() >= 4) {
    const uint16_t id = Le16(extra.data());
    const uint16_t len = Le16(extra.data() + 2);
    if (len > extra.size() - 4) break;
    if (id == 1) {
      absl::string_view body = extra.substr(4, len);
      uint64_t* fields[3] = {&e.uncompressed, &e.compressed, &e.local_offset};
      for (int i = 0; i < 3; ++i) {
        if (!need[i]) continue;
        if (body.size() < 8) return Corrupt(what, at, "ZIP64 extra field too short");
        *fields[i] = Le64(body.data());
        body.remove_prefix(8);
      }
      return absl::OkStatus();
    }
    extra.remove_prefix(4 + len);
  }
  return Corrupt(what, at, "entry needs a ZIP64 extra field and has none");
}

absl::StatusOr<CentralDirectory> ReadCentralDirectory(const InputFile& file,
                                                      const std::string& path) {
  const uint64_t size = file.size();
  const auto not_zip = [&](absl::string_view why) -> absl::Status {
    // A .npy given where an .npz belongs is a likely mistake: say so.
    char head[6];
    if (size >= 6 && file.ReadAt(0, 6, head).ok() && absl::string_view(head, 6) == kNpyMagic) {
      return absl::DataLossError(absl::StrCat(path, ": a .npy file, not an .npz archive"));
    }
    return Corrupt(path, size, absl::StrCat("not a ZIP archive: ", why));
  };
  if (size < kEndBytes) return not_zip("too short for an end-of-central-directory record");
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  const uint64_t tail_begin = size - std::min<uint64_t>(size, kEndBytes + 0xFFFF);
  ASSIGN_OR_RETURN(const std::string tail, file.Read(tail_begin, size - tail_begin));
  uint64_t end_at = 0;
  bool found = false;
  for (size_t i = tail.size() - kEndBytes + 1; i-- > 0;) {
    if (absl::string_view(tail).substr(i, 4) == kEndSignature &&
        i + kEndBytes + Le16(tail.data() + i + 20) == tail.size()) {
      end_at = tail_begin + i;
      found = true;
      break;
    }
  }
  if (!found) return not_zip("no end-of-central-directory record (or a truncated file)");
  const char* end = tail.data() + (end_at - tail_begin);
  uint64_t disk = Le16(end + 4), cd_disk = Le16(end + 6);
  uint64_t entries_here = Le16(end + 8), entries = Le16(end + 10);
  uint64_t cd_size = Le32(end + 12), cd_offset = Le32(end + 16);
  uint64_t cd_limit = end_at;  // the directory ends where the records after it begin
  if (end_at >= kZip64LocatorBytes) {
    ASSIGN_OR_RETURN(const std::string locator,
                     file.Read(end_at - kZip64LocatorBytes, kZip64LocatorBytes));
    if (absl::string_view(locator).substr(0, 4) == kZip64LocatorSignature) {
      const uint64_t at = Le64(locator.data() + 8);
      if (at > end_at - kZip64LocatorBytes || end_at - kZip64LocatorBytes - at < kZip64EndBytes) {
        return Corrupt(path, end_at - kZip64LocatorBytes,
                       "ZIP64 locator points outside the archive");
      }
      ASSIGN_OR_RETURN(const std::string z, file.Read(at, kZip64EndBytes));
      if (absl::string_view(z).substr(0, 4) != kZip64EndSignature) {
        return Corrupt(path, at, "no ZIP64 end-of-central-directory record");
      }
      disk = Le32(z.data() + 16);
      cd_disk = Le32(z.data() + 20);
      entries_here = Le64(z.data() + 24);
      entries = Le64(z.data() + 32);
      cd_size = Le64(z.data() + 40);
      cd_offset = Le64(z.data() + 48);
      cd_limit = at;
    }
  }
  if (disk != 0 || cd_disk != 0 || entries_here != entries) {
    return Unsupported(path, "a ZIP archive split over several disks is not supported");
  }
  if (cd_offset > cd_limit || cd_size != cd_limit - cd_offset) {
    return Corrupt(
        path, end_at,
        absl::StrCat("central directory (", cd_size, " bytes at byte ", cd_offset,
                     ") does not end where the end record begins (byte ", cd_limit, ")"));
  }
  ASSIGN_OR_RETURN(const std::string cd, file.Read(cd_offset, cd_size));
  CentralDirectory dir;
  dir.offset = cd_offset;
  uint64_t pos = 0;
  // Each entry takes at least 46 bytes, so a bad count ends at the directory's end.
  for (uint64_t i = 0; i < entries; ++i) {
    const uint64_t at = cd_offset + pos;
    if (cd.size() - pos < kCentralBytes ||
        absl::string_view(cd).substr(pos, 4) != kCentralSignature) {
      return Corrupt(path, at,
                     absl::StrCat("central directory entry ", i, " of ", entries, " is missing"));
    }
    const char* h = cd.data() + pos;
    ZipEntry e;
    e.flags = Le16(h + 8);
    e.method = Le16(h + 10);
    e.crc = Le32(h + 16);
    e.compressed = Le32(h + 20);
    e.uncompressed = Le32(h + 24);
    const uint64_t name_len = Le16(h + 28), extra_len = Le16(h + 30), comment_len = Le16(h + 32);
    e.local_offset = Le32(h + 42);
    if (cd.size() - pos - kCentralBytes < name_len + extra_len + comment_len) {
      return Corrupt(path, at, "central directory entry runs past the directory");
    }
    e.name = cd.substr(pos + kCentralBytes, name_len);
    RETURN_IF_ERROR(ReadZip64Extra(
        absl::string_view(cd).substr(pos + kCentralBytes + name_len, extra_len), at, e, path));
    dir.entries.push_back(std::move(e));
    pos += kCentralBytes + name_len + extra_len + comment_len;
  }
  if (pos != cd.size()) {
    return Corrupt(path, cd_offset + pos,
                   absl::StrCat(cd.size() - pos, " bytes after the central directory's ", entries,
                                " entries"));
  }
  return dir;
}

absl::string_view StripNpy(absl::string_view name) {
  absl::ConsumeSuffix(&name, ".npy");
  return name;
}

// Inflates a raw deflate stream (ZIP method 8) of exactly `expected` bytes.
absl::StatusOr<std::string> Inflate(absl::string_view in, uint64_t expected, absl::string_view what,
                                    uint64_t at) {
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) return absl::InternalError("zlib inflateInit2 failed");
  struct End {
    z_stream* z;
    ~End() { inflateEnd(z); }
  } end{&z};
  std::string out;
  // Grown as output arrives (deflate expands at most ~1032 times), never past `expected`: a small
  // member that claims to hold gigabytes costs only what it really inflates to.
  out.resize(
      static_cast<size_t>(std::min<uint64_t>(expected, std::max<uint64_t>(in.size(), 1 << 16))));
  uint64_t in_done = 0, out_done = 0;
  while (true) {
    constexpr uint64_t kChunk = 1 << 30;  // zlib counts in 32 bits
    if (out_done == out.size() && out.size() < expected) {
      out.resize(static_cast<size_t>(std::min<uint64_t>(expected, out.size() * 2)));
    }
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data() + in_done));
    z.avail_in = static_cast<uInt>(std::min<uint64_t>(in.size() - in_done, kChunk));
    z.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
    z.avail_out = static_cast<uInt>(std::min<uint64_t>(out.size() - out_done, kChunk));
    // A byte of room past `expected` shows a stream that inflates to more than it claims.
    char probe;
    const bool full = z.avail_out == 0;
    if (full) {
      z.next_out = reinterpret_cast<Bytef*>(&probe);
      z.avail_out = 1;
    }
    const uInt in_before = z.avail_in, out_before = z.avail_out;
    const int rc = inflate(&z, Z_NO_FLUSH);
    in_done += in_before - z.avail_in;
    const uint64_t produced = out_before - z.avail_out;
    if (full && produced > 0) {
      return Corrupt(what, at,
                     absl::StrCat("deflated data inflates to more than the ", expected,
                                  " bytes its entry states"));
    }
    out_done += produced;
    if (rc == Z_STREAM_END) break;
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      return Corrupt(what, at + in_done,
                     absl::StrCat("corrupt deflate stream: ", z.msg != nullptr ? z.msg : "?"));
    }
    if (rc == Z_MEM_ERROR) return absl::ResourceExhaustedError("zlib: out of memory");
    if (in_before == z.avail_in && produced == 0) {
      // No progress: the input ran out before the stream's end (zlib's Z_BUF_ERROR).
      return Corrupt(what, at + in_done, "truncated deflate stream");
    }
  }
  if (out_done != expected) {
    return Corrupt(what, at,
                   absl::StrCat("deflated data inflates to ", out_done, " bytes, its entry states ",
                                expected));
  }
  if (in_done != in.size()) {
    return Corrupt(what, at + in_done,
                   absl::StrCat(in.size() - in_done, " bytes after the deflate stream"));
  }
  return out;
}

uint32_t Crc32(absl::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1 << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

// The bytes of one member, inflated and checked.
absl::StatusOr<std::string> ReadMember(const InputFile& file, const CentralDirectory& dir,
                                       const ZipEntry& e, const std::string& what) {
  if (e.flags & 1) return Unsupported(what, "the member is encrypted");
  if (e.method != 0 && e.method != 8) {
    return Unsupported(what, absl::StrCat("ZIP compression method ", e.method,
                                          " is not supported (stored and deflated are)"));
  }
  if (e.method == 0 && e.compressed != e.uncompressed) {
    return Corrupt(
        what, e.local_offset,
        absl::StrCat("stored member's sizes differ (", e.compressed, " and ", e.uncompressed, ")"));
  }
  if (e.local_offset > dir.offset || dir.offset - e.local_offset < kLocalBytes) {
    return Corrupt(what, e.local_offset, "local header lies outside the archive's data");
  }
  ASSIGN_OR_RETURN(const std::string local, file.Read(e.local_offset, kLocalBytes));
  if (absl::string_view(local).substr(0, 4) != kLocalSignature) {
    return Corrupt(what, e.local_offset, "no local file header");
  }
  const uint64_t name_len = Le16(local.data() + 26), extra_len = Le16(local.data() + 28);
  const uint64_t data_at = e.local_offset + kLocalBytes + name_len + extra_len;
  if (data_at > dir.offset || dir.offset - data_at < e.compressed) {
    return Corrupt(what, e.local_offset,
                   absl::StrCat("member's ", e.compressed,
                                " bytes run into the central directory at byte ", dir.offset));
  }
  ASSIGN_OR_RETURN(const std::string local_name, file.Read(e.local_offset + kLocalBytes, name_len));
  if (local_name != e.name) {
    return Corrupt(what, e.local_offset + kLocalBytes,
                   absl::StrCat("local header names '", absl::CHexEscape(local_name), "'"));
  }
  ASSIGN_OR_RETURN(std::string bytes, file.Read(data_at, e.compressed));
  if (e.method == 8) {
    ASSIGN_OR_RETURN(bytes, Inflate(bytes, e.uncompressed, what, data_at));
  }
  if (const uint32_t crc = Crc32(bytes); crc != e.crc) {
    return Corrupt(
        what, data_at,
        absl::StrCat("CRC-32 mismatch: the entry states ", absl::Hex(e.crc, absl::kZeroPad8),
                     ", the data has ", absl::Hex(crc, absl::kZeroPad8)));
  }
  return bytes;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListNpzMembers(const std::string& path) {
  ASSIGN_OR_RETURN(const InputFile file, InputFile::Open(path));
  ASSIGN_OR_RETURN(const CentralDirectory dir, ReadCentralDirectory(file, path));
  std::vector<std::string> names;
  for (const ZipEntry& e : dir.entries) names.emplace_back(StripNpy(e.name));
  return names;
}

absl::StatusOr<NpyArray> ReadNpzMember(const std::string& path, const std::string& name) {
  ASSIGN_OR_RETURN(const InputFile file, InputFile::Open(path));
  ASSIGN_OR_RETURN(const CentralDirectory dir, ReadCentralDirectory(file, path));
  const ZipEntry* entry = nullptr;
  for (const std::string& wanted : {name + ".npy", name}) {
    for (const ZipEntry& e : dir.entries) {
      if (e.name == wanted) {
        entry = &e;
        break;
      }
    }
    if (entry != nullptr) break;
  }
  if (entry == nullptr) {
    constexpr size_t kListed = 20;
    std::vector<std::string> present;
    for (const ZipEntry& e : dir.entries) {
      if (present.size() == kListed) {
        present.push_back("...");
        break;
      }
      present.push_back(absl::CHexEscape(StripNpy(e.name)));
    }
    return absl::NotFoundError(
        absl::StrCat(path, ": no array '", absl::CHexEscape(name), "' in the archive (it holds ",
                     present.empty() ? "none" : absl::StrJoin(present, ", "), ")"));
  }
  const std::string what = absl::StrCat(path, ":", absl::CHexEscape(entry->name));
  ASSIGN_OR_RETURN(std::string bytes, ReadMember(file, dir, *entry, what));
  return ParseOwnedNpy(std::move(bytes), what);
}

}  // namespace psflow::data
