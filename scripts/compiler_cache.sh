# Sourced by scripts/build.sh, scripts/sanitize.sh and scripts/fuzz.sh: when ccache is installed
# (setup.sh installs it), compile through it, with paths made relative to the checkout so that
# another clone of the same sources (CI's fresh clone, a second worktree) reuses the objects. Sets
# the array `launcher_args` for cmake; empty without ccache (a plain build, nothing else changes).
launcher_args=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  launcher_args=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
                 -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
