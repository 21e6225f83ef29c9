// The progressive path tracer (src/render/path.rs drives it). It follows `common.wgsl`,
// reads the same grids, transfer functions and acceleration cells as the ray-marcher, and
// adds `PathParams` and the accumulation buffer as bind group 1.
//
// The medium (one definition, shared with the Mitsuba comparison):
// - extinction σt(x) = Σ over enabled attributes a of opacity_a(v_a(x)) · extinction_a
//   (per world unit), v_a the trilinear sample of grid a at x (index space, values at
//   integer index coordinates), opacity_a the transfer function's alpha; exactly what the
//   march adds per sample;
// - scattering: a scattering attribute scatters σ_a · colour_a (the transfer function's
//   linear RGB is its single-scattering albedo); an emissive attribute absorbs only and
//   emits σ_a · colour_a · emission_a, as in the march;
// - phase: Henyey-Greenstein with g = phase_g, normalised over the sphere (1/4π isotropic);
// - lights: the sun, a directional (delta) light whose irradiance on a surface facing it
//   is E = π · sun_color (`sun_irradiance`); and the sky, an environment whose radiance in
//   direction d is ambient · mix(sky_horizon, sky_zenith, sqrt(max(d.z, 0)))
//   (`sky_radiance`): the march's gradient without its sun glow and its darkening below
//   the horizon;
// - the ground (where on): a Lambertian plane at the bottom of the world box, albedo
//   ground_albedo · (0.42, 0.45, 0.36) (the march's ground colour without its grid lines).
//
// Units, shared with the march: sun_color is the radiance a white Lambertian surface facing
// the sun reflects (E/π), so the ground here, albedo · (E cos θ / π + sky), is the march's
// albedo · (sun_color · cos θ + sky) exactly, and the sky is the same environment. Single
// scattering of the sun is σs · E · p_HG = σs · sun_color · (4π p_HG) / 4: a quarter of the
// march's (which scales the phase so that isotropic is 1 and adds two octaves of
// approximate multiple scattering); the path's real multiple scattering makes up the rest.
//
// The kernel is one flat loop of ray queries per pixel (`path_main`), each query one
// tracking loop (`query`), and each dispatch adds one sample (src/render/path.rs says why).
//
// Estimators: delta tracking for free flights, ratio tracking for the sun's transmittance,
// both against a piecewise-constant majorant: along a ray, the sum over attributes of the
// largest extinction in the majorant cell the ray is in (`pmaj`, built per accumulation by
// `path_majorants`), one segment per cell crossed.
// Next-event estimation to the sun at every scattering vertex; the sky is reached by the
// path itself (directions sampled from the phase function, or cosine-weighted on the
// ground). Russian roulette after `rr_depth` bounces.

struct PathParams {
    first_sample: u32,  // samples already in the accumulation buffer (0: start afresh)
    samples: u32,       // samples this dispatch adds per pixel
    max_bounces: u32,   // scattering events per path at most
    seed: u32,
    rr_depth: u32,      // bounces before Russian roulette starts
    stats: u32,         // 1: add this dispatch's work to `stats`
    qmc_dims: u32,      // a sample's first random numbers from the scrambled Sobol sequence
    pad2: u32,
}

@group(1) @binding(0) var<storage, read_write> accum: array<vec4<f32>>;
@group(1) @binding(1) var<uniform> PP: PathParams;
// Work counters (src/render/path.rs's `PathStats` names them), each a 64-bit count as a
// (low, high) pair of words; written only when PP.stats is 1.
@group(1) @binding(2) var<storage, read_write> stats: array<atomic<u32>, 22>;

// Pipeline constants (src/render/path.rs sets them per pipeline, from the renderer's
// configuration, for comparing on one device; the inner segment loop that was one of them
// won its measurement and is always on, docs/PERFORMANCE.md):
// - COUNT_WORK: the work counters exist. The pipeline built for counting sets it; the others
//   keep no counters at all (a private array incremented at computed indices lives in
//   local memory on discrete GPUs: a read-modify-write per increment);
// - CARRY_DEPTH: one exponential draw per tentative collision, its optical depth used up
//   across the majorant segments the ray crosses, instead of a fresh draw per segment;
// - CACHE_CELLS: each channel keeps its current majorant cell (its value and where the ray
//   leaves it), so a new segment looks up only the channels whose cell ended (off by default:
//   grids on one lattice, as the storm's attributes, end their cells together, and the
//   state costs registers);
// - USE_QMC: `rnd` may read the Sobol sequence (PP.qmc_dims > 0); off, its code is not
//   inlined at every call;
// - SKIP_LEVELS (0 to SKIP_LEVELS_MAX): where a ray is in empty space, a segment crosses
//   the coarsest empty block of up to this many levels above the acceleration cells (level
//   l: 4^l acceleration cells per axis) instead of one acceleration cell (0: as before;
//   on the storm a second level crossed no more cells than the first: default 1).
override COUNT_WORK: bool = false;
override CARRY_DEPTH: bool = true;
override CACHE_CELLS: bool = false;
override USE_QMC: bool = false;
override SKIP_LEVELS: u32 = 1u;

// The path tracer's majorants (built by `path_majorants` when an accumulation starts), per
// channel on a grid of "majorant cells" that splits each acceleration cell (`ainfo`) into
// 2^k per axis (`fine_grid`: k up to PMAJ_SPLIT_MAX, cells of 2 voxels or more, as many as
// fit ACCEL_CELLS): the largest extinction any trilinear sample can have whose base voxel
// lies in the cell. The stencil of such a sample reaches one voxel on, so the bound is the
// transfer function's largest opacity over the value range of the cell's voxels and the
// next layer on the +x, +y, +z sides. The march's `.w` (an 8-voxel cell and its 26
// neighbours all round) is far looser: on the storm the extinction at a tentative collision
// averaged at most 0.14 of it, and 0.51 of these (the work counters' `majorant_tightness`;
// docs/PERFORMANCE.md, "Path tracer, second round").
@group(1) @binding(3) var<storage, read_write> pmaj: array<f32>;
// Per pixel, the sum over its samples of the squared luminance of each sample's radiance:
// with `accum`, the variance of the pixel's mean, which steers the denoiser
// (shaders/denoise.wgsl).
@group(1) @binding(4) var<storage, read_write> moments: array<f32>;

// Acceleration cells split at most 2^PMAJ_SPLIT_MAX per axis. 1 (cells of 4 voxels, as the
// storm's 8-voxel acceleration cells split): on the storm 2 (cells of 2 voxels) was no
// tighter (0.52 against 0.51) and entered 36 % more cells per sample.
const PMAJ_SPLIT_MAX: u32 = 1u;

// The majorant grid of one channel: cells of 2^shift voxels, the first at `org` (in cells).
struct MajGrid {
    org: vec3<i32>,
    shift: u32,
    dims: vec3<u32>,
}

// How many times (k) each acceleration cell of `si` splits per axis: the most, up to
// PMAJ_SPLIT_MAX, that keeps cells at least 2 voxels wide and the count within ACCEL_CELLS.
fn fine_grid(si: ChannelAccel) -> MajGrid {
    let n = si.dims.x * si.dims.y * si.dims.z;
    var k = 0u;
    for (var j = 1u; j <= PMAJ_SPLIT_MAX; j++) {
        if si.shift < j + 1u || si.shift > SCAN_SHIFT_MAX || n > (ACCEL_CELLS >> (3u * j)) { break; }
        k = j;
    }
    return MajGrid(si.org << vec3<u32>(k), si.shift - k, si.dims << vec3<u32>(k));
}

var<private> f_grid: array<MajGrid, ATTR_CHANNELS>;

// Empty-space levels over the acceleration cells, stored in `pmaj` after every channel's
// majorant cells: a cell of level l covers 4^l × 4^l × 4^l acceleration cells (aligned on
// the channel's first cell) and holds 0 where every one of them is inside the grid's cells
// and empty (`.w` 0: no sample based in it or a neighbour can see a non-zero opacity), 1
// elsewhere. A ray in an empty cell of level l crosses it as one majorant segment of 0;
// the storm's domain is about 45 acceleration cells across, 11 of level 1, 3 of level 2.
const SKIP_BLOCK_SHIFT: u32 = 2u;
const SKIP_LEVELS_MAX: u32 = 2u;

// The cells of level `l` per axis for channel `si`.
fn skip_dims(si: ChannelAccel, l: u32) -> vec3<u32> {
    let s = SKIP_BLOCK_SHIFT * l;
    return (si.dims + vec3<u32>((1u << s) - 1u)) >> vec3<u32>(s);
}

// Level l holds up to ACCEL_CELLS / 16^l cells per channel (4^l per axis, at least 1 per
// axis: ceilings of narrow grids make them more than ACCEL_CELLS / 64^l).
fn skip_capacity(l: u32) -> u32 {
    return ACCEL_CELLS >> (4u * l);
}

// Where channel a's cells of level l start in `pmaj` (l = 1 or 2).
fn skip_base(a: u32, l: u32) -> u32 {
    let level2 = select(0u, ATTR_CHANNELS * skip_capacity(1u), l == 2u);
    return ATTR_CHANNELS * ACCEL_CELLS + level2 + a * skip_capacity(l);
}

// Whether channel `si` has level l: its cells scanned (a known value range: `.w` bounds
// them) and its level's cells fit.
fn skip_ok(si: ChannelAccel, l: u32) -> bool {
    let d = skip_dims(si, l);
    return si.ok != 0u && si.shift <= SCAN_SHIFT_MAX && d.x * d.y * d.z <= skip_capacity(l);
}

const STAT_SAMPLES: u32 = 0u;
const STAT_PATH_RAYS: u32 = 1u;
const STAT_SHADOW_RAYS: u32 = 2u;
const STAT_PATH_STEPS: u32 = 3u;    // tentative collisions on path rays (medium lookups)
const STAT_SHADOW_STEPS: u32 = 4u;  // tentative collisions on shadow rays
const STAT_SEGMENTS: u32 = 5u;      // majorant segments looked up
const STAT_LOOKUPS: u32 = 6u;       // tree lookups and root-tile comparisons (`work`)
const STAT_SCATTERS: u32 = 7u;      // real collisions and ground hits (path vertices)
const STAT_TIGHTNESS: u32 = 8u;     // Σ over tentative collisions of 1000 · σ/majorant
const STAT_OVER: u32 = 9u;          // tentative collisions where σ exceeded the majorant
const STAT_CELLS: u32 = 10u;        // majorant cells looked up (per channel)
const STAT_COUNT: u32 = 11u;

var<private> st: array<u32, STAT_COUNT>;

// Adds `n` to counter `k` where the pipeline counts (every call site passes a constant `k`).
fn count(k: u32, n: u32) {
    if COUNT_WORK { st[k] += n; }
}

const PI: f32 = 3.14159265358979;
const GROUND_RGB: vec3<f32> = vec3<f32>(0.42, 0.45, 0.36);

// ---------------------------------------------------------------------------------------
// Random numbers. A sample's first PP.qmc_dims numbers (0 by default: src/render/path.rs
// says why) come from a randomised quasi-Monte Carlo sequence: Sobol's first 4 dimensions,
// padded (dimensions 4k..4k+3 read the same 4 at a shuffled index), Owen-scrambled per pixel
// with a hash (a nested uniform scramble as in Burley 2020, "Practical Hash-based Owen
// Scrambling"). Every point is uniform on the unit cube, so the estimate stays unbiased,
// but the pixel's samples stratify: its first 2^m camera positions (dimensions 0, 1) fall
// one in each of 2^m cells of the pixel, and each dimension alone in 2^m intervals. The
// rest come from a PCG hash seeding an LCG with PCG's output permutation (RXS-M-XS), per
// (pixel, sample).
// ---------------------------------------------------------------------------------------

var<private> rng: u32;
var<private> q_dim: u32;    // the sample's next dimension
var<private> q_index: u32;  // the sample's index in its pixel's sequence
var<private> q_seed: u32;   // the pixel's scrambling seed

// Direction numbers of Sobol's dimensions 0..3, 32 per dimension (bit b of the index
// contributes entry b): dimension 0 is van der Corput's; 1..3 follow from the primitive
// polynomials x + 1, x² + x + 1, x³ + x + 1 with initial numbers 1; 1, 3; 1, 3, 1 (Joe and
// Kuo). src/render/path.rs's tests derive them again.
const SOBOL_DIRS: array<u32, 128> = array<u32, 128>(
    0x80000000u, 0x40000000u, 0x20000000u, 0x10000000u, 0x08000000u, 0x04000000u, 0x02000000u, 0x01000000u,
    0x00800000u, 0x00400000u, 0x00200000u, 0x00100000u, 0x00080000u, 0x00040000u, 0x00020000u, 0x00010000u,
    0x00008000u, 0x00004000u, 0x00002000u, 0x00001000u, 0x00000800u, 0x00000400u, 0x00000200u, 0x00000100u,
    0x00000080u, 0x00000040u, 0x00000020u, 0x00000010u, 0x00000008u, 0x00000004u, 0x00000002u, 0x00000001u,
    0x80000000u, 0xc0000000u, 0xa0000000u, 0xf0000000u, 0x88000000u, 0xcc000000u, 0xaa000000u, 0xff000000u,
    0x80800000u, 0xc0c00000u, 0xa0a00000u, 0xf0f00000u, 0x88880000u, 0xcccc0000u, 0xaaaa0000u, 0xffff0000u,
    0x80008000u, 0xc000c000u, 0xa000a000u, 0xf000f000u, 0x88008800u, 0xcc00cc00u, 0xaa00aa00u, 0xff00ff00u,
    0x80808080u, 0xc0c0c0c0u, 0xa0a0a0a0u, 0xf0f0f0f0u, 0x88888888u, 0xccccccccu, 0xaaaaaaaau, 0xffffffffu,
    0x80000000u, 0xc0000000u, 0x60000000u, 0x90000000u, 0xe8000000u, 0x5c000000u, 0x8e000000u, 0xc5000000u,
    0x68800000u, 0x9cc00000u, 0xee600000u, 0x55900000u, 0x80680000u, 0xc09c0000u, 0x60ee0000u, 0x90550000u,
    0xe8808000u, 0x5cc0c000u, 0x8e606000u, 0xc5909000u, 0x6868e800u, 0x9c9c5c00u, 0xeeee8e00u, 0x5555c500u,
    0x8000e880u, 0xc0005cc0u, 0x60008e60u, 0x9000c590u, 0xe8006868u, 0x5c009c9cu, 0x8e00eeeeu, 0xc5005555u,
    0x80000000u, 0xc0000000u, 0x20000000u, 0x50000000u, 0xf8000000u, 0x74000000u, 0xa2000000u, 0x93000000u,
    0xd8800000u, 0x25400000u, 0x59e00000u, 0xe6d00000u, 0x78080000u, 0xb40c0000u, 0x82020000u, 0xc3050000u,
    0x208f8000u, 0x51474000u, 0xfbea2000u, 0x75d93000u, 0xa0858800u, 0x914e5400u, 0xdbe79e00u, 0x25db6d00u,
    0x58800080u, 0xe54000c0u, 0x79e00020u, 0xb6d00050u, 0x800800f8u, 0xc00c0074u, 0x200200a2u, 0x50050093u,
);

fn sobol4(index: u32, d: u32) -> u32 {
    var x = 0u;
    var i = index;
    for (var b = 0u; b < 32u && i != 0u; b++) {
        if (i & 1u) != 0u { x ^= SOBOL_DIRS[d * 32u + b]; }
        i >>= 1u;
    }
    return x;
}

// A random permutation of 32-bit words that maps each set of words sharing their low bits
// to such a set (Laine and Karras's hash, Burley's constants); on bit-reversed words, an
// Owen scramble.
fn lk_permute(v: u32, seed: u32) -> u32 {
    var x = v + seed;
    x ^= x * 0x6c50b47cu;
    x ^= x * 0xb82f1e52u;
    x ^= x * 0xc7afe638u;
    x ^= x * 0x8d22f6e6u;
    return x;
}

fn owen_scramble(v: u32, seed: u32) -> u32 {
    return reverseBits(lk_permute(reverseBits(v), seed));
}

// Dimension `dim` of the current sample's point.
fn qmc(dim: u32) -> f32 {
    let set_seed = pcg_hash(q_seed ^ pcg_hash(dim >> 2u));
    let index = owen_scramble(q_index, set_seed);
    let x = owen_scramble(sobol4(index, dim & 3u), pcg_hash(set_seed ^ (dim & 3u)));
    return f32(x >> 8u) * (1.0 / 16777216.0);
}

fn pcg_hash(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn rng_seed(px: vec2<u32>, sample_index: u32) {
    rng = pcg_hash(px.x ^ pcg_hash(px.y ^ pcg_hash(sample_index ^ pcg_hash(PP.seed))));
    q_seed = pcg_hash(px.x ^ pcg_hash(px.y ^ pcg_hash(PP.seed ^ 0x5bd1e995u)));
    q_index = sample_index;
    q_dim = 0u;
}

// Uniform in [0, 1).
fn rnd() -> f32 {
    if USE_QMC && q_dim < PP.qmc_dims {
        q_dim += 1u;
        return qmc(q_dim - 1u);
    }
    rng = rng * 747796405u + 2891336453u;
    let s = rng;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return f32(((w >> 22u) ^ w) >> 8u) * (1.0 / 16777216.0);
}

// ---------------------------------------------------------------------------------------
// Lights, camera
// ---------------------------------------------------------------------------------------

// The sky's radiance towards direction `d` (d points away from the viewer): the march's
// zenith-horizon gradient, ambient × mix(horizon, zenith, sqrt(max(d.z, 0))), without its
// sun glow and without its darkening below the horizon, so that a sky with one colour at
// zenith and horizon is a constant environment.
fn sky_radiance(d: vec3<f32>) -> vec3<f32> {
    return mix(P.sky_horizon.xyz, P.sky_zenith.xyz, sqrt(clamp(d.z, 0.0, 1.0))) * P.sky_zenith.w;
}

// The sun's irradiance on a surface facing it: π · sun_color (the header says why).
fn sun_irradiance() -> vec3<f32> {
    return PI * P.light_color.xyz;
}

// Henyey-Greenstein, normalised over the sphere.
fn hg(cos_t: f32, g: f32) -> f32 {
    let g2 = g * g;
    let den = max(1.0 + g2 - 2.0 * g * cos_t, 1e-12);
    return (1.0 - g2) / (4.0 * PI * den * sqrt(den));
}

// An orthonormal basis around unit `n`.
fn basis(n: vec3<f32>) -> mat3x3<f32> {
    let s = select(-1.0, 1.0, n.z >= 0.0);
    let a = -1.0 / (s + n.z);
    let b = n.x * n.y * a;
    let t = vec3<f32>(1.0 + s * n.x * n.x * a, s * b, -s * n.x);
    let u = vec3<f32>(b, s + n.y * n.y * a, -n.y);
    return mat3x3<f32>(t, u, n);
}

// A direction from the Henyey-Greenstein lobe around `d` (the direction of travel).
fn sample_hg(d: vec3<f32>, g: f32) -> vec3<f32> {
    let u1 = rnd();
    let u2 = rnd();
    var c = 1.0 - 2.0 * u1;
    if abs(g) > 1e-3 {
        let q = (1.0 - g * g) / (1.0 - g + 2.0 * g * u1);
        c = clamp((1.0 + g * g - q * q) / (2.0 * g), -1.0, 1.0);
    }
    let s = sqrt(max(0.0, 1.0 - c * c));
    let phi = 2.0 * PI * u2;
    return normalize(basis(d) * vec3<f32>(s * cos(phi), s * sin(phi), c));
}

// A cosine-weighted direction about +z.
fn sample_cosine_up() -> vec3<f32> {
    let r = sqrt(rnd());
    let phi = 2.0 * PI * rnd();
    return vec3<f32>(r * cos(phi), r * sin(phi), sqrt(max(0.0, 1.0 - r * r)));
}

struct PRay {
    o: vec3<f32>,
    d: vec3<f32>,
}

// The camera ray through a uniformly random point of pixel `px`.
fn camera_ray_at(px: vec2<u32>) -> PRay {
    let fx = (f32(px.x) + rnd()) / f32(P.size.x);
    let fy = (f32(px.y) + rnd()) / f32(P.size.y);
    let h = P.cam_fwd.w;
    let sx = (fx * 2.0 - 1.0) * h * P.cam_right.w;
    let sy = (1.0 - fy * 2.0) * h;
    if (P.flags & FLAG_ORTHO) != 0u {
        return PRay(P.cam_pos.xyz + sx * P.cam_right.xyz + sy * P.cam_up.xyz, P.cam_fwd.xyz);
    }
    return PRay(P.cam_pos.xyz, normalize(P.cam_fwd.xyz + sx * P.cam_right.xyz + sy * P.cam_up.xyz));
}

// ---------------------------------------------------------------------------------------
// The medium along one ray
// ---------------------------------------------------------------------------------------

// The current ray in each grid's index space, and the span of t where its samples can see
// active values (the index bbox grown by a voxel); empty: t0 > t1.
var<private> r_oi: array<vec3<f32>, ATTR_CHANNELS>;
var<private> r_di: array<vec3<f32>, ATTR_CHANNELS>;
var<private> r_inv: array<vec3<f32>, ATTR_CHANNELS>;
var<private> r_t0: array<f32, ATTR_CHANNELS>;
var<private> r_t1: array<f32, ATTR_CHANNELS>;
// Each channel's current majorant cell (CACHE_CELLS): its majorant, and the t where the ray
// leaves it (−∞: none yet).
var<private> r_cell_maj: array<f32, ATTR_CHANNELS>;
var<private> r_cell_end: array<f32, ATTR_CHANNELS>;

// Starts ray (o, d) (world space, d unit) in every grid; returns the span of t over all.
fn begin_ray(o: vec3<f32>, d: vec3<f32>) -> vec2<f32> {
    var lo = INF;
    var hi = -INF;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        r_t0[a] = INF;
        r_t1[a] = -INF;
        r_cell_end[a] = -INF;
        if !g_ok[a] { continue; }
        r_oi[a] = to_index(a, o);
        r_di[a] = dir_to_index(a, d);
        r_inv[a] = safe_inv(r_di[a]);
        let r = ray_box(r_oi[a], r_inv[a], vec3<f32>(g_bmin[a] - vec3<i32>(1)), vec3<f32>(g_bmax[a] + vec3<i32>(1)));
        if r.x <= r.y && r.y >= 0.0 {
            r_t0[a] = max(r.x, 0.0);
            r_t1[a] = r.y;
            lo = min(lo, r_t0[a]);
            hi = max(hi, r_t1[a]);
        }
    }
    return vec2<f32>(lo, hi);
}

struct Segment {
    majorant: f32,
    end: f32,
}

// The majorant from `t` on, and where it ends (the first acceleration-cell boundary, grid
// span boundary or `t_end` ahead): the sum over grids of their cell's largest extinction.
fn segment(t: f32, t_end: f32) -> Segment {
    var maj = 0.0;
    var end = t_end;
    let eps = 1e-3 * P.dt;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        if t > r_t1[a] { continue; }
        if t < r_t0[a] {
            end = min(end, r_t0[a]);
            continue;
        }
        end = min(end, r_t1[a]);
        if CACHE_CELLS && t < r_cell_end[a] {
            // Still in the cell looked up last: t only grows along a ray.
            maj += r_cell_maj[a];
            end = min(end, r_cell_end[a]);
            continue;
        }
        count(STAT_CELLS, 1u);
        let si = ainfo.channels[a];
        let p = floor(r_oi[a] + (t + eps) * r_di[a]);
        if si.ok == 0u || any(abs(p) > vec3<f32>(2.0e9)) {
            // No cells: opacity is at most 1.
            maj += P.attrs[a].extinction;
            continue;
        }
        let fg = f_grid[a];
        let c = (vec3<i32>(p) >> vec3<u32>(fg.shift)) - fg.org;
        let cc = vec3<u32>(clamp(c, vec3<i32>(0), vec3<i32>(fg.dims) - vec3<i32>(1)));
        let m = pmaj[a * ACCEL_CELLS + cc.x + fg.dims.x * (cc.y + fg.dims.y * cc.z)];
        maj += m;
        // The cell crossed: its first voxel and its width (in voxels).
        var lo = vec3<f32>((fg.org + c) << vec3<u32>(fg.shift));
        var side = f32(1u << fg.shift);
        if m == 0.0 && (fg.shift < si.shift || SKIP_LEVELS > 0u) {
            // Empty space: where the whole acceleration cell is (its bound over the cell
            // and its neighbours is 0), step over it at once, and over the coarsest empty
            // cell of the levels above it (SKIP_LEVELS). (Taking the whole cell also where
            // its bound is small but not 0, up to an optical depth of 0.5 across it,
            // entered 2 % fewer cells and added 6 % more tentative collisions on the storm.)
            let ca = (vec3<i32>(p) >> vec3<u32>(si.shift)) - si.org;
            let ua = vec3<u32>(ca);
            if all(ca >= vec3<i32>(0)) && all(ua < si.dims) && accel[a * ACCEL_CELLS + cell_linear(si, ua)].w == 0.0 {
                lo = vec3<f32>((si.org + ca) << vec3<u32>(si.shift));
                side = f32(1u << si.shift);
                // (A level's cell is empty only where all its acceleration cells are.)
                for (var l = 1u; l <= min(SKIP_LEVELS, SKIP_LEVELS_MAX); l++) {
                    if !skip_ok(si, l) { break; }
                    let d = skip_dims(si, l);
                    let s = SKIP_BLOCK_SHIFT * l;
                    let cb = ua >> vec3<u32>(s);
                    count(STAT_CELLS, 1u);
                    if pmaj[skip_base(a, l) + cb.x + d.x * (cb.y + d.y * cb.z)] != 0.0 { break; }
                    lo = vec3<f32>((si.org + vec3<i32>(cb << vec3<u32>(s))) << vec3<u32>(si.shift));
                    side = f32(1u << (si.shift + s));
                }
            }
        }
        let exit = max(ray_box(r_oi[a], r_inv[a], lo, lo + side).y, t + eps);
        r_cell_maj[a] = m;
        r_cell_end[a] = exit;
        end = min(end, exit);
    }
    return Segment(maj, max(end, t + eps));
}

struct Medium {
    sigma: f32,          // extinction
    scatter: vec3<f32>,  // scattering coefficient (RGB)
    emit: vec3<f32>,     // emission, extinction-weighted (radiance = emit / sigma)
}

fn medium_at(t: f32) -> Medium {
    var m = Medium(0.0, vec3<f32>(0.0), vec3<f32>(0.0));
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        if t < r_t0[a] || t > r_t1[a] { continue; }
        let s = sample(a, r_oi[a] + t * r_di[a]);
        let e = tf_eval(a, s.value);
        if e.a > 0.0 {
            let sa = e.a * P.attrs[a].extinction;
            m.sigma += sa;
            if P.attrs[a].kind == KIND_EMISSIVE {
                m.emit += sa * e.rgb * P.attrs[a].emission;
            } else {
                m.scatter += sa * e.rgb;
            }
        }
    }
    return m;
}

// One step towards the next tentative collision along the ray (`query`): enters the
// majorant segment at *t where the last one `s` ended, then either places the collision
// inside it (*t there, returns true) or moves *t to its end.
// CARRY_DEPTH: the tentative collisions are a Poisson process of rate majorant(t); drawing
// the optical depth of the gap to the next once (`depth`) and using it up across segments
// gives the same process as a fresh draw at every segment start (the exponential has no
// memory), for one random number and logarithm per collision instead of per segment.
fn advance(t: ptr<function, f32>, s: ptr<function, Segment>, depth: ptr<function, f32>, t_end: f32) -> bool {
    if !(*t < (*s).end) {
        *s = segment(*t, t_end);
        count(STAT_SEGMENTS, 1u);
    }
    let maj = (*s).majorant;
    let end = (*s).end;
    if CARRY_DEPTH {
        if *depth < 0.0 { *depth = -log(1.0 - rnd()); }
        let next = *t + *depth / max(maj, 1e-30);
        if maj <= 0.0 || !(next < end) {
            *depth = max(*depth - maj * (end - *t), 0.0);
            *t = end;
            return false;
        }
        *t = next;
        *depth = -1.0;
        return true;
    }
    let step = -log(1.0 - rnd()) / max(maj, 1e-30);
    if maj <= 0.0 || *t + step >= end {
        *t = end;
        return false;
    }
    *t += step;
    return true;
}

// What one ray query found: for a path ray (delta tracking) the first real collision, or
// the ground, or nothing; for a shadow ray (ratio tracking) the transmittance.
struct Query {
    hit: bool,
    t: f32,
    medium: Medium,
    t_ground: f32,
    tr: f32,
}

// Traces the ray o + t·d (d unit) through the grids. One loop serves both kinds of ray,
// so the sampling code is inlined once.
fn query(o: vec3<f32>, d: vec3<f32>, shadow: bool) -> Query {
    var q = Query(false, 0.0, Medium(0.0, vec3<f32>(0.0), vec3<f32>(0.0)), INF, 1.0);
    let ground_on = (P.flags & FLAG_GROUND) != 0u;
    if ground_on && d.z < 0.0 {
        let tg = (P.ground.x - o.z) / d.z;
        if tg > 0.0 { q.t_ground = tg; }
    }
    if shadow && ground_on && d.z <= 0.0 {
        q.tr = 0.0;
    }
    let span = begin_ray(o, d);
    var t = max(span.x, 0.0);
    let t_end = min(span.y, q.t_ground);
    // The majorant segment holding t, looked up again only once t passes its end (every
    // tentative collision inside it sees the same cells).
    var s = Segment(0.0, -INF);
    // CARRY_DEPTH: the optical depth (against the majorant) left to the next tentative
    // collision; < 0: draw it.
    var depth = -1.0;
    var i = 0u;
    loop {
        if i >= P.max_steps || !(t < t_end) || work > P.work_budget || q.tr <= 0.0 || q.hit { break; }
        var found = false;
        // To the next tentative collision in a loop of majorant lookups alone, so that a
        // warp's lanes evaluate the medium below together rather than each in a loop
        // iteration of its own (most iterations cross a segment without a collision).
        loop {
            if i >= P.max_steps || !(t < t_end) { break; }
            i++;
            found = advance(&t, &s, &depth, t_end);
            if found { break; }
        }
        if !found { break; }
        let m = medium_at(t);
        if COUNT_WORK {
            if shadow { count(STAT_SHADOW_STEPS, 1u); } else { count(STAT_PATH_STEPS, 1u); }
            count(STAT_TIGHTNESS, u32(1000.0 * clamp(m.sigma / s.majorant, 0.0, 1.0) + 0.5));
            count(STAT_OVER, select(0u, 1u, m.sigma > s.majorant * 1.0001));
        }
        if shadow {
            q.tr *= max(1.0 - m.sigma / s.majorant, 0.0);
            if q.tr < 0.1 {
                // Russian roulette: survive with probability 1/2 at twice the weight.
                q.tr = select(0.0, 2.0 * q.tr, rnd() < 0.5);
            }
        } else if rnd() * s.majorant < m.sigma {
            // A sample above the majorant (values outside the cells' scan) counts as a real
            // collision.
            q.hit = true;
            q.t = t;
            q.medium = m;
        }
    }
    return q;
}

// The largest opacity of attribute `a`'s transfer function over values [lo, hi]: the
// table is piecewise linear, so its value at both ends and its entries between bound it
// (accel.wgsl's `tf_max_alpha`; that part is not included here).
fn path_max_alpha(a: u32, lo: f32, hi: f32) -> f32 {
    if !(lo <= hi) { return 0.0; }
    // An unknown range (cells too large to scan: −∞..∞) spans the whole table.
    let u0 = select(0.0, norm_value(a, lo), finite(lo));
    let u1 = select(1.0, norm_value(a, hi), finite(hi));
    var m = max(tf_u(a, u0).a, tf_u(a, u1).a);
    let i0 = u32(ceil(u0 * f32(TF_SIZE - 1u)));
    let i1 = min(u32(floor(u1 * f32(TF_SIZE - 1u))), TF_SIZE - 1u);
    let row = P.attrs[a].tf_row * TF_SIZE;
    for (var i = i0; i <= i1; i++) {
        m = max(m, tf[row + i].a);
    }
    return m;
}

// Cells per workgroup row of the acceleration passes' indirect dispatches (accel.wgsl's
// ROW): `path_majorants` is dispatched with the same arguments as `accel_cells`.
const PATH_ROW: u32 = 32768u;

// Builds `pmaj`: a thread per acceleration cell and channel (z), for the majorant cells it
// splits into. Where the acceleration cell's bound over it and its neighbours (`.w`) is 0,
// so is every one of them; where the cell is not split, its bound is the value ranges of the
// cell and its + neighbours; else each majorant cell reads its voxels.
@compute @workgroup_size(64, 1, 1)
fn path_majorants(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let a = wg.z;
    if a >= ATTR_CHANNELS { return; }
    let si = ainfo.channels[a];
    let cell = (wg.x + wg.y * PATH_ROW) * 64u + li;
    if si.ok == 0u || cell >= si.dims.x * si.dims.y * si.dims.z { return; }
    // The empty-space levels (built whatever SKIP_LEVELS is: a pipeline with more levels
    // may read them without building again): a thread per cell of each level, whose
    // count is at most the acceleration cells'.
    for (var l = 1u; l <= SKIP_LEVELS_MAX; l++) {
        let d = skip_dims(si, l);
        if !skip_ok(si, l) || cell >= d.x * d.y * d.z { continue; }
        let cb = vec3<u32>(cell % d.x, (cell / d.x) % d.y, cell / (d.x * d.y));
        let n = 1u << (SKIP_BLOCK_SHIFT * l);
        let first = cb * n;
        var empty = true;
        for (var j = 0u; j < n * n * n && empty; j++) {
            let q = first + vec3<u32>(j / (n * n), (j / n) % n, j % n);
            empty = all(q < si.dims) && accel[a * ACCEL_CELLS + cell_linear(si, q)].w == 0.0;
        }
        pmaj[skip_base(a, l) + cell] = select(1.0, 0.0, empty);
    }
    let fg = fine_grid(si);
    let k = si.shift - fg.shift;
    let per_axis = 1u << k;
    let ca = vec3<u32>(cell % si.dims.x, (cell / si.dims.x) % si.dims.y, cell / (si.dims.x * si.dims.y));
    let first = ca << vec3<u32>(k);
    let ext = P.attrs[a].extinction;
    // (Cells too large to scan carry an unknown range, whose `.w` accel.wgsl's
    // tf_max_alpha does not bound: those are never taken as empty here.)
    let coarse_zero = si.shift <= SCAN_SHIFT_MAX && accel[a * ACCEL_CELLS + cell].w == 0.0;
    var coarse = 0.0;
    if !coarse_zero && k == 0u {
        var lo = INF;
        var hi = -INF;
        for (var n = 0u; n < 8u; n++) {
            let q = ca + vec3<u32>(n >> 2u, (n >> 1u) & 1u, n & 1u);
            if any(q >= si.dims) { continue; }
            let m = accel[a * ACCEL_CELLS + cell_linear(si, q)];
            lo = min(lo, m.x);
            hi = max(hi, m.y);
        }
        coarse = path_max_alpha(a, lo, hi) * ext;
    }
    if !coarse_zero && k > 0u { init_grid(a); }
    let side = 1 << fg.shift;
    let e = u32(side) + 1u;
    for (var f = 0u; f < per_axis * per_axis * per_axis; f++) {
        let c = first + vec3<u32>(f / (per_axis * per_axis), (f / per_axis) % per_axis, f % per_axis);
        var m = coarse;
        if !coarse_zero && k > 0u {
            // Voxels [v0, v0 + side]: the cell and one layer on.
            let v0 = (fg.org + vec3<i32>(c)) << vec3<u32>(fg.shift);
            var lo = INF;
            var hi = -INF;
            for (var n = 0u; n < e * e * e; n++) {
                work = 0u;
                let v = lookup(a, v0 + vec3<i32>(vec3<u32>(n / (e * e), (n / e) % e, n % e))).value;
                if finite(v) {
                    lo = min(lo, v);
                    hi = max(hi, v);
                }
            }
            m = path_max_alpha(a, lo, hi) * ext;
        }
        pmaj[a * ACCEL_CELLS + c.x + fg.dims.x * (c.y + fg.dims.y * c.z)] = m;
    }
}

// Each invocation runs its pixel's samples as one flat loop of ray queries: a path ray,
// then (after a scattering event) the shadow ray towards the sun, then the next path ray.
@compute @workgroup_size(8, 8, 1)
fn path_main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= P.size.x || gid.y >= P.size.y { return; }
    let px = gid.xy;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        init_grid(a);
        f_grid[a] = fine_grid(ainfo.channels[a]);
    }
    let sun_dir = P.light_dir.xyz;
    let g = P.light_dir.w;
    var sum = vec4<f32>(0.0);
    var sum_sq = 0.0;       // the samples' squared luminance
    var done = 0u;          // samples finished
    var fresh = true;       // start a new sample
    var shadow = false;     // the next query is the shadow ray of the last event
    var ray = PRay(vec3<f32>(0.0), vec3<f32>(0.0, 0.0, 1.0));
    var next = ray;         // the path ray after the shadow ray
    var thr = vec3<f32>(1.0);
    var rad = vec3<f32>(0.0);
    var sun_weight = vec3<f32>(0.0);
    var covered = 0.0;
    var bounce = 0u;
    var ending = false;     // the path ends after this shadow ray
    // Queries per sample at most: a path and a shadow ray per bounce, and the last ray.
    let budget = PP.samples * (2u * PP.max_bounces + 2u);
    for (var n = 0u; n < budget && done < PP.samples; n++) {
        if fresh {
            rng_seed(px, PP.first_sample + done);
            ray = camera_ray_at(px);
            thr = vec3<f32>(1.0);
            rad = vec3<f32>(0.0);
            covered = 0.0;
            bounce = 0u;
            fresh = false;
        }
        work = 0u;
        let q = query(ray.o, ray.d, shadow);
        if COUNT_WORK {
            if shadow { count(STAT_SHADOW_RAYS, 1u); } else { count(STAT_PATH_RAYS, 1u); }
            count(STAT_LOOKUPS, work);
        }
        var finished = false;
        if shadow {
            rad += sun_weight * q.tr;
            shadow = false;
            ray = next;
            bounce += 1u;
            finished = ending;
            if !finished && bounce >= PP.rr_depth {
                let keep = clamp(max(thr.x, max(thr.y, thr.z)), 0.05, 0.95);
                finished = rnd() >= keep;
                thr /= keep;
            }
        } else if q.hit {
            count(STAT_SCATTERS, 1u);
            if bounce == 0u { covered = 1.0; }
            let x = ray.o + q.t * ray.d;
            let sig = max(q.medium.sigma, 1e-30);
            rad += thr * q.medium.emit / sig;
            if bounce >= PP.max_bounces {
                // One scattering event too many: the path ends without it.
                finished = true;
            } else {
                thr *= q.medium.scatter / sig;
                ending = all(thr <= vec3<f32>(0.0));
                sun_weight = thr * sun_irradiance() * hg(dot(ray.d, sun_dir), g);
                next = PRay(x, sample_hg(ray.d, g));
                ray = PRay(x, sun_dir);
                shadow = true;
            }
        } else if q.t_ground < INF {
            count(STAT_SCATTERS, 1u);
            if bounce >= PP.max_bounces {
                finished = true;
            } else {
                let x = ray.o + q.t_ground * ray.d;
                thr *= P.ground.z * GROUND_RGB;
                ending = all(thr <= vec3<f32>(0.0));
                // Lift the origin off the plane so the next ray does not meet it at t = 0.
                let o = vec3<f32>(x.xy, P.ground.x + 1e-4 * max(P.dt, 1e-6));
                sun_weight = thr * sun_irradiance() * (max(sun_dir.z, 0.0) / PI);
                next = PRay(o, sample_cosine_up());
                ray = PRay(o, sun_dir);
                shadow = true;
            }
        } else {
            rad += thr * sky_radiance(ray.d);
            finished = true;
        }
        if finished {
            // A non-finite sample (a degenerate grid) is dropped rather than poisoning the
            // pixel.
            let ok = all(rad == rad) && all(abs(rad) < vec3<f32>(1e30));
            sum += select(vec4<f32>(0.0), vec4<f32>(rad, covered), ok);
            let y = select(0.0, dot(rad, vec3<f32>(0.2126, 0.7152, 0.0722)), ok);
            sum_sq += y * y;
            count(STAT_SAMPLES, 1u);
            done += 1u;
            fresh = true;
            shadow = false;
            ending = false;
        }
    }
    if COUNT_WORK && PP.stats != 0u {
        for (var k = 0u; k < STAT_COUNT; k++) {
            // 64-bit sums: a carry out of the low word goes to the high one.
            let old = atomicAdd(&stats[2u * k], st[k]);
            if old + st[k] < old { atomicAdd(&stats[2u * k + 1u], 1u); }
        }
    }
    let i = gid.y * P.size.x + gid.x;
    var acc = sum;
    var acc_sq = sum_sq;
    if PP.first_sample > 0u {
        acc += accum[i];
        acc_sq += moments[i];
    }
    accum[i] = acc;
    moments[i] = acc_sq;
    let avg = acc / f32(max(PP.first_sample + PP.samples, 1u));
    textureStore(out_hdr, vec2<i32>(px), avg);
    textureStore(out_ldr, vec2<i32>(px), tone_map(avg.rgb, P.sky_horizon.w));
}
