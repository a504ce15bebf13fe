#include "core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"

namespace psflow {
namespace {

// The format is little-endian; on a little-endian host lengths and floats are copied as they lie
// in memory.
static_assert(std::endian::native == std::endian::little,
              "psflow's safetensors code assumes a little-endian host");

constexpr absl::string_view kMetadataKey = "__metadata__";
constexpr size_t kLengthBytes = 8;
// Writing: small pieces are gathered in a buffer of this size, larger ones written directly.
// Reading: non-F32 data is converted through a buffer of this size.
constexpr size_t kBufferBytes = size_t{1} << 20;

// A name for a message: quoted, with control and non-ASCII bytes escaped, so it stays one line.
std::string Quote(absl::string_view name) { return absl::StrCat("'", absl::CHexEscape(name), "'"); }

// --- Dtypes ----------------------------------------------------------------------------------

enum class Convert { kNone, kF32, kF16, kBF16, kF64 };

struct Dtype {
  absl::string_view name;
  uint64_t size;
  Convert convert;  // how values become float32; kNone: not supported
};

// Every dtype of the reference implementation (safetensors/src/tensor.rs).
constexpr Dtype kDtypes[] = {
    {"BOOL", 1, Convert::kNone},    {"U8", 1, Convert::kNone},      {"I8", 1, Convert::kNone},
    {"F8_E5M2", 1, Convert::kNone}, {"F8_E4M3", 1, Convert::kNone}, {"I16", 2, Convert::kNone},
    {"U16", 2, Convert::kNone},     {"F16", 2, Convert::kF16},      {"BF16", 2, Convert::kBF16},
    {"I32", 4, Convert::kNone},     {"U32", 4, Convert::kNone},     {"F32", 4, Convert::kF32},
    {"F64", 8, Convert::kF64},      {"I64", 8, Convert::kNone},     {"U64", 8, Convert::kNone},
};

const Dtype* FindDtype(absl::string_view name) {
  for (const Dtype& d : kDtypes) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

float HalfToFloat(uint16_t h) {
  const uint32_t bits = h;
  const uint32_t sign = (bits >> 15) << 31;
  const uint32_t exponent = (bits >> 10) & 0x1f;
  const uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24, exact in float32
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent - 15 + 127) << 23) | (mantissa << 13));
}

float BFloat16ToFloat(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

float DoubleToFloat(double d) {
  // Beyond float32's largest value plus half an ulp, round-to-nearest gives infinity; the cast
  // itself would be undefined there.
  constexpr double kOverflow = 0x1.ffffffp127;
  constexpr float kInfinity = std::numeric_limits<float>::infinity();
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
  if (std::isnan(d)) return std::signbit(d) ? -kNaN : kNaN;
  if (std::fabs(d) >= kOverflow) return d < 0 ? -kInfinity : kInfinity;
  return static_cast<float>(d);
}

// --- Header parsing --------------------------------------------------------------------------

struct Entry {
  std::string name;
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<uint64_t> offsets;
  bool has_dtype = false, has_shape = false, has_offsets = false;
};

struct Header {
  std::vector<Entry> entries;  // in the header's order
  std::map<std::string, std::string> metadata;
};

// A SAX handler for nlohmann::json that accepts exactly the header's structure and builds only
// what it needs: anything else (an unexpected type, a nesting, a duplicate or unknown key) stops
// the parse at once, so no input makes it build a large tree. The error is kept in error().
class HeaderParser {
 public:
  using json = nlohmann::json;

  const std::string& error() const { return error_; }
  Header TakeHeader() { return std::move(header_); }

  bool null() { return Unexpected("null"); }
  bool boolean(bool) { return Unexpected("a boolean"); }
  bool number_integer(json::number_integer_t v) {
    if (v < 0) return Unexpected(absl::StrCat("the negative number ", v));
    return Number(static_cast<uint64_t>(v));
  }
  bool number_unsigned(json::number_unsigned_t v) { return Number(v); }
  bool number_float(json::number_float_t, const std::string& text) {
    return Unexpected(absl::StrCat("the number ", text));
  }
  bool binary(json::binary_t&) { return Unexpected("binary data"); }

  bool string(std::string& value) {
    switch (where_) {
      case Where::kMetadataValue:
        header_.metadata[metadata_key_] = std::move(value);
        where_ = Where::kMetadata;
        return true;
      case Where::kTensorValue:
        if (field_ == Field::kDtype) {
          entry().dtype = std::move(value);
          where_ = Where::kTensor;
          return true;
        }
        break;
      default:
        break;
    }
    return Unexpected("a string");
  }

  bool start_object(size_t) {
    switch (where_) {
      case Where::kStart:
        where_ = Where::kTop;
        return true;
      case Where::kTopValue:
        where_ = in_metadata_ ? Where::kMetadata : Where::kTensor;
        return true;
      default:
        return Unexpected("an object");
    }
  }

  bool key(std::string& key) {
    switch (where_) {
      case Where::kTop:
        if (!top_keys_.insert(key).second) return Fail(absl::StrCat("duplicate key ", Quote(key)));
        in_metadata_ = key == kMetadataKey;
        if (!in_metadata_) {
          header_.entries.emplace_back();
          entry().name = std::move(key);
        }
        where_ = Where::kTopValue;
        return true;
      case Where::kMetadata:
        if (header_.metadata.count(key) != 0) {
          return Fail(absl::StrCat("duplicate key ", Quote(key), " in __metadata__"));
        }
        metadata_key_ = std::move(key);
        where_ = Where::kMetadataValue;
        return true;
      case Where::kTensor: {
        bool* seen = nullptr;
        if (key == "dtype") {
          field_ = Field::kDtype;
          seen = &entry().has_dtype;
        } else if (key == "shape") {
          field_ = Field::kShape;
          seen = &entry().has_shape;
        } else if (key == "data_offsets") {
          field_ = Field::kOffsets;
          seen = &entry().has_offsets;
        } else {
          return Fail(absl::StrCat("tensor ", Quote(entry().name), " has the unknown field ",
                                   Quote(key), " (dtype, shape and data_offsets only)"));
        }
        if (*seen) {
          return Fail(absl::StrCat("tensor ", Quote(entry().name), " has the field ", Quote(key),
                                   " twice"));
        }
        *seen = true;
        where_ = Where::kTensorValue;
        return true;
      }
      default:
        return Unexpected("a key");  // unreachable: keys come only inside objects
    }
  }

  bool end_object() {
    switch (where_) {
      case Where::kTop:
        where_ = Where::kDone;
        return true;
      case Where::kMetadata:
        where_ = Where::kTop;
        return true;
      case Where::kTensor: {
        const Entry& e = entry();
        if (!e.has_dtype || !e.has_shape || !e.has_offsets) {
          return Fail(absl::StrCat("tensor ", Quote(e.name),
                                   " lacks a field: dtype, shape and data_offsets are required"));
        }
        where_ = Where::kTop;
        return true;
      }
      default:
        return Unexpected("the end of an object");  // unreachable
    }
  }

  bool start_array(size_t) {
    if (where_ == Where::kTensorValue && field_ == Field::kShape) {
      where_ = Where::kShape;
      return true;
    }
    if (where_ == Where::kTensorValue && field_ == Field::kOffsets) {
      where_ = Where::kOffsets;
      return true;
    }
    return Unexpected("an array");
  }

  bool end_array() {
    if (where_ == Where::kShape) {
      where_ = Where::kTensor;
      return true;
    }
    if (where_ == Where::kOffsets) {
      if (entry().offsets.size() != 2) {
        return Fail(absl::StrCat("tensor ", Quote(entry().name), " has ", entry().offsets.size(),
                                 " data_offsets, not two ([begin, end])"));
      }
      where_ = Where::kTensor;
      return true;
    }
    return Unexpected("the end of an array");  // unreachable
  }

  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& e) {
    // position counts the bytes read, the offending one included; the header starts at byte 8.
    return Fail(absl::StrCat("the header is not valid JSON (at byte ",
                             kLengthBytes + std::max<size_t>(position, 1) - 1,
                             " of the file): ", e.what()));
  }

 private:
  enum class Where {
    kStart,          // before the header's object
    kTop,            // in it, before a key or its end
    kTopValue,       // after a top-level key
    kMetadata,       // in __metadata__, before a key or its end
    kMetadataValue,  // after a key of __metadata__
    kTensor,         // in a tensor's entry, before a field or its end
    kTensorValue,    // after a field name
    kShape,          // in the shape array
    kOffsets,        // in the data_offsets array
    kDone,           // after the header's object
  };
  enum class Field { kDtype, kShape, kOffsets };

  Entry& entry() { return header_.entries.back(); }

  bool Fail(std::string error) {
    if (error_.empty()) error_ = std::move(error);
    return false;
  }

  bool Number(uint64_t v) {
    if (where_ == Where::kShape) {
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Fail(absl::StrCat("tensor ", Quote(entry().name), " has the dimension ", v,
                                 ", over 2^63 - 1"));
      }
      entry().shape.push_back(static_cast<int64_t>(v));
      return true;
    }
    if (where_ == Where::kOffsets) {
      if (entry().offsets.size() == 2) {
        return Fail(absl::StrCat("tensor ", Quote(entry().name),
                                 " has more than two data_offsets ([begin, end])"));
      }
      entry().offsets.push_back(v);
      return true;
    }
    return Unexpected(absl::StrCat("the number ", v));
  }

  // `what` is not allowed where the parse is.
  bool Unexpected(absl::string_view what) {
    std::string where;
    switch (where_) {
      case Where::kStart:
        where = "the header: it must be a JSON object";
        break;
      case Where::kTopValue:
        where = in_metadata_
                    ? "__metadata__: it must be an object of strings"
                    : absl::StrCat("tensor ", Quote(entry().name), ": its entry must be an object");
        break;
      case Where::kMetadataValue:
        where = absl::StrCat("__metadata__ key ", Quote(metadata_key_), ": values must be strings");
        break;
      case Where::kTensorValue:
        where = absl::StrCat("tensor ", Quote(entry().name), " field ",
                             field_ == Field::kDtype   ? "dtype: it must be a string"
                             : field_ == Field::kShape ? "shape: it must be an array"
                                                       : "data_offsets: it must be an array");
        break;
      case Where::kShape:
        where = absl::StrCat("the shape of tensor ", Quote(entry().name),
                             ": dimensions are non-negative integers");
        break;
      case Where::kOffsets:
        where = absl::StrCat("the data_offsets of tensor ", Quote(entry().name),
                             ": they are two non-negative integers");
        break;
      default:
        where = "the header";
        break;
    }
    return Fail(absl::StrCat("found ", what, " in ", where));
  }

  Where where_ = Where::kStart;
  Field field_ = Field::kDtype;
  bool in_metadata_ = false;
  std::string metadata_key_;
  std::set<std::string> top_keys_;
  Header header_;
  std::string error_;
};

// One tensor whose entry passed every check.
struct Layout {
  const Entry* entry;
  const Dtype* dtype;
  uint64_t elements;
  uint64_t begin;  // in the data buffer
  uint64_t end;
};

// `what`: the error's prefix (the file).
absl::Status DataLoss(absl::string_view what, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(what, ": ", why));
}

absl::StatusOr<Header> ParseHeader(absl::string_view json, absl::string_view what) {
  if (json.empty() || json.front() != '{') {
    return DataLoss(what, "the header does not start with '{' (byte 8 of the file)");
  }
  // nlohmann's lexer takes a NUL byte for the end of the input, so "{}\0junk" would pass; JSON
  // allows no raw NUL anywhere (inside strings it must be escaped).
  if (const size_t nul = json.find('\0'); nul != absl::string_view::npos) {
    return DataLoss(what, absl::StrCat("the header is not valid JSON: a NUL byte at byte ",
                                       kLengthBytes + nul, " of the file"));
  }
  HeaderParser parser;
  bool ok = false;
  try {
    ok = nlohmann::json::sax_parse(json.begin(), json.end(), &parser);
  } catch (const std::exception& e) {
    // Not expected: the SAX parse reports errors through parse_error. A header that makes the
    // parser throw (e.g. out of memory) is reported, never thrown on.
    return DataLoss(what, absl::StrCat("the header cannot be parsed: ", e.what()));
  }
  if (!ok) {
    return DataLoss(what, parser.error().empty() ? "the header is not valid JSON" : parser.error());
  }
  return parser.TakeHeader();
}

// Checks every entry against the data buffer (data_bytes long, starting at file offset
// data_start) and returns the tensors in data order.
absl::StatusOr<std::vector<Layout>> CheckLayout(const Header& header, uint64_t data_start,
                                                uint64_t data_bytes, absl::string_view what) {
  std::vector<Layout> layouts;
  layouts.reserve(header.entries.size());
  for (const Entry& e : header.entries) {
    const std::string name = absl::StrCat("tensor ", Quote(e.name));
    const Dtype* dtype = FindDtype(e.dtype);
    if (dtype == nullptr) {
      return DataLoss(what, absl::StrCat(name, " has the unknown dtype ", Quote(e.dtype)));
    }
    uint64_t elements = 1;
    if (std::find(e.shape.begin(), e.shape.end(), 0) != e.shape.end()) {
      elements = 0;
    } else {
      for (int64_t d : e.shape) {
        if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
          return DataLoss(what, absl::StrCat(name, " has the shape [", absl::StrJoin(e.shape, ","),
                                             "]: its element count overflows 64 bits"));
        }
      }
    }
    uint64_t bytes = 0;
    if (__builtin_mul_overflow(elements, dtype->size, &bytes)) {
      return DataLoss(what, absl::StrCat(name, " has the shape [", absl::StrJoin(e.shape, ","),
                                         "]: its byte count overflows 64 bits"));
    }
    const uint64_t begin = e.offsets[0];
    const uint64_t end = e.offsets[1];
    if (end < begin) {
      return DataLoss(what, absl::StrCat(name, " has data_offsets [", begin, ", ", end,
                                         "]: the end is before the begin"));
    }
    if (end - begin != bytes) {
      return DataLoss(what, absl::StrCat(name, " has data_offsets [", begin, ", ", end, "] (",
                                         end - begin, " bytes), but ", e.dtype, " x shape [",
                                         absl::StrJoin(e.shape, ","), "] is ", bytes, " bytes"));
    }
    if (end > data_bytes) {
      return DataLoss(what, absl::StrCat(name, " has data_offsets [", begin, ", ", end,
                                         "], past the end of the data buffer (", data_bytes,
                                         " bytes, from file offset ", data_start, ")"));
    }
    layouts.push_back({&e, dtype, elements, begin, end});
  }
  // Contiguous from 0 and covering the buffer: sorted by range, each begins where the one before
  // ended (empty tensors included, anywhere).
  std::sort(layouts.begin(), layouts.end(), [](const Layout& a, const Layout& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.entry->name < b.entry->name;
  });
  uint64_t expected = 0;
  const Layout* previous = nullptr;
  for (const Layout& l : layouts) {
    if (l.begin < expected) {
      return DataLoss(
          what, absl::StrCat("tensor ", Quote(l.entry->name), " (data_offsets [", l.begin, ", ",
                             l.end, "]) overlaps tensor ", Quote(previous->entry->name),
                             " (data_offsets [", previous->begin, ", ", previous->end, "])"));
    }
    if (l.begin > expected) {
      return DataLoss(
          what, absl::StrCat("data bytes [", expected, ", ", l.begin, ") (file offset ",
                             data_start + expected, ") belong to no tensor: a hole before tensor ",
                             Quote(l.entry->name)));
    }
    expected = l.end;
    previous = &l;
  }
  if (expected != data_bytes) {
    return DataLoss(
        what, absl::StrCat("data bytes [", expected, ", ", data_bytes, ") (file offset ",
                           data_start + expected, ") after the last tensor belong to no tensor"));
  }
  return layouts;
}

// Reads `size` bytes at file offset `offset` into `out`.
using ReadAt = absl::FunctionRef<absl::Status(uint64_t offset, size_t size, char* out)>;

// Fills `values` (elements long) from the tensor's bytes at file offset `at`.
absl::Status ReadValues(const Layout& l, uint64_t at, ReadAt read, std::vector<float>& values) {
  if (l.dtype->convert == Convert::kF32) {
    return read(at, values.size() * sizeof(float), reinterpret_cast<char*>(values.data()));
  }
  const size_t size = static_cast<size_t>(l.dtype->size);
  std::vector<char> buffer(std::min<uint64_t>(kBufferBytes, l.end - l.begin));
  const size_t per_read = buffer.size() / size;
  for (size_t i = 0; i < values.size(); i += per_read) {
    const size_t n = std::min(per_read, values.size() - i);
    RETURN_IF_ERROR(read(at + i * size, n * size, buffer.data()));
    const char* p = buffer.data();
    for (size_t k = 0; k < n; ++k, p += size) {
      switch (l.dtype->convert) {
        case Convert::kF16: {
          uint16_t h;
          std::memcpy(&h, p, sizeof(h));
          values[i + k] = HalfToFloat(h);
          break;
        }
        case Convert::kBF16: {
          uint16_t b;
          std::memcpy(&b, p, sizeof(b));
          values[i + k] = BFloat16ToFloat(b);
          break;
        }
        case Convert::kF64: {
          double d;
          std::memcpy(&d, p, sizeof(d));
          values[i + k] = DoubleToFloat(d);
          break;
        }
        default:
          break;  // unreachable: checked by Decode
      }
    }
  }
  return absl::OkStatus();
}

// The whole decode, over a file of `file_size` bytes that `read` reads.
absl::StatusOr<SafetensorsFile> Decode(uint64_t file_size, ReadAt read, absl::string_view what) {
  if (file_size < kLengthBytes) {
    return DataLoss(what, absl::StrCat("truncated: ", file_size,
                                       " bytes, fewer than the 8 of the header length"));
  }
  uint64_t header_bytes = 0;
  RETURN_IF_ERROR(read(0, kLengthBytes, reinterpret_cast<char*>(&header_bytes)));
  if (header_bytes > kSafetensorsMaxHeaderBytes) {
    return DataLoss(what, absl::StrCat("the header length ", header_bytes, " is over the limit of ",
                                       kSafetensorsMaxHeaderBytes, " bytes"));
  }
  if (header_bytes > file_size - kLengthBytes) {
    return DataLoss(
        what, absl::StrCat("truncated: the header length is ", header_bytes, " bytes, but only ",
                           file_size - kLengthBytes, " follow the length"));
  }
  std::string json(static_cast<size_t>(header_bytes), '\0');
  RETURN_IF_ERROR(read(kLengthBytes, json.size(), json.data()));
  ASSIGN_OR_RETURN(Header header, ParseHeader(json, what));
  const uint64_t data_start = kLengthBytes + header_bytes;
  ASSIGN_OR_RETURN(const std::vector<Layout> layouts,
                   CheckLayout(header, data_start, file_size - data_start, what));
  for (const Layout& l : layouts) {
    if (l.dtype->convert == Convert::kNone) {
      return absl::UnimplementedError(
          absl::StrCat(what, ": tensor ", Quote(l.entry->name), " has the dtype ", l.dtype->name,
                       "; this reader converts only F32, F16, BF16 and F64 to float32"));
    }
  }
  // Every size is now checked against the file: allocating the values is safe.
  SafetensorsFile file;
  file.metadata = std::move(header.metadata);
  file.tensors.reserve(layouts.size());
  for (const Layout& l : layouts) {
    SafetensorsTensor t{l.entry->name, l.entry->shape,
                        std::vector<float>(static_cast<size_t>(l.elements))};
    RETURN_IF_ERROR(ReadValues(l, data_start + l.begin, read, t.values));
    file.tensors.push_back(std::move(t));
  }
  return file;
}

// --- Writing ---------------------------------------------------------------------------------

// True when nlohmann can write `s` as a JSON string (it is valid UTF-8).
bool IsJsonString(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::exception&) {
    return false;
  }
}

absl::Status CheckTensors(const std::vector<SafetensorsTensor>& tensors,
                          const std::map<std::string, std::string>& metadata,
                          absl::string_view what) {
  const auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", why));
  };
  std::set<absl::string_view> names;
  for (const SafetensorsTensor& t : tensors) {
    if (t.name.empty()) return invalid("a tensor has an empty name");
    if (t.name == kMetadataKey) return invalid("a tensor is named __metadata__ (reserved)");
    if (!names.insert(t.name).second) {
      return invalid(absl::StrCat("two tensors are named ", Quote(t.name)));
    }
    if (!IsJsonString(t.name)) {
      return invalid(absl::StrCat("the tensor name ", Quote(t.name), " is not valid UTF-8"));
    }
    if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; })) {
      return invalid(absl::StrCat("tensor ", Quote(t.name), " has the shape [",
                                  absl::StrJoin(t.shape, ","), "], a negative dimension"));
    }
    const bool empty = std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end();
    uint64_t elements = empty ? 0 : 1;
    bool overflow = false;
    for (int64_t d : t.shape) {
      if (!empty) {
        overflow =
            overflow || __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements);
      }
    }
    if (overflow || elements != t.values.size()) {
      return invalid(absl::StrCat("tensor ", Quote(t.name), " has ", t.values.size(),
                                  " values, which does not match its shape [",
                                  absl::StrJoin(t.shape, ","), "]"));
    }
  }
  for (const auto& [key, value] : metadata) {
    if (!IsJsonString(key) || !IsJsonString(value)) {
      return invalid(absl::StrCat("the metadata entry ", Quote(key), " is not valid UTF-8"));
    }
  }
  return absl::OkStatus();
}

std::vector<const SafetensorsTensor*> SortedByName(const std::vector<SafetensorsTensor>& tensors) {
  std::vector<const SafetensorsTensor*> sorted;
  sorted.reserve(tensors.size());
  for (const SafetensorsTensor& t : tensors) sorted.push_back(&t);
  std::sort(
      sorted.begin(), sorted.end(),
      [](const SafetensorsTensor* a, const SafetensorsTensor* b) { return a->name < b->name; });
  return sorted;
}

// The length field and the header, padded with spaces to a multiple of 8 bytes.
absl::StatusOr<std::string> LengthAndHeader(const std::vector<const SafetensorsTensor*>& sorted,
                                            const std::map<std::string, std::string>& metadata,
                                            absl::string_view what) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor* t : sorted) {
    const uint64_t end = offset + t->values.size() * sizeof(float);
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    entry["dtype"] = "F32";
    entry["shape"] = t->shape;
    entry["data_offsets"] = {offset, end};
    header[t->name] = std::move(entry);
    offset = end;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // not expected: CheckTensors checked UTF-8
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  if (text.size() > kSafetensorsMaxHeaderBytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": the header would be ", text.size(),
                                                     " bytes, over the format's limit of ",
                                                     kSafetensorsMaxHeaderBytes));
  }
  const uint64_t length = text.size();
  std::string out(reinterpret_cast<const char*>(&length), sizeof(length));
  out += text;
  return out;
}

using Put = absl::FunctionRef<absl::Status(const void* data, size_t size)>;

// The whole file, piece by piece.
absl::Status Emit(const std::vector<const SafetensorsTensor*>& sorted, const std::string& head,
                  Put put) {
  RETURN_IF_ERROR(put(head.data(), head.size()));
  for (const SafetensorsTensor* t : sorted) {
    RETURN_IF_ERROR(put(t->values.data(), t->values.size() * sizeof(float)));
  }
  return absl::OkStatus();
}

// Gathers small pieces into kBufferBytes writes; large ones go to the file directly.
class FileSink {
 public:
  FileSink(int fd, const std::string& path) : fd_(fd), path_(path) {}

  absl::Status Put(const void* data, size_t size) {
    if (size == 0) return absl::OkStatus();  // data may be null (an empty vector)
    if (buffer_.size() + size > kBufferBytes) RETURN_IF_ERROR(Flush());
    if (size >= kBufferBytes) return WriteFull(fd_, data, size, path_);
    buffer_.append(static_cast<const char*>(data), size);
    return absl::OkStatus();
  }

  absl::Status Flush() {
    RETURN_IF_ERROR(WriteFull(fd_, buffer_.data(), buffer_.size(), path_));
    buffer_.clear();
    return absl::OkStatus();
  }

 private:
  int fd_;
  const std::string& path_;
  std::string buffer_;
};

}  // namespace

absl::StatusOr<std::string> SerializeSafetensors(
    const std::vector<SafetensorsTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  constexpr absl::string_view kWhat = "safetensors";
  RETURN_IF_ERROR(CheckTensors(tensors, metadata, kWhat));
  const std::vector<const SafetensorsTensor*> sorted = SortedByName(tensors);
  ASSIGN_OR_RETURN(const std::string head, LengthAndHeader(sorted, metadata, kWhat));
  size_t total = head.size();
  for (const SafetensorsTensor* t : sorted) total += t->values.size() * sizeof(float);
  std::string out;
  out.reserve(total);
  RETURN_IF_ERROR(Emit(sorted, head, [&](const void* data, size_t size) {
    if (size > 0) out.append(static_cast<const char*>(data), size);
    return absl::OkStatus();
  }));
  return out;
}

absl::Status WriteSafetensors(const std::string& path,
                              const std::vector<SafetensorsTensor>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  const std::string what = absl::StrCat("write ", path);
  RETURN_IF_ERROR(CheckTensors(tensors, metadata, what));
  const std::vector<const SafetensorsTensor*> sorted = SortedByName(tensors);
  ASSIGN_OR_RETURN(const std::string head, LengthAndHeader(sorted, metadata, what));
  return WriteFileAtomically(path, [&](int fd, const std::string& temp_path) {
    FileSink sink(fd, temp_path);
    RETURN_IF_ERROR(
        Emit(sorted, head, [&](const void* data, size_t size) { return sink.Put(data, size); }));
    return sink.Flush();
  });
}

absl::StatusOr<SafetensorsFile> ParseSafetensors(absl::string_view bytes, absl::string_view what) {
  return Decode(
      bytes.size(),
      [&](uint64_t offset, size_t size, char* out) -> absl::Status {
        // Decode reads only what it checked against the size; this guards that promise.
        if (offset > bytes.size() || size > bytes.size() - offset) {
          return DataLoss(what, absl::StrCat("internal: read of ", size, " bytes at offset ",
                                             offset, " past the end"));
        }
        if (size > 0) std::memcpy(out, bytes.data() + offset, size);
        return absl::OkStatus();
      },
      what);
}

absl::StatusOr<SafetensorsFile> ReadSafetensors(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoError(errno, "open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoError(errno, "stat", path);
  if (!S_ISREG(st.st_mode)) return DataLoss(path, "not a regular file");
  return Decode(
      static_cast<uint64_t>(st.st_size),
      [&](uint64_t offset, size_t size, char* out) -> absl::Status {
        constexpr size_t kMaxReadBytes = size_t{1} << 30;
        while (size > 0) {
          const ssize_t n =
              ::pread(fd.get(), out, std::min(size, kMaxReadBytes), static_cast<off_t>(offset));
          if (n < 0) {
            if (errno == EINTR) continue;
            return ErrnoError(errno, "read", path);
          }
          if (n == 0) return DataLoss(path, "truncated while being read (the file shrank)");
          out += n;
          offset += static_cast<uint64_t>(n);
          size -= static_cast<size_t>(n);
        }
        return absl::OkStatus();
      },
      path);
}

}  // namespace psflow
