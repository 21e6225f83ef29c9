"""Reads the brick dump that tests/writer_crosscheck.rs writes (see `dump_bricks` there).

Layout, little-endian:
  header (64 bytes): b"SCBRICKS", u32 count, f32 background, 3 x f64 voxel size (x, y, z),
  3 x f64 origin
  per brick (2128 bytes): 3 x i32 origin, u32 pad, 8 x u64 active mask, 512 x f32 values
Voxel n of a brick is at origin + (n >> 6, (n >> 3) & 7, n & 7), NanoVDB's leaf order.
"""

import struct

HEADER = struct.Struct("<8sIf3d3d")
BRICK = struct.Struct("<3iI8Q512f")


def read(path):
    data = open(path, "rb").read()
    magic, count, background, sx, sy, sz, ox, oy, oz = HEADER.unpack_from(data, 0)
    if magic != b"SCBRICKS":
        raise ValueError(f"{path}: not a brick dump")
    bricks = []
    for i in range(count):
        fields = BRICK.unpack_from(data, HEADER.size + i * BRICK.size)
        origin = fields[0:3]
        mask = fields[4:12]
        values = fields[12:]
        bricks.append((origin, mask, values))
    return background, (sx, sy, sz), (ox, oy, oz), bricks


def voxels(brick):
    """Yields (ijk, active, value) for the 512 voxels of a brick."""
    origin, mask, values = brick
    for n in range(512):
        ijk = (origin[0] + (n >> 6), origin[1] + ((n >> 3) & 7), origin[2] + (n & 7))
        yield ijk, bool(mask[n >> 6] >> (n & 63) & 1), values[n]
