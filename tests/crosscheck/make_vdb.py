"""Builds an OpenVDB FloatGrid from a brick dump, for NanoVDB's own converter to translate.

Usage (Debian's python3-openvdb, i.e. /usr/bin/python3):
    make_vdb.py BRICKS.bin OUT.vdb NAME {fog|levelset|unknown}

Every brick becomes one OpenVDB leaf with exactly the dump's 512 values and active states, so
`nanovdb_convert` sees the same voxels the Rust writer gets.
"""

import sys

import pyopenvdb as vdb

import bricks


def main():
    src, dst, name, klass = sys.argv[1:5]
    background, voxel_size, origin, dump = bricks.read(src)
    grid = vdb.FloatGrid(background)
    grid.name = name
    grid.gridClass = {
        "fog": vdb.GridClass.FOG_VOLUME,
        "levelset": vdb.GridClass.LEVEL_SET,
        "unknown": vdb.GridClass.UNKNOWN,
    }[klass]
    # Scale, then translate: OpenVDB then stores exactly this scale and translation (built
    # from a 4x4 matrix it would re-derive the scale, off by an ulp for 0.1).
    sx, sy, sz = voxel_size
    if sx == sy == sz:
        transform = vdb.createLinearTransform(voxelSize=sx)
        transform.translate(origin)
    else:
        # Anisotropic: a scale-translate map from the 4x4 matrix (OpenVDB's row-vector
        # convention, translation in the last row); the test's scales are exact in binary.
        ox, oy, oz = origin
        transform = vdb.createLinearTransform(
            [[sx, 0, 0, 0], [0, sy, 0, 0], [0, 0, sz, 0], [ox, oy, oz, 1]]
        )
    grid.transform = transform
    acc = grid.getAccessor()
    for brick in dump:
        for ijk, active, value in bricks.voxels(brick):
            if active:
                acc.setValueOn(ijk, value)
            else:
                acc.setValueOff(ijk, value)
    if grid.leafCount() != len(dump):
        sys.exit(f"expected {len(dump)} leaves, OpenVDB made {grid.leafCount()}")
    vdb.write(dst, grids=[grid])


if __name__ == "__main__":
    main()
