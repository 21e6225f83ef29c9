"""What `supercell-data import FILE...` (default options) must store for real CM1 and WRF
output, computed independently of supercell from netCDF4-python's CF-decoded reading
(Debian python3-netcdf4, run with /usr/bin/python3), for data-tools/tests/import_realdata.rs.

Usage: /usr/bin/python3 netcdf_realdata.py OUT_DIR FILE...

The documented rule (data-tools/src/netcdf_import, README "Importing CM1 and WRF output"):
  - x and y: the files' horizontal spacing (CM1: the mean step of xh/yh in metres, to the
    fewest decimals within 2 ulp / (n - 1) of it, an ulp being the coordinate type's
    epsilon times its largest magnitude; WRF: DX, DY), origin at the first mass column
    (CM1: to the fewest decimals within an ulp; WRF: half a cell in).
  - z: the thinnest layer between adjacent mass levels whose lower level lies at most
    3000 m above its column's lowest level, over all columns and all records, rounded to 4
    significant digits and then down to 3; origin at the lowest level of any column and
    record, top at the highest.
  - value at voxel (i, j, k): column (i, j) interpolated linearly in z at
    z0 + k * dz between the two levels around it; outside the column's levels: none.
  - variables: every (time, z, y, x) variable (staggered ones averaged onto mass points in
    float32), without WRF's PH/PHB; CM1's prs and th minus their level means (prs_pert,
    th_pert).

Writes OUT_DIR/reference.json (model, voxel, origin, dims, times, attributes with their
background rule, a tolerance per frame and the packing step, scale_factor, of the source) and OUT_DIR/f{frame}_a{attribute}.f32: the
expected values, little-endian float32, NaN where there is no data, index
(i * ny + j) * nz + k. Exit status 3: netCDF4 is missing.
"""

import datetime
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

G = 9.81
LOW_LAYERS_M = 3000.0
CM1_DIMS = ("time", [("zh", "zf"), ("yh", "yf"), ("xh", "xf")])
WRF_DIMS = ("Time", [("bottom_top", "bottom_top_stag"), ("south_north", "south_north_stag"),
                     ("west_east", "west_east_stag")])


def background(name):
    """The documented background table: (rule, threshold)."""
    n = name.lower()
    if n == "dbz" or n.startswith("refl") or n == "wind_speed":
        return "one_sided", 5.0
    if n.startswith("q"):
        return "one_sided", 1e-5
    if n.startswith("n"):
        return "one_sided", 0.0
    if n[0] in "uvw":
        return "signed", 1.0
    if n in ("prs_pert", "p"):
        return "signed", 10.0
    if n == "th_pert":
        return "signed", 0.1
    return "signed", 0.0


def fewest_digits_within(x, err):
    if err <= 0:
        return x
    for digits in range(-int(math.ceil(math.log10(err))), 30):
        r = round(x, digits)
        if abs(r - x) <= err:
            return r
    return x


def significant(x, digits, floor):
    e = math.floor(math.log10(x))
    step = 10.0 ** (e + 1 - digits)
    q = math.floor(x / step) if floor else round(x / step)
    return round(q * step, max(0, digits - 1 - e))


def default_dz(finest_low_layer):
    """The documented vertical voxel size: 4 significant digits, then down to 3."""
    return significant(significant(finest_low_layer, 4, False), 3, True)


def decoded(var, index=slice(None)):
    """netCDF4's CF-decoded values as float64, NaN where masked."""
    a = var[index]
    return np.ma.filled(np.ma.asarray(a).astype(np.float64), np.nan)


def destagger(values, axis):
    n = values.shape[axis]
    a = np.take(values, range(n - 1), axis=axis)
    b = np.take(values, range(1, n), axis=axis)
    return (np.float32(0.5) * (a + b)).astype(np.float32)


class Model:
    def __init__(self, path):
        self.path = path
        self.ds = netCDF4.Dataset(path)
        self.ds.set_auto_maskandscale(True)
        dims = self.ds.dimensions
        if all(d in dims for d in ("xh", "yh", "zh")):
            self.kind, (self.tdim, self.axes) = "CM1", CM1_DIMS
        elif all(d in dims for d in ("west_east", "south_north", "bottom_top")):
            self.kind, (self.tdim, self.axes) = "WRF", WRF_DIMS
        else:
            raise SystemExit(f"{path}: not CM1 or WRF")
        self.nz, self.ny, self.nx = (len(dims[a[0]]) for a in self.axes)
        if self.kind == "CM1":
            def coord(n):
                v = self.ds[n]
                scale = 1000.0 if v.units.strip().lower() in ("km", "kilometers") else 1.0
                vals = decoded(v) * scale
                eps = np.finfo(np.float32).eps if v.dtype == np.float32 else np.finfo(float).eps
                return vals, eps * np.abs(vals).max()
            (xh, ex), (yh, ey), (zh, _) = coord("xh"), coord("yh"), coord("zh")
            self.spacing = [fewest_digits_within((c[-1] - c[0]) / (len(c) - 1),
                                                 2 * e / (len(c) - 1))
                            for c, e in ((xh, ex), (yh, ey))]
            self.origin_xy = [fewest_digits_within(xh[0], ex), fewest_digits_within(yh[0], ey)]
            self.zh = zh
            self.times = [float(t) for t in decoded(self.ds["time"])]
        else:
            dx, dy = float(self.ds.DX), float(self.ds.DY)
            self.spacing = [dx, dy]
            self.origin_xy = [0.5 * dx, 0.5 * dy]
            self.times = []
            for row in self.ds["Times"][:]:
                text = b"".join(row.tolist()).decode().strip("\0 ")
                t = datetime.datetime.strptime(text, "%Y-%m-%d_%H:%M:%S")
                self.times.append(t.replace(tzinfo=datetime.timezone.utc).timestamp())

    @staticmethod
    def in_double(var, t):
        """CF-decoded in double precision (netCDF4 unpacks in the scale's float32, whose
        rounding of geopotentials near 2e5 m2/s2 moves heights by millimetres): netCDF4
        masks, the packing is undone here with the same attributes."""
        var.set_auto_scale(False)
        raw = decoded(var, t)
        var.set_auto_scale(True)
        return raw * float(getattr(var, "scale_factor", 1.0)) + float(getattr(var, "add_offset", 0.0))

    def heights(self, t):
        """(nz, ny, nx) mass-level heights in metres at record t."""
        if self.kind == "CM1":
            return np.broadcast_to(self.zh[:, None, None], (self.nz, self.ny, self.nx))
        zw = (self.in_double(self.ds["PH"], t) + self.in_double(self.ds["PHB"], t)) / G
        return 0.5 * (zw[:-1] + zw[1:])

    def sources(self):
        out = []
        for name, v in self.ds.variables.items():
            d = v.dimensions
            if len(d) != 4 or d[0] != self.tdim:
                continue
            if not all(d[a + 1] in self.axes[a] for a in range(3)):
                continue
            if self.kind == "WRF" and name in ("PH", "PHB"):
                continue
            if self.kind == "CM1" and name in ("prs", "th"):
                out.append((name + "_pert", name))
            else:
                out.append((name, name))
        return out

    def field(self, source, t):
        v = self.ds[source]
        values = decoded(v, t).astype(np.float32)
        for a in range(3):
            if v.dimensions[a + 1] == self.axes[a][1]:
                values = destagger(values, a)
        return values


def magnitude(var, t):
    """The largest magnitude in the arithmetic that gives var's values at record t: the
    values, and for packed variables the terms of netCDF4's float32 unpacking (whose
    cancellation, e.g. 32766 * -1.2583495 + 41231.082 = 0 instead of 0.00107, supercell's
    double-precision unpacking does not share)."""
    values = decoded(var, t)
    big = float(np.nanmax(np.abs(values))) if np.isfinite(values).any() else 0.0
    if hasattr(var, "scale_factor") or hasattr(var, "add_offset"):
        var.set_auto_scale(False)
        raw = decoded(var, t)
        var.set_auto_scale(True)
        raw_max = float(np.nanmax(np.abs(raw))) if np.isfinite(raw).any() else 0.0
        terms = abs(float(getattr(var, "scale_factor", 1.0))) * raw_max
        big = max(big, terms + abs(float(getattr(var, "add_offset", 0.0))))
    return big


def perturbation(values):
    out = np.empty_like(values)
    for k in range(values.shape[0]):
        lvl = values[k].astype(np.float64)
        ok = ~np.isnan(lvl)
        mean = lvl[ok].sum() / ok.sum() if ok.any() else 0.0
        out[k] = (lvl - mean).astype(np.float32)
    return out


def main():
    out_dir, paths = sys.argv[1], sys.argv[2:]
    models = [Model(p) for p in paths]
    first = models[0]
    frames = [(m, t) for m in models for t in range(len(m.times))]
    lo, hi, finest = math.inf, -math.inf, math.inf
    heights = []
    for m, t in frames:
        z = m.heights(t)
        heights.append(z)
        lo, hi = min(lo, float(z[0].min())), max(hi, float(z[-1].max()))
        for j in range(m.ny):
            for i in range(m.nx):
                col = z[:, j, i]
                for k in range(m.nz - 1):
                    if col[k] - col[0] > LOW_LAYERS_M:
                        break
                    finest = min(finest, float(col[k + 1] - col[k]))
    dz = default_dz(finest)
    voxel = [first.spacing[0], first.spacing[1], dz]
    dims = [first.nx, first.ny, int(math.floor((hi - lo) / dz + 1e-9)) + 1]
    start = first.times[0] if first.kind == "WRF" else 0.0
    sources = first.sources()
    attrs = []
    zs = lo + np.arange(dims[2]) * dz
    for a, (name, source) in enumerate(sources):
        rule, thr = background(name)
        step = abs(float(getattr(first.ds[source], "scale_factor", 0.0)))
        attrs.append({"name": name, "rule": rule, "threshold": thr, "tol": [], "step": step})
    for f, ((m, t), z) in enumerate(zip(frames, heights)):
        for a, (name, source) in enumerate(sources):
            values = m.field(source, t)
            if name != source:
                values = perturbation(values)
            scale = magnitude(m.ds[source], t)
            # float32 arithmetic on values of this magnitude, a few roundings deep.
            attrs[a]["tol"].append(8 * float(np.finfo(np.float32).eps) * max(scale, 1e-30))
            out = np.full((dims[0], dims[1], dims[2]), np.nan, dtype=np.float64)
            for j in range(m.ny):
                for i in range(m.nx):
                    col = z[:, j, i]
                    out[i, j] = np.interp(zs, col, values[:, j, i].astype(np.float64),
                                          left=np.nan, right=np.nan)
            out.astype("<f4").tofile(os.path.join(out_dir, f"f{f}_a{a}.f32"))
    ref = {
        "model": first.kind, "voxel": voxel,
        "origin": [first.origin_xy[0], first.origin_xy[1], lo], "dims": dims,
        "times": [tm - start for m, t in frames for tm in [m.times[t]]],
        "finest_low_layer": finest, "attributes": attrs,
    }
    with open(os.path.join(out_dir, "reference.json"), "w") as fh:
        json.dump(ref, fh)


if __name__ == "__main__":
    main()
