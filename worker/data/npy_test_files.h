// For tests only: .npy and .npz bytes built by hand, laid out as numpy and Python's zipfile write
// them, with switches for the variants a reader must handle (format versions, deflate, ZIP64
// records) and places to break them.
#ifndef PSFLOW_WORKER_DATA_NPY_TEST_FILES_H_
#define PSFLOW_WORKER_DATA_NPY_TEST_FILES_H_

#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace psflow::data::testing {

// The little-endian bytes of `values`.
template <class T>
std::string Bytes(const std::vector<T>& values) {
  std::string out(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// A .npy file of format version major.0 whose header is the dict
// {'descr': '<descr>', 'fortran_order': <fortran>, 'shape': <shape>, } (shape as Python writes
// it: "(2, 3)", "(4,)", "()"), padded with spaces and a newline to a multiple of 64 bytes as
// numpy pads it, followed by `data`.
inline std::string NpyBytes(absl::string_view descr, absl::string_view shape,
                            absl::string_view data, int major = 1, bool fortran = false) {
  std::string dict =
      absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", fortran ? "True" : "False",
                   ", 'shape': ", shape, ", }");
  const size_t preamble = major == 1 ? 10 : 12;
  const size_t total = (preamble + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - preamble - dict.size() - 1, ' ');
  dict.push_back('\n');
  std::string out("\x93NUMPY", 6);
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  const uint32_t len = static_cast<uint32_t>(dict.size());
  out.append(reinterpret_cast<const char*>(&len), major == 1 ? 2 : 4);
  return absl::StrCat(out, dict, data);
}

inline uint32_t Crc32Of(absl::string_view bytes) {
  return static_cast<uint32_t>(crc32(crc32(0L, Z_NULL, 0),
                                     reinterpret_cast<const Bytef*>(bytes.data()),
                                     static_cast<uInt>(bytes.size())));
}

// A raw deflate stream (ZIP method 8) of `bytes`.
inline std::string Deflate(absl::string_view bytes) {
  z_stream z{};
  deflateInit2(&z, Z_BEST_COMPRESSION, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, static_cast<uLong>(bytes.size())), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct ZipMember {
  std::string name;  // "x.npy"
  std::string data;  // the uncompressed bytes
  bool deflate = false;
};

struct ZipLayout {
  bool zip64_local = true;     // a ZIP64 extra field in each local header (numpy's force_zip64)
  bool zip64_central = false;  // sizes and offset 0xFFFFFFFF in the central directory, the real
                               // ones in a ZIP64 extra field (as for members over 4 GiB)
  bool zip64_end = false;      // ZIP64 end record and locator, and a saturated end record
  std::string comment;         // the archive comment, after the end record
};

// A ZIP archive of `members`, in order.
inline std::string ZipBytes(const std::vector<ZipMember>& members, const ZipLayout& layout = {}) {
  const auto u16 = [](std::string& s, uint64_t v) {
    s.append(reinterpret_cast<const char*>(&v), 2);
  };
  const auto u32 = [](std::string& s, uint64_t v) {
    s.append(reinterpret_cast<const char*>(&v), 4);
  };
  const auto u64 = [](std::string& s, uint64_t v) {
    s.append(reinterpret_cast<const char*>(&v), 8);
  };
  std::string out, central;
  for (const ZipMember& m : members) {
    const std::string stored = m.deflate ? Deflate(m.data) : m.data;
    const uint32_t crc = Crc32Of(m.data);
    const uint64_t offset = out.size();
    std::string local_extra;
    if (layout.zip64_local) {
      u16(local_extra, 1);
      u16(local_extra, 16);
      u64(local_extra, m.data.size());
      u64(local_extra, stored.size());
    }
    out.append("PK\x03\x04", 4);
    u16(out, 45);  // version needed
    u16(out, 0);   // flags
    u16(out, m.deflate ? 8 : 0);
    u16(out, 0);   // time
    u16(out, 33);  // date
    u32(out, crc);
    u32(out, stored.size());
    u32(out, m.data.size());
    u16(out, m.name.size());
    u16(out, local_extra.size());
    absl::StrAppend(&out, m.name, local_extra, stored);

    std::string central_extra;
    if (layout.zip64_central) {
      u16(central_extra, 1);
      u16(central_extra, 24);
      u64(central_extra, m.data.size());
      u64(central_extra, stored.size());
      u64(central_extra, offset);
    }
    const uint64_t saturated = layout.zip64_central ? 0xFFFFFFFF : 0;
    central.append("PK\x01\x02", 4);
    u16(central, 0x031E);  // made by: Unix, 3.0
    u16(central, 45);
    u16(central, 0);
    u16(central, m.deflate ? 8 : 0);
    u16(central, 0);
    u16(central, 33);
    u32(central, crc);
    u32(central, saturated ? saturated : stored.size());
    u32(central, saturated ? saturated : m.data.size());
    u16(central, m.name.size());
    u16(central, central_extra.size());
    u16(central, 0);  // comment
    u16(central, 0);  // disk
    u16(central, 0);  // internal attributes
    u32(central, 0x01800000);
    u32(central, saturated ? saturated : offset);
    absl::StrAppend(&central, m.name, central_extra);
  }
  const uint64_t cd_offset = out.size();
  out += central;
  if (layout.zip64_end) {
    const uint64_t end64 = out.size();
    out.append("PK\x06\x06", 4);
    u64(out, 44);
    u16(out, 45);
    u16(out, 45);
    u32(out, 0);
    u32(out, 0);
    u64(out, members.size());
    u64(out, members.size());
    u64(out, central.size());
    u64(out, cd_offset);
    out.append("PK\x06\x07", 4);
    u32(out, 0);
    u64(out, end64);
    u32(out, 1);
  }
  out.append("PK\x05\x06", 4);
  u16(out, 0);
  u16(out, 0);
  u16(out, layout.zip64_end ? 0xFFFF : members.size());
  u16(out, layout.zip64_end ? 0xFFFF : members.size());
  u32(out, layout.zip64_end ? 0xFFFFFFFF : central.size());
  u32(out, layout.zip64_end ? 0xFFFFFFFF : cd_offset);
  u16(out, layout.comment.size());
  out += layout.comment;
  return out;
}

}  // namespace psflow::data::testing

#endif  // PSFLOW_WORKER_DATA_NPY_TEST_FILES_H_
