#!/usr/bin/env python3
"""Checks psflow's Dockerfiles without a Docker engine.

  check_dockerfiles.py [--root DIR] [--bin-dir DIR] [--dockerignore FILE] [DOCKERFILE...]

With no DOCKERFILE it checks ROOT/docker/*.Dockerfile and ROOT/.dockerignore. Rules:
  - the stage that runs scripts/build.sh runs scripts/setup.sh (COPYed first, with
    --no-kube-tools where setup.sh has it; or apt-installs exactly the packages of its
    `packages=(...)` array) and passes -DPSFLOW_CUDA=ON (nvidia/cuda devel base) or OFF
    explicitly; build stages on the same base image are identical across the files (one
    BuildKit cache, no drift); repository scripts a RUN calls are executable;
  - hadolint-like: FROM pinned to a tag or digest and named (AS), multi-stage; apt-get install
    with -y and --no-install-recommends, the apt lists removed in the same RUN; no sudo; COPY, not
    ADD, for local files; absolute WORKDIR;
  - the final stage: a numeric non-root USER, ENTRYPOINT (and CMD) in exec form naming a copied
    binary, EXPOSE, the OCI labels with the version from an ARG whose default is the CMake
    project version, no -dev packages; every binary it copies is an add_executable target;
  - its apt packages (with their dependencies) hold every shared library the built binary loads
    (docker/runtime-packages.sh over BIN_DIR, default ROOT/build/bin; skipped, saying so, when a
    binary is not built), or it installs the list that script wrote in the build stage;
  - .dockerignore excludes build/ and .git, and no file a COPY takes from the context.
Each problem is one line `FILE:LINE: [rule] message`; exit 1 if there is any.
"""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field

# Present in every Debian/Ubuntu image: apt itself depends on them.
BASE_PACKAGES = {"libc6", "libgcc-s1", "libstdc++6"}
OCI_LABELS = ("title", "description", "source", "licenses", "version")
INSTRUCTIONS = {"FROM", "RUN", "CMD", "LABEL", "MAINTAINER", "EXPOSE", "ENV", "ADD", "COPY",
                "ENTRYPOINT", "VOLUME", "USER", "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL",
                "HEALTHCHECK", "SHELL"}
SHELL_OPERATORS = {"&&", "||", ";", "|", "&", ";;", "(", ")"}


@dataclass
class Finding:
    path: str
    line: int
    rule: str
    message: str

    def __str__(self):
        return f"{self.path}:{self.line}: [{self.rule}] {self.message}"


@dataclass
class Instruction:
    line: int
    keyword: str
    args: str            # continuation lines joined, flags included
    flags: dict = field(default_factory=dict)  # --from=, --chown=, ... of FROM/COPY/ADD
    rest: str = ""       # args after the flags


@dataclass
class Stage:
    index: int
    image: str
    name: str            # "" when the FROM has no AS
    line: int
    instructions: list = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Parsing


def parse_dockerfile(text):
    """Returns ([Instruction], [(line, message)]) as Docker's parser reads the file: comment lines
    dropped (also inside a continued instruction), `\\` (or the `# escape=` directive) joins
    lines."""
    escape = "\\"
    errors = []
    lines = text.splitlines()
    for raw in lines:  # parser directives: only before the first other line
        m = re.match(r"\s*#\s*([a-zA-Z]+)\s*=\s*(\S+)\s*$", raw)
        if not m:
            break
        if m.group(1).lower() == "escape":
            escape = m.group(2)
    instructions = []
    parts, start = None, 0
    for number, raw in enumerate(lines, 1):
        stripped = raw.strip()
        if parts is None:
            if not stripped or stripped.startswith("#"):
                continue
            parts, start = [], number
        elif not stripped or stripped.startswith("#"):
            continue
        body = raw.rstrip()
        if body.endswith(escape):
            parts.append(body[: -len(escape)])
            continue
        parts.append(body)
        instructions.append(_instruction(start, "".join(parts), errors))
        parts = None
    if parts:
        instructions.append(_instruction(start, "".join(parts), errors))
    return [i for i in instructions if i], errors


def _instruction(line, text, errors):
    keyword, _, args = text.strip().partition(" ")
    keyword = keyword.upper()
    args = args.strip()
    if keyword not in INSTRUCTIONS:
        errors.append((line, f"unknown instruction {keyword}"))
        return None
    if keyword in ("RUN", "COPY", "ADD") and re.search(r"<<-?['\"]?[A-Za-z_]", args):
        errors.append((line, f"{keyword} with a heredoc: this checker does not read heredocs"))
    flags, rest = {}, args
    if keyword in ("FROM", "COPY", "ADD", "RUN"):
        while True:
            m = re.match(r"--([a-z-]+)(?:=(\S*))?\s*", rest)
            if not m:
                break
            flags[m.group(1)] = m.group(2) if m.group(2) is not None else ""
            rest = rest[m.end():]
    return Instruction(line, keyword, args, flags, rest)


def split_stages(instructions):
    """Returns (global ARG instructions, [Stage])."""
    global_args, stages = [], []
    for ins in instructions:
        if ins.keyword == "FROM":
            words = ins.rest.split()
            image = words[0] if words else ""
            name = words[2] if len(words) >= 3 and words[1].lower() == "as" else ""
            stages.append(Stage(len(stages), image, name, ins.line))
        elif stages:
            stages[-1].instructions.append(ins)
        elif ins.keyword == "ARG":
            global_args.append(ins)
    return global_args, stages


def arg_defaults(instructions):
    defaults = {}
    for ins in instructions:
        if ins.keyword == "ARG":
            name, _, value = ins.rest.partition("=")
            defaults[name.strip()] = value.strip().strip('"\'') if _ else None
    return defaults


def substitute(text, values):
    def repl(m):
        value = values.get(m.group(1) or m.group(2))
        return value if value is not None else m.group(0)
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", repl, text)


def shell_commands(script):
    """Splits a RUN's shell script into simple commands (token lists) at && || ; | &."""
    try:
        lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        tokens = script.split()
    commands, current = [], []
    for token in tokens:
        if token in SHELL_OPERATORS:
            if current:
                commands.append(current)
            current = []
        else:
            current.append(token)
    if current:
        commands.append(current)
    return commands


def json_array(text):
    """The list of strings if `text` is a JSON array of strings (exec form), else None."""
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    return None


def copy_sources_and_dest(ins):
    words = json_array(ins.rest)
    if words is None:
        try:
            words = shlex.split(ins.rest)
        except ValueError:
            words = ins.rest.split()
    return (words[:-1], words[-1]) if len(words) >= 2 else ([], "")


def parse_setup_packages(text):
    """The words of the `packages=( ... )` array of scripts/setup.sh, comments dropped."""
    m = re.search(r"^\s*packages=\((.*?)^\s*\)", text, re.S | re.M)
    if not m:
        m = re.search(r"^\s*packages=\(([^)]*)\)", text, re.M)
    if not m:
        return None
    body = "\n".join(line.split("#", 1)[0] for line in m.group(1).splitlines())
    return body.split()


def cmake_executables(root):
    names = set()
    for directory, subdirs, files in os.walk(root):
        rel = os.path.relpath(directory, root)
        subdirs[:] = [d for d in subdirs
                      if not (rel == "." and (d.startswith("build") or d.startswith(".")))]
        for f in files:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                with open(os.path.join(directory, f), encoding="utf-8") as fh:
                    names.update(re.findall(r"add_executable\(\s*([A-Za-z0-9_.+-]+)", fh.read()))
    return names


def cmake_declares(root, variable):
    """Whether the top CMakeLists.txt declares the cache variable (an option of the build)."""
    try:
        with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as fh:
            return re.search(r"set\(\s*%s\s.*CACHE" % re.escape(variable), fh.read()) is not None
    except OSError:
        return False


def cmake_project_version(root):
    try:
        with open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8") as fh:
            m = re.search(r"project\(\s*\S+\s+VERSION\s+([0-9][0-9.]*)", fh.read())
    except OSError:
        return None
    return m.group(1) if m else None


# ---------------------------------------------------------------------------------------------
# .dockerignore (Docker's rules: patterns relative to the context root, `*` within one path
# element, `**` any number of them, `!` re-includes, the last matching pattern wins, a pattern
# that matches a directory excludes what is under it).


def dockerignore_patterns(text):
    patterns = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = os.path.normpath(line[1:].strip() if negate else line).lstrip("/")
        patterns.append((number, negate, pattern))
    return patterns


def _pattern_regex(pattern):
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + "$")


def dockerignore_excludes(patterns, path):
    """Whether `path` (relative to the context) is left out of the build context."""
    path = os.path.normpath(path)
    parents = [path]
    while os.path.dirname(parents[-1]):
        parents.append(os.path.dirname(parents[-1]))
    excluded = False
    for _, negate, pattern in patterns:
        regex = _pattern_regex(pattern)
        if any(regex.match(p) for p in parents):
            excluded = not negate
    return excluded


# ---------------------------------------------------------------------------------------------
# Packages of this machine (Debian 12, as scripts/setup.sh leaves it)


def installed_dependencies():
    """{package: [[alternative, ...], ...]} of the installed packages' Pre-Depends and Depends,
    each virtual name replaced by the installed packages that provide it."""
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Provides}\t${Pre-Depends}, ${Depends}\n"],
        capture_output=True, text=True, check=False).stdout
    raw, provides = {}, {}
    for line in out.splitlines():
        package, provided, deps = (line.split("\t") + ["", ""])[:3]
        for name in _package_names(provided.split(",")):
            provides.setdefault(name, []).append(package)
        raw[package] = [_package_names(group.split("|")) for group in deps.split(",")]

    def real(name):
        return [name] if name in raw else provides.get(name, [])

    return {package: [[r for a in alternatives for r in real(a)]
                      for alternatives in groups if alternatives]
            for package, groups in raw.items()}


def _package_names(words):
    """Package names of dependency words such as `libc6 (>= 2.34)` or `python3:any`."""
    names = []
    for word in words:
        name = re.sub(r"[:\s(].*", "", word.strip())
        if name:
            names.append(name)
    return names


def dependency_closure(packages, depends):
    """The packages and everything they depend on (the first installed alternative of each)."""
    wanted = set(packages)
    seen, todo = set(), sorted(wanted)
    while todo:
        package = todo.pop()
        if package in seen:
            continue
        seen.add(package)
        for alternatives in depends.get(package, []):
            if alternatives and not any(a in seen or a in wanted for a in alternatives):
                todo.append(alternatives[0])
    return seen


def runtime_packages(root, binaries):
    """Runs docker/runtime-packages.sh: (set of packages, error message or None)."""
    script = os.path.join(root, "docker", "runtime-packages.sh")
    result = subprocess.run(["bash", script, *binaries], capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        return set(), (result.stderr.strip() or f"{script} exited {result.returncode}")
    return set(result.stdout.split()), None


# ---------------------------------------------------------------------------------------------
# Checks


class Checker:
    def __init__(self, root, bin_dir, dockerignore):
        self.root = root
        self.bin_dir = bin_dir
        self.findings = []
        self.notes = []
        self.build_stages = {}  # base image -> (path, [(keyword, args)])
        setup = os.path.join(root, "scripts", "setup.sh")
        with open(setup, encoding="utf-8") as fh:
            setup_text = fh.read()
        self.setup_packages = parse_setup_packages(setup_text)
        # setup.sh's switch that leaves out what only a developer's machine needs (helm, kubectl)
        self.setup_image_flag = "--no-kube-tools" if "--no-kube-tools" in setup_text else None
        if self.setup_packages is None:
            self.add(setup, 1, "setup-sh", "no `packages=(...)` array found")
        for number, line in enumerate(setup_text.splitlines(), 1):
            if "apt-get install" in line and "--no-install-recommends" not in line:
                self.add(setup, number, "apt-recommends",
                         "apt-get install without --no-install-recommends "
                         "(the build stages run it)")
        self.executables = cmake_executables(root)
        self.version = cmake_project_version(root)
        self.cuda_option = cmake_declares(root, "PSFLOW_CUDA")
        self.dockerignore_path = dockerignore
        self.ignore = None
        if os.path.exists(dockerignore):
            with open(dockerignore, encoding="utf-8") as fh:
                self.ignore = dockerignore_patterns(fh.read())
        self._depends = None
        self._runtime_cache = {}

    def add(self, path, line, rule, message):
        self.findings.append(Finding(self.rel(path), line, rule, message))

    def rel(self, path):
        relative = os.path.relpath(path, self.root)
        return path if relative.startswith("..") else relative

    def depends(self):
        if self._depends is None:
            self._depends = installed_dependencies()
        return self._depends

    # .dockerignore ---------------------------------------------------------------------------

    def check_dockerignore(self):
        path = self.dockerignore_path
        if self.ignore is None:
            self.add(path, 1, "dockerignore", "missing: the context would carry build/ and .git")
            return
        for must, why in (("build/CMakeCache.txt", "build/ (this machine's build outputs)"),
                          (".git/HEAD", ".git")):
            if not dockerignore_excludes(self.ignore, must):
                self.add(path, 1, "dockerignore", f"does not exclude {why}")

    # One Dockerfile --------------------------------------------------------------------------

    def check_dockerfile(self, path):
        with open(path, encoding="utf-8") as fh:
            instructions, errors = parse_dockerfile(fh.read())
        for line, message in errors:
            self.add(path, line, "parse", message)
        global_args, stages = split_stages(instructions)
        if not stages:
            self.add(path, 1, "multi-stage", "no FROM")
            return
        if len(stages) < 2:
            self.add(path, stages[0].line, "multi-stage",
                     "one stage: build in a named stage, copy only the binaries into a "
                     "runtime stage")
        names = {}
        for stage in stages:
            self.check_from(path, stage, names, arg_defaults(global_args))
            if stage.name:
                names[stage.name] = stage
            for ins in stage.instructions:
                self.check_instruction(path, ins, names)
        for stage in stages:
            if self.runs(stage, "scripts/build.sh"):
                self.check_build_stage(path, stage, names)
        self.check_final_stage(path, stages[-1], names)

    def check_from(self, path, stage, names, global_defaults):
        image = substitute(stage.image, global_defaults)
        if not stage.name:
            self.add(path, stage.line, "stage-name", f"FROM {stage.image} has no `AS name`")
        if image in names or image == "scratch":
            return
        if "$" in image:
            self.add(path, stage.line, "from-pinned", f"FROM {stage.image}: an ARG without default")
        elif "@sha256:" in image:
            return
        elif ":" not in image.rsplit("/", 1)[-1]:
            self.add(path, stage.line, "from-pinned", f"FROM {image} has no tag: pin one")
        elif image.endswith(":latest"):
            self.add(path, stage.line, "from-pinned", f"FROM {image}: pin a version, not latest")

    def check_instruction(self, path, ins, names):
        if ins.keyword == "RUN":
            self.check_run(path, ins)
        elif ins.keyword == "ADD":
            sources, _ = copy_sources_and_dest(ins)
            local = [s for s in sources if not re.match(r"[a-z]+://|git@", s)]
            if local:
                self.add(path, ins.line, "add", f"ADD {' '.join(local)}: use COPY for local files")
            self.check_context_sources(path, ins, local)
        elif ins.keyword == "COPY":
            source_stage = ins.flags.get("from")
            if source_stage is None:
                self.check_context_sources(path, ins, copy_sources_and_dest(ins)[0])
            elif source_stage not in names and not source_stage.isdigit():
                if re.search(r"[:/@]", source_stage):  # an image, pinned like a FROM
                    self.check_from(path, Stage(-1, source_stage, "-", ins.line), names, {})
                else:
                    self.add(path, ins.line, "copy-from",
                             f"COPY --from={source_stage}: no earlier stage of that name")
        elif ins.keyword == "WORKDIR":
            if not ins.rest.startswith(("/", "$")):
                self.add(path, ins.line, "workdir",
                         f"WORKDIR {ins.rest} is relative: make it absolute")

    def check_context_sources(self, path, ins, sources):
        for source in sources:
            if any(c in source for c in "*?[$"):
                continue
            relative = os.path.normpath(source).lstrip("/")
            if relative != "." and not os.path.exists(os.path.join(self.root, relative)):
                self.add(path, ins.line, "copy-source", f"{source} is not in the repository")
            elif relative != "." and self.ignore and dockerignore_excludes(self.ignore, relative):
                self.add(path, ins.line, "copy-source",
                         f"{source} is excluded by {self.rel(self.dockerignore_path)}")

    def check_run(self, path, ins):
        uses_apt = False
        removes_lists = False
        for words in shell_commands(ins.rest):
            if "sudo" in words:
                self.add(path, ins.line, "sudo", "sudo in RUN: the build already runs as root")
            if words[:1] == ["rm"] and any(w.startswith("/var/lib/apt/lists") for w in words):
                removes_lists = True
            if any(w.endswith("scripts/setup.sh") for w in words):
                uses_apt = True
            script = os.path.join(self.root, words[0]) if words and "/" in words[0] else None
            if script and os.path.isfile(script) and not os.access(script, os.X_OK):
                self.add(path, ins.line, "script-mode",
                         f"runs {words[0]}, which is not executable in the repository")
            tool = next((w for w in words if w in ("apt-get", "apt")), None)
            if tool is None:
                continue
            after = words[words.index(tool) + 1:]
            if "update" in after or "install" in after:
                uses_apt = True
            if "install" not in after:
                continue
            if tool == "apt":
                self.add(path, ins.line, "apt-get", "`apt install`: use apt-get in scripts")
            options = [w for w in after if w.startswith("-")]
            if "--no-install-recommends" not in options:
                self.add(path, ins.line, "apt-recommends",
                         f"{tool} install without --no-install-recommends")
            if not any(o in ("--yes", "--assume-yes") or re.match(r"-[a-z]*y", o) for o in options):
                self.add(path, ins.line, "apt-yes", f"{tool} install without -y")
        if uses_apt and not removes_lists:
            self.add(path, ins.line, "apt-lists",
                     "installs packages but does not rm -rf /var/lib/apt/lists/* in the same RUN")

    @staticmethod
    def apt_installs(stage):
        """(line, [package]) of each apt-get install of the stage (xargs-fed lists not included)."""
        result = []
        for ins in stage.instructions:
            if ins.keyword != "RUN":
                continue
            for words in shell_commands(ins.rest):
                tool = next((w for w in words if w in ("apt-get", "apt")), None)
                if tool is None or "install" not in words[words.index(tool):]:
                    continue
                after = words[words.index("install", words.index(tool)) + 1:]
                result.append((ins.line, [re.sub(r"=.*", "", w) for w in after
                                          if not w.startswith("-") and "$" not in w]))
        return result

    @staticmethod
    def runs(stage, script):
        """The first RUN of the stage that calls `script` (a path ending so), and its arguments."""
        for ins in stage.instructions:
            if ins.keyword != "RUN":
                continue
            for words in shell_commands(ins.rest):
                for i, w in enumerate(words):
                    if w.endswith(script) and (i == 0 or words[i - 1] in ("bash", "sh", "exec")):
                        return ins, words[i + 1:]
        return None

    @staticmethod
    def ancestry(stage, names):
        chain = [stage]
        while chain[-1].image in names and names[chain[-1].image] not in chain:
            chain.append(names[chain[-1].image])
        return chain

    def check_build_stage(self, path, stage, names):
        chain = self.ancestry(stage, names)
        base_image = chain[-1].image
        # scripts/setup.sh, or exactly its packages
        setup_run = next((self.runs(s, "scripts/setup.sh") for s in chain
                          if self.runs(s, "scripts/setup.sh")), None)
        if setup_run is None and self.setup_packages is not None:
            installs = [(line, pkgs) for s in chain for line, pkgs in self.apt_installs(s)]
            installed = {p for _, pkgs in installs for p in pkgs}
            wanted = set(self.setup_packages)
            line = installs[0][0] if installs else stage.line
            if not installs:
                self.add(path, line, "setup-sh",
                         "the build stage neither runs scripts/setup.sh nor installs its packages")
            elif installed != wanted:
                parts = []
                if wanted - installed:
                    parts.append("missing " + " ".join(sorted(wanted - installed)))
                if installed - wanted:
                    parts.append("not in setup.sh " + " ".join(sorted(installed - wanted)))
                self.add(path, line, "setup-sh",
                         "build stage packages differ from scripts/setup.sh's: " + "; ".join(parts))
        elif setup_run is not None:
            run_ins = setup_run[0]
            if self.setup_image_flag and self.setup_image_flag not in setup_run[1]:
                self.add(path, run_ins.line, "setup-sh",
                         f"scripts/setup.sh without {self.setup_image_flag}: an image build "
                         "needs no helm or kubectl")
            copied = any(ins.keyword == "COPY" and "from" not in ins.flags
                         and ins.line < run_ins.line
                         and any(os.path.normpath(src) in ("scripts/setup.sh", "scripts", ".")
                                 for src in copy_sources_and_dest(ins)[0])
                         for s in chain for ins in s.instructions)
            if not copied:
                self.add(path, run_ins.line, "setup-sh",
                         "runs scripts/setup.sh without COPYing it into the stage first")
        # scripts/build.sh with an explicit CUDA choice
        build_ins, build_args = self.runs(stage, "scripts/build.sh")
        cuda = [a.split("=", 1)[1] for a in build_args if a.startswith("-DPSFLOW_CUDA=")]
        gpu_base = base_image.startswith("nvidia/cuda:") and "devel" in base_image
        want = "ON" if gpu_base else "OFF"
        if not self.cuda_option:
            self.add(path, build_ins.line, "cuda-flag",
                     "CMakeLists.txt no longer declares PSFLOW_CUDA: update the Dockerfiles")
        elif not cuda:
            self.add(path, build_ins.line, "cuda-flag",
                     f"scripts/build.sh without -DPSFLOW_CUDA={want}: AUTO depends on the builder")
        elif cuda[-1] != want:
            self.add(path, build_ins.line, "cuda-flag",
                     f"-DPSFLOW_CUDA={cuda[-1]} on {base_image}: want {want}")
        # identical build stages share the cache and cannot drift
        body = [(ins.keyword, ins.args) for s in reversed(chain) for ins in s.instructions]
        previous = self.build_stages.get(base_image)
        if previous is None:
            self.build_stages[base_image] = (path, body)
        elif previous[1] != body:
            self.add(path, stage.line, "same-build",
                     f"build stage on {base_image} differs from {self.rel(previous[0])}'s: keep "
                     "them identical (one BuildKit cache, no drift)")

    def check_final_stage(self, path, stage, names):
        last = {}
        for ins in stage.instructions:
            last.setdefault(ins.keyword, []).append(ins)
        args = arg_defaults(stage.instructions)
        # USER
        if "USER" not in last:
            self.add(path, stage.line, "user", "the final stage sets no USER: it would run as root")
        else:
            user_ins = last["USER"][-1]
            uid = user_ins.rest.split(":", 1)[0]
            if uid in ("root", "0"):
                self.add(path, user_ins.line, "user", f"USER {user_ins.rest} runs as root")
            elif not uid.isdigit():
                self.add(path, user_ins.line, "user",
                         f"USER {user_ins.rest}: use a numeric UID "
                         "(runAsNonRoot can only check those)")
        # ENTRYPOINT / CMD
        for keyword in ("ENTRYPOINT", "CMD"):
            for ins in last.get(keyword, []):
                if json_array(ins.rest) is None:
                    self.add(path, ins.line, "exec-form",
                             f"{keyword} in shell form: write it as a JSON array (exec form)")
        copies = self.copied_binaries(path, stage, names)
        if "ENTRYPOINT" not in last:
            self.add(path, stage.line, "entrypoint", "the final stage has no ENTRYPOINT")
        else:
            ins = last["ENTRYPOINT"][-1]
            words = json_array(ins.rest)
            if words and not any(words[0] in (dest, os.path.basename(dest)) for _, dest in copies):
                self.add(path, ins.line, "entrypoint",
                         f"ENTRYPOINT {words[0]} is none of the binaries this stage copies")
        if "EXPOSE" not in last:
            self.add(path, stage.line, "expose", "the final stage EXPOSEs no port")
        self.check_labels(path, stage, last.get("LABEL", []), args)
        for line, packages in self.apt_installs(stage):
            dev = [p for p in packages if p.endswith("-dev")]
            if dev:
                self.add(path, line, "runtime-dev", "runtime stage installs " + " ".join(dev))
        if self.runs(stage, "scripts/setup.sh"):
            self.add(path, self.runs(stage, "scripts/setup.sh")[0].line, "runtime-dev",
                     "runtime stage runs scripts/setup.sh (build packages)")
        self.check_runtime_libraries(path, stage, copies, names)

    def copied_binaries(self, path, stage, names):
        """[(name, destination)] of the add_executable targets COPY --from'ed into the stage."""
        copies = []
        for ins in stage.instructions:
            if ins.keyword != "COPY" or ins.flags.get("from") not in names:
                continue
            sources, dest = copy_sources_and_dest(ins)
            for source in sources:
                name = os.path.basename(source.rstrip("/"))
                if "/bin/" not in source:
                    continue
                if name not in self.executables:
                    self.add(path, ins.line, "binary",
                             f"{source}: no add_executable({name} ...) in the CMake tree")
                    continue
                copies.append((name, dest + name if dest.endswith("/") else dest))
        return copies

    def check_labels(self, path, stage, label_instructions, args):
        labels, lines = {}, {}
        for ins in label_instructions:
            try:
                words = shlex.split(ins.rest)
            except ValueError:
                words = ins.rest.split()
            for word in words:
                key, _, value = word.partition("=")
                labels[key], lines[key] = value, ins.line
        missing = [k for k in OCI_LABELS if f"org.opencontainers.image.{k}" not in labels]
        if missing:
            self.add(path, stage.line, "labels", "the final stage lacks the OCI labels " +
                     " ".join(f"org.opencontainers.image.{k}" for k in missing))
        version = labels.get("org.opencontainers.image.version")
        if version is None:
            return
        m = re.fullmatch(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", version)
        line = lines["org.opencontainers.image.version"]
        if not m or m.group(1) not in args:
            self.add(path, line, "labels",
                     "org.opencontainers.image.version is not an ARG of the stage")
        elif self.version and args[m.group(1)] != self.version:
            line = next(ins.line for ins in stage.instructions if ins.keyword == "ARG"
                        and ins.rest.partition("=")[0].strip() == m.group(1))
            self.add(path, line, "version",
                     f"ARG {m.group(1)} defaults to {args[m.group(1)]}, the CMake project is "
                     f"{self.version}")

    def check_runtime_libraries(self, path, stage, copies, names):
        if not copies:
            return
        # The list docker/runtime-packages.sh wrote in the build stage, installed here?
        generated = self.generated_list(stage, names)
        if generated is not None:
            listed, build_line = generated
            for name, _ in copies:
                if name not in listed:
                    self.add(path, build_line, "runtime-libs",
                             f"docker/runtime-packages.sh is not run on {name}, which the final "
                             "stage copies")
            return
        if not stage.image.startswith("debian:12"):
            self.add(path, stage.line, "runtime-libs",
                     f"runtime base {stage.image} is not Debian 12: install the list "
                     "docker/runtime-packages.sh writes in the build stage")
            return
        binaries = []
        for name, _ in copies:
            binary = os.path.join(self.bin_dir, name)
            if os.access(binary, os.X_OK):
                binaries.append(binary)
            else:
                self.notes.append(f"{self.rel(path)}: runtime libraries of {name} not checked: "
                                  f"{self.rel(binary)} is not built (scripts/build.sh)")
        if not binaries:
            return
        key = tuple(binaries)
        if key not in self._runtime_cache:
            self._runtime_cache[key] = runtime_packages(self.root, binaries)
        required, error = self._runtime_cache[key]
        if error:
            self.add(path, stage.line, "runtime-libs", error)
            return
        installs = self.apt_installs(stage)
        installed = {p for _, pkgs in installs for p in pkgs}
        covered = dependency_closure(installed | BASE_PACKAGES, self.depends())
        missing = sorted(required - covered)
        if missing:
            line = installs[0][0] if installs else stage.line
            self.add(path, line, "runtime-libs",
                     f"{' '.join(os.path.basename(b) for b in binaries)} loads libraries of "
                     f"{' '.join(missing)}, which the runtime stage does not install")

    def generated_list(self, stage, names):
        """({binary names}, line) if the stage apt-installs a file that a build stage wrote with
        docker/runtime-packages.sh; None otherwise."""
        for ins in stage.instructions:
            if ins.keyword != "RUN":
                continue
            for words in shell_commands(ins.rest):
                if words[:2] != ["xargs", "-a"] or "apt-get" not in words or len(words) < 3:
                    continue
                list_file = words[2]
                for other in names.values():
                    run = self.runs(other, "docker/runtime-packages.sh")
                    if run is None:
                        continue
                    args = run[1]
                    if ">" in args and args[args.index(">") + 1:][:1] == [list_file]:
                        binaries = args[:args.index(">")]
                        return {os.path.basename(b) for b in binaries}, run[0].line
        return None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.normpath(os.path.join(here, "..", "..")))
    parser.add_argument("--bin-dir", help="built binaries (default ROOT/build/bin)")
    parser.add_argument("--dockerignore", help="default ROOT/.dockerignore")
    parser.add_argument("dockerfiles", nargs="*")
    options = parser.parse_args(argv)
    root = os.path.abspath(options.root)
    bin_dir = options.bin_dir or os.path.join(root, "build", "bin")
    dockerignore = options.dockerignore or os.path.join(root, ".dockerignore")
    files = options.dockerfiles or sorted(
        os.path.join(root, "docker", f) for f in os.listdir(os.path.join(root, "docker"))
        if f.endswith(".Dockerfile"))
    checker = Checker(root, bin_dir, dockerignore)
    checker.check_dockerignore()
    for path in files:
        checker.check_dockerfile(os.path.abspath(path))
    for note in checker.notes:
        print(f"check_dockerfiles: {note}")
    order = {checker.rel(os.path.abspath(f)): i for i, f in enumerate(files)}
    for finding in sorted(checker.findings, key=lambda f: (order.get(f.path, -1), f.line)):
        print(finding)
    print(f"check_dockerfiles: {len(files)} Dockerfile{'s' if len(files) != 1 else ''} and "
          f"{checker.rel(dockerignore)}: {len(checker.findings)} problems")
    return 1 if checker.findings else 0


if __name__ == "__main__":
    sys.exit(main())
