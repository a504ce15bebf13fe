#!/usr/bin/env bash
# Builds psflow's CPU images — psflow/operator, psflow/ps, psflow/worker (:VERSION, the CMake
# project version) from docker/operator.Dockerfile, docker/ps.Dockerfile and
# docker/worker-cpu.Dockerfile — with Debian's buildah, no Docker engine or registry needed.
#
#   scripts/images.sh [--prebuilt] [--only operator,ps,worker] [--load SOCKET]
#   scripts/images.sh --cpu-binaries
#
#   (default)      the Dockerfiles as they are: the build stage compiles the tree (scripts/setup.sh,
#                  scripts/build.sh; ~15 min cold on 2 cores, cached by `buildah bud --layers`).
#   --prebuilt     the same runtime stages (the text from `FROM ... AS runtime` on, unchanged) over
#                  the binaries already in $BUILD_DIR/bin (default build/), stripped as the build
#                  stage strips them: no second compile. What the tests use (tests/node). Except
#                  a binary built with CUDA (nvcc was found): the CPU image gets that one target
#                  built again with -DPSFLOW_CUDA=OFF, as the build stage builds it.
#   --only LIST    only these images (comma-separated).
#   --load SOCKET  then imports them into the containerd at SOCKET (namespace k8s.io, the one the
#                  kubelet's CRI uses) with `ctr images import` of a docker-archive tar.
#   --cpu-binaries only builds the CPU-only binaries --prebuilt would (where $BUILD_DIR/bin's load
#                  CUDA's libraries), then exits; no root needed. scripts/test.sh runs it before
#                  the tests, so that the minutes a cold build takes count against no test's time.
#
# The base, debian:12.11-slim: used when buildah's store has it; else the cached debootstrap
# tarball; else pulled when Docker Hub answers; else made with `debootstrap --variant=minbase
# bookworm` from the archive apt already uses (its sources copied in) and cached as a tarball
# (~70 s once). Everything lives under $PSFLOW_IMAGES_DIR (default $BUILD_DIR/images): buildah's
# own store (not the system's), the base tarball, the docker-archive tars. A second run with the
# same binaries takes seconds. Needs root (buildah, debootstrap, containerd's socket).
#
# Containers here may not raise their open-files limit above the shell's hard limit, so buildah
# runs with a containers.conf (CONTAINERS_CONF) whose default_ulimits are the shell's own.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: scripts/images.sh [--prebuilt] [--only operator,ps,worker] [--load SOCKET]" >&2
  echo "       scripts/images.sh --cpu-binaries" >&2
  exit 2
}
prebuilt=0
cpu_binaries=0
only="operator,ps,worker"
load=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prebuilt) prebuilt=1; shift ;;
    --cpu-binaries) cpu_binaries=1; shift ;;
    --only) [ $# -ge 2 ] || usage; only="$2"; shift 2 ;;
    --load) [ $# -ge 2 ] || usage; load="$2"; shift 2 ;;
    *) usage ;;
  esac
done

build_dir="${BUILD_DIR:-build}"
state="${PSFLOW_IMAGES_DIR:-$build_dir/images}"
mkdir -p "$state"
state="$(cd "$state" && pwd)"
version="$(sed -n 's/^project(psflow VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
base_tag="docker.io/library/debian:12.11-slim"
say() { echo "images: $*"; }
die() { echo "images: $*" >&2; exit 1; }

# The CPU images' build stage configures with -DPSFLOW_CUDA=OFF; where nvcc is found, the binaries
# in $BUILD_DIR/bin load CUDA's libraries, which those images lack. Prints the path of binary $1
# built as that stage builds it (scripts/build.sh -DPSFLOW_CUDA=OFF), only that target, in
# $state/cpu-build (through ccache; minutes the first time, seconds after).
cpu_only() {
  say "$build_dir/bin/$1 loads CUDA's libraries: building a CPU-only $1 in $state/cpu-build" >&2
  BUILD_DIR="$state/cpu-build" PSFLOW_BUILD_TARGETS="$1" scripts/build.sh -DPSFLOW_CUDA=OFF \
    > "$state/cpu-build.log" 2>&1 || die "the CPU-only build failed: $(tail -n 5 "$state/cpu-build.log")"
  echo "$state/cpu-build/bin/$1"
}
# Whether binary $1 loads CUDA's libraries. Not `ldd | grep -q`: grep -q exits at the first match,
# ldd dies of SIGPIPE, and under pipefail the caller fails (a CUDA-linked worker went into the CPU
# image, exit 127).
loads_cuda() {
  local deps
  deps="$(ldd "$1")"
  [[ $deps == *libcudart* ]]
}

if [ "$cpu_binaries" -eq 1 ]; then
  [ "$prebuilt" -eq 0 ] && [ -z "$load" ] && [ "$only" = "operator,ps,worker" ] || usage
  exec 9>"$state/lock"
  flock 9  # as a build of the images would: one cpu-build at a time
  for name in psflow-operator psflow-ps psflow-worker; do
    bin="$build_dir/bin/$name"
    [ -x "$bin" ] || die "$bin is not built (scripts/build.sh)"
    if loads_cuda "$bin"; then cpu_only "$name" >/dev/null; fi
  done
  exit 0
fi

[ "$(id -u)" -eq 0 ] || die "needs root (buildah's store, debootstrap, containerd's socket)"
for tool in buildah strip; do
  command -v "$tool" >/dev/null || die "no $tool on PATH (scripts/setup.sh installs it)"
done
[ -z "$load" ] || command -v ctr >/dev/null || die "no ctr on PATH (scripts/setup.sh installs containerd)"

# One run at a time per store.
exec 9>"$state/lock"
flock 9

nofile="$(ulimit -Hn)"
[ "$nofile" = unlimited ] && nofile=1048576
cat > "$state/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=$nofile:$nofile"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$state/containers.conf"
bh() { buildah --root "$state/storage" --runroot "$state/run" --storage-driver overlay "$@"; }

# --- The base image.
base_tar="$state/base/debian-bookworm-minbase.tar"
have_image() { bh inspect --type image "$1" >/dev/null 2>&1; }
import_base() {
  local ctr mnt
  ctr="$(bh from --quiet scratch)"
  mnt="$(bh mount "$ctr")"
  tar --numeric-owner -xpf "$base_tar" -C "$mnt"
  bh umount "$ctr" >/dev/null
  bh config --cmd bash --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    "$ctr"
  bh commit --quiet --rm "$ctr" "$base_tag" >/dev/null
}
# The archive apt uses here (deb822 or one-line sources), for debootstrap.
mirror() {
  local uri
  uri="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null |
    grep -v security | head -n 1 || true)"
  [ -n "$uri" ] || uri="$(sed -n 's/^deb \(\[[^]]*\] \)\?\(http[^ ]*\) bookworm .*/\2/p' \
    /etc/apt/sources.list 2>/dev/null | head -n 1 || true)"
  echo "${uri:-http://deb.debian.org/debian}"
}
umount_under() {
  local target
  for target in $(findmnt -rn -o TARGET | grep "^$1/" | sort -r); do umount -l "$target" || true; done
}
make_base_tar() {
  command -v debootstrap >/dev/null || die "no debootstrap on PATH (scripts/setup.sh installs it)"
  local rootfs="$state/base/rootfs" url
  url="$(mirror)"
  # A debootstrap that failed half-way leaves /proc (and /sys) mounted in its root.
  umount_under "$rootfs"
  rm -rf --one-file-system "$rootfs"
  mkdir -p "$rootfs"
  say "making $base_tag: debootstrap --variant=minbase bookworm from $url (~70 s, once)"
  debootstrap --variant=minbase bookworm "$rootfs" "$url" > "$state/base/debootstrap.log" 2>&1 ||
    die "debootstrap failed: $(tail -n 3 "$state/base/debootstrap.log")"
  # apt inside the images uses the archive apt uses here; trimmed as the slim images are.
  if ls /etc/apt/sources.list.d/*.sources >/dev/null 2>&1; then
    cp /etc/apt/sources.list.d/*.sources "$rootfs/etc/apt/sources.list.d/"
    rm -f "$rootfs/etc/apt/sources.list"
  fi
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc/* \
    "$rootfs"/usr/share/man/* "$rootfs"/var/log/*.log
  tar --numeric-owner -cf "$base_tar.tmp" -C "$rootfs" .
  mv -f "$base_tar.tmp" "$base_tar"
  rm -rf --one-file-system "$rootfs"
}
registry_reachable() {
  command -v curl >/dev/null && curl -s -o /dev/null --max-time 5 https://registry-1.docker.io/v2/
}
if ! have_image "$base_tag"; then
  mkdir -p "$state/base"
  if [ ! -f "$base_tar" ] && registry_reachable &&
    bh pull --quiet --retry 1 "$base_tag" >/dev/null 2>&1; then
    say "pulled $base_tag"
  else
    [ -f "$base_tar" ] || make_base_tar
    import_base
    say "$base_tag from $base_tar"
  fi
fi

# --- The images.
dockerfile_of() {
  case "$1" in
    operator) echo docker/operator.Dockerfile ;;
    ps) echo docker/ps.Dockerfile ;;
    worker) echo docker/worker-cpu.Dockerfile ;;
    *) die "no image $1 (operator, ps, worker)" ;;
  esac
}
bud() {
  bh bud --quiet --layers --network host --pull=never "$@" >/dev/null
}
# The build context standing in for the build stage: what the runtime stage copies from it,
# taken from this machine ($BUILD_DIR/bin for /src/build/bin; other paths, e.g. the data set, as
# they are here, hard-linked where the file system allows).
prebuilt_context() {
  local runtime="$1" ctx="$2" src dst
  rm -rf "$ctx"
  mkdir -p "$ctx"
  while read -r src; do
    dst="$ctx$src"
    mkdir -p "$(dirname "$dst")"
    case "$src" in
      /src/build/bin/*)
        local name="${src#/src/build/bin/}"
        local bin="$build_dir/bin/$name"
        [ -x "$bin" ] || die "$bin is not built (scripts/build.sh)"
        if loads_cuda "$bin"; then bin="$(cpu_only "$name")"; fi
        strip --strip-debug -o "$dst" "$bin"
        ;;
      *)
        [ -e "$src" ] || die "$src (copied from the build stage) is not on this machine (scripts/setup.sh)"
        cp -al "$src" "$dst" 2>/dev/null || cp -a "$src" "$dst"
        ;;
    esac
  done < <(sed -n 's/^COPY --from=build \([^ ]*\) .*/\1/p' <<<"$runtime")
}

built=()
for name in ${only//,/ }; do
  dockerfile="$(dockerfile_of "$name")"
  tag="docker.io/psflow/$name:$version"
  start=$SECONDS
  old_id="$(bh inspect --type image --format '{{.FromImageID}}' "$tag" 2>/dev/null || true)"
  if [ "$prebuilt" -eq 1 ]; then
    runtime="$(sed -n '/^FROM .* AS runtime$/,$p' "$dockerfile")"
    [ -n "$runtime" ] || die "$dockerfile has no stage named runtime"
    ctx="$state/prebuilt/$name"
    prebuilt_context "$runtime" "$ctx/build"
    printf '%s\n' "$runtime" > "$ctx/Dockerfile"
    bud --build-context "build=$ctx/build" -f "$ctx/Dockerfile" -t "$tag" "$ctx"
  else
    bud --target runtime -f "$dockerfile" -t "$tag" .
  fi
  say "built $tag from $dockerfile$([ "$prebuilt" -eq 1 ] && echo " over $build_dir/bin") ($((SECONDS - start)) s)"
  built+=("$name")
  # The image this tag named before, unless it is still a layer of another.
  new_id="$(bh inspect --type image --format '{{.FromImageID}}' "$tag")"
  [ -z "$old_id" ] || [ "$old_id" = "$new_id" ] || bh rmi "$old_id" >/dev/null 2>&1 || true
done

[ -n "$load" ] || exit 0
mkdir -p "$state/archives"
for name in "${built[@]}"; do
  tag="docker.io/psflow/$name:$version"
  archive="$state/archives/$name.tar"
  id="$(bh inspect --type image --format '{{.FromImageID}}' "$tag")"
  # The archive of this very image, when an earlier run wrote it.
  if [ ! -f "$archive" ] || [ "$(cat "$archive.id" 2>/dev/null)" != "$id" ]; then
    rm -f "$archive" "$archive.id"
    bh push --quiet "$tag" "docker-archive:$archive:$tag" >/dev/null
    echo "$id" > "$archive.id"
  fi
  ctr --address "$load" -n k8s.io images import "$archive" >/dev/null ||
    die "ctr could not import $archive into the containerd at $load"
  say "loaded $tag into the containerd at $load"
done
