#!/usr/bin/env python3
"""Writes CM1-layout netCDF files of a given size for timing `supercell-data import`.

    python3 scripts/bench/cm1_like.py OUT_DIR [--nx 384] [--nz 64] [--times 2]

Each file (`cm1out_000001.nc`, ...: one time each, 64-bit offset format) holds xh, yh, a
stretched zh and zf (km), time (s), and eleven 3-D float32 variables: qc, qr, qi, qs, qg, dbz,
uinterp, vinterp, winterp, prs, th. The fields are smooth storm-like blobs (a tower of cloud,
a rain shaft, a rotating updraft) so that the sparse conversion keeps a realistic fraction of
the voxels; they are for timing only, not for meteorology.

Written with netCDF4-python where it is installed, else with SciPy's netCDF-3 writer
(`scipy.io.netcdf_file`, version 2: the same 64-bit offset format), for machines that have
NumPy and SciPy but not netCDF4 (the GPU machine).
"""
import argparse
import os

import numpy as np

try:
    import netCDF4

    def create(path):
        return netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET")
except ImportError:
    from scipy.io import netcdf_file

    def create(path):
        return netcdf_file(path, "w", version=2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--nx", type=int, default=384)
    ap.add_argument("--nz", type=int, default=64)
    ap.add_argument("--times", type=int, default=2)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    nx = ny = a.nx
    nz = a.nz
    dx_km = 0.25
    xh = (dx_km * (np.arange(nx) + 0.5)).astype(np.float32)
    yh = xh.copy()
    # Stretched levels: 50 m at the ground, growing to about 500 m aloft.
    dz = 0.05 + 0.45 * (np.arange(nz) / max(nz - 1, 1)) ** 2
    zf = np.concatenate([[0.0], np.cumsum(dz)]).astype(np.float32)
    zh = (0.5 * (zf[:-1] + zf[1:])).astype(np.float32)
    x = xh[None, None, :] - xh.mean()
    y = yh[None, :, None] - yh.mean()
    z = zh[:, None, None]
    for n in range(a.times):
        t = 300.0 * (n + 1)
        r2 = (x - 0.2 * n) ** 2 + y ** 2
        tower = np.exp(-r2 / 40.0) * np.exp(-((z - 6.0) ** 2) / 20.0)
        qc = np.where(tower > 0.05, 3e-3 * tower, 0.0).astype(np.float32)
        shaft = np.exp(-((x + 8.0) ** 2 + y ** 2) / 12.0) * (z < 5.0)
        qr = (4e-3 * shaft).astype(np.float32)
        qi = np.where(z > 8.0, 2e-3 * tower, 0.0).astype(np.float32)
        qs = (0.5 * qi).astype(np.float32)
        qg = (1e-3 * tower * (z > 4.0) * (z < 9.0)).astype(np.float32)
        dbz = np.where(qr + qg > 1e-5, 10.0 * np.log10(1e6 * (qr + qg) + 1.0) + 20.0,
                       -20.0).astype(np.float32)
        swirl = 30.0 * np.exp(-r2 / 8.0)
        u = (-swirl * y / np.sqrt(r2 + 1.0) + 10.0 + 0.0 * z).astype(np.float32)
        v = (swirl * x / np.sqrt(r2 + 1.0) + 0.0 * z).astype(np.float32)
        w = (40.0 * tower).astype(np.float32)
        prs = (100000.0 * np.exp(-z / 8.0) - 500.0 * tower).astype(np.float32)
        th = (300.0 + 3.0 * z + 5.0 * tower).astype(np.float32)
        path = os.path.join(a.out, f"cm1out_{n + 1:06d}.nc")
        ds = create(path)
        for d, size in [("time", None), ("zh", nz), ("yh", ny), ("xh", nx), ("zf", nz + 1)]:
            ds.createDimension(d, size)
        for name, dim, data in [("xh", "xh", xh), ("yh", "yh", yh), ("zh", "zh", zh),
                                ("zf", "zf", zf)]:
            var = ds.createVariable(name, "f4", (dim,))
            var.units = "km"
            var[:] = data
        tv = ds.createVariable("time", "f8", ("time",))
        tv.units = "s"
        tv[0] = t
        for name, data in [("qc", qc), ("qr", qr), ("qi", qi), ("qs", qs), ("qg", qg),
                           ("dbz", dbz), ("uinterp", u), ("vinterp", v), ("winterp", w),
                           ("prs", prs), ("th", th)]:
            ds.createVariable(name, "f4", ("time", "zh", "yh", "xh"))[0] = np.ascontiguousarray(
                np.broadcast_to(data, (nz, ny, nx)))
        ds.close()
        print(path, os.path.getsize(path))


if __name__ == "__main__":
    main()
