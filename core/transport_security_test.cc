#include "core/transport_security.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace psflow {
namespace {

namespace fs = std::filesystem;
const absl::Time kNow = absl::FromUnixSeconds(1'780'000'000);  // 2026-05-28 20:26:40 UTC

class LoadTlsFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("psflow_tls_files_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    const CertificateAuthority ca =
        CertificateAuthority::Create("ca", absl::Hours(48), kNow).value();
    const PemCertificate leaf =
        ca.Issue({.common_name = "ps-0", .dns_names = {"localhost"}, .ip_addresses = {}},
                 absl::Hours(24), kNow)
            .value();
    files_ = {Write("ca.crt", ca.pem().certificate), Write("tls.crt", leaf.certificate),
              Write("tls.key", leaf.private_key)};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::string Error(const TlsFiles& files, absl::Time now = kNow) {
    absl::StatusOr<TransportSecurity> s = LoadTlsFiles(files, now);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(s.status().message());
  }

  fs::path dir_;
  TlsFiles files_;
};

TEST_F(LoadTlsFilesTest, GoodFilesGiveMutualTls) {
  absl::StatusOr<TransportSecurity> s = LoadTlsFiles(files_, kNow);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->tls());
  EXPECT_STREQ(s->Describe(), "mutual TLS");
  EXPECT_FALSE(TransportSecurity().tls());
  EXPECT_STREQ(TransportSecurity().Describe(), "plaintext");
}

TEST_F(LoadTlsFilesTest, EachBadFileIsNamedWithItsReason) {
  TlsFiles missing = files_;
  missing.ca = (dir_ / "nope.crt").string();
  EXPECT_EQ(Error(missing),
            absl::StrCat("--tls_ca cannot read ", missing.ca, ": No such file or directory"));

  TlsFiles not_pem = files_;
  not_pem.certificate = Write("junk.crt", "not a certificate\n");
  EXPECT_EQ(Error(not_pem),
            absl::StrCat("--tls_cert ", not_pem.certificate, ": is not a PEM certificate"));

  TlsFiles key_is_cert = files_;
  key_is_cert.private_key = files_.certificate;
  EXPECT_EQ(Error(key_is_cert),
            absl::StrCat("--tls_key ", files_.certificate, ": is not a PEM private key"));

  const CertificateAuthority other =
      CertificateAuthority::Create("other", absl::Hours(48), kNow).value();
  const PemCertificate stranger =
      other
          .Issue({.common_name = "x", .dns_names = {"localhost"}, .ip_addresses = {}},
                 absl::Hours(24), kNow)
          .value();
  TlsFiles wrong_key = files_;
  wrong_key.private_key = Write("other.key", stranger.private_key);
  EXPECT_EQ(Error(wrong_key),
            absl::StrCat("--tls_key ", wrong_key.private_key,
                         ": is not the private key of the certificate in ", files_.certificate));

  TlsFiles foreign = files_;
  foreign.certificate = Write("other.crt", stranger.certificate);
  foreign.private_key = Write("other.key", stranger.private_key);
  EXPECT_EQ(Error(foreign), absl::StrCat("--tls_cert ", foreign.certificate,
                                         ": is not signed by the CA (--tls_ca ", files_.ca, ")"));

  EXPECT_EQ(
      Error(files_, kNow + absl::Hours(30)),
      absl::StrCat("--tls_cert ", files_.certificate,
                   ": has expired (notAfter 2026-05-29 20:26:40 UTC) (--tls_ca ", files_.ca, ")"));
}

}  // namespace
}  // namespace psflow
