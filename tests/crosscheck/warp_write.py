"""Writes compressed .nvdb files with warp-lang's own writer (Volume.save_to_nvdb) and reports
warp's values at sample points, for tests/nvdb_warp_files.rs.

Usage: python3 warp_write.py OUT_DIR

Writes into OUT_DIR, for each codec in none, zip, blosc:
  single_<codec>.nvdb  one float grid (negative and positive coordinates, anisotropic-free
                       0.5 voxels, translated), from Volume.load_from_numpy
  pair_<codec>.nvdb    two float grids in one segment: save_to_nvdb of a volume whose buffer
                       holds both grids (as a volume loaded from a multi-grid file does)
and OUT_DIR/warp.json: {"points": [[i, j, k], ...], "grids": [[values of grid 0], [grid 1]]},
the values from wp.volume_lookup_f on each grid before saving.
Exit status 3 means "skip": warp-lang or the blosc module (which warp's Blosc writer needs)
is missing.
"""

import json
import os
import sys

SKIP = 3


def main():
    out_dir = sys.argv[1]
    try:
        import numpy as np
        import warp as wp
    except ImportError as e:
        print(f"skip: warp-lang is not importable: {e}")
        sys.exit(SKIP)
    try:
        import blosc  # noqa: F401  (save_to_nvdb imports it for codec="blosc")
    except ImportError as e:
        print(f"skip: the blosc module (pip install blosc) is not importable: {e}")
        sys.exit(SKIP)

    wp.config.quiet = True
    wp.init()
    rng = np.random.default_rng(14)

    def volume(shape, origin, density, scale):
        values = rng.random(shape).astype(np.float32) * scale
        values[rng.random(shape) >= density] = 0.0
        return wp.Volume.load_from_numpy(values, min_world=origin, voxel_size=0.5, bg_value=0.0, device="cpu")

    grids = [
        volume((37, 20, 11), (-9.5, -4.0, 2.5), 0.35, 3.0),
        volume((16, 40, 24), (3.0, -12.0, -6.0), 0.5, -7.0),
    ]

    @wp.kernel
    def lookup(vol: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=float)):
        t = wp.tid()
        p = ijk[t]
        out[t] = wp.volume_lookup_f(vol, p[0], p[1], p[2])

    # Index points covering both grids' index boxes and beyond.
    points = [[int(x), int(y), int(z)] for x in range(-24, 40, 3) for y in range(-30, 50, 4) for z in range(-20, 36, 5)]
    ijk = wp.array(np.array(points, dtype=np.int32), dtype=wp.vec3i, device="cpu")
    values = []
    for g in grids:
        out = wp.zeros(len(points), dtype=float, device="cpu")
        wp.launch(lookup, dim=len(points), inputs=[g.id, ijk, out], device="cpu")
        values.append([float(v) for v in out.numpy()])

    # Both grid buffers back to back, grid 1 of 2 and 2 of 2 (warp's grids carry no
    # checksum, so the count fields can be set as NanoVDB's readers set them).
    bufs = [g.array().numpy().copy() for g in grids]
    for i, b in enumerate(bufs):
        b[24:28] = np.frombuffer(np.uint32(i).tobytes(), dtype=np.uint8)
        b[28:32] = np.frombuffer(np.uint32(len(bufs)).tobytes(), dtype=np.uint8)
    pair = wp.Volume(wp.array(np.concatenate(bufs), dtype=wp.uint8, device="cpu"))

    for codec in ("none", "zip", "blosc"):
        grids[0].save_to_nvdb(os.path.join(out_dir, f"single_{codec}.nvdb"), codec=codec)
        pair.save_to_nvdb(os.path.join(out_dir, f"pair_{codec}.nvdb"), codec=codec)
    json.dump({"points": points, "grids": values}, open(os.path.join(out_dir, "warp.json"), "w"))


if __name__ == "__main__":
    main()
