#include "operator/local/local_certificates.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/read_file.h"
#include "core/transport_security.h"

namespace psflow::local {
namespace {

namespace fs = std::filesystem;

mode_t Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(LocalCertificates, PrivateFilesThatVerifyAndGoWithTheObject) {
  const std::string parent = ::testing::TempDir();
  std::string dir;
  {
    absl::StatusOr<std::unique_ptr<LocalCertificates>> certs =
        LocalCertificates::Create(parent, "tiny");
    ASSERT_TRUE(certs.ok()) << certs.status();
    dir = (*certs)->dir();
    EXPECT_TRUE(absl::StartsWith(dir, absl::StrCat(parent, "/psflow-tls-"))) << dir;
    absl::StatusOr<std::vector<std::string>> flags =
        (*certs)->AddReplica("ps-0", {"10.77.0.2", "127.0.0.1"});
    ASSERT_TRUE(flags.ok()) << flags.status();
    EXPECT_EQ(*flags, (std::vector<std::string>{absl::StrCat("--tls_ca=", dir, "/ca.crt"),
                                                absl::StrCat("--tls_cert=", dir, "/ps-0.crt"),
                                                absl::StrCat("--tls_key=", dir, "/ps-0.key")}));
    EXPECT_EQ(Mode(dir), 0700u);
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) {
      names.push_back(entry.path().filename().string());
      EXPECT_EQ(Mode(entry.path().string()), 0600u) << entry.path();
    }
    std::sort(names.begin(), names.end());
    // No CA key on disk: it never leaves the runner's memory.
    EXPECT_EQ(names, (std::vector<std::string>{"ca.crt", "ps-0.crt", "ps-0.key"}));
    // The files are what psflow-ps and psflow-worker accept, naming the replica's addresses.
    EXPECT_TRUE(LoadTlsFiles({dir + "/ca.crt", dir + "/ps-0.crt", dir + "/ps-0.key"}).ok());
    EXPECT_EQ(
        SubjectAltNames(ReadFile(dir + "/ps-0.crt").value()).value(),
        (std::vector<std::string>{"DNS:localhost", "DNS:ps-0", "IP:10.77.0.2", "IP:127.0.0.1"}));
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

// The folder of a runner that was SIGKILLed (its pid gone) is removed by the next run; a live
// runner's, and folders not of this form, stay.
TEST(LocalCertificates, TheFolderOfAKilledRunIsRemovedByTheNext) {
  const std::string parent = absl::StrCat(::testing::TempDir(), "/leftovers_", ::getpid());
  fs::remove_all(parent);
  fs::create_directories(parent);
  const pid_t gone = ::fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) ::_exit(0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);  // reaped: the pid names no process now
  const std::string killed = absl::StrCat(parent, "/psflow-tls-", gone, "-AbC123");
  const std::string live = absl::StrCat(parent, "/psflow-tls-", ::getpid(), "-XyZ789");
  const std::string other = absl::StrCat(parent, "/psflow-tls-notapid");
  for (const std::string& dir : {killed, live, other}) {
    fs::create_directories(dir);
    std::ofstream(dir + "/worker-0.key") << "key";
  }
  {
    absl::StatusOr<std::unique_ptr<LocalCertificates>> certs =
        LocalCertificates::Create(parent, "next");
    ASSERT_TRUE(certs.ok()) << certs.status();
    EXPECT_TRUE(
        absl::StartsWith((*certs)->dir(), absl::StrCat(parent, "/psflow-tls-", ::getpid(), "-")));
  }
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(live + "/worker-0.key"));
  EXPECT_TRUE(fs::exists(other + "/worker-0.key"));
  fs::remove_all(parent);
}

TEST(LocalCertificates, AFolderThatCannotBeMadeIsNamed) {
  const std::string parent = ::testing::TempDir() + "psflow_no_such_parent/deeper";
  absl::StatusOr<std::unique_ptr<LocalCertificates>> certs =
      LocalCertificates::Create(parent, "tiny");
  EXPECT_EQ(certs.status(), absl::FailedPreconditionError(
                                absl::StrCat("cannot make a folder for the TLS certificates in ",
                                             parent, ": No such file or directory")));
}

}  // namespace
}  // namespace psflow::local
