#!/usr/bin/env bash
# Prints the packages (dpkg) that hold the shared libraries BINARY... load, one a line, sorted.
# Libraries of the CUDA runtime + cuDNN base image and of the NVIDIA driver (libcuda, libcudart,
# libcublas*, libcudnn*, libnvidia-*) are left out: the base image or the driver provides them.
#
# worker.Dockerfile's build stage runs it on the GPU worker and its runtime stage installs the
# list (Ubuntu 24.04 names its library packages differently from Debian 12). The Debian images
# list their runtime packages by hand; tests/docker/check_dockerfiles.py runs this script on
# build/bin/ to check those lists. Exits 1, naming the library, if ldd cannot resolve one or no
# package owns it.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

declare -A libs=()  # resolved path -> soname
for binary in "$@"; do
  [ -x "$binary" ] || { echo "runtime-packages: $binary is not an executable file" >&2; exit 1; }
  while read -r soname arrow path _; do
    [ "$arrow" = "=>" ] || continue  # the vDSO and the dynamic loader (libc6) have no "=>"
    case "$soname" in
      libcuda.so.* | libcudart.so.* | libcublas*.so.* | libcudnn*.so.* | libnvidia-*.so.*)
        continue ;;
    esac
    if [ "$path" = "not" ]; then
      echo "runtime-packages: $binary: ldd finds no $soname" >&2
      exit 1
    fi
    libs["$path"]="$soname"
  done < <(ldd "$binary")
done

# dpkg knows each file under one spelling only (/lib or /usr/lib, the symlink or its target), so
# every spelling is asked in one dpkg-query call (one read of its database).
spellings() {
  local real
  real="$(readlink -f "$1")"
  printf '%s\n' "$1" "$real" "/usr$1" "/usr$real" "${1#/usr}" "${real#/usr}"
}
declare -A owner=()  # spelling -> package
mapfile -t queries < <(for path in "${!libs[@]}"; do spellings "$path"; done | sort -u)
while IFS= read -r line; do
  case "$line" in diversion\ *) continue ;; esac
  owner["${line#*: }"]="$(sed 's/[:,].*//' <<<"$line")"
done < <(dpkg-query -S "${queries[@]}" 2>/dev/null || true)

declare -A packages=()
for path in "${!libs[@]}"; do
  pkg=""
  while IFS= read -r spelling; do
    pkg="${owner[$spelling]:-}"
    [ -z "$pkg" ] || break
  done < <(spellings "$path")
  if [ -z "$pkg" ]; then
    echo "runtime-packages: no package owns $path (${libs[$path]})" >&2
    exit 1
  fi
  packages["$pkg"]=1
done
printf '%s\n' "${!packages[@]}" | sort
