#include "worker/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace psflow::data {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 34;  // 16 GiB: anything larger is corrupt

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Reads exactly n bytes; returns how many were read (fewer at end of file), or -1 on error.
int64_t ReadFully(gzFile f, void* out, int64_t n) {
  int64_t done = 0;
  auto* p = static_cast<unsigned char*>(out);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<int64_t>(n - done, 1 << 30));
    const int got = gzread(f, p + done, chunk);
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  // gzopen reads gzip files and, transparently, plain ones.
  GzFile f(gzopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  auto corrupt = [&path](const std::string& why) {
    return absl::DataLossError(absl::StrCat(path, ": ", why));
  };
  unsigned char magic[4];
  if (ReadFully(f.get(), magic, 4) != 4) return corrupt("truncated idx header");
  if (magic[0] != 0 || magic[1] != 0) return corrupt("not an idx file (bad magic)");
  if (magic[2] != 0x08) {
    return corrupt(absl::StrCat("idx element type 0x", absl::Hex(magic[2]),
                                " is not supported (only unsigned bytes, 0x08)"));
  }
  const int ndims = magic[3];
  if (ndims < 1 || ndims > 4) return corrupt(absl::StrCat("bad idx dimension count ", ndims));
  IdxArray a;
  int64_t total = 1;
  for (int i = 0; i < ndims; ++i) {
    unsigned char be[4];
    if (ReadFully(f.get(), be, 4) != 4) return corrupt("truncated idx header");
    const int64_t d =
        (int64_t{be[0]} << 24) | (int64_t{be[1]} << 16) | (int64_t{be[2]} << 8) | be[3];
    if (d == 0) return corrupt("idx dimension of size 0");
    // Checked before multiplying: four dimensions of up to 2^32 - 1 overflow int64.
    if (d > kMaxElements / total) return corrupt("idx dimensions too large");
    a.dims.push_back(d);
    total *= d;
  }
  // Grow with the data actually read, so a corrupt header claiming gigabytes costs nothing.
  constexpr int64_t kChunk = int64_t{16} << 20;
  int64_t got = 0;
  while (got < total) {
    const int64_t want = std::min(kChunk, total - got);
    a.values.resize(static_cast<size_t>(got + want));
    const int64_t n = ReadFully(f.get(), a.values.data() + got, want);
    if (n < 0) return corrupt("read error (corrupt gzip stream?)");
    got += n;
    if (n < want) break;
  }
  if (got != total) {
    return corrupt(absl::StrCat("truncated: dims [", absl::StrJoin(a.dims, ","), "] need ", total,
                                " data bytes, file has ", got));
  }
  unsigned char extra;
  if (ReadFully(f.get(), &extra, 1) != 0) return corrupt("unexpected bytes after the idx data");
  return a;
}

}  // namespace psflow::data
