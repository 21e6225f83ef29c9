# shellcheck shell=bash
# Source at the start of a GPU-machine run, in the repository root:
#   source scripts/rig/env.sh
# Makes a machine without a desktop session usable for headless Vulkan on an NVIDIA GPU:
#  - Vulkan loader: where libvulkan.so.1 is missing and .dev/gl/ holds Debian packages of
#    it (libvulkan1, and libegl1 libglvnd0 ... for EGL), unpacks them (root) and refreshes
#    the linker cache. A machine with packages installs libvulkan1 instead.
#  - NVIDIA's Vulkan driver manifest: where the driver is installed outside the loader's
#    search path (containers mount it under /usr/local/nvidia), VK_DRIVER_FILES points at it,
#    as __EGL_VENDOR_LIBRARY_FILENAMES does for EGL. An existing setting is kept.
#  - kvikio for the peer reader: wheels in .dev/whl/ are installed into .dev/site (no network
#    needed) and put on PYTHONPATH.
#  - XDG_RUNTIME_DIR: supercell makes its own where none is set; the GPU test binaries do
#    not, and Mesa's and NVIDIA's Vulkan drivers complain without one.

if ! ldconfig -p 2>/dev/null | grep -q 'libvulkan\.so\.1 '; then
  if ls .dev/gl/*.deb >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    for deb in .dev/gl/*.deb; do dpkg -x "$deb" /; done
    ldconfig
  else
    echo "env.sh: no Vulkan loader (libvulkan.so.1): install libvulkan1, or put its .deb in .dev/gl/" >&2
  fi
fi
for icd in /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json /usr/share/vulkan/icd.d/nvidia_icd.json \
  /etc/vulkan/icd.d/nvidia_icd.json; do
  if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$icd" ]; then
    export VK_DRIVER_FILES=$icd
  fi
done
egl=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [ -z "${__EGL_VENDOR_LIBRARY_FILENAMES:-}" ] && [ -f "$egl" ]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=$egl
fi
if ls .dev/whl/*.whl >/dev/null 2>&1; then
  if python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target .dev/site .dev/whl/*.whl; then
    export PYTHONPATH="$PWD/.dev/site${PYTHONPATH:+:$PYTHONPATH}"
  fi
fi
if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "$XDG_RUNTIME_DIR" ] || [ ! -O "$XDG_RUNTIME_DIR" ]; then
  XDG_RUNTIME_DIR=$(mktemp -d "${TMPDIR:-/tmp}/runtime-XXXXXX") && export XDG_RUNTIME_DIR
fi
unset icd egl deb
