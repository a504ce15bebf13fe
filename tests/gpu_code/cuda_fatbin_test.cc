#include "tests/gpu_code/cuda_fatbin.h"

#include <elf.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace psflow::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <class T>
void Append(std::string& bytes, T value) {
  bytes.append(reinterpret_cast<const char*>(&value), sizeof(value));
}

// A CUDA ELF image as nvcc 13 writes it: ABI version 8, the architecture in e_flags bits 8-15.
std::string CudaElf(int arch) {
  Elf64_Ehdr ehdr{};
  std::memcpy(ehdr.e_ident, ELFMAG, SELFMAG);
  ehdr.e_ident[EI_CLASS] = ELFCLASS64;
  ehdr.e_ident[EI_ABIVERSION] = 8;
  ehdr.e_machine = 190;
  ehdr.e_flags = 0x6000004 | (static_cast<uint32_t>(arch) << 8);
  std::string bytes;
  Append(bytes, ehdr);
  return bytes;
}

// One 64-byte entry header and its payload, padded to 8 bytes.
std::string Entry(uint16_t kind, int arch, uint64_t flags, std::string payload) {
  payload.resize((payload.size() + 7) / 8 * 8, '\0');
  std::string bytes;
  Append<uint16_t>(bytes, kind);
  Append<uint16_t>(bytes, 0x0101);
  Append<uint32_t>(bytes, 64);
  Append<uint64_t>(bytes, payload.size());
  bytes.resize(28, '\0');
  Append<uint32_t>(bytes, static_cast<uint32_t>(arch));
  bytes.resize(40, '\0');
  Append<uint64_t>(bytes, flags);
  bytes.resize(64, '\0');
  return bytes + payload;
}

std::string FatbinBytes(const std::string& entries) {
  std::string bytes;
  Append<uint32_t>(bytes, 0xBA55ED50);
  Append<uint16_t>(bytes, 1);
  Append<uint16_t>(bytes, 16);
  Append<uint64_t>(bytes, entries.size());
  return bytes + entries;
}

constexpr uint64_t kZstd = 0x8011;  // as nvcc 13 flags its compressed PTX
const std::string kZstdBytes = "\x28\xb5\x2f\xfd compressed";

std::vector<std::string> Described(const Fatbin& fatbin) {
  std::vector<std::string> out;
  for (const GpuCode& code : fatbin.code) {
    out.push_back(absl::StrCat(Describe(code), code.compressed ? " (compressed)" : ""));
  }
  return out;
}

TEST(ParseFatbins, ReadsTheKindAndArchitectureOfEveryEntryOfEveryFatbin) {
  const std::string first =
      FatbinBytes(Entry(1, 90, kZstd, kZstdBytes) + Entry(2, 80, 0x11, CudaElf(80)) +
                  Entry(2, 90, 0x11, CudaElf(90)));
  const std::string second =
      FatbinBytes(Entry(2, 75, kZstd, kZstdBytes) + Entry(1, 75, 0x11, ".version"));
  const std::string section = first + std::string(8, '\0') + second;
  const auto fatbins = ParseFatbins(section);
  ASSERT_TRUE(fatbins.ok()) << fatbins.status();
  ASSERT_EQ(fatbins->size(), 2u);
  EXPECT_EQ((*fatbins)[0].offset, 0u);
  EXPECT_THAT(Described((*fatbins)[0]), ElementsAre("compute_90 (compressed)", "sm_80", "sm_90"));
  EXPECT_EQ((*fatbins)[1].offset, first.size() + 8);
  EXPECT_THAT(Described((*fatbins)[1]), ElementsAre("sm_75 (compressed)", "compute_75"));
}

TEST(ParseFatbins, AnEmptySectionHoldsNoFatbins) {
  const auto fatbins = ParseFatbins("");
  ASSERT_TRUE(fatbins.ok()) << fatbins.status();
  EXPECT_TRUE(fatbins->empty());
}

TEST(ParseFatbins, AnElfImageOfAnotherArchitectureThanItsHeaderIsAnError) {
  const auto fatbins = ParseFatbins(FatbinBytes(Entry(2, 90, 0x11, CudaElf(80))));
  EXPECT_EQ(fatbins.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fatbins.status().message(), HasSubstr("header says sm_90, its ELF image says sm_80"));
}

TEST(ParseFatbins, AnUncompressedElfEntryThatIsNoCudaElfIsAnError) {
  const auto fatbins = ParseFatbins(FatbinBytes(Entry(2, 90, 0x11, "not an ELF image")));
  EXPECT_EQ(fatbins.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(fatbins.status().message(), HasSubstr("not a CUDA ELF image"));
}

TEST(ParseFatbins, CutShortOrWithoutMagicIsAnErrorNamingTheOffset) {
  const std::string whole = FatbinBytes(Entry(2, 90, 0x11, CudaElf(90)));
  for (size_t size : {size_t{4}, size_t{16}, size_t{40}, whole.size() - 1}) {
    const auto fatbins = ParseFatbins(absl::string_view(whole).substr(0, size));
    EXPECT_EQ(fatbins.status().code(), absl::StatusCode::kInvalidArgument) << size;
    EXPECT_THAT(fatbins.status().message(), HasSubstr("fatbin at section offset")) << size;
  }
  const auto no_magic = ParseFatbins(whole + "not a fatbin header");
  EXPECT_THAT(no_magic.status().message(), HasSubstr("offset " + std::to_string(whole.size())));
  EXPECT_THAT(no_magic.status().message(), HasSubstr("no fatbin magic"));
}

TEST(ReadElfSection, ReadsANamedSectionOfARealExecutable) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  const std::string path(self, static_cast<size_t>(n));
  const auto text = ReadElfSection(path, ".text");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_GT(text->size(), 1000u);
  // This test is built without CUDA code: no fatbins.
  EXPECT_EQ(ReadFatbins(path).status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadElfSection, AFileThatIsNotElfOrIsMissingIsAnError) {
  const std::string path =
      (std::filesystem::temp_directory_path() / absl::StrCat("cuda_fatbin_test_", getpid()))
          .string();
  std::ofstream(path) << "#!/bin/sh\n";
  const auto not_elf = ReadElfSection(path, ".nv_fatbin");
  EXPECT_EQ(not_elf.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_elf.status().message(), HasSubstr("is not a 64-bit little-endian ELF file"));
  std::filesystem::remove(path);
  EXPECT_EQ(ReadElfSection(path, ".nv_fatbin").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace psflow::testing
