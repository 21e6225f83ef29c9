"""Writes .vdb files with OpenVDB's Python binding (Debian python3-openvdb, run with
/usr/bin/python3) and reports OpenVDB's own values at sample points, for
tests/vdb_import.rs.

Usage: /usr/bin/python3 openvdb_write.py OUT_DIR [LARGE_EDGE]

Writes OUT_DIR/frame_000.vdb and frame_001.vdb, each with four grids:
  density   float fog volume: scattered voxels at negative and positive coordinates, an
            active 128^3 tile (a 32^3-node tile) and active 8^3 tiles, translated 0.5 voxels
  sphere    float level set (createLevelSetSphere), inactive interior tiles at -background
  smoke     float fog volume saved as half floats (saveFloatAsHalf)
  velocity  Vec3s grid (the importer keeps its length, and optionally its components)
OUT_DIR/small.vdb (a few voxels of every kind of grid, for corrupting),
OUT_DIR/rotated.vdb and anisotropic.vdb (transforms that cannot be imported),
and OUT_DIR/openvdb.json: {"points": [...], "frames": [{grid name: {"values": [...],
"active": [...], "class": ..., "voxel_size": ..., "translation": ...}}], "compression": ...}.
With LARGE_EDGE, also OUT_DIR/large.vdb: one dense fog grid of LARGE_EDGE^3 voxels, for
measuring import speed.
Exit status 3 means "skip": pyopenvdb is missing.
"""

import json
import math
import os
import random
import sys

SKIP = 3


def main():
    out_dir = sys.argv[1]
    try:
        import pyopenvdb as vdb
    except ImportError as e:
        print(f"skip: pyopenvdb is not importable: {e}")
        sys.exit(SKIP)
    rng = random.Random(14)
    points = [(rng.randint(-70, 70), rng.randint(-70, 70), rng.randint(-70, 70)) for _ in range(3000)]
    points += [(x, y, z) for x in range(-140, 20, 9) for y in (-100, -64, -3) for z in (-120, -5, 40)]
    points += [(-12, 7, 30), (0, 0, 0), (-1, -1, -1), (30, 40, 50)]
    frames = []
    for frame in range(2):
        density = vdb.FloatGrid(0.0)
        density.name = "density"
        density.gridClass = vdb.GridClass.FOG_VOLUME
        acc = density.getAccessor()
        for _ in range(4000):
            ijk = (rng.randint(-60, 60), rng.randint(-60, 60), rng.randint(-60, 60))
            acc.setValueOn(ijk, rng.random() * (1 + frame))
        # A 128^3 region at a 128-aligned origin becomes one tile of a 32^3 node; 8^3
        # aligned cubes become tiles of a 16^3 node.
        density.fill((-256, -128, -128), (-129, -1, -1), 0.25 + frame, active=True)
        density.fill((16, 16, 16), (23, 23, 23), 0.75, active=True)
        density.fill((-8, 24, 8), (-1, 31, 15), 0.5, active=True)
        t = vdb.createLinearTransform(voxelSize=0.5)
        t.translate((0.25, -1.0, 3.0))
        density.transform = t

        sphere = vdb.createLevelSetSphere(radius=20.0 + frame, center=(3.0, -4.0, 5.0), voxelSize=1.0, halfWidth=3.0)
        sphere.name = "sphere"

        smoke = vdb.FloatGrid(0.0)
        smoke.name = "smoke"
        smoke.gridClass = vdb.GridClass.FOG_VOLUME
        smoke.saveFloatAsHalf = True
        acc = smoke.getAccessor()
        for _ in range(3000):
            ijk = (rng.randint(-40, 40), rng.randint(-40, 40), rng.randint(-40, 40))
            acc.setValueOn(ijk, rng.uniform(-3.0, 3.0))

        velocity = vdb.Vec3SGrid((0.0, 0.0, 0.0))
        velocity.name = "velocity"
        acc = velocity.getAccessor()
        for _ in range(3000):
            ijk = (rng.randint(-50, 50), rng.randint(-50, 50), rng.randint(-50, 50))
            acc.setValueOn(ijk, (rng.uniform(-2, 2), rng.uniform(-2, 2), rng.uniform(-2, 2)))

        grids = [density, sphere, smoke, velocity]
        vdb.write(os.path.join(out_dir, f"frame_{frame:03}.vdb"), grids=grids)
        # Values as OpenVDB reads them back from the file (half floats rounded as stored).
        back = vdb.readAll(os.path.join(out_dir, f"frame_{frame:03}.vdb"))[0]
        report = {}
        for g in back:
            acc = g.getConstAccessor()
            values = []
            components = []
            for p in points:
                v = acc.getValue(p)
                if isinstance(v, tuple):
                    values.append(math.sqrt(sum(c * c for c in v)))
                    components.append(list(v))
                else:
                    values.append(v)
            report[g.name] = {
                "values": values,
                "components": components,
                "active": [acc.isValueOn(p) for p in points],
                "class": str(g.gridClass),
                "voxel_size": list(g.transform.voxelSize()),
                "translation": list(g.transform.indexToWorld((0, 0, 0))),
                "compression": g.metadata.get("file_compression", ""),
            }
        frames.append(report)
    # A small file of every kind of grid and node, for cutting and flipping bytes (one
    # root child per grid: each costs a 32^3 node's 32768 values to decode).
    small = []
    for kind, half in (("float", False), ("half", True)):
        g = vdb.FloatGrid(0.5)
        g.name = kind
        g.saveFloatAsHalf = half
        acc = g.getAccessor()
        for i in range(40):
            acc.setValueOn((i * 7, i * 3 + 9, i), i * 0.25)
        g.fill((8, 8, 8), (15, 15, 15), 2.0, active=True)
        g.fill((16, 8, 8), (23, 15, 15), -0.5, active=False)
        small.append(g)
    small.append(vdb.createLevelSetSphere(radius=4.0, center=(20.0, 20.0, 20.0), voxelSize=1.0, halfWidth=2.0))
    v = vdb.Vec3SGrid((0.0, 0.0, 0.0))
    v.name = "vectors"
    v.getAccessor().setValueOn((-1, 2, -3), (1.0, 2.0, 2.0))
    small.append(v)
    vdb.write(os.path.join(out_dir, "small.vdb"), grids=small)

    # Transforms NanoVDB's uniform voxels cannot hold: a rotation, and anisotropic voxels.
    for name, matrix in [
        ("rotated", [[0.0, 1.0, 0.0, 0.0], [-1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0]]),
        ("anisotropic", [[1.0, 0.0, 0.0, 0.0], [0.0, 2.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0], [5.0, 0.0, 0.0, 1.0]]),
    ]:
        g = vdb.FloatGrid(0.0)
        g.name = name
        g.getAccessor().setValueOn((1, 2, 3), 1.0)
        g.transform = vdb.createLinearTransform(matrix)
        vdb.write(os.path.join(out_dir, f"{name}.vdb"), grids=[g])
    json.dump({"points": points, "frames": frames}, open(os.path.join(out_dir, "openvdb.json"), "w"))

    if len(sys.argv) > 2:
        edge = int(sys.argv[2])
        import numpy as np

        dense = np.random.default_rng(1).random((edge, edge, edge), dtype=np.float32)
        big = vdb.FloatGrid(0.0)
        big.name = "density"
        big.gridClass = vdb.GridClass.FOG_VOLUME
        big.copyFromArray(dense, ijk=(-edge // 2, 0, 7))
        vdb.write(os.path.join(out_dir, "large.vdb"), grids=[big])


if __name__ == "__main__":
    main()
