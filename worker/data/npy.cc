#include "worker/data/npy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "core/wire_type.h"
#include "worker/data/input_file.h"

namespace psflow::data {

// NpyArray::data is little-endian; on a little-endian host that is also the order its elements
// are read in, with a memcpy.
static_assert(std::endian::native == std::endian::little, "npy.cc assumes a little-endian host");

namespace {

// NumPy itself refuses headers over 10000 bytes unless told otherwise; a header this long is
// corrupt, and the limit bounds what a bad length makes ReadNpy read.
constexpr uint64_t kMaxHeaderBytes = 1 << 20;

// Where a .npy file's header text lies.
struct Preamble {
  uint64_t header_begin = 0;  // 10 for version 1.0, 12 for 2.0 and 3.0
  uint64_t header_len = 0;
  uint64_t end() const { return header_begin + header_len; }
};

// Reads the magic, version and header length from the first bytes of a file (all of them, or at
// least 12).
absl::StatusOr<Preamble> ParsePreamble(absl::string_view bytes, absl::string_view what) {
  if (bytes.size() < kNpyMagic.size() || bytes.substr(0, kNpyMagic.size()) != kNpyMagic) {
    return Corrupt(what, 0, "not a .npy file (no \\x93NUMPY magic)");
  }
  if (bytes.size() < 8) return Corrupt(what, bytes.size(), "truncated .npy preamble");
  const int major = static_cast<unsigned char>(bytes[6]);
  Preamble p;
  if (major == 1) {
    if (bytes.size() < 10) return Corrupt(what, bytes.size(), "truncated .npy preamble");
    p.header_begin = 10;
    p.header_len = Le16(bytes.data() + 8);
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return Corrupt(what, bytes.size(), "truncated .npy preamble");
    p.header_begin = 12;
    p.header_len = Le32(bytes.data() + 8);
  } else {
    return Corrupt(
        what, 6,
        absl::StrCat(".npy format version ", major, ".", static_cast<unsigned char>(bytes[7]),
                     " is not supported (1.0, 2.0 and 3.0 are)"));
  }
  if (p.header_len > kMaxHeaderBytes) {
    return Corrupt(what, 8, absl::StrCat("header length ", p.header_len, " is implausibly large"));
  }
  return p;
}

// What a .npy header says: the array's type and shape and how its data is laid out.
struct NpyHeader {
  NpyType type = NpyType::kFloat32;
  bool big_endian = false;
  bool fortran_order = false;
  std::vector<int64_t> shape;
};

absl::StatusOr<NpyType> TypeOfDescr(absl::string_view descr, bool& big_endian,
                                    absl::string_view what) {
  absl::string_view code = descr;
  big_endian = false;
  if (!code.empty() && (code[0] == '<' || code[0] == '>' || code[0] == '=' || code[0] == '|')) {
    big_endian = code[0] == '>';
    code.remove_prefix(1);
  }
  static constexpr struct {
    absl::string_view code;
    NpyType type;
  } kTypes[] = {
      {"b1", NpyType::kBool},    {"i1", NpyType::kInt8},    {"i2", NpyType::kInt16},
      {"i4", NpyType::kInt32},   {"i8", NpyType::kInt64},   {"u1", NpyType::kUint8},
      {"u2", NpyType::kUint16},  {"u4", NpyType::kUint32},  {"u8", NpyType::kUint64},
      {"f2", NpyType::kFloat16}, {"f4", NpyType::kFloat32}, {"f8", NpyType::kFloat64},
  };
  for (const auto& t : kTypes) {
    if (code == t.code) return t.type;
  }
  std::string hint;
  if (absl::StartsWith(code, "O")) {
    hint = ": object arrays hold pickled Python objects; save a numeric array instead";
  }
  return Unsupported(what, absl::StrCat("dtype '", absl::CHexEscape(descr),
                                        "' is not supported (bool, int8..int64, uint8..uint64, "
                                        "float16, float32 and float64 are)",
                                        hint));
}

// A reader of the header's dict literal, as numpy's repr() writes it (and as
// a hand-written one may: either quote, any spacing, a trailing comma or not).
class HeaderParser {
 public:
  // `text` begins at byte `base` of the file named `what`.
  HeaderParser(absl::string_view text, uint64_t base, absl::string_view what)
      : text_(text), base_(base), what_(what) {}

  absl::StatusOr<NpyHeader> Parse() {
    NpyHeader h;
    bool has_descr = false, has_fortran = false, has_shape = false;
    SkipSpace();
    if (!Consume('{')) return Error("header is not a dict literal: expected '{'");
    while (true) {
      SkipSpace();
      if (Consume('}')) break;
      const uint64_t key_at = pos_;
      ASSIGN_OR_RETURN(const std::string key, ParseString("a quoted key"));
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      bool* seen;
      if (key == "descr") {
        seen = &has_descr;
        RETURN_IF_ERROR(ParseDescr(h));
      } else if (key == "fortran_order") {
        seen = &has_fortran;
        ASSIGN_OR_RETURN(h.fortran_order, ParseBool());
      } else if (key == "shape") {
        seen = &has_shape;
        ASSIGN_OR_RETURN(h.shape, ParseShape());
      } else {
        pos_ = key_at;
        return Error(absl::StrCat("unexpected key '", absl::CHexEscape(key),
                                  "' (a header has 'descr', 'fortran_order' and 'shape')"));
      }
      if (*seen) {
        pos_ = key_at;
        return Error(absl::StrCat("key '", key, "' appears twice"));
      }
      *seen = true;
      SkipSpace();
      if (Consume('}')) break;
      if (!Consume(',')) return Error("expected ',' or '}' after a value");
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after the header's dict");
    if (!has_descr || !has_fortran || !has_shape) {
      return Error(absl::StrCat("header lacks '",
                                !has_descr ? "descr" : (!has_fortran ? "fortran_order" : "shape"),
                                "'"));
    }
    return h;
  }

 private:
  absl::Status Error(absl::string_view why) const {
    return Corrupt(what_, base_ + pos_, absl::StrCat("bad .npy header: ", why));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
      ++pos_;
    }
  }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(absl::string_view word) {
    if (absl::StartsWith(text_.substr(pos_), word)) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  absl::StatusOr<std::string> ParseString(absl::string_view expected) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error(absl::StrCat("expected ", expected));
    }
    const char quote = text_[pos_];
    const size_t end = text_.find(quote, pos_ + 1);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string s(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return s;
  }

  absl::Status ParseDescr(NpyHeader& h) {
    if (pos_ < text_.size() && text_[pos_] == '[') {
      return Unsupported(what_, "structured dtypes (a list of named fields) are not supported");
    }
    ASSIGN_OR_RETURN(const std::string descr, ParseString("a dtype string as 'descr'"));
    ASSIGN_OR_RETURN(h.type, TypeOfDescr(descr, h.big_endian, what_));
    return absl::OkStatus();
  }

  absl::StatusOr<bool> ParseBool() {
    if (ConsumeWord("True")) return true;
    if (ConsumeWord("False")) return false;
    return Error("expected True or False as 'fortran_order'");
  }

  // A tuple of non-negative integers: "()", "(3,)", "(2, 3)"; Python 2's "3L" too.
  absl::StatusOr<std::vector<int64_t>> ParseShape() {
    std::vector<int64_t> shape;
    if (!Consume('(')) return Error("expected a tuple as 'shape'");
    while (true) {
      SkipSpace();
      if (Consume(')')) break;
      if (pos_ >= text_.size() || !absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        return Error("expected a non-negative integer in 'shape'");
      }
      int64_t d = 0;
      while (pos_ < text_.size() && absl::ascii_isdigit(static_cast<unsigned char>(text_[pos_]))) {
        const int digit = text_[pos_] - '0';
        if (d > (std::numeric_limits<int64_t>::max() - digit) / 10) {
          return Error("dimension too large");
        }
        d = d * 10 + digit;
        ++pos_;
      }
      Consume('L');
      if (shape.size() >= 64) return Error("more than 64 dimensions");
      shape.push_back(d);
      SkipSpace();
      if (Consume(')')) break;
      if (!Consume(',')) return Error("expected ',' or ')' in 'shape'");
    }
    return shape;
  }

  absl::string_view text_;
  uint64_t base_;
  absl::string_view what_;
  size_t pos_ = 0;
};

// The parsed header of a .npy file whose first bytes are `prefix` (at least up to the header's
// end) and whose length is `total_size`: the array without its data, and where the data begins.
struct NpyLayout {
  NpyHeader header;
  uint64_t data_begin = 0;
  uint64_t data_bytes = 0;
};

absl::StatusOr<NpyLayout> ParseLayout(absl::string_view prefix, uint64_t total_size,
                                      absl::string_view what) {
  ASSIGN_OR_RETURN(const Preamble p, ParsePreamble(prefix, what));
  if (p.end() > prefix.size()) {
    return Corrupt(what, prefix.size(),
                   absl::StrCat("truncated: the header ends at byte ", p.end()));
  }
  NpyLayout layout;
  ASSIGN_OR_RETURN(
      layout.header,
      HeaderParser(prefix.substr(p.header_begin, p.header_len), p.header_begin, what).Parse());
  layout.data_begin = p.end();
  // Checked multiplication, so that no shape, however large, overflows.
  uint64_t bytes = static_cast<uint64_t>(NpyTypeSize(layout.header.type));
  bool overflow = false;
  for (int64_t d : layout.header.shape) {
    overflow |= __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  }
  const uint64_t available = total_size - layout.data_begin;
  const std::string shape = absl::StrCat("(", absl::StrJoin(layout.header.shape, ", "), ")");
  if (overflow || bytes > available) {
    return Corrupt(what, total_size,
                   absl::StrCat("truncated: shape ", shape, " of ", NpyTypeName(layout.header.type),
                                " needs ", overflow ? "over 2^64" : absl::StrCat(bytes),
                                " data bytes, the file has ", available));
  }
  if (bytes < available) {
    const uint64_t extra = available - bytes;
    return Corrupt(what, layout.data_begin + bytes,
                   absl::StrCat("the data of shape ", shape, " is followed by ", extra,
                                " unexpected byte", extra == 1 ? "" : "s"));
  }
  layout.data_bytes = bytes;
  return layout;
}

// Turns `data`, laid out as the header says, into NpyArray's layout.
NpyArray Finish(NpyHeader header, std::string data) {
  const size_t width = static_cast<size_t>(NpyTypeSize(header.type));
  if (header.big_endian && width > 1) {
    for (size_t i = 0; i < data.size(); i += width) std::reverse(&data[i], &data[i] + width);
  }
  NpyArray a;
  a.type = header.type;
  a.shape = std::move(header.shape);
  const int64_t n = a.size();
  if (header.fortran_order && a.shape.size() > 1 && n > 0) {
    // Column-major to row-major: walk the output in C order with an odometer over the indices,
    // moving the input offset by each dimension's Fortran stride.
    const size_t rank = a.shape.size();
    std::vector<int64_t> stride, index(rank, 0);
    int64_t s = 1;
    for (int64_t d : a.shape) {
      stride.push_back(s);
      s *= d;
    }
    std::string c_order(data.size(), '\0');
    int64_t from = 0;
    for (int64_t to = 0; to < n; ++to) {
      std::memcpy(&c_order[static_cast<size_t>(to) * width],
                  &data[static_cast<size_t>(from) * width], width);
      for (size_t j = rank; j-- > 0;) {
        if (++index[j] < a.shape[j]) {
          from += stride[j];
          break;
        }
        from -= stride[j] * (a.shape[j] - 1);
        index[j] = 0;
      }
    }
    data = std::move(c_order);
  }
  a.data = std::move(data);
  return a;
}

}  // namespace

int NpyTypeSize(NpyType type) {
  switch (type) {
    case NpyType::kBool:
    case NpyType::kInt8:
    case NpyType::kUint8:
      return 1;
    case NpyType::kInt16:
    case NpyType::kUint16:
    case NpyType::kFloat16:
      return 2;
    case NpyType::kInt32:
    case NpyType::kUint32:
    case NpyType::kFloat32:
      return 4;
    case NpyType::kInt64:
    case NpyType::kUint64:
    case NpyType::kFloat64:
      return 8;
  }
  return 1;
}

absl::string_view NpyTypeName(NpyType type) {
  switch (type) {
    case NpyType::kBool:
      return "bool";
    case NpyType::kInt8:
      return "int8";
    case NpyType::kInt16:
      return "int16";
    case NpyType::kInt32:
      return "int32";
    case NpyType::kInt64:
      return "int64";
    case NpyType::kUint8:
      return "uint8";
    case NpyType::kUint16:
      return "uint16";
    case NpyType::kUint32:
      return "uint32";
    case NpyType::kUint64:
      return "uint64";
    case NpyType::kFloat16:
      return "float16";
    case NpyType::kFloat32:
      return "float32";
    case NpyType::kFloat64:
      return "float64";
  }
  return "?";
}

bool NpyTypeIsInteger(NpyType type) {
  return type != NpyType::kBool && type != NpyType::kFloat16 && type != NpyType::kFloat32 &&
         type != NpyType::kFloat64;
}

int64_t NpyArray::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Calls fn(value) for each element of `a` read as T, in order.
template <class T, class Fn>
void ForEach(const NpyArray& a, Fn&& fn) {
  const char* p = a.data.data();
  for (size_t i = 0; i + sizeof(T) <= a.data.size(); i += sizeof(T)) {
    T v;
    std::memcpy(&v, p + i, sizeof(T));
    fn(v);
  }
}

// Calls fn(value) for each element of `a` as its own C++ type.
template <class Fn>
void Visit(const NpyArray& a, Fn&& fn) {
  switch (a.type) {
    case NpyType::kBool:
      return ForEach<uint8_t>(a, [&](uint8_t v) { fn(static_cast<bool>(v)); });
    case NpyType::kInt8:
      return ForEach<int8_t>(a, fn);
    case NpyType::kInt16:
      return ForEach<int16_t>(a, fn);
    case NpyType::kInt32:
      return ForEach<int32_t>(a, fn);
    case NpyType::kInt64:
      return ForEach<int64_t>(a, fn);
    case NpyType::kUint8:
      return ForEach<uint8_t>(a, fn);
    case NpyType::kUint16:
      return ForEach<uint16_t>(a, fn);
    case NpyType::kUint32:
      return ForEach<uint32_t>(a, fn);
    case NpyType::kUint64:
      return ForEach<uint64_t>(a, fn);
    case NpyType::kFloat16:
      return ForEach<uint16_t>(a, [&](uint16_t v) { fn(FromFloat16(v)); });
    case NpyType::kFloat32:
      return ForEach<float>(a, fn);
    case NpyType::kFloat64:
      return ForEach<double>(a, fn);
  }
}

}  // namespace

std::vector<float> NpyArray::ToFloats() const {
  std::vector<float> out;
  out.reserve(data.size() / static_cast<size_t>(NpyTypeSize(type)));
  Visit(*this, [&](auto v) { out.push_back(static_cast<float>(v)); });
  return out;
}

absl::StatusOr<std::vector<int64_t>> NpyArray::ToIntegers(absl::string_view what) const {
  std::vector<int64_t> out;
  out.reserve(data.size() / static_cast<size_t>(NpyTypeSize(type)));
  absl::Status status;
  // 2^63: doubles in [-2^63, 2^63) convert to int64 exactly.
  constexpr double kLimit = 9223372036854775808.0;
  Visit(*this, [&](auto v) {
    using T = decltype(v);
    if (!status.ok()) return;
    if constexpr (std::is_floating_point_v<T>) {
      if (!(v >= -kLimit && v < kLimit) || v != std::trunc(v)) {
        status = absl::InvalidArgumentError(absl::StrCat(what, ": element ", out.size(), " is ", v,
                                                         ", not an integer (", NpyTypeName(type),
                                                         " values must be whole numbers here)"));
        return;
      }
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        status = absl::InvalidArgumentError(
            absl::StrCat(what, ": element ", out.size(), " is ", v, ", beyond int64's range"));
        return;
      }
    }
    out.push_back(static_cast<int64_t>(v));
  });
  RETURN_IF_ERROR(status);
  return out;
}

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, absl::string_view what) {
  ASSIGN_OR_RETURN(NpyLayout layout, ParseLayout(bytes, bytes.size(), what));
  return Finish(std::move(layout.header), std::string(bytes.substr(layout.data_begin)));
}

absl::StatusOr<NpyArray> ParseOwnedNpy(std::string bytes, absl::string_view what) {
  ASSIGN_OR_RETURN(NpyLayout layout, ParseLayout(bytes, bytes.size(), what));
  bytes.erase(0, layout.data_begin);
  return Finish(std::move(layout.header), std::move(bytes));
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(const InputFile file, InputFile::Open(path));
  ASSIGN_OR_RETURN(const std::string head, file.Read(0, std::min<uint64_t>(file.size(), 12)));
  ASSIGN_OR_RETURN(const Preamble p, ParsePreamble(head, path));
  ASSIGN_OR_RETURN(const std::string prefix,
                   file.Read(0, std::min<uint64_t>(file.size(), p.end())));
  ASSIGN_OR_RETURN(NpyLayout layout, ParseLayout(prefix, file.size(), path));
  // The sizes agree with the file's: this allocation is what the file holds.
  std::string data(static_cast<size_t>(layout.data_bytes), '\0');
  RETURN_IF_ERROR(file.ReadAt(layout.data_begin, layout.data_bytes, data.data()));
  return Finish(std::move(layout.header), std::move(data));
}

}  // namespace psflow::data
