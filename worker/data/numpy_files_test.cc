// Files NumPy itself writes (np.save, np.savez, np.savez_compressed), read back exactly. Needs
// /usr/bin/python3 with numpy (Debian: python3-numpy); each test skips, saying so, without it.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "worker/data/array_dataset.h"
#include "worker/data/npy.h"
#include "worker/data/npz.h"

extern char** environ;

namespace psflow::data {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::UnorderedElementsAre;

constexpr char kPython[] = "/usr/bin/python3";

// Runs kPython with `args`; its exit status, or -1 when it could not run or was killed.
// `quiet` sends its stderr to /dev/null.
int RunPython(const std::vector<std::string>& args, bool quiet) {
  std::vector<std::string> argv_strings = {kPython};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (quiet) posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, kPython, &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// Writes the files the tests read, into `dir`.
constexpr char kWriter[] = R"py(
import sys
import numpy as np
d = sys.argv[1]
x = (np.arange(24, dtype=np.float32) * 0.25 - 3).reshape(6, 4)
y = np.array([0, 1, 2, 0, 1, 2], dtype=np.int64)
u16 = np.arange(5, dtype='>u2') * 1000
big = (np.arange(200000) % 1000).astype(np.float32)
np.savez(d + '/stored.npz', x=x, y=y, u16=u16, big=big)
np.savez_compressed(d + '/deflated.npz', x=x, y=y, u16=u16, big=big)
np.savez(d + '/positional.npz', y)
np.save(d + '/images.npy', (np.arange(24) * 11 % 256).astype(np.uint8).reshape(2, 3, 4))
np.save(d + '/fortran.npy', np.asfortranarray(x.astype(np.float64)))
np.save(d + '/bools.npy', np.array([True, False, True]))
with open(d + '/v2.npy', 'wb') as f:
    np.lib.format.write_array(f, y.astype(np.int32), version=(2, 0))
with open(d + '/v3.npy', 'wb') as f:
    np.lib.format.write_array(f, y.astype(np.uint8), version=(3, 0))
np.save(d + '/tokens.npy', np.array([5, 0, 3], dtype=np.int32))
np.save(d + '/object.npy', np.array([{'a': 1}], dtype=object), allow_pickle=True)
)py";

class NumpyFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kPython, X_OK) != 0) {
      GTEST_SKIP() << kPython << " is missing: files written by NumPy are not checked";
    }
    if (RunPython({"-c", "import numpy"}, true) != 0) {
      GTEST_SKIP() << kPython << " has no numpy (Debian: apt-get install python3-numpy): files "
                   << "written by NumPy are not checked";
    }
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("psflow_numpy_files_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    ASSERT_EQ(RunPython({"-c", kWriter, dir_.string()}, false), 0) << "the NumPy writer failed";
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string Path(const std::string& name) const { return (dir_ / name).string(); }

  static std::vector<float> X() {
    std::vector<float> x;
    for (int i = 0; i < 24; ++i) x.push_back(static_cast<float>(i) * 0.25f - 3);
    return x;
  }
  static std::vector<float> Big() {
    std::vector<float> big;
    for (int i = 0; i < 200000; ++i) big.push_back(static_cast<float>(i % 1000));
    return big;
  }

  std::filesystem::path dir_;
};

TEST_F(NumpyFilesTest, ReadsSavezAndSavezCompressed) {
  for (const char* name : {"stored.npz", "deflated.npz"}) {
    const std::string path = Path(name);
    auto names = ListNpzMembers(path);
    ASSERT_TRUE(names.ok()) << names.status();
    EXPECT_THAT(*names, UnorderedElementsAre("x", "y", "u16", "big")) << name;
    auto x = ReadNpzMember(path, "x");
    ASSERT_TRUE(x.ok()) << x.status();
    EXPECT_EQ(x->type, NpyType::kFloat32);
    EXPECT_THAT(x->shape, ElementsAre(6, 4));
    EXPECT_THAT(x->ToFloats(), ElementsAreArray(X()));
    auto y = ReadNpzMember(path, "y");
    ASSERT_TRUE(y.ok()) << y.status();
    EXPECT_EQ(y->type, NpyType::kInt64);
    EXPECT_THAT(*y->ToIntegers("y"), ElementsAre(0, 1, 2, 0, 1, 2));
    auto u16 = ReadNpzMember(path, "u16");  // big-endian in the file
    ASSERT_TRUE(u16.ok()) << u16.status();
    EXPECT_EQ(u16->type, NpyType::kUint16);
    EXPECT_THAT(*u16->ToIntegers("u16"), ElementsAre(0, 1000, 2000, 3000, 4000));
    auto big = ReadNpzMember(path, "big");
    ASSERT_TRUE(big.ok()) << big.status();
    EXPECT_EQ(big->ToFloats(), Big()) << name;

    auto d = LoadNpzSplit(path, "x", "y", ArrayDataOptions{{2, 2}, 3, 2.f});
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<float> doubled = X();
    for (float& v : doubled) v *= 2;
    EXPECT_EQ(d->inputs, doubled);
    EXPECT_THAT(d->labels, ElementsAre(0, 1, 2, 0, 1, 2));
  }
  auto positional = ReadNpzMember(Path("positional.npz"), "arr_0");
  ASSERT_TRUE(positional.ok()) << positional.status();
  EXPECT_THAT(*positional->ToIntegers("arr_0"), ElementsAre(0, 1, 2, 0, 1, 2));
}

TEST_F(NumpyFilesTest, ReadsNpyFiles) {
  auto images = ReadNpy(Path("images.npy"));
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->type, NpyType::kUint8);
  EXPECT_THAT(images->shape, ElementsAre(2, 3, 4));
  std::vector<float> pixels;
  for (int i = 0; i < 24; ++i) pixels.push_back(static_cast<float>(i * 11 % 256));
  EXPECT_EQ(images->ToFloats(), pixels);

  auto fortran = ReadNpy(Path("fortran.npy"));
  ASSERT_TRUE(fortran.ok()) << fortran.status();
  EXPECT_EQ(fortran->type, NpyType::kFloat64);
  EXPECT_THAT(fortran->shape, ElementsAre(6, 4));
  EXPECT_EQ(fortran->ToFloats(), X());

  auto bools = ReadNpy(Path("bools.npy"));
  ASSERT_TRUE(bools.ok()) << bools.status();
  EXPECT_EQ(bools->type, NpyType::kBool);
  EXPECT_THAT(bools->ToFloats(), ElementsAre(1.f, 0.f, 1.f));

  for (const char* name : {"v2.npy", "v3.npy"}) {
    auto a = ReadNpy(Path(name));
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_THAT(*a->ToIntegers(name), ElementsAre(0, 1, 2, 0, 1, 2)) << name;
  }

  auto d = LoadNpySplit(Path("images.npy"), Path("v2.npy"), ArrayDataOptions{{3, 4}, 3, 1.f});
  EXPECT_FALSE(d.ok());  // 2 images, 6 labels
  auto tokens = LoadTokenIds(Path("tokens.npy"), 6);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_THAT(*tokens, ElementsAre(5, 0, 3));

  auto object = ReadNpy(Path("object.npy"));
  EXPECT_EQ(object.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace psflow::data
