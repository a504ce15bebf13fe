#!/usr/bin/env python3
"""Tests of check_dockerfiles.py: it rejects testdata/broken.Dockerfile with exactly the expected
(line, rule) findings, catches the cross-file and version rules on small Dockerfiles written
here, and its parsers read continuations, comments, setup.sh's array and .dockerignore patterns
as Docker and bash do."""

import contextlib
import io
import os
import re
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import check_dockerfiles as cd  # noqa: E402

FINDING = re.compile(r"^(?P<path>\S+):(?P<line>\d+): \[(?P<rule>[a-z-]+)\] ")

# Each break of testdata/broken.Dockerfile (its comments say why) and broken.dockerignore.
BROKEN_DOCKERFILE = {
    (6, "from-pinned"), (8, "workdir"), (10, "add"), (10, "copy-source"),
    (13, "sudo"), (13, "apt-recommends"), (13, "apt-lists"), (13, "setup-sh"),
    (17, "cuda-flag"), (20, "from-pinned"),
    (23, "stage-name"), (23, "entrypoint"), (23, "expose"), (23, "labels"),
    (26, "apt-get"), (26, "apt-recommends"), (26, "apt-yes"), (26, "apt-lists"),
    (26, "runtime-dev"), (26, "runtime-libs"),
    (29, "binary"), (31, "copy-from"), (33, "user"), (35, "exec-form"),
}
BROKEN_DOCKERIGNORE = {(1, "dockerignore")}

# A stage the Debian images could use verbatim, and a runtime stage around {install} {copy}.
BUILD = """FROM debian:12.11-slim AS build
WORKDIR /src
COPY scripts/setup.sh scripts/setup.sh
RUN scripts/setup.sh --no-kube-tools && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh -DPSFLOW_CUDA=OFF
"""
RUNTIME = """FROM {base} AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends libyaml-cpp0.7 \\
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/bin/psflow /usr/local/bin/psflow
ARG VERSION={version}
LABEL org.opencontainers.image.title=psflow org.opencontainers.image.description=d \\
      org.opencontainers.image.source=s org.opencontainers.image.licenses=l \\
      org.opencontainers.image.version=${{VERSION}}
USER 65532
EXPOSE 9100
ENTRYPOINT ["/usr/local/bin/psflow"]
"""


def run_checker(*args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cd.main(["--root", ROOT, *args])
    return code, out.getvalue()


def findings(output, suffix):
    result = set()
    for line in output.splitlines():
        m = FINDING.match(line)
        if m and m.group("path").endswith(suffix):
            result.add((int(m.group("line")), m.group("rule")))
    return result


class BrokenFixture(unittest.TestCase):
    def test_every_break_is_reported_at_its_line_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as bin_dir:
            # A stand-in psflow-ps whose libraries are known: Debian 12's ls loads libselinux1.
            os.symlink("/bin/ls", os.path.join(bin_dir, "psflow-ps"))
            code, output = run_checker(
                "--bin-dir", bin_dir,
                "--dockerignore", os.path.join(HERE, "testdata", "broken.dockerignore"),
                os.path.join(HERE, "testdata", "broken.Dockerfile"))
        self.assertEqual(code, 1, output)
        self.assertEqual(findings(output, "broken.Dockerfile"), BROKEN_DOCKERFILE, output)
        self.assertEqual(findings(output, "broken.dockerignore"), BROKEN_DOCKERIGNORE, output)
        for expected in ("does not exclude build/", "does not exclude .git",
                         "not in setup.sh wget", "missing build-essential",
                         "loads libraries of libpcre2-8-0 libselinux1",
                         "no add_executable(psflow-trainer", "USER root runs as root",
                         "FROM debian has no tag", "FROM busybox:latest"):
            self.assertIn(expected, output)
        self.assertIn("26 problems", output)


class SmallDockerfiles(unittest.TestCase):
    def check(self, *texts, bin_dir="/nonexistent"):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, text in enumerate(texts):
                paths.append(os.path.join(tmp, f"f{i}.Dockerfile"))
                with open(paths[-1], "w", encoding="utf-8") as fh:
                    fh.write(text)
            code, output = run_checker("--bin-dir", bin_dir, *paths)
        return code, {(name, line, rule) for name in (f"f{i}.Dockerfile" for i in range(len(texts)))
                      for line, rule in findings(output, name)}, output

    def test_a_clean_pair_passes(self):
        code, found, output = self.check(BUILD + RUNTIME.format(base="debian:12.11-slim",
                                                                version="0.1.0"))
        self.assertEqual((code, found), (0, set()), output)

    def test_version_default_must_be_the_cmake_project_version(self):
        code, found, _ = self.check(BUILD + RUNTIME.format(base="debian:12.11-slim",
                                                           version="9.9.9"))
        self.assertEqual(found, {("f0.Dockerfile", 11, "version")})

    def test_build_stages_on_one_base_must_be_identical(self):
        other = BUILD.replace("RUN scripts/build.sh -DPSFLOW_CUDA=OFF",
                              "RUN scripts/build.sh -DPSFLOW_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug")
        runtime = RUNTIME.format(base="debian:12.11-slim", version="0.1.0")
        _, found, _ = self.check(BUILD + runtime, other + runtime)
        self.assertEqual(found, {("f1.Dockerfile", 1, "same-build")})

    def test_one_stage_and_parse_errors(self):
        _, found, output = self.check(
            "FROM debian:12.11-slim\nRUNN true\nRUN <<EOF\ntrue\nEOF\n")
        self.assertIn(("f0.Dockerfile", 1, "multi-stage"), found, output)
        self.assertIn(("f0.Dockerfile", 2, "parse"), found, output)
        self.assertIn(("f0.Dockerfile", 3, "parse"), found, output)

    def test_non_debian_runtime_needs_the_generated_list(self):
        _, found, _ = self.check(BUILD + RUNTIME.format(
            base="nvidia/cuda:13.0.2-cudnn-runtime-ubuntu24.04", version="0.1.0"))
        self.assertEqual(found, {("f0.Dockerfile", 7, "runtime-libs")})

    def test_generated_list_must_cover_every_copied_binary(self):
        build = BUILD.replace(
            "RUN scripts/build.sh -DPSFLOW_CUDA=OFF",
            "RUN scripts/build.sh -DPSFLOW_CUDA=OFF \\\n"
            " && docker/runtime-packages.sh build/bin/psflow-ps > /tmp/p.txt")
        runtime = RUNTIME.format(base="debian:12.11-slim", version="0.1.0").replace(
            "apt-get install -y --no-install-recommends libyaml-cpp0.7",
            "xargs -a /tmp/p.txt apt-get install -y --no-install-recommends")
        _, found, output = self.check(build + runtime)
        self.assertEqual(found, {("f0.Dockerfile", 6, "runtime-libs")}, output)
        self.assertIn("not run on psflow,", output)

    def test_gpu_build_stage_must_turn_cuda_on(self):
        build = BUILD.replace("debian:12.11-slim AS build",
                              "nvidia/cuda:13.0.2-cudnn-devel-ubuntu24.04 AS build")
        _, found, output = self.check(build + RUNTIME.format(base="debian:12.11-slim",
                                                             version="0.1.0"))
        self.assertIn(("f0.Dockerfile", 6, "cuda-flag"), found, output)
        self.assertIn("want ON", output)


class Parsers(unittest.TestCase):
    def test_continuations_drop_comment_and_blank_lines(self):
        instructions, errors = cd.parse_dockerfile(
            "# header\nRUN a \\\n# inside\n\n    b \\\n  c\nUSER 1\n")
        self.assertEqual(errors, [])
        self.assertEqual([(i.line, i.keyword, i.args) for i in instructions],
                         [(2, "RUN", "a     b   c"), (7, "USER", "1")])

    def test_escape_directive(self):
        instructions, _ = cd.parse_dockerfile("# escape=`\nRUN a `\n  b\n")
        self.assertEqual([(i.line, i.args) for i in instructions], [(2, "a   b")])

    def test_flags_and_exec_form(self):
        (ins,), _ = cd.parse_dockerfile("COPY --from=build --chown=1:1 /a /b/\n")
        self.assertEqual(ins.flags, {"from": "build", "chown": "1:1"})
        self.assertEqual(cd.copy_sources_and_dest(ins), (["/a"], "/b/"))
        self.assertEqual(cd.json_array('["x", "--y"]'), ["x", "--y"])
        self.assertIsNone(cd.json_array("x --y"))
        self.assertIsNone(cd.json_array("[x]"))

    def test_shell_commands_split_at_operators(self):
        self.assertEqual(cd.shell_commands("a 'b && c' && d; e | f"),
                         [["a", "b && c"], ["d"], ["e"], ["f"]])

    def test_setup_packages_array(self):
        text = "x=1\npackages=(\n  a b # c d\n  e\n)\nmissing=()\n"
        self.assertEqual(cd.parse_setup_packages(text), ["a", "b", "e"])
        with open(os.path.join(ROOT, "scripts", "setup.sh"), encoding="utf-8") as fh:
            packages = cd.parse_setup_packages(fh.read())
        self.assertIn("libgrpc++-dev", packages)

    def test_dockerignore_matching(self):
        patterns = cd.dockerignore_patterns("# c\n/build*\n**/*.swp\n!keep.swp\n.git\n")
        excluded = lambda p: cd.dockerignore_excludes(patterns, p)  # noqa: E731
        self.assertTrue(excluded("build/bin/psflow"))
        self.assertTrue(excluded("build-asan"))
        self.assertTrue(excluded(".git/HEAD"))
        self.assertTrue(excluded("a/b/c.swp"))
        self.assertFalse(excluded("keep.swp"))
        self.assertFalse(excluded("worker/build.cc"))
        self.assertFalse(excluded("scripts/build.sh"))

    def test_dependency_closure_takes_one_alternative(self):
        depends = {"a": [["b"], ["c", "d"]], "b": [], "c": [["e"]], "d": [], "e": []}
        self.assertEqual(cd.dependency_closure({"a"}, depends), {"a", "b", "c", "e"})
        self.assertEqual(cd.dependency_closure({"a", "d"}, depends), {"a", "b", "d"})


if __name__ == "__main__":
    result = unittest.main(exit=False, verbosity=1).result
    failed = len(result.failures) + len(result.errors)
    print(f"{result.testsRun - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
