"""Reads a .nvdb file with warp-lang (NanoVDB 32.8-based) and reports values at given points.

Usage: python3 warp_read.py FILE.nvdb POINTS.json OUT.json

POINTS.json: {"points": [[i, j, k], ...], "world": [[x, y, z], ...]} ("world" optional).
OUT.json gets:
  grid: what warp's loader reports (name, type, voxel size, translation, transform)
  warp: values from a warp kernel using wp.volume_lookup_f (Float grids; null otherwise,
        since warp's lookup returns 0 for other value types)
  pnano: values and active states decoded by the PNanoVDB header bundled with warp, compiled
         here with the system C compiler (all scalar float types, quantized ones included)
  world: for the "world" positions of a Float grid, warp's volume_world_to_index and its
         volume_sample_f with LINEAR and CLOSEST sampling (null otherwise)
Exit status 3 means "skip": warp or a C compiler is missing.
"""

import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 3


def main():
    nvdb, points_path, out_path = sys.argv[1:4]
    try:
        import numpy as np
        import warp as wp
    except ImportError as e:
        print(f"skip: warp-lang is not importable: {e}")
        sys.exit(SKIP)

    wp.config.quiet = True
    wp.init()
    points = json.load(open(points_path))["points"]
    with open(nvdb, "rb") as f:
        volume = wp.Volume.load_from_nvdb(f, device="cpu")
    info = volume.get_grid_info()
    result = {
        "grid": {
            "name": info.name,
            "type": info.type_str,
            "size": int(info.size_in_bytes),
            "voxel_size": list(volume.get_voxel_size()),
            "translation": [float(x) for x in info.translation],
            "transform": [float(x) for x in np.array(info.transform_matrix).flatten()],
        },
        "warp": None,
        "pnano": None,
    }

    if info.type_str == "float":

        @wp.kernel
        def lookup(vol: wp.uint64, ijk: wp.array(dtype=wp.vec3i), out: wp.array(dtype=float)):
            t = wp.tid()
            p = ijk[t]
            out[t] = wp.volume_lookup_f(vol, p[0], p[1], p[2])

        ijk = wp.array(np.array(points, dtype=np.int32).reshape(-1, 3), dtype=wp.vec3i, device="cpu")
        out = wp.zeros(len(points), dtype=float, device="cpu")
        wp.launch(lookup, dim=len(points), inputs=[volume.id, ijk, out], device="cpu")
        result["warp"] = [float(v) for v in out.numpy()]

    world = json.load(open(points_path)).get("world")
    result["world"] = None
    if world and info.type_str == "float":
        result["world"] = world_samples(wp, np, volume, world)

    result["pnano"] = pnano_read(wp, np, nvdb, points)
    json.dump(result, open(out_path, "w"))


def world_samples(wp, np, volume, world):
    """warp's index coordinates and linear and closest samples at world positions."""

    @wp.kernel
    def sample(
        vol: wp.uint64,
        xyz: wp.array(dtype=wp.vec3),
        uvw: wp.array(dtype=wp.vec3),
        linear: wp.array(dtype=float),
        closest: wp.array(dtype=float),
    ):
        t = wp.tid()
        p = wp.volume_world_to_index(vol, xyz[t])
        uvw[t] = p
        linear[t] = wp.volume_sample_f(vol, p, wp.Volume.LINEAR)
        closest[t] = wp.volume_sample_f(vol, p, wp.Volume.CLOSEST)

    n = len(world)
    xyz = wp.array(np.array(world, dtype=np.float32).reshape(-1, 3), dtype=wp.vec3, device="cpu")
    uvw = wp.zeros(n, dtype=wp.vec3, device="cpu")
    linear = wp.zeros(n, dtype=float, device="cpu")
    closest = wp.zeros(n, dtype=float, device="cpu")
    wp.launch(sample, dim=n, inputs=[volume.id, xyz, uvw, linear, closest], device="cpu")
    return {
        "index": [[float(c) for c in p] for p in uvw.numpy()],
        "linear": [float(v) for v in linear.numpy()],
        "closest": [float(v) for v in closest.numpy()],
    }


def pnano_read(wp, np, nvdb, points):
    """Decodes values with warp's PNanoVDB.h, or returns None without a C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        print("note: no C compiler, PNanoVDB decoding skipped")
        return None
    include = os.path.join(os.path.dirname(wp.__file__), "native", "nanovdb")
    here = os.path.dirname(os.path.abspath(__file__))
    with tempfile.TemporaryDirectory() as tmp:
        lib = os.path.join(tmp, "pnano_read.so")
        subprocess.run(
            [cc, "-O1", "-shared", "-fPIC", "-I", include, "-o", lib, os.path.join(here, "pnano_read.c"), "-lm"],
            check=True,
        )
        so = ctypes.CDLL(lib)
        data = open(nvdb, "rb").read()
        # Skip the file header and metadata to the first grid, as warp's loader does.
        count = int.from_bytes(data[12:14], "little")
        off = 16
        for _ in range(count):
            name_size = int.from_bytes(data[off + 136 : off + 140], "little")
            off += 176 + name_size
        grid = np.frombuffer(data[off:], dtype=np.uint8).copy()
        ijk = np.array(points, dtype=np.int32).reshape(-1)
        out = np.zeros(len(points), dtype=np.float32)
        active = np.zeros(len(points), dtype=np.uint8)
        so.read_values.restype = ctypes.c_int
        t = so.read_values(
            grid.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_uint64(grid.size),
            ctypes.c_uint32(len(points)),
            ijk.ctypes.data_as(ctypes.c_void_p),
            out.ctypes.data_as(ctypes.c_void_p),
            active.ctypes.data_as(ctypes.c_void_p),
        )
        if t < 0:
            return None
        return {"grid_type": t, "values": [float(v) for v in out], "active": [bool(a) for a in active]}


if __name__ == "__main__":
    main()
