#include "tests/gpu_code/cuda_fatbin.h"

#include <elf.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psflow::testing {
namespace {

constexpr uint32_t kFatbinMagic = 0xBA55ED50;
constexpr size_t kFatbinHeaderSize = 16;
constexpr size_t kEntryHeaderMinSize = 64;
constexpr uint16_t kEntryPtx = 1;
constexpr uint16_t kEntryElf = 2;
constexpr uint64_t kCompressedFlags = 0x2000 | 0x8000;  // LZ4 (CUDA 11-12), zstd (CUDA 13)
constexpr uint16_t kEmCuda = 190;

// The T at `offset` of `bytes` (unaligned, little-endian as the host); nullopt past the end.
template <class T>
std::optional<T> Read(absl::string_view bytes, size_t offset) {
  if (offset > bytes.size() || bytes.size() - offset < sizeof(T)) return std::nullopt;
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

absl::Status Malformed(size_t offset, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("fatbin at section offset ", offset, ": ", what));
}

// Cross-checks an uncompressed ELF payload against the architecture its entry header names.
absl::Status CheckCudaElf(absl::string_view elf, int arch, size_t offset) {
  const auto ehdr = Read<Elf64_Ehdr>(elf, 0);
  if (!ehdr || std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0 || ehdr->e_machine != kEmCuda) {
    return Malformed(offset, "an uncompressed ELF entry is not a CUDA ELF image");
  }
  if (ehdr->e_ident[EI_ABIVERSION] >= 8) {
    const int elf_arch = static_cast<int>((ehdr->e_flags >> 8) & 0xff);
    if (elf_arch != arch) {
      return Malformed(offset, absl::StrCat("the entry header says sm_", arch,
                                            ", its ELF image says sm_", elf_arch));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Fatbin>> ParseFatbins(absl::string_view section) {
  std::vector<Fatbin> fatbins;
  size_t pos = 0;
  while (true) {
    // The linker may pad between the fatbins of two translation units.
    while (pos < section.size() && section[pos] == '\0') ++pos;
    if (pos == section.size()) break;
    const auto magic = Read<uint32_t>(section, pos);
    const auto header_size = Read<uint16_t>(section, pos + 6);
    const auto entries_size = Read<uint64_t>(section, pos + 8);
    if (!magic || !header_size || !entries_size) return Malformed(pos, "header cut short");
    if (*magic != kFatbinMagic) return Malformed(pos, "no fatbin magic 0xBA55ED50");
    if (*header_size < kFatbinHeaderSize || *header_size > section.size() - pos ||
        *entries_size > section.size() - pos - *header_size) {
      return Malformed(pos, "sizes run past the end of the section");
    }
    Fatbin fatbin;
    fatbin.offset = pos;
    size_t entry = pos + *header_size;
    const size_t end = entry + *entries_size;
    while (entry < end) {
      const absl::string_view rest = section.substr(entry, end - entry);
      const auto kind = Read<uint16_t>(rest, 0);
      const auto entry_header_size = Read<uint32_t>(rest, 4);
      const auto payload_size = Read<uint64_t>(rest, 8);
      const auto arch = Read<uint32_t>(rest, 28);
      const auto flags = Read<uint64_t>(rest, 40);
      if (!kind || !entry_header_size || !payload_size || !arch || !flags ||
          *entry_header_size < kEntryHeaderMinSize || *entry_header_size > rest.size() ||
          *payload_size > rest.size() - *entry_header_size) {
        return Malformed(entry, "entry header cut short or its sizes run past the fatbin");
      }
      GpuCode code;
      code.arch = static_cast<int>(*arch);
      code.compressed = (*flags & kCompressedFlags) != 0;
      if (*kind == kEntryPtx || *kind == kEntryElf) {
        code.kind = *kind == kEntryPtx ? GpuCode::Kind::kPtx : GpuCode::Kind::kSass;
        if (code.kind == GpuCode::Kind::kSass && !code.compressed) {
          const absl::Status s =
              CheckCudaElf(rest.substr(*entry_header_size, *payload_size), code.arch, entry);
          if (!s.ok()) return s;
        }
        fatbin.code.push_back(code);
      }
      entry += *entry_header_size + *payload_size;
    }
    fatbins.push_back(std::move(fatbin));
    pos = end;
  }
  return fatbins;
}

absl::StatusOr<std::string> ReadElfSection(const std::string& path, absl::string_view name) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int error = errno;
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open ", path));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  const std::string file = std::move(bytes).str();
  const auto not_elf = [&path](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a 64-bit little-endian ELF file: ", why));
  };
  const auto ehdr = Read<Elf64_Ehdr>(file, 0);
  if (!ehdr || std::memcmp(ehdr->e_ident, ELFMAG, SELFMAG) != 0) return not_elf("no ELF magic");
  if (ehdr->e_ident[EI_CLASS] != ELFCLASS64 || ehdr->e_ident[EI_DATA] != ELFDATA2LSB) {
    return not_elf("another class or byte order");
  }
  if (ehdr->e_shentsize != sizeof(Elf64_Shdr)) return not_elf("unexpected section header size");
  const auto section_header = [&](size_t index) {
    return Read<Elf64_Shdr>(file, ehdr->e_shoff + index * sizeof(Elf64_Shdr));
  };
  if (ehdr->e_shstrndx >= ehdr->e_shnum) return not_elf("no section names");
  const auto names = section_header(ehdr->e_shstrndx);
  if (!names || names->sh_offset > file.size() || names->sh_size > file.size() - names->sh_offset) {
    return not_elf("section names cut short");
  }
  const absl::string_view name_table(file.data() + names->sh_offset, names->sh_size);
  for (size_t i = 0; i < ehdr->e_shnum; ++i) {
    const auto shdr = section_header(i);
    if (!shdr || shdr->sh_name >= name_table.size()) return not_elf("section headers cut short");
    absl::string_view section_name = name_table.substr(shdr->sh_name);
    section_name = section_name.substr(0, section_name.find('\0'));
    if (section_name != name) continue;
    if (shdr->sh_type == SHT_NOBITS) return std::string();
    if (shdr->sh_offset > file.size() || shdr->sh_size > file.size() - shdr->sh_offset) {
      return not_elf(absl::StrCat("section ", name, " runs past the end of the file"));
    }
    return file.substr(shdr->sh_offset, shdr->sh_size);
  }
  return absl::NotFoundError(absl::StrCat(path, " has no ELF section ", name));
}

absl::StatusOr<std::vector<Fatbin>> ReadFatbins(const std::string& path) {
  absl::StatusOr<std::string> section = ReadElfSection(path, ".nv_fatbin");
  if (!section.ok()) return section.status();
  absl::StatusOr<std::vector<Fatbin>> fatbins = ParseFatbins(*section);
  if (!fatbins.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": .nv_fatbin: ", fatbins.status().message()));
  }
  return fatbins;
}

std::string Describe(const GpuCode& code) {
  return absl::StrCat(code.kind == GpuCode::Kind::kPtx ? "compute_" : "sm_", code.arch);
}

}  // namespace psflow::testing
