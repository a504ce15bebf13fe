// Bad input of every kind a user can give ends in one clear line and a non-zero exit: never a
// crash, a hang or a stack dump. Each case runs the real binary.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/certificates.h"
#include "core/free_ports.h"
#include "tests/test_util.h"

namespace psflow::testing {
namespace {

namespace fs = std::filesystem;
constexpr auto kTimeout = std::chrono::seconds(60);
constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

class BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           absl::StrCat("psflow_bad_input_", getpid(), "_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // Asserts the run failed with `code`, without timing out, and that its output is exactly one
  // line (the error), which contains every one of `parts`.
  static void ExpectOneLineError(const CommandResult& r, int code,
                                 const std::vector<std::string>& parts) {
    ASSERT_FALSE(r.timed_out) << r.output;
    EXPECT_EQ(r.status.signal, 0) << r.output;
    EXPECT_EQ(r.status.code, code) << r.output;
    std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 1u) << r.output;
    for (const auto& p : parts) EXPECT_TRUE(absl::StrContains(lines[0], p)) << lines[0];
  }

  // The last line of a run that logged before failing.
  static std::string LastLine(const CommandResult& r) {
    std::vector<std::string> lines = absl::StrSplit(r.output, '\n', absl::SkipEmpty());
    return lines.empty() ? "" : lines.back();
  }

  fs::path dir_;
};

const char kHead[] = "apiVersion: psflow.io/v1alpha1\nkind: TrainingJob\nmetadata: {name: bad}\n";

TEST_F(BadInput, ManifestThatIsNotYaml) {
  const auto path = Write("job.yaml", "spec: [this is: {not yaml");
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", path}, Environment({}), kTimeout), 2,
                     {"psflow: ", path, "not valid YAML"});
}

TEST_F(BadInput, ManifestWithUnknownReplicaType) {
  const auto path = Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    Worker: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-worker]}]}}}
    Master: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-ps]}]}}}
)"));
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", path}, Environment({}), kTimeout), 2,
                     {"spec.replicaSpecs.Master", "unknown replica type"});
}

TEST_F(BadInput, ManifestWithZeroWorkers) {
  const auto path = Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    PS: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-ps]}]}}}
    Worker: {replicas: 0, template: {spec: {containers: [{name: psflow, command: [psflow-worker]}]}}}
)"));
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", path}, Environment({}), kTimeout), 2,
                     {"at least one Worker"});
}

TEST_F(BadInput, ManifestWithoutCommand) {
  const auto path = Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    PS: {replicas: 1, template: {spec: {containers: [{name: psflow, image: psflow/ps}]}}}
    Worker: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-worker]}]}}}
)"));
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", path}, Environment({}), kTimeout), 2,
                     {"spec.replicaSpecs.PS", "has no command"});
}

TEST_F(BadInput, ManifestThatDoesNotExist) {
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", (dir_ / "none.yaml").string()},
                                Environment({}), kTimeout),
                     2, {"none.yaml", "cannot read"});
}

TEST_F(BadInput, WorkerWithMissingDataset) {
  const std::string empty = (dir_ / "empty").string();
  fs::create_directories(empty);
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--data_path=" + empty},
                                Environment({}, {"TF_CONFIG"}), kTimeout),
                     1, {"psflow-worker: ", empty + "/train-images-idx3-ubyte.gz", "no such file"});
}

TEST_F(BadInput, WorkerWithTruncatedDataset) {
  const fs::path data = dir_ / "fmnist";
  fs::create_directories(data);
  for (const auto& entry : fs::directory_iterator(kFashionMnist)) {
    fs::copy_file(entry.path(), data / entry.path().filename());
  }
  const fs::path labels = data / "train-labels-idx1-ubyte.gz";
  fs::resize_file(labels, fs::file_size(labels) / 2);
  const auto r = RunCommand({Binary("psflow-worker"), "--data_path=" + data.string()},
                            Environment({}, {"TF_CONFIG"}), kTimeout);
  ExpectOneLineError(r, 1, {"psflow-worker: ", labels.string()});
  EXPECT_TRUE(absl::StrContains(r.output, "truncated") || absl::StrContains(r.output, "corrupt"))
      << r.output;
}

// A model of one's own: a missing or invalid model file, a model named twice, data that is not
// what the model file says, weights of another model: one line each, naming the file.
TEST_F(BadInput, ModelFilesDataAndWeights) {
  const auto env = Environment({}, {"TF_CONFIG"});
  const std::string worker = Binary("psflow-worker");
  ExpectOneLineError(
      RunCommand({worker, "--model_file=" + (dir_ / "none.yaml").string()}, env, kTimeout), 1,
      {"psflow-worker: cannot read ", "none.yaml"});
  const std::string bad = Write("bad.yaml",
                                "name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n"
                                "  - {type: dense, units: 3, unit: 2}\ndata: {format: csv}\n");
  ExpectOneLineError(RunCommand({worker, "--model_file=" + bad}, env, kTimeout), 1,
                     {"bad.yaml:5: layer 0 (dense): unknown option \"unit\""});
  const std::string model = Write("m.yaml",
                                  "name: m\ninput: {shape: [4]}\nclasses: 3\nlayers:\n"
                                  "  - {type: dense, units: 3}\n"
                                  "data: {format: csv, train: t.csv, test: t.csv}\n");
  ExpectOneLineError(
      RunCommand({worker, "--model_file=" + model, "--model=mnist_mlp"}, env, kTimeout), 1,
      {"--model_file=", "and --model name two models: give one"});
  ExpectOneLineError(RunCommand({worker, "--model_file=" + model, "--eval_only"}, env, kTimeout), 1,
                     {"--eval_only needs --weights=FILE"});
  Write("t.csv", "a,b,c,d,label\n1,2,3,4,0\n1,2,x,4,1\n");
  ExpectOneLineError(
      RunCommand({worker, "--model_file=" + model, "--data_path=" + dir_.string()}, env, kTimeout),
      1, {"t.csv:3: column 3 (\"c\"): \"x\" is not a number"});
  Write("t.csv", "a,b,c,d,label\n1,2,3,4,0\n1,2,3,4,7\n");
  ExpectOneLineError(
      RunCommand({worker, "--model_file=" + model, "--data_path=" + dir_.string()}, env, kTimeout),
      1, {"t.csv:3: column 5 (\"label\"): label 7 is outside 0..2"});
  const std::string weights = Write("w.safetensors", "not a safetensors file");
  Write("t.csv", "a,b,c,d,label\n1,2,3,4,0\n1,2,3,4,2\n");
  // Found once the model is built (after two INFO lines): the error is the last line.
  const CommandResult r =
      RunCommand({worker, "--model_file=" + model, "--data_path=" + dir_.string(),
                  "--weights=" + weights, "--eval_only"},
                 env, kTimeout);
  EXPECT_EQ(r.status.code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(LastLine(r), "w.safetensors: the header length ")) << r.output;
}

TEST_F(BadInput, UnknownModelOrConfig) {
  const auto env = Environment({}, {"TF_CONFIG"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--model=resnet50"}, env, kTimeout), 1,
      {"psflow-worker: unknown model \"resnet50\"", "cifar10_cnn, mnist_cnn, mnist_mlp, ptb_lstm",
       "--model_file=FILE for your own"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--model=ptb_lstm", "--model_config=huge"}, env,
                 kTimeout),
      1, {"unknown ptb_lstm config \"huge\"", "large, medium, small, test"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--model=mnist_cnn", "--model_config=small"}, env,
                 kTimeout),
      1, {"--model_config is for ptb_lstm only"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--data_source=imagenet"}, env, kTimeout),
                     1, {"--data_source must be real or synthetic, got \"imagenet\""});
  // Datasets that are not on the machine must be named.
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--model=cifar10_cnn"}, env, kTimeout), 1,
                     {"cifar10_cnn needs --data_path", "--data_source=synthetic"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--model=ptb_lstm"}, env, kTimeout), 1,
                     {"ptb_lstm needs --data_path", "make_ptb_corpus.py"});
}

TEST_F(BadInput, NegativeStopGrace) {
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--stop_grace_s=-1"},
                                Environment({}, {"TF_CONFIG"}), kTimeout),
                     1, {"psflow-worker: --stop_grace_s must be >= 0, got -1"});
}

TEST_F(BadInput, ComputeModeUnknownOrAStepTimeThatIsNotOne) {
  const auto env = Environment({}, {"TF_CONFIG"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--compute=fake"}, env, kTimeout), 1,
                     {"psflow-worker: --compute must be real, replay:MS or replay:measured"});
  for (const char* ms : {"--compute=replay:0", "--compute=replay:-1", "--compute=replay:nan"}) {
    ExpectOneLineError(RunCommand({Binary("psflow-worker"), ms}, env, kTimeout), 1,
                       {"psflow-worker: --compute=replay:MS needs MS"});
  }
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--compute=replay:20", "--device=gpu"}, env, kTimeout),
      1, {"psflow-worker: --compute=replay runs on the CPU backend", "drop --device=gpu"});
}

TEST_F(BadInput, ComputeThreadsOutOfRange) {
  // Each thread is a real one in the CPU backend's pool: a typo must not start 100,000.
  const auto env = Environment({}, {"TF_CONFIG"});
  for (const char* threads : {"--compute_threads=-1", "--compute_threads=100000"}) {
    ExpectOneLineError(RunCommand({Binary("psflow-worker"), threads}, env, kTimeout), 1,
                       {"psflow-worker: --compute_threads must be between 0 and 1024"});
  }
}

TEST_F(BadInput, Cifar10FilesMissingTruncatedOrInTheWrongFormat) {
  const auto env = Environment({}, {"TF_CONFIG"});
  const std::string dir = dir_.string();
  auto run = [&] {
    return RunCommand({Binary("psflow-worker"), "--model=cifar10_cnn", "--data_path=" + dir}, env,
                      kTimeout);
  };
  ExpectOneLineError(run(), 1, {"psflow-worker: ", dir + "/data_batch_1.bin"});
  // Five good files of two records, a test file cut mid-record.
  const std::string record = std::string(1, '\3') + std::string(3072, '\x80');
  for (int i = 1; i <= 5; ++i) Write(absl::StrCat("data_batch_", i, ".bin"), record + record);
  Write("test_batch.bin", record + record.substr(0, 100));
  ExpectOneLineError(run(), 1, {dir + "/test_batch.bin", "3073"});
  // The python version's pickle under the binary version's name.
  Write("test_batch.bin", std::string("\x80\x02}q\x00(") + std::string(6140, 'x'));
  ExpectOneLineError(run(), 1, {dir + "/test_batch.bin", "pickle"});
  // A label byte out of range.
  Write("data_batch_3.bin", record + std::string(1, '\xc8') + record.substr(1));
  ExpectOneLineError(run(), 1, {dir + "/data_batch_3.bin", "label byte 200"});
}

TEST_F(BadInput, PtbFilesMissingOrNotBelongingTogether) {
  const auto env = Environment({}, {"TF_CONFIG"});
  const std::string dir = dir_.string();
  auto run = [&] {
    return RunCommand(
        {Binary("psflow-worker"), "--model=ptb_lstm", "--model_config=test", "--data_path=" + dir},
        env, kTimeout);
  };
  ExpectOneLineError(run(), 1, {"psflow-worker: ", dir + "/ptb.train.txt"});
  Write("ptb.train.txt", " the cat sat on the mat \n the dog sat \n");
  Write("ptb.valid.txt", " the cat sat \n");
  Write("ptb.test.txt", " the dog sat on the \n the zebra sat \n");
  ExpectOneLineError(run(), 1, {dir + "/ptb.test.txt:2", "vocabulary mismatch", "\"zebra\""});
  Write("ptb.test.txt", std::string("\0\0\0binary", 9));
  ExpectOneLineError(run(), 1, {dir + "/ptb.test.txt"});
  // Too little text for one batch of the config (20 x 2 steps).
  Write("ptb.test.txt", " the dog \n");
  ExpectOneLineError(run(), 1, {"epoch size is 0"});
}

TEST_F(BadInput, TfConfigThatIsNotJson) {
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker")}, Environment({"TF_CONFIG={cluster:"}), kTimeout), 1,
      {"psflow-worker: TF_CONFIG is not valid JSON"});
  ExpectOneLineError(RunCommand({Binary("psflow-ps")}, Environment({"TF_CONFIG=[]"}), kTimeout), 1,
                     {"psflow-ps: TF_CONFIG must be a JSON object"});
}

TEST_F(BadInput, TfConfigTaskOutOfRange) {
  const std::string tf_config =
      R"(TF_CONFIG={"cluster":{"ps":["127.0.0.1:1"],"worker":["127.0.0.1:2"]},)"
      R"("task":{"type":"worker","index":3}})";
  ExpectOneLineError(RunCommand({Binary("psflow-worker")}, Environment({tf_config}), kTimeout), 1,
                     {"task index 3 is out of range", "\"worker\" has 1 task(s)"});
  const std::string ps_config =
      R"(TF_CONFIG={"cluster":{"ps":["127.0.0.1:1"],"worker":["127.0.0.1:2"]},)"
      R"("task":{"type":"ps","index":1}})";
  ExpectOneLineError(RunCommand({Binary("psflow-ps")}, Environment({ps_config}), kTimeout), 1,
                     {"psflow-ps: ", "task index 1 is out of range", "\"ps\" has 1"});
}

TEST_F(BadInput, AnEvaluatorWithoutPsOrATestSplit) {
  const std::string no_ps =
      R"(TF_CONFIG={"cluster":{"worker":["127.0.0.1:2"],"evaluator":["127.0.0.1:3"]},)"
      R"("task":{"type":"evaluator","index":0}})";
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker")}, Environment({no_ps}), kTimeout), 1,
      {"psflow-worker: an evaluator follows the ps tasks, and the cluster has none"});
  const std::string with_ps =
      R"(TF_CONFIG={"cluster":{"ps":["127.0.0.1:1"],"worker":["127.0.0.1:2"],)"
      R"("evaluator":["127.0.0.1:3"]},"task":{"type":"evaluator","index":0}})";
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--data_source=synthetic"},
                                Environment({with_ps}), kTimeout),
                     1, {"psflow-worker: an evaluator needs a test split"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--eval_interval_s=0"},
                                Environment({with_ps}), kTimeout),
                     1, {"psflow-worker: --eval_interval_s must be > 0"});
  const std::string other =
      R"(TF_CONFIG={"cluster":{"ps":["127.0.0.1:1"],"master":["127.0.0.1:3"]},)"
      R"("task":{"type":"master","index":0}})";
  ExpectOneLineError(RunCommand({Binary("psflow-worker")}, Environment({other}), kTimeout), 1,
                     {"runs worker, chief or evaluator tasks", "\"master\""});
}

TEST_F(BadInput, UnreachablePsFailsAfterTheDeadlineNamingTheAddress) {
  const int port = FreeLocalPorts(1).value()[0];
  const std::string ps = absl::StrCat("127.0.0.1:", port);
  const auto start = std::chrono::steady_clock::now();
  const auto r = RunCommand(
      {Binary("psflow-worker"), "--job_name=worker", "--task_index=0", "--ps_hosts=" + ps,
       "--worker_hosts=127.0.0.1:1", "--ps_timeout_s=2", "--startup_timeout_s=2"},
      Environment({}, {"TF_CONFIG"}), kTimeout);
  ASSERT_FALSE(r.timed_out);
  EXPECT_EQ(r.status.code, 1) << r.output;
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const std::string last = LastLine(r);
  EXPECT_EQ(last.rfind("psflow-worker: ", 0), 0u) << r.output;
  EXPECT_TRUE(absl::StrContains(last, "ps task 0 at " + ps + " unreachable for 2s")) << last;
  // Retried with backoff before giving up (several attempts, no busy loop): exactly one error.
  EXPECT_EQ(LinesWith(r.output, "psflow-worker: ").size(), 1u);
}

TEST_F(BadInput, WorkerFlagsAndEnvironmentOutOfRange) {
  const auto no_cluster = Environment({}, {"TF_CONFIG", "PSFLOW_METRICS_PORT"});
  // Known only once the data is loaded (after one log line): the error is the last line.
  const auto big_batch =
      RunCommand({Binary("psflow-worker"), "--batch_size=100000"}, no_cluster, kTimeout);
  EXPECT_EQ(big_batch.status.code, 1) << big_batch.output;
  EXPECT_EQ(LastLine(big_batch),
            "psflow-worker: --batch_size=100000 is larger than this worker's shard (60000 "
            "examples)");
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--train_epochs=-1"}, no_cluster, kTimeout), 1,
      {"--train_epochs must be >= 1"});
  // Found before training (the run trained to the end, then could not export).
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--export_dir=/proc/version/model"},
                                no_cluster, kTimeout),
                     1, {"--export_dir: export folder /proc/version/model cannot be written"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--train_seconds=nan"}, no_cluster, kTimeout), 1,
      {"--train_seconds must be a number of seconds >= 0, got nan"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--metrics_port=70000"}, no_cluster, kTimeout), 1,
      {"metrics port 70000 is above 65535"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-ps"), "--job_name=ps", "--task_index=0", "--ps_hosts=127.0.0.1:1"},
                 Environment({"PSFLOW_METRICS_PORT=abc"}, {"TF_CONFIG"}), kTimeout),
      1, {"PSFLOW_METRICS_PORT=\"abc\" is not a port number"});
  // The ps's settings are checked by the worker too, in one line, even with no ps in use.
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--wire_dtype=fp8"}, no_cluster, kTimeout), 1,
      {"--wire_dtype must be float32, bfloat16 or float16, got \"fp8\""});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--optimizer=adamw"}, no_cluster, kTimeout), 1,
      {"adamw"});
  ExpectOneLineError(RunCommand({Binary("psflow-ps"), "--job_name=ps", "--task_index=0",
                                 "--ps_hosts=127.0.0.1:1", "--keep_checkpoints=0"},
                                Environment({}, {"TF_CONFIG"}), kTimeout),
                     1, {"--keep_checkpoints must be >= 1"});
  // Found at start-up, not at the first checkpoint (or the last, on SIGTERM).
  ExpectOneLineError(RunCommand({Binary("psflow-ps"), "--job_name=ps", "--task_index=0",
                                 "--ps_hosts=127.0.0.1:1", "--checkpoint_dir=/proc/version/ckpt"},
                                Environment({}, {"TF_CONFIG"}), kTimeout),
                     1, {"--checkpoint_dir: ", "/proc/version/ckpt"});
  // More GPUs than the machine has: refused before anything is loaded, naming the flags.
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--num_gpus=0"}, no_cluster, kTimeout), 1,
                     {"--num_gpus must be >= 1"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--num_gpus=2"}, no_cluster, kTimeout), 1,
                     {"--num_gpus > 1 needs --device=gpu"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--cuda_graphs"}, no_cluster, kTimeout),
                     1, {"--cuda_graphs needs --device=gpu"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--device=gpu", "--num_gpus=4096"},
                                no_cluster, kTimeout),
                     1, {"--gpu=0 --num_gpus=4096: "});
  // Mixed precision: GPU only, one spelling at a time, a loss scale that makes sense.
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--dtype=bf16"}, no_cluster, kTimeout), 1,
                     {"--dtype=bf16 needs --device=gpu"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--dtype=fp8"}, no_cluster, kTimeout), 1,
                     {"--dtype must be fp32, tf32, bf16 or fp16, got \"fp8\""});
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--device=gpu", "--use_fp16", "--dtype=bf16"},
                 no_cluster, kTimeout),
      1, {"--use_fp16 contradicts --dtype=bf16"});
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--loss_scale=-3"}, no_cluster, kTimeout),
                     1, {"--loss_scale must be none, dynamic or a positive number, got \"-3\""});
  // A cluster named only in part is an error, not a silent solo run.
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--ps_hosts=127.0.0.1:1"}, no_cluster, kTimeout), 1,
      {"no cluster spec: set TF_CONFIG or pass --job_name"});
}

// --check_config: the flags and the cluster spec as the task would check them at its start, one
// line, nothing started and no file the flags name read (they are the pod's).
TEST_F(BadInput, CheckConfigSaysValidOrTheErrorInOneLineAndStartsNothing) {
  const auto cluster = Environment(
      {"TF_CONFIG={\"cluster\":{\"ps\":[\"p:2222\"],\"worker\":[\"w0:2222\",\"w1:2222\"]},"
       "\"task\":{\"type\":\"worker\",\"index\":1}}"},
      {"PSFLOW_METRICS_PORT"});
  CommandResult r = RunCommand({Binary("psflow-worker"), "--check_config", "--model=mnist_cnn",
                                "--data_path=/nonexistent", "--export_dir=/proc/version/x"},
                               cluster, kTimeout);
  EXPECT_EQ(r.status.code, 0) << r.output;
  EXPECT_EQ(r.output,
            "psflow-worker: valid: worker 1 of a cluster with 2 trainers and 1 ps task; training "
            "mnist_cnn on the CPU: batch 128, adam learning rate 0.001\n");
  ExpectOneLineError(
      RunCommand({Binary("psflow-worker"), "--check_config", "--batch_size=-2"}, cluster, kTimeout),
      1, {"psflow-worker: --batch_size must be >= 1"});
  // The TLS flags as a set (their files are the pod's: not read).
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--check_config", "--tls_ca=/in/pod"},
                                cluster, kTimeout),
                     1,
                     {"psflow-worker: --tls_ca, --tls_cert and --tls_key go together (all three "
                      "or none); missing: --tls_cert --tls_key"});
  r = RunCommand(
      {Binary("psflow-worker"), "--check_config", "--tls_ca=/a", "--tls_cert=/b", "--tls_key=/c"},
      cluster, kTimeout);
  EXPECT_EQ(r.status.code, 0) << r.output;
  ExpectOneLineError(RunCommand({Binary("psflow-worker"), "--check_config", "--stop_grace_s=-1"},
                                cluster, kTimeout),
                     1, {"psflow-worker: --stop_grace_s must be >= 0, got -1"});
  // A port already taken and a checkpoint folder that cannot be written are the task's to find
  // where it runs.
  const auto ps =
      Environment({"TF_CONFIG={\"cluster\":{\"ps\":[\"127.0.0.1:1\"],\"worker\":[\"w:1\"]},"
                   "\"task\":{\"type\":\"ps\",\"index\":0}}"},
                  {"PSFLOW_METRICS_PORT", "PSFLOW_BULK_PORT"});
  r = RunCommand({Binary("psflow-ps"), "--check_config", "--checkpoint_dir=/proc/version/c"}, ps,
                 kTimeout);
  EXPECT_EQ(r.status.code, 0) << r.output;
  EXPECT_EQ(r.output,
            "psflow-ps: valid: ps task 0 of 1 on port 1, transport bulk, checkpoints in "
            "/proc/version/c\n");
  ExpectOneLineError(
      RunCommand({Binary("psflow-ps"), "--check_config", "--bulk_port=70000"}, ps, kTimeout), 1,
      {"psflow-ps: --bulk_port must be -1, 0 or a port number, got 70000"});
  ExpectOneLineError(
      RunCommand({Binary("psflow-ps"), "--check_config"}, cluster, kTimeout), 1,
      {"psflow-ps: psflow-ps runs ps tasks, but the cluster spec says task type \"worker\""});
}

// A replica's own flags are checked by its program before `psflow run` starts anything and by
// `psflow validate`: one line naming the replica type, not the backoff limit's restarts.
TEST_F(BadInput, AReplicasFlagsAreCheckedByValidateAndBeforeARunStarts) {
  const auto job = [this](const std::string& ps_args, const std::string& worker_args) {
    return Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    PS: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-ps], args: [)",
                                          ps_args, R"(]}]}}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: psflow, command: [psflow-worker], args: [)",
                                          worker_args, R"(]}]}}
)"));
  };
  const std::string run_dir = (dir_ / "run").string();
  const struct {
    std::string ps_args, worker_args, error;
  } cases[] = {
      {"", "--learning_rat=0.1",
       "spec.replicaSpecs.Worker: psflow-worker refuses its args: ERROR: Unknown command line "
       "flag 'learning_rat'"},
      {"", "--sync_replicas, --replicas_to_aggregate=3",
       "spec.replicaSpecs.Worker: psflow-worker refuses its args: --replicas_to_aggregate"},
      {"--keep_checkpoints=0", "",
       "spec.replicaSpecs.PS: psflow-ps refuses its args: --keep_checkpoints must be >= 1"},
  };
  for (const auto& c : cases) {
    const std::string path = job(c.ps_args, c.worker_args);
    ExpectOneLineError(RunCommand({Binary("psflow"), "validate", path}, Environment({}), kTimeout),
                       2, {"psflow: " + path + ": " + c.error});
    ExpectOneLineError(RunCommand({Binary("psflow"), "run", "--run_dir=" + run_dir, path},
                                  Environment({}), kTimeout),
                       2, {"psflow: " + c.error});
    EXPECT_FALSE(fs::exists(run_dir)) << c.error;  // nothing started
  }
  const CommandResult valid = RunCommand(
      {Binary("psflow"), "validate", job("--checkpoint_dir=/in/the/pod", "--model=mnist_cnn")},
      Environment({}), kTimeout);
  EXPECT_EQ(valid.status.code, 0) << valid.output;
  EXPECT_EQ(LinesWith(valid.output,
                      ": spec.replicaSpecs.PS: valid: ps task 0 of 1 on port 2222, "
                      "transport bulk, checkpoints in /in/the/pod")
                .size(),
            1u)
      << valid.output;
  EXPECT_EQ(LinesWith(valid.output,
                      ": spec.replicaSpecs.Worker: valid: worker 0 of a cluster with 2 trainers "
                      "and 1 ps task; training mnist_cnn on the CPU")
                .size(),
            1u)
      << valid.output;
}

TEST_F(BadInput, PsPortAlreadyTaken) {
  const int port = FreeLocalPorts(1).value()[0];
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  const std::string ps = absl::StrCat("127.0.0.1:", port);
  ExpectOneLineError(RunCommand({Binary("psflow-ps"), "--job_name=ps", "--task_index=0",
                                 "--ps_hosts=" + ps, "--worker_hosts=127.0.0.1:1"},
                                Environment({}, {"TF_CONFIG"}), kTimeout),
                     1,
                     {"psflow-ps: ps task 0 cannot listen on 0.0.0.0:" + std::to_string(port),
                      "Address already in use"});
  close(fd);
}

TEST_F(BadInput, JobWhoseWorkerFailsEndsFailedAndStopsThePs) {
  const auto path = Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    PS: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [psflow-ps]}]}}}
    Worker:
      replicas: 2
      template: {spec: {containers: [{name: psflow, command: [psflow-worker], args: [--data_path=/nonexistent]}]}}
)"));
  const auto r = RunCommand(
      {Binary("psflow"), "run", "--progress=never", "--run_dir=" + (dir_ / "run").string(), path},
      Environment({}), kTimeout);
  ASSERT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.status.code, 1) << r.output;
  EXPECT_EQ(LinesWith(r.output, "job bad Failed").size(), 1u) << r.output;
  EXPECT_EQ(LinesWith(r.output, "[psflow] ps-0 stopped").size(), 1u) << r.output;
  // Without --verbose the replicas' output is in their logs; the failed one's last lines are
  // shown, after where its log is.
  const std::string log = (dir_ / "run").string() + "/worker-";
  EXPECT_FALSE(LinesWith(r.output, "'s log ends (" + log).empty()) << r.output;
  EXPECT_FALSE(LinesWith(r.output, "/nonexistent/train-images-idx3-ubyte.gz: no such file").empty())
      << r.output;
}

// A TLS file that is missing, not PEM, not the certificate's key, of another CA or expired: one
// line naming the flag, the file and why, exit 2, before the ps serves or the worker connects.
TEST_F(BadInput, TlsFilesCheckedAtStartUpExitTwoNamingTheFile) {
  const absl::Time now = absl::Now();
  const CertificateAuthority ca = CertificateAuthority::Create("ca", absl::Hours(24)).value();
  const CertificateAuthority other = CertificateAuthority::Create("ca", absl::Hours(24)).value();
  const CertificateSubject subject{
      .common_name = "ps-0", .dns_names = {"localhost"}, .ip_addresses = {"127.0.0.1"}};
  const PemCertificate leaf = ca.Issue(subject, absl::Hours(1)).value();
  const PemCertificate stranger = other.Issue(subject, absl::Hours(1)).value();
  // Made two days ago, valid a day: expired since yesterday.
  const CertificateAuthority old_ca =
      CertificateAuthority::Create("old", absl::Hours(72), now - absl::Hours(48)).value();
  const PemCertificate expired =
      old_ca.Issue(subject, absl::Hours(24), now - absl::Hours(48)).value();
  const std::string ca_file = Write("ca.crt", ca.pem().certificate);
  const std::string cert = Write("tls.crt", leaf.certificate);
  const std::string key = Write("tls.key", leaf.private_key);
  const std::string other_key = Write("other.key", stranger.private_key);
  const std::string other_cert = Write("other.crt", stranger.certificate);
  const std::string old_ca_file = Write("old-ca.crt", old_ca.pem().certificate);
  const std::string expired_cert = Write("expired.crt", expired.certificate);
  const std::string expired_key = Write("expired.key", expired.private_key);
  const std::string missing = (dir_ / "missing.crt").string();

  const std::vector<std::string> ps = {Binary("psflow-ps"), "--job_name=ps", "--task_index=0",
                                       "--ps_hosts=127.0.0.1:1", "--worker_hosts=127.0.0.1:2"};
  const std::vector<std::string> worker = {Binary("psflow-worker"), "--job_name=worker",
                                           "--task_index=0", "--ps_hosts=127.0.0.1:1",
                                           "--worker_hosts=127.0.0.1:2"};
  auto run = [&](std::vector<std::string> argv, const std::string& ca_path,
                 const std::string& cert_path, const std::string& key_path) {
    if (!ca_path.empty()) argv.push_back("--tls_ca=" + ca_path);
    if (!cert_path.empty()) argv.push_back("--tls_cert=" + cert_path);
    if (!key_path.empty()) argv.push_back("--tls_key=" + key_path);
    return RunCommand(argv, Environment({}, {"TF_CONFIG"}), kTimeout);
  };
  ExpectOneLineError(run(ps, ca_file, "", ""), 2,
                     {"psflow-ps: --tls_ca, --tls_cert and --tls_key go together (all three or "
                      "none); missing: --tls_cert --tls_key"});
  ExpectOneLineError(run(worker, missing, cert, key), 2,
                     {"psflow-worker: --tls_ca cannot read " + missing + ": No such file"});
  ExpectOneLineError(run(ps, ca_file, key, key), 2,
                     {"psflow-ps: --tls_cert " + key + ": is not a PEM certificate"});
  ExpectOneLineError(run(worker, ca_file, cert, other_key), 2,
                     {"psflow-worker: --tls_key " + other_key +
                      ": is not the private key of the certificate in " + cert});
  ExpectOneLineError(run(ps, ca_file, other_cert, other_key), 2,
                     {"psflow-ps: --tls_cert " + other_cert +
                      ": is not signed by the CA (--tls_ca " + ca_file + ")"});
  ExpectOneLineError(run(worker, old_ca_file, expired_cert, expired_key), 2,
                     {"psflow-worker: --tls_cert " + expired_cert + ": has expired (notAfter "});
  // Valid files, but the ps's certificate does not name its host (127.0.0.1): every worker would
  // refuse it, so the ps refuses to start.
  const PemCertificate elsewhere =
      ca.Issue({.common_name = "ps-0", .dns_names = {"other.example"}, .ip_addresses = {}},
               absl::Hours(1))
          .value();
  const std::string elsewhere_cert = Write("elsewhere.crt", elsewhere.certificate);
  const std::string elsewhere_key = Write("elsewhere.key", elsewhere.private_key);
  ExpectOneLineError(run(ps, ca_file, elsewhere_cert, elsewhere_key), 1,
                     {"psflow-ps: the certificate of --tls_cert names DNS:other.example but not "
                      "127.0.0.1, this ps task's host in the cluster spec: every worker would "
                      "refuse it"});
}

TEST_F(BadInput, UnwritableRunFolderStopsTheRunBeforeAnyReplicaStarts) {
  const std::string marker = (dir_ / "started").string();
  const auto path = Write("job.yaml", absl::StrCat(kHead, R"(spec:
  replicaSpecs:
    Worker: {replicas: 1, template: {spec: {containers: [{name: psflow, command: [touch, )",
                                                   marker, R"(]}]}}}
)"));
  const std::string file = Write("file", "not a folder");
  ExpectOneLineError(RunCommand({Binary("psflow"), "run", "--run_dir=" + file + "/run", path},
                                Environment({}), kTimeout),
                     2, {"run folder " + file + "/run cannot be written", "--run_dir"});
  EXPECT_FALSE(fs::exists(marker));
}

}  // namespace
}  // namespace psflow::testing
