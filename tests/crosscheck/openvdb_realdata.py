"""Reads grids of real .vdb files with OpenVDB's Python binding (Debian python3-openvdb, run
with /usr/bin/python3) and reports OpenVDB's values at sample points, for
tests/vdb_realdata.rs.

Usage: /usr/bin/python3 openvdb_realdata.py OUT.json FILE GRID [GRID ...] [-- FILE GRID ...]

GRID is the name supercell gives the grid: NAME, or NAME#K for the K-th later grid called
NAME, which OpenVDB reads as NAME[K]; or @I for the file's I-th grid (unnamed grids). Grids are read one by one (io::File::readGrid), since
the binding cannot read files that also hold grid types it does not know (int32, points).

Writes OUT.json: {FILE: {GRID: {"type", "class", "voxel_size", "index_to_world": [[ijk,
xyz], ...], "bbox", "points", "values" (vectors as [x, y, z]), "active"}}}. Points: the
corners of the active bounding box and random points in it grown by two voxels, so both
active voxels and the background are sampled.
Exit status 3 means "skip": pyopenvdb is missing.
"""

import json
import random
import sys

SKIP = 3


def openvdb_name(name):
    base, sep, k = name.rpartition("#")
    if sep and k.isdigit():
        return f"{base}[{k}]"
    return name


def report(vdb, path, name, rng):
    if name.startswith("@"):
        g = vdb.readAll(path)[0][int(name[1:])]
    else:
        g = vdb.read(path, openvdb_name(name))
    lo, hi = g.evalActiveVoxelBoundingBox()
    empty = g.activeVoxelCount() == 0
    points = []
    if not empty:
        points += [tuple(lo), tuple(hi)]
        for _ in range(1500):
            points.append(tuple(rng.randint(lo[a] - 2, hi[a] + 2) for a in range(3)))
    points.append((0, 0, 0))
    acc = g.getConstAccessor()
    values = []
    for p in points:
        v = acc.getValue(p)
        values.append(list(v) if isinstance(v, tuple) else v)
    t = g.transform
    corners = [(0, 0, 0), (1, 1, 1), (-7, 13, 100)] + ([tuple(lo), tuple(hi)] if not empty else [])
    return {
        "type": type(g).__name__,
        "class": str(g.gridClass),
        "voxel_size": list(t.voxelSize()),
        "index_to_world": [[list(c), list(t.indexToWorld(c))] for c in corners],
        "active_count": g.activeVoxelCount(),
        "points": [list(p) for p in points],
        "values": values,
        "active": [acc.isValueOn(p) for p in points],
    }


def main():
    out = sys.argv[1]
    try:
        import pyopenvdb as vdb
    except ImportError as e:
        print(f"skip: pyopenvdb is not importable: {e}")
        sys.exit(SKIP)
    rng = random.Random(25)
    result = {}
    args = sys.argv[2:]
    while args:
        cut = args.index("--") if "--" in args else len(args)
        path, names = args[0], args[1:cut]
        args = args[cut + 1 :]
        result[path] = {name: report(vdb, path, name, rng) for name in names}
    with open(out, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
