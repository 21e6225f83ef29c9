//! Test grids for the renderer tests: every value type the shader decodes, negative
//! coordinates, and tiles at every level (lower 8³, upper 128³, root 4096³).
#![allow(dead_code)]

use supercell::format::layout::{self as l};
use supercell::format::{
    BuildOptions, ChecksumMode, Grid, GridType, LEAF_DIM, LeafBrick, SparseVolume, build_grid,
};
use supercell::render::{
    AttributeView, Colormap, GpuContext, Image, Mode, Renderer, TransferFunction, View,
    smallest_voxel_edge,
};

/// Value of the lower-node tile (8³, active).
pub const LOWER_TILE_VALUE: f32 = 0.9;
/// Value of the upper-node tile (128³, inactive, partly inside the bbox).
pub const UPPER_TILE_VALUE: f32 = 0.5;
/// Value of the root tile (4096³, inactive, partly inside the bbox).
pub const ROOT_TILE_VALUE: f32 = 0.3;
/// Origin of the brick left out to make room for the lower-node tile.
pub const LOWER_TILE_ORIGIN: [i32; 3] = [144, -24, -24];

fn smooth(p: [f32; 3]) -> f32 {
    let c = [128.0, 0.0, 0.0];
    let d2: f32 = (0..3).map(|i| (p[i] - c[i]).powi(2)).sum();
    let blob = (-d2 / (2.0 * 14.0 * 14.0)).exp();
    let ripple = 0.5 + 0.5 * (p[0] * 0.35).sin() * (p[1] * 0.27 + 1.0).cos() * (p[2] * 0.31).sin();
    (blob * (0.55 + 0.45 * ripple)).clamp(0.0, 1.0)
}

/// A volume over index x ∈ [104, 152), y, z ∈ [−24, 24) (crossing lower-node, upper-node
/// and root-key boundaries), with holes where the tiles go: no data at x ≥ 128, y ≥ 0,
/// z ≥ 0 (upper-node tile), none at y < 0, z ≥ 0 (root tile), and one brick missing at
/// [`LOWER_TILE_ORIGIN`] (lower-node tile). Voxels below 0.04 are inactive.
pub fn test_volume() -> SparseVolume {
    let mut bricks = Vec::new();
    for bx in (104..152).step_by(8) {
        for by in (-24..24).step_by(8) {
            for bz in (-24..24).step_by(8) {
                let o = [bx, by, bz];
                // Holes: the upper-node tile's region (x ≥ 128, y ≥ 0, z ≥ 0), the root
                // tile's (y < 0, z ≥ 0), and the lower-node tile's brick.
                let upper_hole = bx >= 128 && by >= 0;
                let root_hole = by < 0;
                if (bz >= 0 && (upper_hole || root_hole)) || o == LOWER_TILE_ORIGIN {
                    continue;
                }
                let mut b = LeafBrick::filled(o, 0.0);
                for x in 0..LEAF_DIM {
                    for y in 0..LEAF_DIM {
                        for z in 0..LEAF_DIM {
                            let p = [
                                (bx + x as i32) as f32,
                                (by + y as i32) as f32,
                                (bz + z as i32) as f32,
                            ];
                            let v = smooth(p);
                            if v >= 0.04 {
                                b.set_active(LeafBrick::index(x, y, z), v);
                            }
                        }
                    }
                }
                bricks.push(b);
            }
        }
    }
    SparseVolume {
        background: 0.0,
        bricks,
    }
}

/// Build options of the test grids: a non-trivial index→world map.
pub fn options(t: GridType) -> BuildOptions {
    BuildOptions {
        name: format!("test_{t:?}"),
        grid_type: t,
        voxel_size: [0.25; 3],
        world_origin: [-3.0, 5.0, 1.5],
        fpn_tolerance: 0.002,
        checksum: ChecksumMode::Disabled,
        ..Default::default()
    }
}

fn rd32(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn wr32(b: &mut [u8], o: usize, v: u32) {
    b[o..o + 4].copy_from_slice(&v.to_le_bytes());
}
/// The little-endian `u64` at byte `o` of `b`.
pub fn rd64(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn wr64(b: &mut [u8], o: usize, v: u64) {
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}
fn set_bit(b: &mut [u8], mask: usize, n: usize) {
    b[mask + n / 8] |= 1 << (n % 8);
}
fn bit(b: &[u8], mask: usize, n: usize) -> bool {
    b[mask + n / 8] >> (n % 8) & 1 == 1
}

const TREE: usize = l::GRID_SIZE as usize;

fn tree_off(b: &[u8], i: usize) -> usize {
    TREE + rd64(b, TREE + 8 * i) as usize
}

/// Adds the three tiles of [`test_volume`] to a Float or Fp* grid (node values are f32).
pub fn add_tiles(mut g: Vec<u8>) -> Vec<u8> {
    let lay = l::layout(GridType::Float).unwrap();
    let root = tree_off(&g, 3);
    // Lower-node tile: the lower node holding LOWER_TILE_ORIGIN, entry of that leaf region.
    let lowers = tree_off(&g, 1);
    let nlower = rd32(&g, TREE + l::TREE_OFF_NODE_COUNT_LOWER as usize) as usize;
    let lo_org = [128, -128, -128];
    let mut done_lower = false;
    for i in 0..nlower {
        let node = lowers + i * lay.lower.size as usize;
        let org: Vec<i32> = (0..3)
            .map(|k| rd32(&g, node + 4 * k) as i32 & !127)
            .collect();
        if org == lo_org {
            let o = LOWER_TILE_ORIGIN;
            let n = ((((o[0] & 127) >> 3) << 8) | (((o[1] & 127) >> 3) << 4) | ((o[2] & 127) >> 3))
                as usize;
            assert!(!bit(&g, node + lay.lower.off_child_mask as usize, n));
            set_bit(&mut g, node + l::INTERNAL_OFF_VALUE_MASK as usize, n);
            let e = node + lay.lower.off_table as usize + 8 * n;
            wr64(&mut g, e, 0);
            wr32(&mut g, e, LOWER_TILE_VALUE.to_bits());
            done_lower = true;
        }
    }
    assert!(done_lower, "no lower node at {lo_org:?}");
    let c = TREE + l::TREE_OFF_TILE_COUNT_LOWER as usize;
    let v = rd32(&g, c);
    wr32(&mut g, c, v + 1);
    // Upper-node tile (inactive): the upper node of the +++ root region, lower region
    // [128, 256) × [0, 128) × [0, 128).
    let uppers = tree_off(&g, 2);
    let nupper = rd32(&g, TREE + l::TREE_OFF_NODE_COUNT_UPPER as usize) as usize;
    let mut done_upper = false;
    for i in 0..nupper {
        let node = uppers + i * lay.upper.size as usize;
        let org: Vec<i32> = (0..3).map(|k| rd32(&g, node + 4 * k) as i32).collect();
        if org.iter().all(|&v| v >= 0) {
            let n = 1 << 10;
            assert!(!bit(&g, node + lay.upper.off_child_mask as usize, n));
            let e = node + lay.upper.off_table as usize + 8 * n;
            wr64(&mut g, e, 0);
            wr32(&mut g, e, UPPER_TILE_VALUE.to_bits());
            done_upper = true;
        }
    }
    assert!(done_upper, "no upper node in the +++ region");
    // Root tile (inactive value tile) for key region x ≥ 0, y < 0, z ≥ 0: appended to the
    // table, which shifts every node after it by one tile.
    let ts = lay.root.tile_size as usize;
    let count = rd32(&g, root + l::ROOT_OFF_TABLE_SIZE as usize) as usize;
    let at = root + lay.root.size as usize + count * ts;
    for t in 0..count {
        let tile = root + lay.root.size as usize + t * ts;
        let child = rd64(&g, tile + 8);
        if child != 0 {
            wr64(&mut g, tile + 8, child + ts as u64);
        }
    }
    let mut tile = vec![0u8; ts];
    let key = l::coord_to_key([0, -1, 0]);
    tile[..8].copy_from_slice(&key.to_le_bytes());
    tile[lay.root.tile_off_value as usize..][..4]
        .copy_from_slice(&ROOT_TILE_VALUE.to_bits().to_le_bytes());
    g.splice(at..at, tile);
    wr32(
        &mut g,
        root + l::ROOT_OFF_TABLE_SIZE as usize,
        (count + 1) as u32,
    );
    for i in 0..3 {
        let o = TREE + 8 * i;
        let v = rd64(&g, o);
        if v != 0 {
            wr64(&mut g, o, v + ts as u64);
        }
    }
    let size = g.len() as u64;
    wr64(&mut g, l::GRID_OFF_GRID_SIZE as usize, size);
    Grid::parse(&g).expect("tiled grid parses");
    g
}

/// IEEE binary16 from f32, round to nearest even.
pub fn f32_to_half(v: f32) -> u16 {
    let b = v.to_bits();
    let sign = ((b >> 16) & 0x8000) as u16;
    let exp = ((b >> 23) & 0xff) as i32;
    let man = b & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = man | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = m >> shift;
        let rem = m & ((1 << shift) - 1);
        let mid = 1 << (shift - 1);
        let r = if rem > mid || (rem == mid && half & 1 == 1) {
            half + 1
        } else {
            half
        };
        return sign | r as u16;
    }
    let half = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    let r = if rem > 0x1000 || (rem == 0x1000 && half & 1 == 1) {
        half + 1
    } else {
        half
    };
    sign | r as u16
}

fn f32_at(b: &[u8], o: usize) -> f32 {
    f32::from_bits(rd32(b, o))
}

/// Converts a Float grid (possibly with tiles) into a Half grid: values and node
/// statistics become binary16, leaves shrink from 2144 to 1120 bytes.
pub fn to_half(src: &[u8]) -> Vec<u8> {
    let f = l::layout(GridType::Float).unwrap();
    let h = l::layout(GridType::Half).unwrap();
    assert_eq!(
        rd32(src, l::GRID_OFF_GRID_TYPE as usize),
        GridType::Float as u32
    );
    let leaf0 = tree_off(src, 0);
    let nleaf = rd32(src, TREE + l::TREE_OFF_NODE_COUNT_LEAF as usize) as usize;
    let mut g = src[..leaf0].to_vec();
    g.resize(leaf0 + nleaf * h.leaf.size as usize, 0);
    let half_at = |g: &mut Vec<u8>, o: usize, v: f32| {
        g[o..o + 2].copy_from_slice(&f32_to_half(v).to_le_bytes());
    };
    // Root: background and min/max as half, then the f32 average and deviation.
    let root = tree_off(src, 3);
    let (bg, mn, mx, av, sd) = (
        f32_at(src, root + f.root.off_background as usize),
        f32_at(src, root + f.root.off_min as usize),
        f32_at(src, root + f.root.off_max as usize),
        f32_at(src, root + f.root.off_avg as usize),
        f32_at(src, root + f.root.off_stddev as usize),
    );
    g[root + 28..root + h.root.size as usize].fill(0);
    half_at(&mut g, root + h.root.off_background as usize, bg);
    half_at(&mut g, root + h.root.off_min as usize, mn);
    half_at(&mut g, root + h.root.off_max as usize, mx);
    wr32(&mut g, root + h.root.off_avg as usize, av.to_bits());
    wr32(&mut g, root + h.root.off_stddev as usize, sd.to_bits());
    let count = rd32(src, root + l::ROOT_OFF_TABLE_SIZE as usize) as usize;
    for t in 0..count {
        let tile = root + f.root.size as usize + t * f.root.tile_size as usize;
        if rd64(src, tile + 8) == 0 {
            let v = f32_at(src, tile + f.root.tile_off_value as usize);
            g[tile + 20..tile + 24].fill(0);
            half_at(&mut g, tile + h.root.tile_off_value as usize, v);
        }
    }
    // Internal nodes: statistics and tile values; lower nodes' leaf offsets move.
    for (level, nl, hl) in [(2usize, f.upper, h.upper), (1, f.lower, h.lower)] {
        let first = tree_off(src, level);
        let n = rd32(src, TREE + [0, 36, 40][level]) as usize;
        for i in 0..n {
            let node = first + i * nl.size as usize;
            let stats: Vec<f32> = [nl.off_min, nl.off_max, nl.off_avg, nl.off_stddev]
                .iter()
                .map(|&o| f32_at(src, node + o as usize))
                .collect();
            g[node + nl.off_min as usize..node + nl.off_table as usize].fill(0);
            half_at(&mut g, node + hl.off_min as usize, stats[0]);
            half_at(&mut g, node + hl.off_max as usize, stats[1]);
            wr32(&mut g, node + hl.off_avg as usize, stats[2].to_bits());
            wr32(&mut g, node + hl.off_stddev as usize, stats[3].to_bits());
            for e in 0..nl.table_count() as usize {
                let at = node + nl.off_table as usize + 8 * e;
                if bit(src, node + nl.off_child_mask as usize, e) {
                    if level == 1 {
                        let old = node as u64 + rd64(src, at);
                        let idx = (old as usize - leaf0) / f.leaf.size as usize;
                        let new = leaf0 + idx * h.leaf.size as usize;
                        wr64(&mut g, at, (new - node) as u64);
                    }
                } else {
                    let v = f32_at(src, at);
                    wr64(&mut g, at, 0);
                    half_at(&mut g, at, v);
                }
            }
        }
    }
    for i in 0..nleaf {
        let s = leaf0 + i * f.leaf.size as usize;
        let d = leaf0 + i * h.leaf.size as usize;
        g[d..d + 80].copy_from_slice(&src[s..s + 80]);
        half_at(
            &mut g,
            d + h.leaf.off_min as usize,
            f32_at(src, s + f.leaf.off_min as usize),
        );
        half_at(
            &mut g,
            d + h.leaf.off_max as usize,
            f32_at(src, s + f.leaf.off_max as usize),
        );
        wr32(
            &mut g,
            d + h.leaf.off_avg as usize,
            rd32(src, s + f.leaf.off_avg as usize),
        );
        wr32(
            &mut g,
            d + h.leaf.off_stddev as usize,
            rd32(src, s + f.leaf.off_stddev as usize),
        );
        for n in 0..512 {
            let v = f32_at(src, s + f.leaf.off_table as usize + 4 * n);
            half_at(&mut g, d + h.leaf.off_table as usize + 2 * n, v);
        }
    }
    wr32(
        &mut g,
        l::GRID_OFF_GRID_TYPE as usize,
        GridType::Half as u32,
    );
    let size = g.len() as u64;
    wr64(&mut g, l::GRID_OFF_GRID_SIZE as usize, size);
    Grid::parse(&g).expect("half grid parses");
    g
}

/// The test grid of type `t` (Float, Half, Fp4, Fp8, Fp16, FpN), with tiles when asked.
pub fn test_grid(t: GridType, tiles: bool) -> Vec<u8> {
    let vol = test_volume();
    let build = if t == GridType::Half {
        GridType::Float
    } else {
        t
    };
    let mut g = build_grid(&vol, &options(build)).expect("test grid builds");
    if tiles {
        g = add_tiles(g);
    }
    if t == GridType::Half {
        g = to_half(&g);
    }
    g
}

/// A view of `grid`'s world bbox with one attribute styled by `preset`.
pub fn view_for(grid: &Grid<'_>, presets: &[&str], w: u32, h: u32) -> View {
    let b = grid.world_bbox();
    let bbox = [b[0].map(|v| v as f32), b[1].map(|v| v as f32)];
    let extent = (0..3)
        .map(|i| bbox[1][i] - bbox[0][i])
        .fold(0.0f32, f32::max);
    let attrs = presets
        .iter()
        .map(|p| {
            Some(AttributeView {
                enabled: true,
                tf: TransferFunction::preset(p, [0.0, 1.0], extent),
            })
        })
        .collect();
    let mut v = View::new(
        bbox,
        smallest_voxel_edge(grid.voxel_size()).expect("a positive voxel size"),
        attrs,
        w as f32 / h as f32,
    );
    v.settings.max_steps = 4096;
    v
}

/// The headless device and one renderer (pipeline creation is slow on lavapipe).
pub struct TestGpu {
    /// Device and queue.
    pub ctx: GpuContext,
    /// The renderer.
    pub r: Renderer,
}

impl TestGpu {
    /// Renders `grids` (each its own buffer) with `view`.
    pub fn render(&mut self, grids: &[&[u8]], view: &View, w: u32, h: u32) -> Image {
        self.bind(grids);
        self.r.render(view, w, h).expect("render");
        self.r.read_image().expect("read back")
    }

    /// Binds `grids`, each its own buffer, grid i to channel i (the renderer keeps the
    /// buffers alive while they are bound).
    pub fn bind(&mut self, grids: &[&[u8]]) {
        let bufs: Vec<wgpu::Buffer> = grids
            .iter()
            .map(|g| supercell::render::upload_slot(&self.ctx.device, &self.ctx.queue, g))
            .collect();
        let slices: Vec<_> = bufs
            .iter()
            .zip(grids)
            .map(|(b, g)| {
                Some(supercell::render::GridSlice {
                    buffer: b,
                    offset: 0,
                    size: g.len() as u64,
                })
            })
            .collect();
        self.r.set_grids(&slices).expect("bind");
    }
}

/// The headless device, or `None` (with a note) when this machine has none: the GPU tests
/// then pass vacuously unless `SUPERCELL_REQUIRE_GPU` is set (CI sets it).
pub fn gpu() -> Option<TestGpu> {
    match GpuContext::headless() {
        Ok(ctx) => {
            eprintln!("rendering on {}", ctx.describe());
            let r = Renderer::new(&ctx.device, &ctx.queue).expect("pipeline");
            Some(TestGpu { ctx, r })
        }
        Err(e) => {
            if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                panic!("no GPU adapter and SUPERCELL_REQUIRE_GPU is set: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

/// Where test images go (`target/render-tests`, or `SUPERCELL_TEST_OUT`).
pub fn out_dir() -> std::path::PathBuf {
    let d = std::env::var_os("SUPERCELL_TEST_OUT")
        .map(Into::into)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/render-tests")
        });
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Adds `d` to the little-endian `u64` at byte `o` of `b`.
pub fn add64(b: &mut [u8], o: usize, d: u64) {
    let v = rd64(b, o).wrapping_add(d);
    b[o..o + 8].copy_from_slice(&v.to_le_bytes());
}

/// `grid` with `gap` zero bytes between its root and its first upper node, so that every
/// node below the root lies `gap` bytes further on: the tree's node offsets, the root
/// tiles' child offsets and the grid size move by `gap`. The zeros are never written
/// (`vec![0; n]` maps untouched pages), so a grid of many GiB costs little memory.
pub fn padded(grid: &[u8], gap: u64) -> Vec<u8> {
    assert_eq!(gap % 4096, 0);
    let tree = l::GRID_SIZE as usize;
    let root = tree + rd64(grid, tree + l::TREE_OFF_NODE_OFFSET_ROOT as usize) as usize;
    let upper = tree + rd64(grid, tree + l::TREE_OFF_NODE_OFFSET_UPPER as usize) as usize;
    let blind = rd64(grid, l::GRID_OFF_BLIND_METADATA_OFFSET as usize);
    let blind_count = u32::from_le_bytes(
        grid[l::GRID_OFF_BLIND_METADATA_COUNT as usize..][..4]
            .try_into()
            .unwrap(),
    );
    let mut out = vec![0u8; grid.len() + gap as usize];
    out[..upper].copy_from_slice(&grid[..upper]);
    out[upper + gap as usize..].copy_from_slice(&grid[upper..]);
    for off in [
        l::TREE_OFF_NODE_OFFSET_LEAF,
        l::TREE_OFF_NODE_OFFSET_LOWER,
        l::TREE_OFF_NODE_OFFSET_UPPER,
    ] {
        add64(&mut out, tree + off as usize, gap);
    }
    let lay = l::layout(GridType::Float).unwrap();
    let tiles = u32::from_le_bytes(
        grid[root + l::ROOT_OFF_TABLE_SIZE as usize..][..4]
            .try_into()
            .unwrap(),
    ) as usize;
    for i in 0..tiles {
        let child = root
            + lay.root.size as usize
            + i * lay.root.tile_size as usize
            + l::ROOT_TILE_OFF_CHILD as usize;
        if rd64(&out, child) != 0 {
            add64(&mut out, child, gap);
        }
    }
    add64(&mut out, l::GRID_OFF_GRID_SIZE as usize, gap);
    if blind_count > 0 && blind as usize >= upper {
        add64(&mut out, l::GRID_OFF_BLIND_METADATA_OFFSET as usize, gap);
    }
    out
}

/// The `supercell` binary: `SUPERCELL_BIN` on the GPU machine, where test binaries travel
/// without the build tree, else the one cargo built.
#[allow(dead_code)]
pub fn supercell_command() -> std::process::Command {
    std::process::Command::new(
        std::env::var_os("SUPERCELL_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_supercell").into()),
    )
}

/// A box of density 1 over index [0, `n`)³ (`n` a multiple of 8), each voxel `voxel` world
/// units wide: the path tracer's tests' medium.
pub fn solid_box_grid(n: i32, voxel: f32) -> Vec<u8> {
    let mut origins = Vec::new();
    for bx in (0..n).step_by(8) {
        for by in (0..n).step_by(8) {
            for bz in (0..n).step_by(8) {
                origins.push([bx, by, bz]);
            }
        }
    }
    solid_bricks_grid(&origins, voxel)
}

/// Leaves of density 1 at `origins` (multiples of 8), each voxel `voxel` world units wide.
pub fn solid_bricks_grid(origins: &[[i32; 3]], voxel: f32) -> Vec<u8> {
    let bricks = origins
        .iter()
        .map(|&o| {
            let mut b = LeafBrick::filled(o, 0.0);
            for i in 0..LEAF_DIM * LEAF_DIM * LEAF_DIM {
                b.set_active(i, 1.0);
            }
            b
        })
        .collect();
    grid_of_bricks("box", bricks, voxel)
}

/// A Float grid named `name` of `bricks` (background 0), each voxel `voxel` world units wide.
pub fn grid_of_bricks(name: &str, bricks: Vec<LeafBrick>, voxel: f32) -> Vec<u8> {
    grid_of_scaled_bricks(name, bricks, [f64::from(voxel); 3])
}

/// A Float grid named `name` of `bricks` (background 0), its voxels `voxel` world units
/// along x, y and z, index (0, 0, 0) at the world origin.
pub fn grid_of_scaled_bricks(name: &str, bricks: Vec<LeafBrick>, voxel: [f64; 3]) -> Vec<u8> {
    let vol = SparseVolume {
        background: 0.0,
        bricks,
    };
    let opts = BuildOptions {
        name: name.into(),
        voxel_size: voxel,
        checksum: ChecksumMode::Disabled,
        ..Default::default()
    };
    build_grid(&vol, &opts).unwrap()
}

/// The path tracer's view of `grid`: one attribute of constant grey `srgb_grey` (opacity
/// rising linearly to 1 at value 1) and `extinction`, framed for `width` × `height`.
pub fn grey_path_view(
    grid: &[u8],
    voxel: f32,
    srgb_grey: f32,
    extinction: f32,
    width: u32,
    height: u32,
) -> View {
    let g = Grid::parse(grid).unwrap();
    let b = g.world_bbox();
    let bbox = [b[0].map(|v| v as f32), b[1].map(|v| v as f32)];
    let tf = TransferFunction {
        range: [0.0, 1.0],
        colormap: Colormap::Stops(vec![(0.0, [srgb_grey; 3]), (1.0, [srgb_grey; 3])]),
        opacity: vec![(0.0, 0.0), (1.0, 1.0)],
        kind: Default::default(),
        extinction,
        emission: 1.0,
        casts_shadow: true,
        albedo: None,
    };
    let mut v = View::new(
        bbox,
        voxel,
        vec![Some(AttributeView { enabled: true, tf })],
        width as f32 / height as f32,
    );
    v.settings.mode = Mode::Path;
    v
}

/// Asserts GPU image against CPU reference within render_gpu.rs's bounds (mean |Δ| ≤ 1e-4,
/// 99th percentile ≤ 1e-3, at most 0.2 % of pixels off by more than 0.05).
pub fn check_gpu_close(d: &supercell::render::ImageDiff, what: &str) {
    eprintln!("{what}: GPU vs CPU {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "{what}: GPU and CPU differ: {d:?}"
    );
}

/// Generates a small built-in-model storm dataset into `dir`: `frames` frames at
/// `resolution` voxels across, the attributes given, one lane.
pub fn small_storm(
    dir: &std::path::Path,
    resolution: u32,
    frames: u32,
    attributes: Vec<supercell::synth::Attribute>,
    label: &str,
) {
    let mut p = supercell::synth::default_params();
    p.resolution = resolution;
    p.frames = frames;
    p.attributes = attributes;
    supercell::synth::generate_dataset(
        &p,
        &supercell::synth::GenerateOptions::default(),
        dir,
        supercell::dataset::LaneSpec::Count(1),
        1 << 20,
        supercell::dataset::Provenance::new(label, Vec::<String>::new()),
        |_| {},
    )
    .expect("dataset");
}
