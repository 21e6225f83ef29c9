#!/usr/bin/env python3
"""Renders a scene exported by `supercell-data export-mitsuba` with Mitsuba 3 and compares it
with supercell's linear image of the same scene (`supercell render --linear`, a PFM).

    python3 scripts/mitsuba_compare.py EXPORT_DIR --supercell frame_00000.pfm \
        --spp 1024 --max-depth 64 --out OUT_DIR [--max-rel-rmse 0.03]

The Mitsuba scene: a `volpath` integrator; a `perspective` sensor at the exported camera
(vertical field of view); a `cube` shape with a `null` BSDF around the marched box, holding a
`heterogeneous` medium whose extinction is the exported `gridvolume` (scale 1), whose albedo
is the exported colour, with a Henyey-Greenstein phase function; a `directional` emitter with
the sun's irradiance; the sky as an environment emitter: `constant` where the sky's zenith and
horizon colours are equal, else an `envmap` holding the renderer's sky gradient (its `sky()`
without the sun glow) times the sky weight. `--sky-model march` darkens the sky below the
horizon as the ray marcher's background does (for comparisons with `render` in shaded mode
of a black medium); the default, `path`, keeps the horizon colour there, as the path
tracer's sky does.

Writes OUT_DIR/mitsuba.pfm (Mitsuba's linear image, rows bottom-up), OUT_DIR/mitsuba-halves.npz
(its two halves: `--reuse` compares another supercell image without rendering again), OUT_DIR/compare.png
(supercell | Mitsuba | difference, tone-mapped as supercell tone-maps: ACES of exposure times
radiance, then sRGB) and OUT_DIR/compare.json: the relative RMSE
sqrt(mean((supercell - mitsuba)^2)) / mean(mitsuba) over pixels and channels, the means,
the same over means of 5x5-pixel blocks (--block: noise shrinks with the block's area, a
systematic difference stays), Mitsuba's own noise (from two independent halves of its
samples), and how the render was made. Exit status: 0 (within --max-rel-rmse, or no limit), 1 (beyond it),
2 (bad input), 3 (Mitsuba is not installed).
"""

import argparse
import json
import math
import os
import sys
import time

try:
    import numpy as np
except ImportError:  # pragma: no cover - reported as "not installed"
    print("numpy is not installed", file=sys.stderr)
    sys.exit(3)


def fail(message):
    print(f"mitsuba_compare: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_pfm(path):
    """A colour PFM as an array [rows top-down, columns, 3] of float32."""
    with open(path, "rb") as f:
        data = f.read()
    parts = []
    pos = 0
    # Three header tokens ("PF", "W H" as two, scale) separated by whitespace, then one
    # whitespace byte before the data.
    while len(parts) < 4:
        while pos < len(data) and data[pos : pos + 1].isspace():
            pos += 1
        start = pos
        while pos < len(data) and not data[pos : pos + 1].isspace():
            pos += 1
        if start == pos:
            fail(f"{path}: truncated PFM header")
        parts.append(data[start:pos].decode("ascii", "replace"))
    pos += 1
    if parts[0] != "PF":
        fail(f"{path}: not a colour PFM (magic {parts[0]!r})")
    try:
        width, height, scale = int(parts[1]), int(parts[2]), float(parts[3])
    except ValueError:
        fail(f"{path}: bad PFM header {parts!r}")
    if width <= 0 or height <= 0:
        fail(f"{path}: bad PFM size {width}x{height}")
    dtype = "<f4" if scale < 0 else ">f4"
    count = width * height * 3
    if len(data) - pos < count * 4:
        fail(f"{path}: {len(data) - pos} bytes of pixels, expected {count * 4}")
    img = np.frombuffer(data, dtype=dtype, count=count, offset=pos).astype(np.float32)
    return img.reshape(height, width, 3)[::-1]


def write_pfm(path, img):
    """Writes [rows top-down, columns, 3] as a little-endian colour PFM (rows bottom-up)."""
    h, w, _ = img.shape
    with open(path, "wb") as f:
        f.write(f"PF\n{w} {h}\n-1.0\n".encode("ascii"))
        f.write(np.ascontiguousarray(img[::-1], dtype="<f4").tobytes())


def aces(x):
    """supercell's tone curve (render::image::aces)."""
    a, b, c, d, e = 2.51, 0.03, 2.43, 0.59, 0.14
    return np.clip((x * (a * x + b)) / (x * (c * x + d) + e), 0.0, 1.0)


def srgb_encode(c):
    return np.where(c <= 0.0031308, c * 12.92, 1.055 * np.power(np.maximum(c, 0), 1 / 2.4) - 0.055)


def tone_map(img, exposure):
    return (np.clip(srgb_encode(aces(img * exposure)), 0, 1) * 255 + 0.5).astype(np.uint8)


def blocks(img, b):
    """Means of b x b pixel blocks (the image cut to whole blocks)."""
    h, w = img.shape[0] // b * b, img.shape[1] // b * b
    return img[:h, :w].reshape(h // b, b, w // b, b, -1).mean(axis=(1, 3))


def sky_radiance(dz, zenith, horizon, darken_below):
    """The sky's radiance as a function of the direction's z: the zenith-horizon gradient of
    the renderer's `sky(d)` without the sun glow; with `darken_below`, also its darkening
    below the horizon (the ray marcher's background), else the horizon colour there (the
    path tracer's sky)."""
    zenith = np.asarray(zenith, np.float64)
    horizon = np.asarray(horizon, np.float64)
    up = np.clip(dz, 0.0, 1.0)[..., None]
    above = horizon + (zenith - horizon) * np.sqrt(up)
    if not darken_below:
        return above
    below = horizon * (1.0 - 0.5 * np.clip(-dz * 4.0, 0.0, 1.0))[..., None]
    return np.where((dz < 0.0)[..., None], below, above)


def camera_rays_dz(cam, width, height):
    """World z of every pixel-centre ray of supercell's pinhole camera."""
    origin, target, up = (np.asarray(cam[k], np.float64) for k in ("origin", "target", "up"))
    fwd = target - origin
    fwd /= np.linalg.norm(fwd)
    right = np.cross(fwd, up)
    right /= np.linalg.norm(right)
    up = np.cross(right, fwd)
    h = math.tan(math.radians(cam["fov_y_deg"]) * 0.5)
    xs = ((np.arange(width) + 0.5) / width * 2 - 1) * h * width / height
    ys = (1 - (np.arange(height) + 0.5) / height * 2) * h
    d = fwd + xs[None, :, None] * right + ys[:, None, None] * up
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    return d[..., 2]


def build_scene(mi, sc, export_dir, args):
    med = sc["medium"]
    to_world = lambda m: mi.ScalarTransform4f(np.asarray(m, dtype=np.float64).tolist())
    sigma_t = {
        "type": "gridvolume",
        "filename": os.path.join(export_dir, med["sigma_t"]),
        "to_world": to_world(med["volume_to_world"]),
    }
    if isinstance(med["albedo"], str):
        albedo = {
            "type": "gridvolume",
            "filename": os.path.join(export_dir, med["albedo"]),
            "to_world": to_world(med["volume_to_world"]),
            "raw": True,
        }
    else:
        albedo = {"type": "rgb", "value": [float(c) for c in med["albedo"]]}
    cam = sc["camera"]
    corners = np.asarray(med["cube_to_world"], np.float64)[:3, 3]
    scale = float(np.linalg.norm(np.asarray(cam["origin"]) - corners)) + float(
        np.abs(np.asarray(med["cube_to_world"], np.float64)[:3, :3]).sum())
    width, height = int(sc["width"]), int(sc["height"])
    scene = {
        "type": "scene",
        "integrator": {"type": "volpath", "max_depth": int(args.max_depth)},
        "sensor": {
            "type": "perspective",
            "fov": float(cam["fov_y_deg"]),
            "fov_axis": "y",
            # Mitsuba's default clip range (0.01 to 10^4) is too short for scenes in metres.
            "near_clip": 1e-6 * scale,
            "far_clip": 1e3 * scale,
            "to_world": mi.ScalarTransform4f().look_at(
                origin=cam["origin"], target=cam["target"], up=cam["up"]
            ),
            "film": {
                "type": "hdrfilm",
                "width": width,
                "height": height,
                "pixel_format": "rgb",
                "rfilter": {"type": "box"},
            },
            "sampler": {"type": "independent", "sample_count": int(args.spp)},
        },
        "medium_box": {
            "type": "cube",
            "to_world": to_world(med["cube_to_world"]),
            "bsdf": {"type": "null"},
            "interior": {
                "type": "heterogeneous",
                "sigma_t": sigma_t,
                "albedo": albedo,
                "scale": 1.0,
                "phase": {"type": "hg", "g": float(sc["phase_g"])},
            },
        },
    }
    sun = [float(c) for c in sc["sun"]["irradiance"]]
    if max(sun) > 0:
        scene["sun"] = {
            "type": "directional",
            "direction": [-float(c) for c in sc["sun"]["to_sun"]],
            "irradiance": {"type": "rgb", "value": sun},
        }
    sky = sc["sky"]
    weight = float(sky["ambient"]) if args.sky_weight is None else args.sky_weight
    zenith = [weight * c for c in sky["zenith"]]
    horizon = [weight * c for c in sky["horizon"]]
    darken = args.sky_model == "march"
    # One colour is a constant sky, unless it darkens below the horizon where that is seen
    # (with a black medium only what the camera sees of the sky matters).
    sees_below = darken and bool((camera_rays_dz(cam, width, height) < 0).any())
    if args.sky == "constant" or (
        args.sky == "auto" and zenith == horizon and not sees_below
    ):
        sky_kind = "constant"
        scene["sky"] = {"type": "constant", "radiance": {"type": "rgb", "value": zenith}}
    else:
        # Latitude-longitude map, local +Y up (Mitsuba's envmap), turned so +Y is world +Z.
        # The sky depends on the direction's height only, so longitude does not matter.
        rows, cols = 512, 16
        theta = (np.arange(rows) + 0.5) / rows * math.pi
        rad = sky_radiance(np.cos(theta), zenith, horizon, darken)
        bitmap = np.repeat(rad[:, None, :], cols, axis=1).astype(np.float32)
        sky_kind = "envmap"
        scene["sky"] = {
            "type": "envmap",
            "bitmap": mi.Bitmap(bitmap),
            "to_world": mi.ScalarTransform4f(
                [[1, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]]
            ),
        }
    return scene, sky_kind


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("export_dir", help="directory written by supercell-data export-mitsuba")
    ap.add_argument("--supercell", help="supercell's linear image (PFM) of the same scene")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--spp", type=int, default=256, help="Mitsuba samples per pixel")
    ap.add_argument("--max-depth", type=int, default=64,
                    help="volpath max_depth: 1 + the scattering events a path may have")
    ap.add_argument("--variant", default="scalar_rgb", help="scalar_rgb or llvm_ad_rgb")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sky", choices=["auto", "constant", "envmap"], default="auto",
                    help="sky emitter (auto: constant when it is, envmap otherwise)")
    ap.add_argument("--sky-model", choices=["path", "march"], default="path",
                    help="path: the path tracer's sky (the horizon colour below the "
                    "horizon); march: the ray marcher's background (darker below the horizon)")
    ap.add_argument("--sky-weight", type=float, default=None,
                    help="multiplies the sky colours (default: the scene's ambient)")
    ap.add_argument("--exposure", type=float, default=0.85, help="exposure of the PNG")
    ap.add_argument("--block", type=int, default=5,
                    help="also compare means of BLOCK x BLOCK pixels (less noise, same bias)")
    ap.add_argument("--max-rel-rmse", type=float, default=None,
                    help="exit 1 when the relative RMSE is larger")
    ap.add_argument("--reuse", action="store_true",
                    help="take Mitsuba's two halves from an earlier run's OUT_DIR "
                    "(mitsuba-halves.npz) instead of rendering them again: a render at "
                    "960x540 takes minutes, and supercell's image may come later")
    args = ap.parse_args()

    if args.block < 1 or args.spp < 1:
        fail("--block and --spp must be at least 1")
    try:
        import mitsuba as mi
    except ImportError:
        print("mitsuba is not installed (pip install mitsuba)", file=sys.stderr)
        sys.exit(3)
    try:
        mi.set_variant(args.variant)
    except Exception as e:  # an unknown variant, or LLVM missing for llvm_ad_rgb
        print(f"mitsuba variant {args.variant} is not available: {e}", file=sys.stderr)
        sys.exit(3)

    scene_path = os.path.join(args.export_dir, "scene.json")
    try:
        with open(scene_path) as f:
            sc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{scene_path}: {e}")
    if sc.get("format") != "supercell-mitsuba-scene 1":
        fail(f"{scene_path}: unknown format {sc.get('format')!r}")
    if sc.get("ground"):
        print("warning: the scene has a ground plane, which the Mitsuba scene leaves out",
              file=sys.stderr)

    desc, sky_kind = build_scene(mi, sc, args.export_dir, args)
    scene = mi.load_dict(desc)
    # Two independent halves of the samples: their mean is the picture, their difference
    # measures Mitsuba's own noise (how much of the comparison's difference is noise).
    started = time.time()
    half = max(args.spp // 2, 1)
    halves_path = os.path.join(args.out, "mitsuba-halves.npz")
    if args.reuse:
        try:
            saved = np.load(halves_path)
            halves = [saved["half0"], saved["half1"]]
            seconds = float(saved["seconds"])
            if int(saved["spp"]) != 2 * half or halves[0].shape[:2] != (int(sc["height"]), int(sc["width"])):
                fail(f"{halves_path}: rendered at {int(saved['spp'])} samples per pixel and "
                     f"{halves[0].shape[1]}x{halves[0].shape[0]}, not {2 * half} and "
                     f"{sc['width']}x{sc['height']}")
        except (OSError, KeyError, ValueError) as e:
            fail(f"--reuse: {halves_path}: {e}")
    else:
        halves = [
            np.array(mi.render(scene, spp=half, seed=args.seed + k), dtype=np.float64)[..., :3]
            for k in (0, 1)
        ]
        seconds = time.time() - started
        os.makedirs(args.out, exist_ok=True)
        np.savez_compressed(halves_path, half0=halves[0], half1=halves[1], seconds=seconds,
                            spp=2 * half)
    img = (0.5 * (halves[0] + halves[1])).astype(np.float32)
    b = args.block
    noise = math.sqrt(float(((halves[0] - halves[1]) ** 2).mean())) / 2
    noise_block = math.sqrt(float(((blocks(halves[0], b) - blocks(halves[1], b)) ** 2).mean())) / 2
    os.makedirs(args.out, exist_ok=True)
    write_pfm(os.path.join(args.out, "mitsuba.pfm"), img)

    result = {
        "mitsuba_version": mi.__version__,
        "variant": args.variant,
        "spp": 2 * half,
        "max_depth": args.max_depth,
        "sky": sky_kind,
        "sky_model": args.sky_model,
        "seconds": round(seconds, 3),
        "reused": bool(args.reuse),
        "width": int(sc["width"]),
        "height": int(sc["height"]),
        "mean_mitsuba": float(img.mean()),
        # The RMS of Mitsuba's noise in its picture, of the mean radiance.
        "rel_noise_mitsuba": noise / max(float(img.mean()), 1e-30),
        "block": b,
        "rel_noise_mitsuba_block": noise_block / max(float(img.mean()), 1e-30),
    }
    status = 0
    if args.supercell:
        ref = read_pfm(args.supercell)
        if ref.shape != img.shape:
            fail(f"{args.supercell} is {ref.shape[1]}x{ref.shape[0]}, the export "
                 f"{img.shape[1]}x{img.shape[0]}")
        diff = ref.astype(np.float64) - img
        mean = float(img.mean())
        rel = math.sqrt(float((diff ** 2).mean())) / max(mean, 1e-30)
        rel_block = math.sqrt(float((blocks(diff, b) ** 2).mean())) / max(mean, 1e-30)
        result.update({
            "mean_supercell": float(ref.mean()),
            "mean_ratio": float(ref.mean()) / max(mean, 1e-30),
            "mean_per_channel_supercell": ref.reshape(-1, 3).mean(0).tolist(),
            "mean_per_channel_mitsuba": img.reshape(-1, 3).mean(0).tolist(),
            "rel_rmse": rel,
            "rel_mean_abs": float(np.abs(diff).mean()) / max(mean, 1e-30),
            "rel_rmse_block": rel_block,
        })
        if args.max_rel_rmse is not None:
            result["max_rel_rmse"] = args.max_rel_rmse
            if not rel <= args.max_rel_rmse:
                status = 1
        panels = [tone_map(ref, args.exposure), tone_map(img, args.exposure)]
        # Difference panel: |supercell - mitsuba| with 10 % of the mean radiance at full scale.
        d = np.clip(np.abs(diff).mean(-1) / (0.1 * max(mean, 1e-30)), 0, 1)
        panels.append((np.repeat(d[..., None], 3, axis=-1) * 255 + 0.5).astype(np.uint8))
        gap = np.full((img.shape[0], 4, 3), 255, np.uint8)
        side = np.concatenate([panels[0], gap, panels[1], gap, panels[2]], axis=1)
        mi.Bitmap(side, pixel_format=mi.Bitmap.PixelFormat.RGB).write(
            os.path.join(args.out, "compare.png"))
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(json.dumps(result))
    sys.exit(status)


if __name__ == "__main__":
    main()
