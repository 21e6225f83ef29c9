"""Tunes the path tracer's denoiser on saved accumulations (numpy; the venv of
tests/mitsuba_compare.rs has it).

    SUPERCELL_DENOISE_DUMP=DIR supercell render SCENE --mode path --size WxH --converge N ...
    python scripts/denoise_tune.py DIR WxH "[5]" "[4,5,6]" "[0.7,1.0]"

prints, per saved row (samples per pixel), relMSE less the reference's own noise (as
`--converge` reports it) raw and through the filter for each combination of levels, sigma
and sigma per level (Python lists). The filter is src/render/denoise.rs's `denoise_cpu`
(and shaders/denoise.wgsl) step for step; on the storm at 192x108 it reproduces the GPU's
figures to 4 digits. MINN=K skips rows under K samples.
"""
import numpy as np, sys, glob, os, itertools
D = sys.argv[1]; W, H = map(int, sys.argv[2].split('x'))
def load(name, ch):
    a = np.fromfile(os.path.join(D, name), dtype='<f4')
    return a.reshape(H, W, ch) if ch > 1 else a.reshape(H, W)
ref = load(f"reference_{W}x{H}.f32", 4); ha = load(f"half_a_{W}x{H}.f32", 4); hb = load(f"half_b_{W}x{H}.f32", 4)
def relmse(x, r):
    return np.mean((x[..., :3] - r[..., :3])**2 / (r[..., :3]**2 + 1e-2))
noise = np.mean((ha[..., :3] - hb[..., :3])**2 / 4 / (ref[..., :3]**2 + 1e-2))
LUM = np.array([0.2126, 0.7152, 0.0722], np.float32)
def lum(c): return c[..., :3] @ LUM
def shift(a, dx, dy, fill):
    # out[y,x] = a[y+dy, x+dx] where inside, else fill; also returns mask
    out = np.full_like(a, fill); m = np.zeros(a.shape[:2], bool)
    ys = slice(max(0, -dy), min(H, H - dy)); xs = slice(max(0, -dx), min(W, W - dx))
    ys2 = slice(max(0, dy), min(H, H + dy)); xs2 = slice(max(0, dx), min(W, W + dx))
    if ys.start < ys.stop and xs.start < xs.stop:
        out[ys, xs] = a[ys2, xs2]; m[ys, xs] = True
    return out, m
B3 = [0.0625, 0.25, 0.375, 0.25, 0.0625]; K3 = [0.25, 0.5, 0.25]
def init(s, q, n):
    c = s / n; l = lum(c)
    if n >= 2:
        v = np.maximum(q / n - l * l, 0) * n / (n - 1) / n
    else:
        s1 = np.zeros_like(l); s2 = np.zeros_like(l); k = np.zeros_like(l)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                a, m = shift(l, dx, dy, 0); s1 += a; s2 += a * a; k += m
        mm = s1 / k; v = np.maximum(s2 / k - mm * mm, 0)
    return c, v
def atrous(c, v, step, sigma, eps, vscale=1.0):
    gv = np.zeros_like(v); gw = np.zeros_like(v)
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            a, m = shift(v, dx, dy, 0); w = K3[dx + 1] * K3[dy + 1] * m
            gv += w * a; gw += w
    lp = lum(c); stop = sigma * np.sqrt(np.maximum(gv / gw, 0) * vscale) + eps
    sc = np.zeros_like(c); sv = np.zeros_like(v); sw = np.zeros_like(v)
    for dy in range(-2, 3):
        for dx in range(-2, 3):
            cq, m = shift(c, dx * step, dy * step, 0); vq, _ = shift(v, dx * step, dy * step, 0)
            w = B3[dx + 2] * B3[dy + 2] * np.exp(-np.abs(lp - lum(cq)) / stop) * m
            sc += w[..., None] * cq; sv += w * w * vq; sw += w
    return sc / sw[..., None], sv / (sw * sw)
def denoise(s, q, n, levels=5, sigma=5.0, eps=1e-4, grow=0.7):
    c, v = init(s, q, n)
    for k in range(levels):
        c, v = atrous(c, v, 1 << k, sigma * grow**k, eps)
    return c
spps = sorted(int(f.split('_')[1]) for f in glob.glob(os.path.join(D, f"sums_*_{W}x{H}.f32")))
print("ref noise", noise)
configs = [dict()] + [dict(levels=L, sigma=s, grow=g) for L, s, g in itertools.product(*[eval(a) for a in sys.argv[3:6]])] if len(sys.argv) > 3 else [dict()]
for n in spps:
    if n < int(os.environ.get("MINN", "0")): continue
    s = load(f"sums_{n}_{W}x{H}.f32", 4); q = load(f"sq_{n}_{W}x{H}.f32", 1)
    raw = relmse(s / n, ref) - noise
    line = [f"{n:4d} raw {raw:.3e}"]
    for cf in configs:
        d = relmse(denoise(s, q, n, **cf), ref) - noise
        line.append(f"{cf} {d:.3e} ({raw/max(d,1e-12):.1f}x)")
    print(" | ".join(line), flush=True)
