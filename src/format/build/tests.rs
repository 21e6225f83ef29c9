#![allow(clippy::needless_range_loop)] // voxel loops index bricks, codes and expectations alike

use super::*;
use crate::format::grid::{Grid, Value};
use crate::format::layout::{TREE_OFF_NODE_COUNT_LOWER, TREE_OFF_NODE_COUNT_UPPER};
use crate::format::le::LeBytes;

/// SplitMix64: deterministic test data without extra dependencies.
pub(crate) struct Rng(pub(crate) u64);
impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Bricks scattered over several upper nodes on both sides of zero, with every kind of
/// mask: empty, full, sparse, single voxel; plus a brick of constant values.
pub(crate) fn test_volume(seed: u64, bricks: usize) -> SparseVolume {
    let mut rng = Rng(seed);
    let mut seen = std::collections::HashSet::new();
    let mut out = SparseVolume {
        background: 0.25,
        bricks: Vec::new(),
    };
    while out.bricks.len() < bricks {
        let c = |r: &mut Rng| (r.below(2 * 1100) as i32 - 1100) * 8;
        let origin = if out.bricks.len() < 3 {
            [[-8, -8, -8], [0, 0, 0], [-4096, 4088, -4104]][out.bricks.len()]
        } else if out.bricks.len().is_multiple_of(3) {
            // Clusters: neighbours share lower nodes.
            let b = out.bricks[out.bricks.len() - 1].origin;
            [b[0], b[1], b[2] + 8]
        } else {
            [c(&mut rng), c(&mut rng), c(&mut rng)]
        };
        if !seen.insert(origin) {
            continue;
        }
        let k = out.bricks.len();
        let mut b = LeafBrick::filled(origin, 0.0);
        let scale = 1.0 + (k % 7) as f32 * 10.0;
        for v in b.values.iter_mut() {
            *v = (rng.unit() - 0.3) * scale;
        }
        match k % 6 {
            0 => {}
            1 => b.active = [u64::MAX; 8],
            2 => b.active[3] = 1 << 37,
            3 => {
                b.values.fill(1.5);
                b.active = [u64::MAX; 8];
            }
            _ => {
                for w in b.active.iter_mut() {
                    *w = rng.next() & rng.next();
                }
            }
        }
        out.bricks.push(b);
    }
    out
}

fn opts(t: GridType) -> BuildOptions {
    BuildOptions {
        name: format!("test_{t}"),
        grid_type: t,
        voxel_size: [0.5; 3],
        world_origin: [10.0, -20.0, 0.125],
        fpn_tolerance: 0.01,
        ..BuildOptions::default()
    }
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    LeBytes::new(b).f32_at(at, "test field").unwrap()
}
fn u32_at(b: &[u8], at: usize) -> u32 {
    LeBytes::new(b).u32_at(at, "test field").unwrap()
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    LeBytes::new(b).u64_at(at, "test field").unwrap()
}
fn coord_at(b: &[u8], at: usize) -> Coord {
    LeBytes::new(b).coord_at(at, "test field").unwrap()
}

/// An independent, deliberately plain transcription of NanoVDB's quantizer for one leaf:
/// returns (bits, minimum, quantum, codes).
fn reference_quantize(values: &[f32; 512], t: GridType, tol: f32) -> (u32, f32, f32, Vec<u32>) {
    let min = values.iter().copied().fold(f32::MAX, f32::min);
    let max = values.iter().copied().fold(-f32::MAX, f32::max);
    let to_code = |bits: u32, v: f32| -> u32 {
        if bits == 16 {
            let encode = 65535.0f64 / (max - min) as f64;
            let x = encode * (v - min) as f64 + 0.5;
            if x.is_nan() { 0 } else { x as u32 }
        } else {
            let encode = ((1u32 << bits) - 1) as f32 / (max - min);
            let x = encode * (v - min) + 0.5;
            if x.is_nan() { 0 } else { x as u32 }
        }
    };
    let bits = match t {
        GridType::Fp4 => 4,
        GridType::Fp8 => 8,
        GridType::Fp16 => 16,
        _ => {
            let mut bits = 16;
            for b in [1u32, 2, 4, 8] {
                if max - min == 0.0 {
                    bits = 1;
                    break;
                }
                let q = (max - min) / ((1u32 << b) - 1) as f32;
                if values
                    .iter()
                    .all(|&v| (v - (to_code(b, v) as f32 * q + min)).abs() <= tol)
                {
                    bits = b;
                    break;
                }
            }
            bits
        }
    };
    let quantum = (max - min) / ((1u32 << bits) - 1) as f32;
    (
        bits,
        min,
        quantum,
        values.iter().map(|&v| to_code(bits, v)).collect(),
    )
}

fn value_f32(v: Value) -> f32 {
    match v {
        Value::Float(f) => f,
        other => panic!("expected a float value, got {other:?}"),
    }
}

/// A synthetic storm-like volume: a dense core of fully active bricks with smooth values,
/// wrapped in a shell of partially active bricks (about 50k bricks in all).
pub(crate) fn synthetic(bricks_per_axis: i32) -> SparseVolume {
    let n = bricks_per_axis;
    let mut vol = SparseVolume {
        background: 0.0,
        bricks: Vec::new(),
    };
    let mut rng = Rng(7);
    for bx in -n / 2..n / 2 {
        for by in -n / 2..n / 2 {
            for bz in 0..n * 3 / 4 {
                let (x, y, z) = (
                    bx as f32 / n as f32,
                    by as f32 / n as f32,
                    bz as f32 / n as f32 - 0.375,
                );
                let r = (x * x + y * y + z * z).sqrt();
                if r > 0.5 {
                    continue;
                }
                let mut b = LeafBrick::filled([bx * 8, by * 8, bz * 8], 0.0);
                for (i, v) in b.values.iter_mut().enumerate() {
                    let (u, w, t) = ((i >> 6) as f32, ((i >> 3) & 7) as f32, (i & 7) as f32);
                    *v = (1.0 - 2.0 * r)
                        * (0.6
                            + 0.4 * ((u + bx as f32 * 8.0) * 0.05).sin() * ((w - t) * 0.07).cos());
                }
                b.active = if r < 0.45 {
                    [u64::MAX; 8]
                } else {
                    std::array::from_fn(|_| rng.next())
                };
                vol.bricks.push(b);
            }
        }
    }
    vol
}

/// Writer throughput (run with `--release -- --ignored --nocapture`).
#[test]
#[ignore]
fn bench_writer_throughput() {
    let n: i32 = std::env::var("WRITER_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48);
    let vol = synthetic(n);
    let input_mb = vol.bricks.len() as f64 * (512.0 * 4.0 + 64.0) / 1e6;
    let active: u64 = vol.bricks.iter().map(|b| u64::from(b.active_count())).sum();
    println!(
        "volume: {} bricks, {active} active voxels, {input_mb:.1} MB of input",
        vol.bricks.len()
    );
    let threads = rayon::current_num_threads();
    for t in [
        GridType::Float,
        GridType::Fp16,
        GridType::Fp8,
        GridType::Fp4,
        GridType::FpN,
    ] {
        let o = BuildOptions {
            grid_type: t,
            fpn_tolerance: 0.001,
            ..BuildOptions::default()
        };
        let mut out = Vec::new();
        build_grid_into(&vol, &o, &mut out).unwrap(); // warm-up, sizes the buffer
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap();
        let time = |f: &dyn Fn()| {
            let reps = 3;
            let start = std::time::Instant::now();
            for _ in 0..reps {
                f();
            }
            start.elapsed().as_secs_f64() / reps as f64
        };
        let build = |buf: &mut Vec<u8>| build_grid_into(&vol, &o, buf).unwrap();
        // One grid on one thread, fresh buffer each time (page faults included).
        let single = one.install(|| time(&|| build(&mut Vec::new())));
        // One grid on one thread into a reused buffer: the writer's own cost.
        let reuse = {
            let mut buf = out.clone();
            let start = std::time::Instant::now();
            one.install(|| {
                for _ in 0..3 {
                    build(&mut buf);
                }
            });
            start.elapsed().as_secs_f64() / 3.0
        };
        // One grid using every thread (leaf encoding in parallel), reused buffer.
        let all = {
            let mut buf = out.clone();
            let start = std::time::Instant::now();
            for _ in 0..3 {
                build(&mut buf);
            }
            start.elapsed().as_secs_f64() / 3.0
        };
        // As a generator runs: one grid per thread, all threads busy, reused buffers.
        let mut bufs = vec![out.clone(); threads];
        let start = std::time::Instant::now();
        bufs.par_iter_mut().for_each(build);
        let batch = start.elapsed().as_secs_f64();
        let mb = out.len() as f64 / 1e6;
        println!(
            "{:>8}: grid {mb:6.1} MB | 1 thread: {:5.0} MB/s out ({:5.0} in), reused buffer {:5.0} out ({:5.0} in) | {threads} threads: one grid {:5.0} MB/s out, {threads} grids {:5.0} MB/s out ({:5.0} in)",
            t.name(),
            mb / single,
            input_mb / single,
            mb / reuse,
            input_mb / reuse,
            mb / all,
            threads as f64 * mb / batch,
            threads as f64 * input_mb / batch,
        );
    }
}

#[test]
fn float_round_trip_every_voxel() {
    let vol = test_volume(1, 300);
    let buf = build_grid(&vol, &opts(GridType::Float)).unwrap();
    let grid = Grid::parse(&buf).unwrap();
    assert_eq!(grid.grid_size() as usize, buf.len());
    assert_eq!(buf.len() % 32, 0);
    let mut acc = grid.accessor();
    let bricks: std::collections::HashSet<Coord> = vol.bricks.iter().map(|b| b.origin).collect();
    for b in &vol.bricks {
        for n in 0..512 {
            let ijk = [
                b.origin[0] + (n >> 6) as i32,
                b.origin[1] + ((n >> 3) & 7) as i32,
                b.origin[2] + (n & 7) as i32,
            ];
            let v = value_f32(acc.value(ijk).unwrap());
            assert_eq!(v.to_bits(), b.values[n].to_bits(), "value at {ijk:?}");
            assert_eq!(acc.is_active(ijk), b.is_active(n), "state at {ijk:?}");
        }
        // Neighbouring bricks that do not exist read as inactive background.
        for d in [[8, 0, 0], [0, -8, 0], [0, 0, 4096], [-128, 0, 0]] {
            let o = [b.origin[0] + d[0], b.origin[1] + d[1], b.origin[2] + d[2]];
            if !bricks.contains(&o) {
                assert_eq!(value_f32(grid.value(o).unwrap()), vol.background);
                assert!(!grid.is_active(o));
            }
        }
    }
    assert_eq!(
        value_f32(grid.value([1 << 30, -(1 << 30), 7]).unwrap()),
        vol.background
    );
    assert_eq!(grid.name(), "test_float");
}

#[test]
fn quantized_round_trip_matches_reference() {
    let vol = test_volume(2, 120);
    for t in [GridType::Fp4, GridType::Fp8, GridType::Fp16, GridType::FpN] {
        let o = opts(t);
        let buf = build_grid(&vol, &o).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        let mut acc = grid.accessor();
        for b in &vol.bricks {
            let (bits, min, quantum, codes) = reference_quantize(&b.values, t, o.fpn_tolerance);
            for n in 0..512 {
                let ijk = [
                    b.origin[0] + (n >> 6) as i32,
                    b.origin[1] + ((n >> 3) & 7) as i32,
                    b.origin[2] + (n & 7) as i32,
                ];
                let got = value_f32(acc.value(ijk).unwrap());
                let want = codes[n] as f32 * quantum + min;
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{t} at {ijk:?} ({bits} bits)"
                );
                // Rounding to the nearest code: error at most half a quantum.
                let err = (got - b.values[n]).abs();
                assert!(
                    err <= 0.5 * quantum * 1.0001 + 1e-6 * b.values[n].abs(),
                    "{t} error {err} > q/2 = {}",
                    quantum / 2.0
                );
                if t == GridType::FpN && bits < 16 {
                    assert!(err <= o.fpn_tolerance, "FpN error {err} above tolerance");
                }
                assert_eq!(acc.is_active(ijk), b.is_active(n));
            }
        }
    }
}

#[test]
fn fpn_leaf_widths_and_flags() {
    let mut vol = SparseVolume {
        background: 0.0,
        bricks: Vec::new(),
    };
    // A constant brick (1 bit), two levels (1 bit), a ramp needing 8 bits at 0.002.
    let mut b = LeafBrick::filled([0, 0, 0], 3.0);
    b.active[0] = 1;
    vol.bricks.push(b);
    let mut b = LeafBrick::filled([8, 0, 0], 0.0);
    for n in 0..512 {
        b.values[n] = if n % 2 == 0 { 0.0 } else { 1.0 };
    }
    vol.bricks.push(b);
    let mut b = LeafBrick::filled([16, 0, 0], 0.0);
    for n in 0..512 {
        b.values[n] = n as f32 / 511.0;
    }
    vol.bricks.push(b);
    let o = BuildOptions {
        grid_type: GridType::FpN,
        fpn_tolerance: 0.002,
        ..opts(GridType::FpN)
    };
    let buf = build_grid(&vol, &o).unwrap();
    let grid = Grid::parse(&buf).unwrap();
    let flags: Vec<u8> = grid.leaves().map(|l| l.flags()).collect();
    assert_eq!(flags, vec![2, 0, 3 << 5]);
    for b in &vol.bricks {
        let (bits, ..) = reference_quantize(&b.values, GridType::FpN, 0.002);
        assert!(bits <= 8);
    }
    let expect: u32 = [1u32, 1, 8].iter().map(|b| 96 + 64 * b).sum();
    let leaves_at = 736 + 64 + 32 + 270400 + 33856;
    assert_eq!(buf.len(), leaves_at + expect as usize);
}

/// Brute-force statistics of the active values (decoded) under a node spanning `dim`
/// voxels from `origin`.
fn brute(
    grid: &Grid<'_>,
    vol: &SparseVolume,
    origin: Coord,
    dim: i32,
) -> (usize, f32, f32, f64, f64, Coord, Coord) {
    let mut vals = Vec::new();
    let (mut lo, mut hi) = ([i32::MAX; 3], [i32::MIN; 3]);
    let mut acc = grid.accessor();
    for b in &vol.bricks {
        if (0..3).any(|a| b.origin[a] < origin[a] || b.origin[a] >= origin[a] + dim) {
            continue;
        }
        for n in 0..512 {
            if b.is_active(n) {
                let ijk = [
                    b.origin[0] + (n >> 6) as i32,
                    b.origin[1] + ((n >> 3) & 7) as i32,
                    b.origin[2] + (n & 7) as i32,
                ];
                vals.push(value_f32(acc.value(ijk).unwrap()));
                for a in 0..3 {
                    lo[a] = lo[a].min(ijk[a]);
                    hi[a] = hi[a].max(ijk[a]);
                }
            }
        }
    }
    let n = vals.len();
    let min = vals.iter().copied().fold(f32::MAX, f32::min);
    let max = vals.iter().copied().fold(-f32::MAX, f32::max);
    let mean = vals.iter().map(|&v| v as f64).sum::<f64>() / n.max(1) as f64;
    let var = vals.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n.max(1) as f64;
    (n, min, max, mean, var.sqrt(), lo, hi)
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-5 * scale.max(1.0)
}

#[test]
fn statistics_equal_brute_force() {
    let vol = test_volume(3, 200);
    for t in [GridType::Float, GridType::Fp8, GridType::FpN] {
        let buf = build_grid(&vol, &opts(t)).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        let l = layout::layout(t).unwrap();
        // Leaves.
        for leaf in grid.leaves() {
            let at = leaf.offset();
            let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, leaf.origin(), 8);
            let flags = leaf.flags();
            assert_eq!(flags & 2 != 0, n > 0);
            if n == 0 {
                assert_eq!(coord_at(&buf, at), leaf.origin());
                continue;
            }
            let dif = [buf[at + 12], buf[at + 13], buf[at + 14]];
            assert_eq!(coord_at(&buf, at), lo);
            assert_eq!([0, 1, 2].map(|a| lo[a] + dif[a] as i32), hi);
            let scale = (max.abs().max(min.abs())) as f64;
            if t == GridType::Float {
                assert_eq!([f32_at(&buf, at + 80), f32_at(&buf, at + 84)], [min, max]);
                assert!(close(f32_at(&buf, at + 88) as f64, mean, scale));
                assert!(close(f32_at(&buf, at + 92) as f64, std, scale));
            } else {
                let (m, q) = (f32_at(&buf, at + 80), f32_at(&buf, at + 84));
                let s = |k: usize| {
                    f32::from(
                        LeBytes::new(&buf)
                            .u16_at(at + 88 + 2 * k, "leaf stats")
                            .unwrap(),
                    )
                };
                let tol = q as f64 * 0.5001 + 1e-6 * scale;
                assert!(((s(0) * q + m) as f64 - min as f64).abs() <= tol);
                assert!(((s(1) * q + m) as f64 - max as f64).abs() <= tol);
                assert!(((s(2) * q + m) as f64 - mean).abs() <= tol);
                assert!(((s(3) * q) as f64 - std).abs() <= tol);
            }
        }
        // Internal nodes and root.
        let tree = 672;
        let counts = [
            u32_at(&buf, tree + TREE_OFF_NODE_COUNT_LOWER as usize),
            u32_at(&buf, tree + TREE_OFF_NODE_COUNT_UPPER as usize),
        ];
        for (level, nl, dim) in [(1usize, &l.lower, 128), (2, &l.upper, 4096)] {
            let first = tree + u64_at(&buf, tree + 8 * level) as usize;
            for i in 0..counts[level - 1] as usize {
                let at = first + i * nl.size as usize;
                let lo_stored = coord_at(&buf, at);
                let origin = lo_stored.map(|c| c & !(dim - 1));
                let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, origin, dim);
                let flags = u64_at(&buf, at + 24);
                if n == 0 {
                    assert_eq!(flags, 1);
                    continue;
                }
                assert_eq!(flags, 2);
                assert_eq!([coord_at(&buf, at), coord_at(&buf, at + 12)], [lo, hi]);
                let scale = (max.abs().max(min.abs())) as f64;
                assert_eq!(f32_at(&buf, at + nl.off_min as usize), min);
                assert_eq!(f32_at(&buf, at + nl.off_max as usize), max);
                assert!(close(
                    f32_at(&buf, at + nl.off_avg as usize) as f64,
                    mean,
                    scale
                ));
                assert!(close(
                    f32_at(&buf, at + nl.off_stddev as usize) as f64,
                    std,
                    scale
                ));
            }
        }
        let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, [i32::MIN / 2; 3], i32::MAX);
        assert_eq!(grid.active_voxel_count(), n as u64);
        assert_eq!(grid.index_bbox(), [lo, hi]);
        let rs = grid.root_stats().unwrap();
        assert_eq!(rs.min, Value::Float(min));
        assert_eq!(rs.max, Value::Float(max));
        assert!(close(rs.avg, mean, 10.0) && close(rs.stddev, std, 10.0));
        let h = grid.header();
        assert_eq!(h.flags, 0b111110, "{t}");
        // World bbox: index bbox, max corner exclusive, through the map.
        let o = opts(t);
        for a in 0..3 {
            assert_eq!(h.world_bbox[0][a], lo[a] as f64 * 0.5 + o.world_origin[a]);
            assert_eq!(
                h.world_bbox[1][a],
                (hi[a] + 1) as f64 * 0.5 + o.world_origin[a]
            );
            assert_eq!(
                h.voxel_size[a],
                (0.5 + o.world_origin[a]) - o.world_origin[a]
            );
        }
        assert_eq!(h.map.mat[0], 0.5);
        assert_eq!(h.map.inv_mat[4], 2.0);
        assert_eq!(h.map.vec, o.world_origin);
    }
}

#[test]
fn root_tiles_sorted_and_keyed_like_nanovdb() {
    let vol = test_volume(4, 150);
    let buf = build_grid(&vol, &opts(GridType::Float)).unwrap();
    let grid = Grid::parse(&buf).unwrap();
    let l = layout::layout(GridType::Float).unwrap();
    let root = 736;
    let count = u32_at(&buf, root + 24) as usize;
    let uppers: std::collections::BTreeSet<Coord> = vol
        .bricks
        .iter()
        .map(|b| b.origin.map(|c| c & !4095))
        .collect();
    assert_eq!(count, uppers.len());
    assert!(uppers.iter().any(|o| o.iter().any(|&c| c < 0)));
    // BTreeSet iterates [i32; 3] lexicographically with signed comparison.
    for (i, origin) in uppers.iter().enumerate() {
        let tile = root + l.root.size as usize + i * l.root.tile_size as usize;
        assert_eq!(
            u64_at(&buf, tile),
            layout::coord_to_key(*origin),
            "tile {i}"
        );
        let child = root + u64_at(&buf, tile + 8) as usize;
        assert_eq!(coord_at(&buf, child).map(|c| c & !4095), *origin);
        assert_eq!(u32_at(&buf, tile + 16), 0);
    }
    assert_eq!(grid.node_counts().upper as usize, uppers.len());
    let lowers: std::collections::HashSet<Coord> = vol
        .bricks
        .iter()
        .map(|b| b.origin.map(|c| c & !127))
        .collect();
    assert_eq!(grid.node_counts().lower as usize, lowers.len());
    assert_eq!(grid.node_counts().leaves as usize, vol.bricks.len());
    // Leaves come out in breadth-first order: sorted by (upper, lower index, leaf index).
    let order: Vec<Coord> = grid.leaves().map(|l| l.origin()).collect();
    let mut sorted = order.clone();
    sorted.sort_by_key(|o| {
        (
            o.map(|c| c >> 12),
            child_index(*o, &l.upper),
            child_index(*o, &l.lower),
        )
    });
    assert_eq!(order, sorted);
}

#[test]
fn empty_volume_is_a_valid_grid() {
    for v in [NanoVdbVersion::V32_4, NanoVdbVersion::V32_9] {
        let vol = SparseVolume {
            background: -2.0,
            bricks: Vec::new(),
        };
        let o = BuildOptions {
            version: v,
            ..opts(GridType::Fp8)
        };
        let buf = build_grid(&vol, &o).unwrap();
        assert_eq!(buf.len(), 736 + 64);
        let grid = Grid::parse(&buf).unwrap();
        assert_eq!(value_f32(grid.value([0, 0, 0]).unwrap()), -2.0);
        assert_eq!(grid.active_voxel_count(), 0);
        assert_eq!(grid.header().flags & GRID_FLAG_HAS_BBOX, 0);
        assert_eq!(grid.index_bbox(), [[i32::MAX; 3], [i32::MIN; 3]]);
        assert_eq!(grid.world_bbox(), [[f64::MAX; 3], [-f64::MAX; 3]]);
        let rs = grid.root_stats().unwrap();
        assert_eq!((rs.min, rs.max), (Value::Float(-2.0), Value::Float(-2.0)));
        assert_eq!(
            checksum::verify_checksum(&buf, v.version()),
            checksum::ChecksumState::Valid
        );
        // 32.4 computes no tail for an empty root; 32.9's tail covers < 4 KiB: CRC of nothing.
        let tail = (grid.stored_checksum() >> 32) as u32;
        assert_eq!(
            tail,
            if v == NanoVdbVersion::V32_4 {
                u32::MAX
            } else {
                0
            }
        );
    }
}

#[test]
fn bricks_without_active_voxels() {
    // A lone brick with no active voxel: nodes above it get NanoVDB's empty bbox, the
    // "no active values" node flag, and the grid no HasBBox flag.
    let mut b = LeafBrick::filled([-4096, 8, 16], 0.0);
    b.values
        .iter_mut()
        .enumerate()
        .for_each(|(n, v)| *v = n as f32);
    let vol = SparseVolume {
        background: 5.0,
        bricks: vec![b],
    };
    for t in [GridType::Float, GridType::Fp8, GridType::FpN] {
        let buf = build_grid(&vol, &opts(t)).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        assert_eq!(grid.active_voxel_count(), 0);
        assert_eq!(grid.header().flags & GRID_FLAG_HAS_BBOX, 0);
        assert_eq!(grid.index_bbox(), [[i32::MAX; 3], [i32::MIN; 3]]);
        assert_eq!(value_f32(grid.value([-4096, 8, 16]).unwrap()), 0.0);
        assert_eq!(
            value_f32(grid.value([-4096 + 7, 8 + 7, 16 + 7]).unwrap()).round(),
            511.0
        );
        assert_eq!(value_f32(grid.value([0, 0, 0]).unwrap()), 5.0);
        let rs = grid.root_stats().unwrap();
        assert_eq!(
            (rs.min, rs.max),
            (Value::Float(f32::MAX), Value::Float(-f32::MAX))
        );
        let l = layout::layout(t).unwrap();
        let upper = 736 + l.root.size as usize + l.root.tile_size as usize;
        let lower = upper + l.upper.size as usize;
        assert_eq!(u64_at(&buf, upper + 24), 1);
        assert_eq!(u64_at(&buf, lower + 24), 1);
        assert_eq!(
            checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
            checksum::ChecksumState::Valid
        );
    }
}

#[test]
fn checksums_verify_and_detect_flips() {
    let vol = test_volume(5, 60);
    for (t, v) in [
        (GridType::Float, NanoVdbVersion::V32_4),
        (GridType::FpN, NanoVdbVersion::V32_4),
        (GridType::Fp16, NanoVdbVersion::V32_9),
    ] {
        let o = BuildOptions {
            version: v,
            ..opts(t)
        };
        let mut buf = build_grid(&vol, &o).unwrap();
        assert_eq!(
            &buf[0..8],
            if v == NanoVdbVersion::V32_4 {
                b"NanoVDB0"
            } else {
                b"NanoVDB1"
            }
        );
        assert_eq!(
            checksum::verify_checksum(&buf, v.version()),
            checksum::ChecksumState::Valid
        );
        assert_eq!(checksum::compute_checksum(&buf).unwrap(), u64_at(&buf, 8));
        let last = buf.len() - 1;
        if t == GridType::FpN && v == NanoVdbVersion::V32_4 {
            // 32.3–32.5 CRC only `sizeof` an FpN leaf, its 96-byte header: codes are not
            // covered, and NanoVDB 32.4 would not notice this flip either.
            buf[last] ^= 0x10;
            assert_eq!(
                checksum::verify_checksum(&buf, v.version()),
                checksum::ChecksumState::Valid
            );
            buf[last] ^= 0x10;
        }
        // Inside the last leaf's value mask.
        let leaf_header = Grid::parse(&buf).unwrap().leaves().last().unwrap().offset() + 40;
        for at in [20usize, 700, 900, leaf_header, buf.len() / 2] {
            buf[at] ^= 0x10;
            assert!(
                matches!(
                    checksum::verify_checksum(&buf, v.version()),
                    checksum::ChecksumState::Mismatch { .. }
                ),
                "{t} flip at {at} went unnoticed"
            );
            buf[at] ^= 0x10;
        }
        assert_eq!(
            checksum::verify_checksum(&buf, v.version()),
            checksum::ChecksumState::Valid
        );
    }
    let o = BuildOptions {
        checksum: ChecksumMode::Disabled,
        ..opts(GridType::Float)
    };
    let buf = build_grid(&vol, &o).unwrap();
    assert_eq!(
        checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
        checksum::ChecksumState::Absent
    );
    let o = BuildOptions {
        checksum: ChecksumMode::Head,
        ..opts(GridType::Float)
    };
    let mut buf = build_grid(&vol, &o).unwrap();
    assert_eq!(u64_at(&buf, 8) >> 32, u32::MAX as u64);
    let last = buf.len() - 1;
    buf[last] ^= 1; // outside the head: a head-only checksum does not see it
    assert_eq!(
        checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
        checksum::ChecksumState::Valid
    );
}

#[test]
fn rejects_bad_input() {
    let mut vol = test_volume(6, 10);
    let o = opts(GridType::Fp8);
    let dup = vol.bricks[4].clone();
    vol.bricks.push(dup);
    assert!(matches!(
        build_grid(&vol, &o),
        Err(FormatError::Corrupt { offset: 10, .. })
    ));
    vol.bricks.pop();
    vol.bricks[2].origin[1] += 4;
    assert!(matches!(
        build_grid(&vol, &o),
        Err(FormatError::Corrupt { offset: 2, .. })
    ));
    vol.bricks[2].origin[1] -= 4;
    vol.bricks[7].values[100] = f32::NAN;
    assert!(matches!(
        build_grid(&vol, &o),
        Err(FormatError::Corrupt { offset: 7, .. })
    ));
    // NaN is stored as is in Float grids, as NanoVDB does.
    assert!(build_grid(&vol, &opts(GridType::Float)).is_ok());
    vol.bricks[7].values[100] = 0.0;
    let bad = BuildOptions {
        grid_class: GridClass::VoxelVolume,
        ..o.clone()
    };
    assert!(build_grid(&vol, &bad).is_err());
    let bad = BuildOptions {
        grid_type: GridType::Double,
        ..o.clone()
    };
    assert!(matches!(
        build_grid(&vol, &bad),
        Err(FormatError::Unsupported { .. })
    ));
    let bad = BuildOptions {
        voxel_size: [0.0; 3],
        ..o.clone()
    };
    assert!(build_grid(&vol, &bad).is_err());
    let bad = BuildOptions {
        name: "x".repeat(256),
        ..o.clone()
    };
    assert!(build_grid(&vol, &bad).is_err());
    assert!(build_grid(&vol, &o).is_ok());
}

/// Encodes `vol`'s bricks with a [`LeafEncoder`] into blocks of `per_block` leaves, with
/// blocks filled round-robin so that the encoder's pending groups span several blocks.
fn encode_ahead(vol: &SparseVolume, o: &BuildOptions, per_block: usize) -> EncodedLeaves {
    let nblocks = vol.bricks.len().div_ceil(per_block).max(1);
    let mut blocks: Vec<EncodedBlock> = (0..nblocks)
        .map(|_| EncodedBlock::new(o, vol.background, per_block).unwrap())
        .collect();
    let mut enc = LeafEncoder::new();
    for (i, b) in vol.bricks.iter().enumerate() {
        enc.push(&mut blocks, i % nblocks, b.origin, &b.values, &b.active)
            .unwrap();
    }
    enc.flush(&mut blocks);
    EncodedLeaves::new(o.grid_type, vol.background, blocks).unwrap()
}

/// Bricks whose quantization is at an edge: all zero, constant, zeros of both signs, the
/// largest finite magnitudes (a range that overflows), ranges of one ulp and denormal
/// ranges, a single active voxel, inactive voxels holding values.
fn edge_volume() -> SparseVolume {
    let mut bricks = Vec::new();
    let mut put = |k: i32, values: [f32; 512], active: [u64; 8]| {
        bricks.push(LeafBrick {
            origin: [8 * k, -8 * (k % 5), 128 * (k % 3)],
            values: Box::new(values),
            active,
        });
    };
    let full = [u64::MAX; 8];
    put(0, [0.0; 512], full);
    put(1, [-0.0; 512], full);
    put(2, [7.25; 512], full);
    put(
        3,
        std::array::from_fn(|n| if n % 2 == 0 { 0.0 } else { -0.0 }),
        full,
    );
    put(
        4,
        std::array::from_fn(|n| if n == 3 { f32::MAX } else { -f32::MAX }),
        full,
    );
    put(
        5,
        std::array::from_fn(|n| if n < 256 { f32::MAX } else { 0.0 }),
        full,
    );
    put(
        6,
        std::array::from_fn(|n| 1.0 + (n % 2) as f32 * f32::EPSILON),
        full,
    );
    put(
        7,
        std::array::from_fn(|n| (n % 3) as f32 * f32::from_bits(1)),
        full,
    );
    put(
        8,
        std::array::from_fn(|n| f32::MIN_POSITIVE * (n % 5) as f32),
        full,
    );
    let mut one = [0u64; 8];
    one[7] = 1 << 63;
    put(9, std::array::from_fn(|n| n as f32 * 0.5 - 100.0), one);
    let mut some = [0u64; 8];
    some[2] = 0x00ff_00ff_00ff_00ff;
    put(10, std::array::from_fn(|n| (n as f32).sin() * 1e-3), some);
    put(11, std::array::from_fn(|n| -1e30 + n as f32 * 1e27), full);
    put(12, [0.0; 512], [0; 8]);
    SparseVolume {
        background: 0.0,
        bricks,
    }
}

#[test]
fn leaves_encoded_ahead_build_the_same_bytes() {
    let types = [
        GridType::Float,
        GridType::Fp4,
        GridType::Fp8,
        GridType::Fp16,
        GridType::FpN,
    ];
    let vols = [
        test_volume(5, 300),
        test_volume(77, 41),
        edge_volume(),
        SparseVolume::default(),
    ];
    for t in types {
        for (vi, vol) in vols.iter().enumerate() {
            let o = BuildOptions {
                grid_class: GridClass::FogVolume,
                ..opts(t)
            };
            let want = build_grid(vol, &o).unwrap();
            for per_block in [1, 7, 32, 1000] {
                let leaves = encode_ahead(vol, &o, per_block);
                assert_eq!(leaves.len(), vol.bricks.len());
                let mut got = vec![0xAB; 17];
                build_grid_encoded_into(&leaves, &o, &mut got).unwrap();
                assert!(got == want, "{t} volume {vi}, {per_block} per block");
            }
        }
    }
}

#[test]
fn leaves_encoded_ahead_are_checked() {
    let vol = test_volume(3, 20);
    let o = opts(GridType::Fp16);
    let leaves = encode_ahead(&vol, &o, 8);
    let err = build_grid_encoded_into(&leaves, &opts(GridType::Fp8), &mut Vec::new());
    assert!(err.unwrap_err().to_string().contains("cannot make"));
    // A non-finite value is refused by the encoder, naming the leaf's origin.
    let mut block = EncodedBlock::new(&o, 0.0, 1).unwrap();
    let mut values = [1.0f32; 512];
    values[9] = f32::NAN;
    let mut enc = LeafEncoder::new();
    let err = enc
        .push(
            std::slice::from_mut(&mut block),
            0,
            [8, 16, 24],
            &values,
            &[1; 8],
        )
        .unwrap_err();
    assert!(err.to_string().contains("[8, 16, 24]"), "{err}");
    enc.flush(std::slice::from_mut(&mut block));
    assert!(block.is_empty());
    // An unflushed block is refused.
    let mut block = EncodedBlock::new(&o, 0.0, 1).unwrap();
    enc.push(
        std::slice::from_mut(&mut block),
        0,
        [0; 3],
        &[2.0; 512],
        &[1; 8],
    )
    .unwrap();
    assert!(EncodedLeaves::new(GridType::Fp16, 0.0, vec![block]).is_err());
    // Two leaves at one origin, as in a volume.
    let mut dup = vol.clone();
    dup.bricks.push(dup.bricks[4].clone());
    let leaves = encode_ahead(&dup, &o, 8);
    assert!(build_grid_encoded_into(&leaves, &o, &mut Vec::new()).is_err());
}
