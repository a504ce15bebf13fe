# Sourced by control_plane.sh and tests/node/node.sh: the Kubernetes binaries of the tests.
#
# kube_asset NAME prints the path of binary NAME from $assets (the caller's $PSFLOW_KUBE_ASSETS
# folder): NAME itself when it is executable there, else NAME.xz decompressed into $bin_cache
# (again only when the archive is newer), checked against $assets/SHA256SUMS when that names it.
# Returns 1 when there is neither; a decompressed binary that does not match its sum is an error.
# The assets folder is read-only in CI: nothing is written beside the archives.
kube_asset() {
  local name="$1"
  if [ -x "$assets/$name" ]; then echo "$assets/$name"; return 0; fi
  [ -f "$assets/$name.xz" ] || return 1
  local out="$bin_cache/$name"
  if [ ! -x "$out" ] || [ "$assets/$name.xz" -nt "$out" ]; then
    xz -dc "$assets/$name.xz" > "$out.tmp.$$"
    if [ -f "$assets/SHA256SUMS" ] && grep -q " $name\$" "$assets/SHA256SUMS"; then
      local want got
      want="$(grep " $name\$" "$assets/SHA256SUMS" | cut -d' ' -f1)"
      got="$(sha256sum "$out.tmp.$$" | cut -d' ' -f1)"
      if [ "$want" != "$got" ]; then
        rm -f "$out.tmp.$$"
        echo "$assets/$name.xz does not decompress to the binary SHA256SUMS names" >&2
        exit 1
      fi
    fi
    chmod +x "$out.tmp.$$"
    mv -f "$out.tmp.$$" "$out"
  fi
  echo "$out"
}
