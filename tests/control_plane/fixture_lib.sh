# Sourced by control_plane.sh and tests/node/node.sh, the ctest fixtures that start processes
# for the tests: what both need. The caller sets $fixture (its name in messages), $dir (its
# folder, at call time) and defines stop_all (what fail undoes).
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

# skip REASON: writes it to $dir/skip (the tests that need the fixture skip with it), says it,
# exits 0.
skip() {
  echo "$1" > "$dir/skip"
  echo "$fixture not started: $1"
  exit 0
}

# fail MESSAGE: says it with the last lines of every log in $dir, stops what was started, exits 1.
fail() {
  echo "$(basename "$0"): $1" >&2
  for log in "$dir"/*.log; do
    [ -f "$log" ] || continue
    echo "--- last lines of $log" >&2
    tail -n 15 "$log" >&2
  done
  stop_all
  exit 1
}

# free_port: a free loopback port: nothing answers a connection to it (and it was not handed out
# already). Below the kernel's ephemeral range (ip_local_port_range, 32768-60999 by default), from
# which every outgoing connection's source port and every port a test binds as port 0 come: a
# port from that range can be taken by either between this check and the server's bind (seen: the
# controller manager's "bind: address already in use" in a loaded run).
used_ports=" "
free_port() {
  local port low=20000 high=32767 ephemeral
  read -r ephemeral _ < /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || ephemeral=32768
  [ "$ephemeral" -gt "$((low + 1000))" ] && high=$((ephemeral - 1))
  for _ in $(seq 200); do
    port=$((low + RANDOM % (high - low + 1)))
    case "$used_ports" in *" $port "*) continue ;; esac
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      used_ports+="$port "
      echo "$port"
      return 0
    fi
  done
  fail "no free loopback port found"
}

# wait_for WHAT SECONDS COMMAND...: retries COMMAND every 0.2 s, fails after SECONDS.
wait_for() {
  local what="$1" seconds="$2"
  shift 2
  for _ in $(seq $((seconds * 5))); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  fail "$what not ready after ${seconds} s"
}

# ssl ARGS...: openssl, its output in $dir/openssl.log, failing the fixture on an error.
ssl() { openssl "$@" 2>>"$dir/openssl.log" >/dev/null || fail "openssl $1 failed"; }
