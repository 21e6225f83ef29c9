#!/usr/bin/env bash
# RAM-backed "lanes": block devices that stand in for NVMe(-oF) namespaces, one file
# system each, so a striped dataset can be spread over them and read in parallel.
#
#   sudo bash scripts/rig/lanes.sh up N SIZE_GIB [ROOT]   N lanes of SIZE_GIB at ROOT/0..N-1
#   sudo bash scripts/rig/lanes.sh down [ROOT]            unmount them and free their memory
#   bash scripts/rig/lanes.sh status [ROOT]
#
# Each lane is a loop device over a sparse file in /dev/shm (RAM: N x SIZE_GIB must fit),
# formatted ext4 and mounted with noatime (ROOT defaults to /mnt/lanes). cuFile identifies
# the block device under a file through udev's database; where udev does not know the loop
# devices (containers), a minimal record is written to /run/udev/data so that
# cuFileHandleRegister accepts the files (it fails with error 5027 otherwise). `down`
# detaches only the loop devices `up` made (listed in /dev/shm/supercell-lanes.list).
set -euo pipefail

list=/dev/shm/supercell-lanes.list

need() {
  command -v "$1" >/dev/null || { echo "lanes.sh: $1 is missing (package: $2)" >&2; exit 1; }
}

up() {
  local n=${1:?lane count} size=${2:?size in GiB} root=${3:-/mnt/lanes}
  [ "$(id -u)" = 0 ] || { echo "lanes.sh: run as root (loop devices, mounts)" >&2; exit 1; }
  need losetup mount
  need mkfs.ext4 e2fsprogs
  if [ -s "$list" ]; then
    echo "lanes.sh: lanes are already up (see $list); run 'lanes.sh down' first" >&2
    exit 1
  fi
  local free_kib
  free_kib=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
  if [ $((n * size * 1024 * 1024)) -gt "$free_kib" ]; then
    echo "lanes.sh: $n x $size GiB does not fit in the $((free_kib / 1024 / 1024)) GiB of available memory" >&2
    exit 1
  fi
  mkdir -p "$root"
  local i img dev majmin
  for ((i = 0; i < n; i++)); do
    img=/dev/shm/supercell-lane$i.img
    truncate -s "${size}G" "$img"
    dev=$(losetup --find --show "$img")
    echo "$dev $img $root/$i" >>"$list"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$dev"
    mkdir -p "$root/$i"
    mount -o noatime "$dev" "$root/$i"
    majmin=$(cat "/sys/class/block/${dev##*/}/dev")
    if [ ! -e "/run/udev/data/b$majmin" ]; then
      mkdir -p /run/udev/data
      printf 'E:DEVTYPE=disk\nE:ID_FS_TYPE=ext4\nE:ID_FS_USAGE=filesystem\n' >"/run/udev/data/b$majmin"
    fi
    echo "lane $i: $dev ($majmin) at $root/$i, $size GiB"
  done
}

down() {
  [ -s "$list" ] || { echo "lanes.sh: no lanes are up"; return 0; }
  local dev img mnt majmin
  while read -r dev img mnt; do
    if mountpoint -q "$mnt"; then umount "$mnt"; fi
    majmin=$(cat "/sys/class/block/${dev##*/}/dev" 2>/dev/null || true)
    if [ -n "$majmin" ] && grep -qx 'E:ID_FS_USAGE=filesystem' "/run/udev/data/b$majmin" 2>/dev/null &&
      [ "$(wc -l <"/run/udev/data/b$majmin")" = 3 ]; then
      rm -f "/run/udev/data/b$majmin"
    fi
    losetup --detach "$dev" 2>/dev/null || true
    rm -f "$img"
    rmdir "$mnt" 2>/dev/null || true
  done <"$list"
  rm -f "$list"
  echo "lanes down"
}

case "${1:-}" in
  up) shift; up "$@" ;;
  down) down ;;
  status) if [ -s "$list" ]; then cat "$list"; else echo "no lanes are up"; fi ;;
  *) echo "usage: lanes.sh up N SIZE_GIB [ROOT] | down | status" >&2; exit 2 ;;
esac
