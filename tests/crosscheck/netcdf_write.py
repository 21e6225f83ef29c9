"""Writes small CM1 and WRF output files with the netCDF4 Python module (Debian
python3-netcdf4, run with /usr/bin/python3) and computes, independently of supercell, what
`supercell-data import` must store at sample voxels, for data-tools/tests/import_netcdf.rs.

Usage: /usr/bin/python3 netcdf_write.py OUT_DIR

Writes, in OUT_DIR:
  cm1out_000001.nc, cm1out_000002.nc  CM1 layout (64-bit offset netCDF), one time each:
      xh, yh in km (250 m apart), zh in km, stretched; qc, qr, dbz, uinterp, vinterp,
      winterp, prs, th at mass points, w on zf (staggered)
  wrfout_d01_2026-05-20_21:00:00      WRF layout (netCDF-4), two times: Times strings,
      DX = DY = 200 m, U/V/W/PH/PHB staggered, QRAIN, QCLOUD, REFL_10CM, T, heights that
      differ per column (terrain) and per time
  bad_dims.nc, bad_nan.nc, bad_order.nc, bad_wrf_heights.nc  files import must refuse
  cf.nc, cf_unsigned.nc, cf_valid_unpacked.nc, cf_text_scale.nc  CF-encoded variables
      (write_cf), checked with netcdf_realdata.py
  netcdf.json  per model: voxel size, origin, dims, frame times, and per frame and
      attribute the expected value (null: no active voxel) at sample voxels
The expected values follow the documented method exactly: voxel (i, j, k) at
z = z0 + k * dz (dz from the finest low layer, netcdf_realdata.default_dz; z0 the lowest
level of any record); linear in z between the column's two levels around z, in double
precision from the stored single-precision values; staggered variables averaged in single
precision; values at or below the background (|v| for signed fields) dropped.
Exit status 3 means "skip": netCDF4 is missing.
"""

import json
import math
import os
import sys

SKIP = 3

try:
    import netCDF4
    import numpy as np
except ImportError:
    sys.exit(SKIP)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from netcdf_realdata import default_dz  # noqa: E402

G = 9.81


def bracket(levels, z):
    """(m, t): z between levels[m] and levels[m+1] with weight t of the upper one."""
    n = len(levels)
    if not (levels[0] <= z <= levels[n - 1]):
        return None
    a, b = 0, n - 1
    while b - a > 1:
        mid = (a + b) // 2
        if levels[mid] <= z:
            a = mid
        else:
            b = mid
    return a, (z - levels[a]) / (levels[a + 1] - levels[a])


def interp(column_values, levels, z):
    r = bracket(levels, z)
    if r is None:
        return None
    m, t = r
    v0 = float(column_values[m])
    if t == 0.0:
        return v0
    v1 = float(column_values[m + 1])
    if t == 1.0:
        return v1
    return (1.0 - t) * v0 + t * v1


def keeps(value, rule, threshold):
    v = float(np.float32(value))
    if math.isnan(v):
        return False
    return v > threshold if rule == "one_sided" else abs(v) > threshold


def level_perturbation(values):
    """values (nz, ny, nx) float32 minus each level's mean, as float32."""
    out = np.empty_like(values)
    for k in range(values.shape[0]):
        lvl = values[k].astype(np.float64)
        out[k] = (lvl - lvl.sum() / lvl.size).astype(np.float32)
    return out


def destagger(values, axis):
    a = np.take(values, range(values.shape[axis] - 1), axis=axis)
    b = np.take(values, range(1, values.shape[axis]), axis=axis)
    return (np.float32(0.5) * (a + b)).astype(np.float32)


def expected(fields, heights, points, z0, dz, rules):
    """fields: name -> (nz, ny, nx) float32; heights(k, j, i) -> metres."""
    out = {}
    for name, f in fields.items():
        rule, thr = rules[name]
        vals = []
        for (i, j, k) in points:
            z = z0 + k * dz
            levels = [heights(kk, j, i) for kk in range(f.shape[0])]
            v = interp(f[:, j, i], levels, z)
            if v is None or not keeps(v, rule, thr):
                vals.append(None)
            else:
                vals.append(float(np.float32(v)))
        out[name] = vals
    return out


def sample_points(dims):
    pts = []
    for i in range(dims[0]):
        for j in range(dims[1]):
            for k in range(dims[2]):
                if (i + 2 * j + 3 * k) % 3 == 0 or k == dims[2] - 1:
                    pts.append([i, j, k])
    return pts


def write_cm1(out_dir):
    nx, ny, nz = 5, 4, 6
    dx_km = 0.25
    xh = np.float32(1.0 + dx_km * np.arange(nx))
    yh = np.float32(-0.5 + dx_km * np.arange(ny))
    zh = np.array([0.05, 0.15, 0.3, 0.5, 0.8, 1.2], dtype=np.float32)
    zf = np.array([0.0, 0.1, 0.2, 0.4, 0.6, 1.0, 1.4], dtype=np.float32)
    rng = np.random.default_rng(7)
    frames = []
    times = [300.0, 600.0]
    rules = {
        "qc": ("one_sided", 1e-5), "qr": ("one_sided", 1e-5), "dbz": ("one_sided", 5.0),
        "uinterp": ("signed", 1.0), "vinterp": ("signed", 1.0), "winterp": ("signed", 1.0),
        "w": ("signed", 1.0), "prs_pert": ("signed", 10.0), "th_pert": ("signed", 0.1),
        "wind_speed": ("one_sided", 5.0),
    }
    for n, t in enumerate(times):
        shape = (nz, ny, nx)
        qc = rng.uniform(-2e-3, 3e-3, shape).astype(np.float32)
        qc[qc < 0] = 0.0
        qr = rng.uniform(0.0, 8e-3, shape).astype(np.float32)
        dbz = rng.uniform(-10.0, 70.0, shape).astype(np.float32)
        u = rng.uniform(-20.0, 20.0, shape).astype(np.float32)
        v = rng.uniform(-20.0, 20.0, shape).astype(np.float32)
        winterp = rng.uniform(-10.0, 40.0, shape).astype(np.float32)
        w = rng.uniform(-10.0, 40.0, (nz + 1, ny, nx)).astype(np.float32)
        prs = (100000.0 - 1000.0 * np.arange(nz)[:, None, None]
               + rng.uniform(-300.0, 300.0, shape)).astype(np.float32)
        th = (300.0 + 3.0 * np.arange(nz)[:, None, None]
              + rng.uniform(-2.0, 2.0, shape)).astype(np.float32)
        path = os.path.join(out_dir, f"cm1out_{n + 1:06d}.nc")
        ds = netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET")
        for d, size in [("time", None), ("zh", nz), ("yh", ny), ("xh", nx), ("zf", nz + 1)]:
            ds.createDimension(d, size)
        for name, dim, data, units in [("xh", "xh", xh, "km"), ("yh", "yh", yh, "km"),
                                       ("zh", "zh", zh, "km"), ("zf", "zf", zf, "km")]:
            var = ds.createVariable(name, "f4", (dim,))
            var.units = units
            var[:] = data
        tv = ds.createVariable("time", "f8", ("time",))
        tv.units = "s"
        tv[0] = t
        for name, data in [("qc", qc), ("qr", qr), ("dbz", dbz), ("uinterp", u),
                           ("vinterp", v), ("winterp", winterp), ("prs", prs), ("th", th)]:
            ds.createVariable(name, "f4", ("time", "zh", "yh", "xh"))[0] = data
        ds.createVariable("w", "f4", ("time", "zf", "yh", "xh"))[0] = w
        # A 2-D field, which is not imported.
        ds.createVariable("cref", "f4", ("time", "yh", "xh"))[0] = dbz[0]
        ds.close()
        fields = {
            "qc": qc, "qr": qr, "dbz": dbz, "uinterp": u, "vinterp": v, "winterp": winterp,
            "w": destagger(w, 0), "prs_pert": level_perturbation(prs),
            "th_pert": level_perturbation(th),
            "wind_speed": np.sqrt(u * u + v * v + winterp * winterp).astype(np.float32),
        }
        frames.append(fields)
    z_m = [float(z) * 1000.0 for z in zh]
    z0, z1 = z_m[0], z_m[-1]
    # The columns are 250 m apart (0.25 km in float32 rounds to the decimal).
    voxel = [250.0, 250.0, default_dz(min(np.diff(z_m)))]
    dims = [nx, ny, int(math.floor((z1 - z0) / voxel[2] + 1e-9)) + 1]
    pts = sample_points(dims)
    return {
        "voxel": voxel,
        "origin": [1000.0, -500.0, z0],
        "dims": dims,
        "times": times,
        "points": pts,
        "frames": [expected(f, lambda k, j, i: z_m[k], pts, z0, voxel[2], rules)
                   for f in frames],
    }


def write_wrf(out_dir):
    nx, ny, nz = 4, 3, 5
    dx = 200.0
    zw_base = np.array([0.0, 100.0, 250.0, 500.0, 900.0, 1500.0])
    rng = np.random.default_rng(11)
    labels = ["2026-05-20_21:00:00", "2026-05-20_21:05:00"]
    path = os.path.join(out_dir, "wrfout_d01_2026-05-20_21:00:00")
    ds = netCDF4.Dataset(path, "w", format="NETCDF4")
    for d, size in [("Time", None), ("DateStrLen", 19), ("west_east", nx),
                    ("south_north", ny), ("bottom_top", nz), ("west_east_stag", nx + 1),
                    ("south_north_stag", ny + 1), ("bottom_top_stag", nz + 1)]:
        ds.createDimension(d, size)
    ds.DX = np.float32(dx)
    ds.DY = np.float32(dx)
    times = ds.createVariable("Times", "S1", ("Time", "DateStrLen"))
    mass = ("Time", "bottom_top", "south_north", "west_east")
    specs = {
        "U": ("Time", "bottom_top", "south_north", "west_east_stag"),
        "V": ("Time", "bottom_top", "south_north_stag", "west_east"),
        "W": ("Time", "bottom_top_stag", "south_north", "west_east"),
        "PH": ("Time", "bottom_top_stag", "south_north", "west_east"),
        "PHB": ("Time", "bottom_top_stag", "south_north", "west_east"),
        "QRAIN": mass, "QCLOUD": mass, "REFL_10CM": mass, "T": mass,
    }
    vars_ = {n: ds.createVariable(n, "f4", d) for n, d in specs.items()}
    rules = {"U": ("signed", 1.0), "V": ("signed", 1.0), "W": ("signed", 1.0),
             "QRAIN": ("one_sided", 1e-5), "QCLOUD": ("one_sided", 1e-5),
             "REFL_10CM": ("one_sided", 5.0), "T": ("signed", 0.0),
             "wind_speed": ("one_sided", 5.0)}
    terrain = rng.uniform(0.0, 60.0, (ny, nx))
    phb = (G * (zw_base[:, None, None] + terrain[None, :, :])).astype(np.float32)
    frames = []
    heights_per_time = []
    for n, label in enumerate(labels):
        times[n] = netCDF4.stringtochar(np.array([label], dtype="S19"))[0]
        ph = (G * rng.uniform(-3.0, 3.0, (nz + 1, ny, nx)) * (n + 1)).astype(np.float32)
        u = rng.uniform(-20.0, 20.0, (nz, ny, nx + 1)).astype(np.float32)
        v = rng.uniform(-20.0, 20.0, (nz, ny + 1, nx)).astype(np.float32)
        w = rng.uniform(-10.0, 30.0, (nz + 1, ny, nx)).astype(np.float32)
        qr = rng.uniform(-1e-3, 6e-3, (nz, ny, nx)).astype(np.float32)
        qr[qr < 0] = 0.0
        qc = rng.uniform(0.0, 2e-3, (nz, ny, nx)).astype(np.float32)
        refl = rng.uniform(-20.0, 65.0, (nz, ny, nx)).astype(np.float32)
        t = rng.uniform(-5.0, 25.0, (nz, ny, nx)).astype(np.float32)
        for name, data in [("PH", ph), ("PHB", phb), ("U", u), ("V", v), ("W", w),
                           ("QRAIN", qr), ("QCLOUD", qc), ("REFL_10CM", refl), ("T", t)]:
            vars_[name][n] = data
        zw = (ph.astype(np.float64) + phb.astype(np.float64)) / G
        zm = 0.5 * (zw[:-1] + zw[1:])
        heights_per_time.append(zm)
        ud, vd, wd = destagger(u, 2), destagger(v, 1), destagger(w, 0)
        frames.append({
            "U": ud, "V": vd, "W": wd, "QRAIN": qr, "QCLOUD": qc, "REFL_10CM": refl, "T": t,
            "wind_speed": np.sqrt(ud * ud + vd * vd + wd * wd).astype(np.float32),
        })
    ds.close()
    z0 = min(float(zm[0].min()) for zm in heights_per_time)
    z1 = max(float(zm[-1].max()) for zm in heights_per_time)
    # Every layer is in the lowest 3 km here.
    finest = min(float(np.diff(zm, axis=0).min()) for zm in heights_per_time)
    voxel = [dx, dx, default_dz(finest)]
    dims = [nx, ny, int(math.floor((z1 - z0) / voxel[2] + 1e-9)) + 1]
    pts = sample_points(dims)
    return {
        "voxel": voxel,
        "origin": [0.5 * dx, 0.5 * dx, z0],
        "dims": dims,
        "times": [0.0, 300.0],
        "points": pts,
        "frames": [
            expected(f, lambda k, j, i, zm=zm: float(zm[k, j, i]), pts, z0, voxel[2], rules)
            for f, zm in zip(frames, heights_per_time)
        ],
    }


def write_bad(out_dir):
    def cm1(name, zh, dims=("zh", "yh", "xh")):
        ds = netCDF4.Dataset(os.path.join(out_dir, name), "w", format="NETCDF3_CLASSIC")
        ds.createDimension("time", None)
        for d, n in zip(dims, (len(zh), 2, 2)):
            ds.createDimension(d, n)
        if dims[0] == "zh":
            for c, vals in [("xh", [0.0, 0.25]), ("yh", [0.0, 0.25]), ("zh", zh)]:
                var = ds.createVariable(c, "f4", (c,))
                var.units = "km"
                var[:] = np.array(vals, dtype=np.float32)
        tv = ds.createVariable("time", "f8", ("time",))
        tv[0] = 0.0
        ds.createVariable("qr", "f4", ("time",) + tuple(dims))[0] = np.ones(
            (len(zh), 2, 2), dtype=np.float32)
        ds.close()
    cm1("bad_dims.nc", [0.1, 0.2, 0.3], dims=("level", "y", "x"))
    cm1("bad_nan.nc", [0.1, float("nan"), 0.3])
    cm1("bad_order.nc", [0.1, 0.3, 0.2])
    # WRF whose geopotential decreases with height in one column.
    ds = netCDF4.Dataset(os.path.join(out_dir, "bad_wrf_heights.nc"), "w", format="NETCDF4")
    for d, size in [("Time", None), ("DateStrLen", 19), ("west_east", 2), ("south_north", 2),
                    ("bottom_top", 2), ("bottom_top_stag", 3)]:
        ds.createDimension(d, size)
    ds.DX = np.float32(100.0)
    ds.DY = np.float32(100.0)
    ds.createVariable("Times", "S1", ("Time", "DateStrLen"))[0] = netCDF4.stringtochar(
        np.array(["2026-05-20_21:00:00"], dtype="S19"))[0]
    phb = np.zeros((3, 2, 2), dtype=np.float32)
    phb[:, :, :] = (G * np.array([0.0, 100.0, 200.0]))[:, None, None]
    phb[2, 1, 1] = G * 50.0
    stag = ("Time", "bottom_top_stag", "south_north", "west_east")
    ds.createVariable("PHB", "f4", stag)[0] = phb
    ds.createVariable("PH", "f4", stag)[0] = np.zeros((3, 2, 2), dtype=np.float32)
    ds.createVariable("QRAIN", "f4", ("Time", "bottom_top", "south_north", "west_east"))[0] = \
        np.ones((2, 2, 2), dtype=np.float32)
    ds.close()


def write_cf(out_dir):
    """CM1-layout netCDF-4 files whose variables need CF decoding: cf.nc (packed int16 with
    _FillValue, missing_value and valid_range; float32 with _FillValue and valid_min; packed
    bytes with netCDF's default fill; packed unsigned shorts), and files whose attributes the
    import must refuse: cf_unsigned.nc (_Unsigned), cf_valid_unpacked.nc (a float valid_max
    on packed shorts), cf_text_scale.nc (a text scale_factor)."""
    nx, ny, nz = 6, 5, 8
    rng = np.random.default_rng(5)

    def base(name):
        ds = netCDF4.Dataset(os.path.join(out_dir, name), "w", format="NETCDF4")
        for d, size in [("time", None), ("zh", nz), ("yh", ny), ("xh", nx)]:
            ds.createDimension(d, size)
        for c, vals in [("xh", 300.0 * np.arange(nx)), ("yh", 300.0 * np.arange(ny)),
                        ("zh", [40.0, 120.0, 230.0, 400.0, 650.0, 1000.0, 1500.0, 2200.0])]:
            var = ds.createVariable(c, "f8", (c,))
            var.units = "m"
            var[:] = np.array(vals)
        tv = ds.createVariable("time", "f8", ("time",))
        tv[0] = 60.0
        return ds

    dims = ("time", "zh", "yh", "xh")
    shape = (nz, ny, nx)
    ds = base("cf.nc")
    qr = ds.createVariable("qr", "i2", dims, fill_value=-32767)
    qr.set_auto_maskandscale(False)
    qr.scale_factor = np.float32(2e-7)
    qr.add_offset = np.float32(4e-3)
    qr.missing_value = np.int16(-999)
    qr.valid_range = np.array([-30000, 30000], dtype=np.int16)
    raw = rng.integers(-32000, 32000, shape).astype(np.int16)
    raw.flat[::7] = -32767
    raw.flat[3::11] = -999
    raw.flat[5::13] = 31000
    qr[0] = raw
    dbz = ds.createVariable("dbz", "f4", dims, fill_value=np.float32(-9999.0))
    dbz.valid_min = np.float32(-20.0)
    vals = rng.uniform(-40.0, 70.0, shape).astype(np.float32)
    vals.flat[::5] = -9999.0
    dbz[0] = vals
    # Packed bytes (netCDF's default fill -127 counts as missing) and unsigned shorts.
    for name, kind, scale, offset, raw in [
            ("w", "i1", np.float32(0.5), None, rng.integers(-128, 127, shape).astype(np.int8)),
            ("th", "u2", np.float64(0.01), np.float64(250.0),
             rng.integers(4000, 9000, shape).astype(np.uint16))]:
        v = ds.createVariable(name, kind, dims)
        v.set_auto_maskandscale(False)
        v.scale_factor = scale
        if offset is not None:
            v.add_offset = offset
        if kind == "i1":
            raw.flat[::9] = -127
        v[0] = raw
    ds.close()
    for name, attr, value in [("cf_unsigned.nc", "_Unsigned", "true"),
                              ("cf_valid_unpacked.nc", "valid_max", np.float32(0.5)),
                              ("cf_text_scale.nc", "scale_factor", "0.001")]:
        ds = base(name)
        v = ds.createVariable("qr", "i2", dims)
        v.set_auto_maskandscale(False)
        v[0] = rng.integers(0, 1000, shape).astype(np.int16)
        if attr != "scale_factor":
            v.scale_factor = np.float32(1e-5)
        v.setncattr(attr, value)
        ds.close()


def main():
    out_dir = sys.argv[1]
    report = {"cm1": write_cm1(out_dir), "wrf": write_wrf(out_dir)}
    write_bad(out_dir)
    write_cf(out_dir)
    with open(os.path.join(out_dir, "netcdf.json"), "w") as f:
        json.dump(report, f)


if __name__ == "__main__":
    main()
