#include "operator/local/local_certificates.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
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
    // No CA key on disk: it never leaves the runner's memory (.lock: the run's, held).
    EXPECT_EQ(names, (std::vector<std::string>{".lock", "ca.crt", "ps-0.crt", "ps-0.key"}));
    // The files are what psflow-ps and psflow-worker accept, naming the replica's addresses.
    EXPECT_TRUE(LoadTlsFiles({dir + "/ca.crt", dir + "/ps-0.crt", dir + "/ps-0.key"}).ok());
    EXPECT_EQ(
        SubjectAltNames(ReadFile(dir + "/ps-0.crt").value()).value(),
        (std::vector<std::string>{"DNS:localhost", "DNS:ps-0", "IP:10.77.0.2", "IP:127.0.0.1"}));
  }
  EXPECT_FALSE(fs::exists(dir)) << dir;
}

// The folder of a run that was SIGKILLed (its lock file held by nobody) is removed by the next
// run; a live run's (its lock held), and a folder without a lock file, stay.
TEST(LocalCertificates, TheFolderOfAKilledRunIsRemovedByTheNext) {
  const std::string parent = absl::StrCat(::testing::TempDir(), "/leftovers_", ::getpid());
  fs::remove_all(parent);
  fs::create_directories(parent);
  const std::string killed = parent + "/psflow-tls-AbC123";
  const std::string live = parent + "/psflow-tls-XyZ789";
  const std::string other = parent + "/psflow-tls-nolock";
  for (const std::string& dir : {killed, live, other}) {
    fs::create_directories(dir);
    std::ofstream(dir + "/worker-0.key") << "key";
  }
  std::ofstream(killed + "/.lock") << "";
  const int held = ::open((live + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX | LOCK_NB), 0);
  std::string made;
  {
    absl::StatusOr<std::unique_ptr<LocalCertificates>> certs =
        LocalCertificates::Create(parent, "next");
    ASSERT_TRUE(certs.ok()) << certs.status();
    made = (*certs)->dir();
    EXPECT_TRUE(fs::exists(made + "/.lock"));
    // Its own folder is not a leftover while it lives: a run beside it leaves it be.
    absl::StatusOr<std::unique_ptr<LocalCertificates>> beside =
        LocalCertificates::Create(parent, "beside");
    ASSERT_TRUE(beside.ok()) << beside.status();
    EXPECT_TRUE(fs::exists(made + "/ca.crt"));
  }
  ::close(held);
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(live + "/worker-0.key"));
  EXPECT_TRUE(fs::exists(other + "/worker-0.key"));
  EXPECT_FALSE(fs::exists(made));  // gone with its object
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
