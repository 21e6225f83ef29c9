// supercell shaders, common part: NanoVDB traversal from storage buffers, trilinear
// sampling, transfer functions, and the acceleration grids' layout. `march.wgsl` (the
// ray-marcher) and `accel.wgsl` (the per-frame acceleration and shadow grids) follow it.
//
// The Rust side prepends a block of `const`s generated from `format::layout` (byte offsets
// of every NanoVDB field read here, grid type numbers, magic numbers) and from
// `render::params` (MAX_ATTRS, DECLARED_PARTS, PART_SHIFT_WORDS, MODE_*, FLAG_*, KIND_*: the
// encoding of the uniform block and of the bindings), so each has one source of truth.
// ATTR_CHANNELS (4 or MAX_ATTRS) and USED_PARTS (1, 2, 4, 8, .. up to the device's part
// count) say how much of that the pipeline walks: the renderer builds one per frame shape it meets, so a frame of few
// attributes and one part costs what it did before there were eight of each.
//
// A frame is bound as up to DECLARED_PARTS storage bindings ("parts", p0..), each at most
// 2^PART_SHIFT_WORDS words; a grid starts at a word of one part and runs on into the
// following ones, so neither a frame nor a grid is limited by the largest binding. Grids are
// addressed by 32-bit word (a grid may be up to 16 GiB), and every read goes through `ld`,
// which is bounds-checked: a corrupt or half-written grid gives wrong values, never a fault,
// and every loop has a fixed or budgeted trip count, so it never hangs either.
//
// The CPU reference renderer (src/render/cpu.rs) mirrors this file function by function;
// change both together.

const BAD: u32 = 0xffffffffu;
const INF: f32 = 3.0e38;
const PART_MASK_WORDS: u32 = (1u << PART_SHIFT_WORDS) - 1u;

struct Attr {
    range_lo: f32,
    range_inv: f32,
    extinction: f32,
    emission: f32,
    kind: u32,
    enabled: u32,
    tf_row: u32,
    shadow: u32,
}

// Where a channel's grid lies: its first word is word `offset` of part `part`.
struct GridBase {
    part: u32,
    offset: u32,
    words: u32,   // 0: no grid
    pad: u32,
}

struct Params {
    cam_pos: vec4<f32>,
    cam_fwd: vec4<f32>,     // w: tan(fov_y / 2), or half the view height (orthographic)
    cam_right: vec4<f32>,   // w: aspect (width / height)
    cam_up: vec4<f32>,
    light_dir: vec4<f32>,   // towards the light; w: Henyey-Greenstein g
    light_color: vec4<f32>, // w: multiple-scattering strength
    sky_zenith: vec4<f32>,  // w: ambient strength
    sky_horizon: vec4<f32>, // w: exposure
    ground: vec4<f32>,      // x: height, y: grid spacing, z: albedo, w: top of the scene
    size: vec2<u32>,
    mode: u32,
    flags: u32,
    dt: f32,
    max_steps: u32,
    t_cutoff: f32,
    iso_value: f32,
    iso_attr: u32,
    shadow_steps: u32,      // most steps of one shadow-grid march
    step_tau: f32,          // optical depth one adaptive step may span
    shadow_tau_max: f32,    // a shadow march stops at this optical depth
    frame_seed: u32,
    work_budget: u32,
    pixel_angle: f32,
    max_step_scale: u32,    // adaptive steps are at most this many base steps
    attrs: array<Attr, MAX_ATTRS>,
    grids: array<GridBase, MAX_ATTRS>,
    // Sort-last (FLAG_REGION): the world box this render draws, [lo, hi) (faces on the
    // domain's faces at ∓3e38), and per channel the whole frame's grid's index bbox, used in
    // place of the bound grid's (a brick of it) so that every layout stays the whole frame's.
    region_lo: vec4<f32>,
    region_hi: vec4<f32>,
    region_bmin: array<vec4<i32>, MAX_ATTRS>,
    region_bmax: array<vec4<i32>, MAX_ATTRS>,
}

@group(0) @binding(0) var<storage, read> P: Params;
@group(0) @binding(1) var<storage, read> tf: array<vec4<f32>>;
@group(0) @binding(2) var out_ldr: texture_storage_2d<rgba8unorm, write>;
@group(0) @binding(3) var out_hdr: texture_storage_2d<rgba32float, write>;
// The frame's parts p0, p1, .. (DECLARED_PARTS of them, generated on the Rust side: at least
// 8, more for frames that need them; unused ones are bound to a small empty buffer).
PART_DECLARATIONS

// Acceleration grids, rebuilt on the GPU when the grids or the look change (accel.wgsl):
// per channel, a dense grid of cells of 2^shift voxels over the grid's index bbox, each
// (min value, max value, mean extinction, max extinction over the cell and its 26
// neighbours); and a grid of sun transmittance at the cell centres of one reference channel.
struct ChannelAccel {
    org: vec3<i32>,   // first cell, in cells (index >> shift)
    shift: u32,
    dims: vec3<u32>,
    ok: u32,          // 0: no grid for this channel (nothing to skip or shadow with)
}
struct AccelInfo {
    channels: array<ChannelAccel, MAX_ATTRS>,
    shadow_ref: u32,  // channel whose cells carry the shadow grid; MAX_ATTRS: no shadows
    pad0: u32,
    pad1: u32,
    pad2: u32,
    // The sun grid's cells, in the reference channel's index space over its (widened) cells:
    // 2^k voxels along each axis, k per axis packed in `shift` (`sun_shifts`). Cubic voxels
    // get the reference's cells; where its voxels are longer along an axis, the sun cells
    // along it are as many times fewer voxels (down to 1), so that they are about as wide
    // in world units along every axis (as long as they fit ACCEL_CELLS).
    sun: ChannelAccel,
}

// The sun cells' shift (log2 of their voxels) along x, y and z.
fn sun_shifts(si: ChannelAccel) -> vec3<u32> {
    return (vec3<u32>(si.shift) >> vec3<u32>(0u, 8u, 16u)) & vec3<u32>(255u);
}

// The sun cells' size in voxels along x, y and z.
fn sun_cell_size(si: ChannelAccel) -> vec3<f32> {
    return vec3<f32>(vec3<u32>(1u) << sun_shifts(si));
}
@group(0) @binding(ACCEL_BINDING_CELLS) var<storage, ACCEL_ACCESS> accel: array<vec4<f32>>;
@group(0) @binding(ACCEL_BINDING_SUN) var<storage, ACCEL_ACCESS> sun_grid: array<f32>;
@group(0) @binding(ACCEL_BINDING_INFO) var<storage, ACCEL_ACCESS> ainfo: AccelInfo;

// Sort-last: whether world point `w` lies in the region this render draws (half-open).
fn in_region(w: vec3<f32>) -> bool {
    return all(w >= P.region_lo.xyz) && all(w < P.region_hi.xyz);
}

fn cell_linear(si: ChannelAccel, c: vec3<u32>) -> u32 {
    return c.x + si.dims.x * (c.y + si.dims.y * c.z);
}

// ---------------------------------------------------------------------------------------
// Bounds-checked reads
// ---------------------------------------------------------------------------------------

// Words of grid `a`.
fn words(a: u32) -> u32 {
    return P.grids[a].words;
}

// Word `w` of grid `a`, 0 past its end. The one accessor every grid read goes through:
// the grid's word w lies (base offset + w) words into the parts after its first one. The
// sum is split so that it never overflows: w may be up to 2^32 − 1.
// Parts from USED_PARTS on are not read (a pipeline is built per count of parts bound,
// rounded up to a power of two): their cases compile to nothing, so a frame of one part
// pays for one. The cases (one per declared part, `case k: { if k < USED_PARTS && o <
// arrayLength(&pk) { return pk[o]; } }`) are generated with the declarations.
fn ld(a: u32, w: u32) -> u32 {
    let g = P.grids[a];
    if w >= g.words { return 0u; }
    let x = g.offset + (w & PART_MASK_WORDS);
    let part = g.part + (w >> PART_SHIFT_WORDS) + (x >> PART_SHIFT_WORDS);
    let o = x & PART_MASK_WORDS;
    switch part {
PART_CASES
        default: {}
    }
    return 0u;
}

// Fields of a node (or the grid header) at word address `node`: `off` is the field's byte
// offset in the node (a multiple of 4 except for single bytes; checked on the Rust side).
fn fld(a: u32, node: u32, off: u32) -> u32 { return ld(a, node + (off >> 2u)); }
fn fld_f(a: u32, node: u32, off: u32) -> f32 { return bitcast<f32>(fld(a, node, off)); }
fn fld_i(a: u32, node: u32, off: u32) -> i32 { return bitcast<i32>(fld(a, node, off)); }
fn fld_u8(a: u32, node: u32, off: u32) -> u32 { return (fld(a, node, off) >> ((off & 3u) * 8u)) & 0xffu; }

fn finite(v: f32) -> bool { return (bitcast<u32>(v) & 0x7f800000u) != 0x7f800000u; }

// Words of a node of `size` bytes.
fn size_words(size: u32) -> u32 { return (size + 3u) >> 2u; }

// A child reference: a signed 64-bit byte offset `lo | hi << 32` from the node at word
// `base`. Returns the child's word address if it lies inside the grid, 32-byte aligned,
// with room for `size` bytes, else BAD. Offsets reach at most 16 GiB either way (a grid's
// word count is a u32).
fn rel(a: u32, base: u32, lo: u32, hi: u32, size: u32) -> u32 {
    let len = words(a);
    if (lo & 31u) != 0u || base > len { return BAD; }
    var r = BAD;
    if hi < 4u {
        let d = (lo >> 2u) | (hi << 30u);
        if d != 0u && d <= len - base { r = base + d; }
    } else if hi >= 0xfffffffcu {
        // Backward: the magnitude is the two's complement of hi:lo.
        let mlo = 0u - lo;
        let mhi = ~hi + select(0u, 1u, lo == 0u);
        let d = (mlo >> 2u) | (mhi << 30u);
        if mhi < 4u && d != 0u && d <= base { r = base - d; }
    }
    if r == BAD || len - r < size_words(size) || (r & 7u) != 0u { return BAD; }
    return r;
}

// ---------------------------------------------------------------------------------------
// Per-grid state: header facts, read once per ray, and the accessor's node cache
// ---------------------------------------------------------------------------------------

var<private> g_ok: array<bool, ATTR_CHANNELS>;
var<private> g_type: array<u32, ATTR_CHANNELS>;
var<private> g_root: array<u32, ATTR_CHANNELS>;
var<private> g_tiles: array<u32, ATTR_CHANNELS>;
var<private> g_bg: array<f32, ATTR_CHANNELS>;
var<private> g_bmin: array<vec3<i32>, ATTR_CHANNELS>;
var<private> g_bmax: array<vec3<i32>, ATTR_CHANNELS>;
var<private> g_inv0: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_inv1: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_inv2: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_vec: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_mat0: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_mat1: array<vec3<f32>, ATTR_CHANNELS>;
var<private> g_mat2: array<vec3<f32>, ATTR_CHANNELS>;

// Node addresses below are word addresses in the grid.
var<private> c_leaf: array<u32, ATTR_CHANNELS>;
var<private> c_leaf_org: array<vec3<i32>, ATTR_CHANNELS>;
var<private> c_lower: array<u32, ATTR_CHANNELS>;
var<private> c_lower_org: array<vec3<i32>, ATTR_CHANNELS>;
var<private> c_upper: array<u32, ATTR_CHANNELS>;
var<private> c_upper_org: array<vec3<i32>, ATTR_CHANNELS>;

// Work units spent by this ray (lookups and root-tile comparisons); the ray ends when it
// passes P.work_budget, so even a grid with a huge corrupt tile table cannot stall a frame.
var<private> work: u32;

// A value of the root/internal value type (f32, or f16 for Half grids) at word `w` (Half
// values sit in the low half of their word: their offsets are multiples of 4).
fn node_value(a: u32, w: u32) -> f32 {
    if g_type[a] == GRID_TYPE_HALF {
        return unpack2x16float(ld(a, w) & 0xffffu).x;
    }
    return bitcast<f32>(ld(a, w));
}

fn read_vec3f(a: u32, w: u32) -> vec3<f32> {
    return vec3<f32>(bitcast<f32>(ld(a, w)), bitcast<f32>(ld(a, w + 1u)), bitcast<f32>(ld(a, w + 2u)));
}

fn init_grid(a: u32) {
    g_ok[a] = false;
    c_leaf[a] = BAD;
    c_lower[a] = BAD;
    c_upper[a] = BAD;
    if P.attrs[a].enabled == 0u { return; }
    let m0 = ld(a, 0u);
    let m1 = ld(a, 1u);
    let magic = (m0 == MAGIC_NUMB_LO && m1 == MAGIC_NUMB_HI) || (m0 == MAGIC_GRID_LO && m1 == MAGIC_GRID_HI);
    let t = fld(a, 0u, GRID_OFF_GRID_TYPE);
    let typed = t == GRID_TYPE_FLOAT || t == GRID_TYPE_HALF || t == GRID_TYPE_FP4 || t == GRID_TYPE_FP8 || t == GRID_TYPE_FP16 || t == GRID_TYPE_FPN;
    if !magic || !typed { return; }
    g_type[a] = t;
    let tree = GRID_SIZE >> 2u;
    let root = rel(a, tree, fld(a, tree, TREE_OFF_NODE_OFFSET_ROOT), fld(a, tree, TREE_OFF_NODE_OFFSET_ROOT + 4u), ROOT_SIZE);
    if root == BAD { return; }
    g_root[a] = root;
    let room = (words(a) - root - (ROOT_SIZE >> 2u)) / (ROOT_TILE_SIZE >> 2u);
    g_tiles[a] = min(min(fld(a, root, ROOT_OFF_TABLE_SIZE), room), MAX_ROOT_TILES);
    g_bg[a] = node_value(a, root + (ROOT_OFF_BACKGROUND >> 2u));
    var bmin = vec3<i32>(fld_i(a, root, NODE_OFF_BBOX_MIN), fld_i(a, root, NODE_OFF_BBOX_MIN + 4u), fld_i(a, root, NODE_OFF_BBOX_MIN + 8u));
    var bmax = vec3<i32>(fld_i(a, root, NODE_OFF_BBOX_MAX), fld_i(a, root, NODE_OFF_BBOX_MAX + 4u), fld_i(a, root, NODE_OFF_BBOX_MAX + 8u));
    if (P.flags & FLAG_REGION) != 0u {
        // A brick of the whole grid (possibly empty): clip, cells and sun grid as the whole.
        bmin = P.region_bmin[a].xyz;
        bmax = P.region_bmax[a].xyz;
    }
    if any(bmin > bmax) { return; }
    g_bmin[a] = bmin;
    g_bmax[a] = bmax;
    let map = GRID_OFF_MAP >> 2u;
    g_inv0[a] = read_vec3f(a, map + (MAP_OFF_INVMATF >> 2u));
    g_inv1[a] = read_vec3f(a, map + (MAP_OFF_INVMATF >> 2u) + 3u);
    g_inv2[a] = read_vec3f(a, map + (MAP_OFF_INVMATF >> 2u) + 6u);
    g_vec[a] = read_vec3f(a, map + (MAP_OFF_VECF >> 2u));
    g_mat0[a] = read_vec3f(a, map + (MAP_OFF_MATF >> 2u));
    g_mat1[a] = read_vec3f(a, map + (MAP_OFF_MATF >> 2u) + 3u);
    g_mat2[a] = read_vec3f(a, map + (MAP_OFF_MATF >> 2u) + 6u);
    var fin = finite(g_bg[a]);
    for (var i = 0u; i < 3u; i++) {
        fin = fin && finite(g_inv0[a][i]) && finite(g_inv1[a][i]) && finite(g_inv2[a][i]) && finite(g_vec[a][i]);
        fin = fin && finite(g_mat0[a][i]) && finite(g_mat1[a][i]) && finite(g_mat2[a][i]);
    }
    g_ok[a] = fin;
}

// World → index (NanoVDB's matrices are row-major: index = invMat · (world − vec), so each
// component is a dot product with one stored row).
fn to_index(a: u32, w: vec3<f32>) -> vec3<f32> {
    let d = w - g_vec[a];
    return vec3<f32>(dot(g_inv0[a], d), dot(g_inv1[a], d), dot(g_inv2[a], d));
}
fn dir_to_index(a: u32, d: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(dot(g_inv0[a], d), dot(g_inv1[a], d), dot(g_inv2[a], d));
}
// Index → world: world = mat · index + vec.
fn to_world(a: u32, p: vec3<f32>) -> vec3<f32> {
    return vec3<f32>(dot(g_mat0[a], p), dot(g_mat1[a], p), dot(g_mat2[a], p)) + g_vec[a];
}

// ---------------------------------------------------------------------------------------
// Tree traversal with a cached read accessor
// ---------------------------------------------------------------------------------------

struct Look {
    value: f32,
    // 0: a leaf voxel; 1: a lower-node tile (8³); 2: an upper-node tile (128³);
    // 3: a root tile or the background (4096³).
    level: u32,
}

// Bit `n` of the mask at word address `mask`.
fn bit_at(a: u32, mask: u32, n: u32) -> bool {
    return ((ld(a, mask + (n >> 5u)) >> (n & 31u)) & 1u) != 0u;
}

// How one leaf stores its values, read once per leaf visit: where the values (or codes)
// start, their width and how a code becomes a value. A stencil inside one leaf then pays
// one type dispatch and one header read, not eight.
struct LeafCodec {
    // Word address of value 0.
    table: u32,
    // Bits per value: 32 (Float), 16 (Half), or the quantized leaf's code width (a power of
    // two, so no value straddles a word).
    bits: u32,
    // 0: Float, 1: Half, 2: quantized (value = code · quantum + minimum).
    kind: u32,
    quantum: f32,
    minimum: f32,
}

fn leaf_codec(a: u32, leaf: u32) -> LeafCodec {
    let t = g_type[a];
    if t == GRID_TYPE_FLOAT { return LeafCodec(leaf + (LEAF_FLOAT_OFF_TABLE >> 2u), 32u, 0u, 0.0, 0.0); }
    if t == GRID_TYPE_HALF { return LeafCodec(leaf + (LEAF_HALF_OFF_TABLE >> 2u), 16u, 1u, 0.0, 0.0); }
    var bits = 16u;
    if t == GRID_TYPE_FP4 { bits = 4u; }
    if t == GRID_TYPE_FP8 { bits = 8u; }
    if t == GRID_TYPE_FPN { bits = 1u << min(fld_u8(a, leaf, LEAF_OFF_FLAGS) >> 5u, 4u); }
    return LeafCodec(leaf + (LEAF_FP_OFF_CODES >> 2u), bits, 2u,
        fld_f(a, leaf, LEAF_FP_OFF_QUANTUM), fld_f(a, leaf, LEAF_FP_OFF_MINIMUM));
}

// The value at bit `bitpos` of the leaf's values, given the word holding it.
fn leaf_decode(c: LeafCodec, word: u32, bitpos: u32) -> f32 {
    if c.kind == 0u { return bitcast<f32>(word); }
    let code = (word >> (bitpos & 31u)) & ((1u << c.bits) - 1u);
    if c.kind == 1u { return unpack2x16float(code).x; }
    return f32(code) * c.quantum + c.minimum;
}

// Value `n` of a leaf: one load of the word holding it.
fn codec_value(a: u32, c: LeafCodec, n: u32) -> f32 {
    let bitpos = n * c.bits;
    return leaf_decode(c, ld(a, c.table + (bitpos >> 5u)), bitpos);
}

// Values `n` and `n + 1` of a leaf (`n`'s z below 7: a stencil's two corners along z), with
// one load where both lie in one word (every 16-bit or narrower pair at even z).
fn codec_pair(a: u32, c: LeafCodec, n: u32) -> vec2<f32> {
    let b0 = n * c.bits;
    let b1 = b0 + c.bits;
    let w0 = ld(a, c.table + (b0 >> 5u));
    var w1 = w0;
    if (b1 >> 5u) != (b0 >> 5u) { w1 = ld(a, c.table + (b1 >> 5u)); }
    return vec2<f32>(leaf_decode(c, w0, b0), leaf_decode(c, w1, b1));
}

// Value `n` of the leaf at word address `leaf`. One load of the word holding it; quantized
// leaves add their quantum and minimum. (Each read site here is inlined many times over, so
// the code keeps them few: lavapipe compiles every inlined copy.) It decodes as
// `leaf_codec` + `codec_value` do, written out: the tree walk calling those instead was
// part of a version that ran 15-35 % slower on the H200 (docs/PERFORMANCE.md, "Sixth
// round"); the GPU == CPU tests hold both decodings to the CPU reader.
fn leaf_value(a: u32, leaf: u32, n: u32) -> f32 {
    let t = g_type[a];
    var bits = 32u;
    var base = LEAF_FLOAT_OFF_TABLE;
    if t == GRID_TYPE_HALF {
        bits = 16u;
        base = LEAF_HALF_OFF_TABLE;
    } else if t != GRID_TYPE_FLOAT {
        base = LEAF_FP_OFF_CODES;
        bits = 16u;
        if t == GRID_TYPE_FP4 { bits = 4u; }
        if t == GRID_TYPE_FP8 { bits = 8u; }
        if t == GRID_TYPE_FPN { bits = 1u << min(fld_u8(a, leaf, LEAF_OFF_FLAGS) >> 5u, 4u); }
    }
    let bitpos = n * bits;
    let word = ld(a, leaf + (base >> 2u) + (bitpos >> 5u));
    if t == GRID_TYPE_FLOAT { return bitcast<f32>(word); }
    let code = (word >> (bitpos & 31u)) & ((1u << bits) - 1u);
    if t == GRID_TYPE_HALF { return unpack2x16float(code).x; }
    return f32(code) * fld_f(a, leaf, LEAF_FP_OFF_QUANTUM) + fld_f(a, leaf, LEAF_FP_OFF_MINIMUM);
}

fn leaf_index(ijk: vec3<i32>) -> u32 {
    let l = vec3<u32>(ijk & vec3<i32>(7));
    return (l.x << 6u) | (l.y << 3u) | l.z;
}

// The value at `ijk`, starting from the deepest cached node that contains it, and the level
// it was found at. A single descent (root → upper → lower → leaf), written without nested
// calls so that it is one block of code.
fn lookup(a: u32, ijk: vec3<i32>) -> Look {
    work += 1u;
    var leaf = BAD;
    var node = BAD;
    var level = 3u;
    // Where the value lives when it is not a leaf voxel (word address): background by
    // default.
    var vaddr = g_root[a] + (ROOT_OFF_BACKGROUND >> 2u);
    if c_leaf[a] != BAD && all((ijk & vec3<i32>(-8)) == c_leaf_org[a]) {
        leaf = c_leaf[a];
    } else if c_lower[a] != BAD && all((ijk & vec3<i32>(-128)) == c_lower_org[a]) {
        node = c_lower[a];
        level = 1u;
    } else if c_upper[a] != BAD && all((ijk & vec3<i32>(-4096)) == c_upper_org[a]) {
        node = c_upper[a];
        level = 2u;
    } else {
        // NanoVDB's 64-bit root key: x:21 | y:21 | z:21 bits of (coordinate as u32) >> 12.
        let k = bitcast<vec3<u32>>(ijk) >> vec3<u32>(12u);
        let key_lo = k.z | (k.y << 21u);
        let key_hi = (k.y >> 11u) | (k.x << 10u);
        let root = g_root[a];
        for (var i = 0u; i < g_tiles[a]; i++) {
            work += 1u;
            if work > P.work_budget { break; }
            let tile = root + (ROOT_SIZE >> 2u) + i * (ROOT_TILE_SIZE >> 2u);
            if fld(a, tile, ROOT_TILE_OFF_KEY) == key_lo && fld(a, tile, ROOT_TILE_OFF_KEY + 4u) == key_hi {
                vaddr = tile + (ROOT_TILE_OFF_VALUE >> 2u);
                let lo = fld(a, tile, ROOT_TILE_OFF_CHILD);
                let hi = fld(a, tile, ROOT_TILE_OFF_CHILD + 4u);
                if lo != 0u || hi != 0u {
                    node = rel(a, root, lo, hi, UPPER_SIZE);
                    if node != BAD {
                        level = 2u;
                        c_upper[a] = node;
                        c_upper_org[a] = ijk & vec3<i32>(-4096);
                    }
                }
                break;
            }
        }
    }
    if level == 2u {
        let l = vec3<u32>(ijk & vec3<i32>(4095)) >> vec3<u32>(7u);
        let n = (l.x << 10u) | (l.y << 5u) | l.z;
        let entry = node + (UPPER_OFF_TABLE >> 2u) + n * (TABLE_STRIDE >> 2u);
        vaddr = entry;
        if bit_at(a, node + (UPPER_OFF_CHILD_MASK >> 2u), n) {
            node = rel(a, node, ld(a, entry), ld(a, entry + 1u), LOWER_SIZE);
            if node != BAD {
                level = 1u;
                c_lower[a] = node;
                c_lower_org[a] = ijk & vec3<i32>(-128);
            }
        }
    }
    if level == 1u {
        let l = vec3<u32>(ijk & vec3<i32>(127)) >> vec3<u32>(3u);
        let n = (l.x << 8u) | (l.y << 4u) | l.z;
        let entry = node + (LOWER_OFF_TABLE >> 2u) + n * (TABLE_STRIDE >> 2u);
        vaddr = entry;
        if bit_at(a, node + (LOWER_OFF_CHILD_MASK >> 2u), n) {
            leaf = rel(a, node, ld(a, entry), ld(a, entry + 1u), LEAF_MIN_SIZE);
            if leaf != BAD {
                c_leaf[a] = leaf;
                c_leaf_org[a] = ijk & vec3<i32>(-8);
            }
        }
    }
    if leaf != BAD {
        return Look(leaf_value(a, leaf, leaf_index(ijk)), 0u);
    }
    return Look(node_value(a, vaddr), level);
}

// ---------------------------------------------------------------------------------------
// Trilinear sampling with constant-region detection
// ---------------------------------------------------------------------------------------

struct Smp {
    value: f32,
    // Whether every trilinear stencil in the region [org, org + size − 1) reads only this
    // constant tile value; then the ray may skip to the region's exit.
    constant: bool,
    org: vec3<i32>,
    size: i32,
}

fn region_shift(level: u32) -> u32 {
    switch level {
        case 1u: { return 3u; }
        case 2u: { return 7u; }
        default: { return 12u; }
    }
}

fn trilerp(v: array<f32, 8>, f: vec3<f32>) -> f32 {
    // v index: dx * 4 + dy * 2 + dz; interpolate along z, then y, then x.
    let a00 = v[0] + (v[1] - v[0]) * f.z;
    let a01 = v[2] + (v[3] - v[2]) * f.z;
    let a10 = v[4] + (v[5] - v[4]) * f.z;
    let a11 = v[6] + (v[7] - v[6]) * f.z;
    let b0 = a00 + (a01 - a00) * f.y;
    let b1 = a10 + (a11 - a10) * f.y;
    return b0 + (b1 - b0) * f.x;
}

// The constant region of corner 0's lookup `l` when every trilinear stencil of `p` reads only
// its tile value (`constant`), else a sample marked not constant.
fn tile_region(l: Look, i0: vec3<i32>, p: vec3<f32>) -> Smp {
    if l.level > 0u {
        let s = 1 << region_shift(l.level);
        let org = i0 & vec3<i32>(-s);
        if all(p < vec3<f32>(org + vec3<i32>(s - 1))) {
            return Smp(l.value, true, org, s);
        }
    }
    return Smp(l.value, false, i0, 0);
}

fn sample(a: u32, p: vec3<f32>) -> Smp {
    let fp = floor(p);
    let i0 = vec3<i32>(fp);
    let f = p - fp;
    var v: array<f32, 8>;
    // Corner c = (dx, dy, dz) = (c / 4, c / 2 % 2, c % 2), trilerp's order: c and c + 1 are
    // a column's two corners along z. Corner 0 is looked up; when it lies in a leaf, the
    // corners inside that leaf are read from it directly, two along z at a time where both
    // lie in it, and only the others go through `lookup` (which then keeps their leaf
    // cached: a stencil across a leaf's z face walked the tree for every other corner when
    // each corner was looked up in turn). One call site of each read: every site is
    // inlined, and a larger kernel ran slower on the H200.
    var leaf = BAD;
    var org = vec3<i32>(0);
    var codec = LeafCodec(0u, 32u, 0u, 0.0, 0.0);
    let z_inside = (i0.z & 7) < 7;
    for (var c = 0u; c < 8u; c++) {
        let ijk = i0 + vec3<i32>(vec3<u32>(c >> 2u, (c >> 1u) & 1u, c & 1u));
        if leaf != BAD && all((ijk & vec3<i32>(-8)) == org) {
            if z_inside && (c & 1u) == 0u {
                let pair = codec_pair(a, codec, leaf_index(ijk));
                v[c] = pair.x;
                v[c + 1u] = pair.y;
                c++;
            } else {
                v[c] = codec_value(a, codec, leaf_index(ijk));
            }
            continue;
        }
        let l = lookup(a, ijk);
        v[c] = l.value;
        if c == 0u {
            let r = tile_region(l, i0, p);
            if r.constant {
                return r;
            }
            if l.level == 0u {
                leaf = c_leaf[a];
                org = c_leaf_org[a];
                codec = leaf_codec(a, leaf);
            }
        }
    }
    return Smp(trilerp(v, f), false, i0, 0);
}

// ---------------------------------------------------------------------------------------
// Transfer functions, rays, lighting
// ---------------------------------------------------------------------------------------

// Colour (rgb) and opacity (a) of `value` under attribute `a`'s transfer function: 256
// entries over the attribute's value range, linearly interpolated.
fn tf_eval(a: u32, value: f32) -> vec4<f32> {
    if !finite(value) { return vec4<f32>(0.0); }
    let at = P.attrs[a];
    return tf_u(a, clamp((value - at.range_lo) * at.range_inv, 0.0, 1.0));
}

// The transfer function at normalized value `u` (0..1).
fn tf_u(a: u32, u: f32) -> vec4<f32> {
    let x = u * f32(TF_SIZE - 1u);
    let i = min(u32(x), TF_SIZE - 2u);
    let fr = x - f32(i);
    let base = P.attrs[a].tf_row * TF_SIZE + i;
    return mix(tf[base], tf[base + 1u], fr);
}

fn norm_value(a: u32, value: f32) -> f32 {
    if !finite(value) { return 0.0; }
    let at = P.attrs[a];
    return clamp((value - at.range_lo) * at.range_inv, 0.0, 1.0);
}

fn safe_inv(d: vec3<f32>) -> vec3<f32> {
    let tiny = select(vec3<f32>(-1e-20), vec3<f32>(1e-20), d >= vec3<f32>(0.0));
    return 1.0 / select(d, tiny, abs(d) < vec3<f32>(1e-20));
}

// Entry and exit of the ray o + t·d through the box [lo, hi].
fn ray_box(o: vec3<f32>, inv_d: vec3<f32>, lo: vec3<f32>, hi: vec3<f32>) -> vec2<f32> {
    let t0 = (lo - o) * inv_d;
    let t1 = (hi - o) * inv_d;
    let tn = min(t0, t1);
    let tx = max(t0, t1);
    return vec2<f32>(max(max(tn.x, tn.y), tn.z), min(min(tx.x, tx.y), tx.z));
}

// Where the ray o + t·d (index space) leaves the constant region of `s`.
fn region_exit(s: Smp, o: vec3<f32>, inv_d: vec3<f32>) -> f32 {
    let lo = vec3<f32>(s.org);
    let hi = vec3<f32>(s.org + vec3<i32>(s.size - 1));
    return ray_box(o, inv_d, lo, hi).y;
}

