#!/usr/bin/env bash
# The test command: installs what the tests need (when run as root on Debian/Ubuntu), then
# runs format, lint and every CPU-side test, including the cross-checks against independent
# NanoVDB implementations (Debian's nanovdb tools and python3-openvdb, PyPI's warp-lang) and
# supercell's pictures against Mitsuba 3's (PyPI's mitsuba).
#
#   bash scripts/test.sh            # everything CI runs
#   SUPERCELL_SKIP_INSTALL=1 ...    # skip the package installation step
#
# warp-lang goes into a virtual environment, target/crosscheck-venv: Debian 12 and later
# refuse pip installs into the system Python (PEP 668). Its python3 comes first on PATH for
# the tests, which run `python3` from PATH.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# Python for the cross-checks, and what makes a virtual environment with pip in it
# (Debian splits ensurepip out into python3-venv).
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv python3-pip)
# A C compiler: the linker cargo calls, and the PNanoVDB reader the warp cross-check builds.
command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v nanovdb_validate >/dev/null || need_apt+=(libnanovdb-tools)
/usr/bin/python3 -c 'import pyopenvdb' 2>/dev/null || need_apt+=(python3-openvdb)
# netCDF: the C library supercell-data links for CM1/WRF import (netcdf crate, system
# library: seconds to install, where building netCDF-C and HDF5 from source would need
# cmake and minutes of two cores), and the Python module that writes the test files.
pkg-config --exists netcdf 2>/dev/null || need_apt+=(libnetcdf-dev pkg-config)
/usr/bin/python3 -c 'import netCDF4' 2>/dev/null || need_apt+=(python3-netcdf4)
# fio, the baseline `bench --peer fio` runs beside supercell, and its json+ converter
# (fio_jsonplus_clat2csv, which imports six) that reads `bench --json` in tests/bench_peer.rs.
command -v fio >/dev/null || need_apt+=(fio)
python3 -c 'import six' 2>/dev/null || need_apt+=(python3-six)
# ffmpeg and ffprobe: `render --movie` encodes with the system's ffmpeg, and
# tests/render_movie.rs checks the video with ffprobe and ffmpeg's decoder.
command -v ffprobe >/dev/null || need_apt+=(ffmpeg)
# Open MPI (mpirun, and the headers and libclang the `mpi` crate's bindings are generated
# with) for the `mpi` feature's tests: bench across ranks (tests/mpi_bench.rs).
command -v mpirun >/dev/null || need_apt+=(openmpi-bin)
[ -e /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || pkg-config --exists ompi 2>/dev/null ||
  need_apt+=(libopenmpi-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || need_apt+=(libclang-dev)
# Mesa's software Vulkan (lavapipe) for the renderer tests.
ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1 || need_apt+=(mesa-vulkan-drivers libvulkan1)
# A virtual X server and the libraries winit loads at run time, for the player's window tests
# (tests/play.rs starts its own Xvfb when DISPLAY is unset).
command -v Xvfb >/dev/null || need_apt+=(xvfb)
command -v xauth >/dev/null || need_apt+=(xauth)  # xvfb-run needs it
ldconfig -p 2>/dev/null | grep -q libxkbcommon-x11.so.0 || need_apt+=(libxkbcommon-x11-0)
ldconfig -p 2>/dev/null | grep -q libXcursor.so.1 || need_apt+=(libxcursor1 libxi6 libxrandr2)
if [ -z "${SUPERCELL_SKIP_INSTALL:-}" ] && [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${need_apt[@]}"
  else
    echo "note: not root or no apt-get; tests needing ${need_apt[*]} will be skipped" >&2
  fi
fi

# warp-lang (and blosc) in a virtual environment under target/ (kept between runs; cargo clean removes
# it). --system-site-packages keeps numpy and other Debian packages visible.
venv=target/crosscheck-venv
if [ -z "${SUPERCELL_SKIP_INSTALL:-}" ] && command -v python3 >/dev/null; then
  if ! "$venv/bin/python3" -c 'import warp, blosc' 2>/dev/null; then
    # blosc: warp's Volume.save_to_nvdb needs it for Blosc-compressed files.
    if python3 -m venv --system-site-packages "$venv" &&
      "$venv/bin/python3" -m pip install -q --disable-pip-version-check 'warp-lang==1.19.0' \
        'blosc==1.11.4'; then
      :
    else
      echo "note: warp-lang not installed in $venv; its cross-check will be skipped" >&2
    fi
  fi
  # Mitsuba 3 (CPU variants), the independent renderer of tests/mitsuba_compare.rs.
  if ! "$venv/bin/python3" -c 'import mitsuba' 2>/dev/null; then
    "$venv/bin/python3" -m pip install -q --disable-pip-version-check 'mitsuba==3.9.1' ||
      echo "note: mitsuba not installed in $venv; its comparison will be skipped" >&2
  fi
fi
if [ -x "$venv/bin/python3" ]; then
  PATH="$PWD/$venv/bin:$PATH"
  export PATH
fi

# CI must fail when a cross-check tool or the software Vulkan adapter is missing, rather
# than skip silently.
if [ -n "${CI:-}" ]; then export SUPERCELL_REQUIRE_CROSSCHECK=1 SUPERCELL_REQUIRE_GPU=1; fi
# Mesa's Vulkan loader wants a runtime directory; headless machines often have none.
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d) && export XDG_RUNTIME_DIR
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The player's window tests need an X display: an Xvfb per run keeps them off any real
# desktop (and works where there is none).
if command -v xvfb-run >/dev/null; then
  xvfb-run -a -s "-screen 0 1280x1024x24" cargo test --workspace
else
  cargo test --workspace
fi
# The `mpi` feature (scale-out across MPI ranks): its code linted; bench, play (headless and
# the window, under an Xvfb of its own), sort-last render and supercell-data's conversion
# across ranks run under mpirun. Where Open MPI's development
# files are missing it is skipped, except in CI, which installs them above.
if pkg-config --exists ompi 2>/dev/null || [ -n "${CI:-}" ]; then
  cargo clippy --features mpi --lib --bins -- -D warnings
  cargo test --features mpi --test mpi_bench --test mpi_play --test mpi_window --test render_split
  # Conversion across ranks: mpirun -n 2 supercell-data generate, byte-identical.
  cargo clippy -p supercell-data --features mpi --bins -- -D warnings
  cargo test -p supercell-data --features mpi --test mpi_convert
else
  echo "note: Open MPI's development files are missing; the mpi feature is not tested" >&2
fi
