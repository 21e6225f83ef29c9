//! Spatial bricks (`generate --bricks N`, `dataset::bricks`, `Dataset::retain_brick`): a
//! bricked dataset's grids hold exactly the whole grid's values over each brick's box and
//! halo, its owned boxes cover every active voxel once, one brick's part of a frame reads
//! only that brick's bytes, hostile brick lists are refused with the manifest named, and a
//! bricked write across ranks is the one-process dataset byte for byte. One frame is also
//! checked independently: exported, converted to OpenVDB by Debian's `nanovdb_convert` and
//! read by `python3-openvdb`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use supercell::cluster::threads::run_on;
use supercell::dataset::ranks::first_difference;
use supercell::dataset::{
    AlignedBuf, Brick, CrcCheck, Dataset, DatasetError, LaneSpec, Manifest, Provenance,
    export_frame,
};
use supercell::format::{ChecksumState, Codec, Coord, Grid, GridType};
use supercell::synth::{
    GenerateOptions, StormParams, default_params, generate_dataset, generate_dataset_ranks,
};

const CHUNK: u64 = 16384;

fn storm() -> StormParams {
    StormParams {
        resolution: 40,
        frames: 2,
        ..default_params()
    }
}

fn opts(grid_type: GridType, bricks: Vec<Brick>) -> GenerateOptions {
    GenerateOptions {
        grid_type,
        max_frames_in_flight: 1,
        bricks,
        ..GenerateOptions::default()
    }
}

fn provenance() -> Provenance {
    Provenance::new("storm test", Vec::<String>::new())
}

/// Generates `params` into `dir` (3 lanes), bricked into `bricks` (0: whole grids).
fn generate(params: &StormParams, grid_type: GridType, bricks: u32, dir: &Path) -> Dataset {
    let bricks = match bricks {
        0 => Vec::new(),
        n => params.bricks(n).unwrap(),
    };
    generate_dataset(
        params,
        &opts(grid_type, bricks),
        dir,
        LaneSpec::Count(3),
        CHUNK,
        provenance(),
        |_| {},
    )
    .unwrap();
    Dataset::open(dir).unwrap()
}

/// How many times finer than the model grid attribute `a`'s voxels are (from the bricks'
/// world boxes and the attribute's voxel size).
fn refine(m: &Manifest, a: usize) -> i32 {
    let b = &m.bricks[0];
    let model =
        (b.world_box[1][0] - b.world_box[0][0]) / f64::from(b.index_box[1][0] - b.index_box[0][0]);
    (model / m.attributes[a].voxel_size.unwrap()[0]).round() as i32
}

/// The box (min inclusive, max exclusive) a brick's grid of an attribute `r` times finer
/// than the model grid must hold the whole grid's values over: the brick's box in the
/// attribute's index space grown by one leaf (8 voxels; trilinear samples and central
/// differences need 2), computed here rather than taken from the library.
fn must_hold(b: &Brick, r: i32) -> [Coord; 2] {
    let [lo, hi] = b.index_box;
    [lo.map(|v| v * r - 8), hi.map(|v| v * r + 8)]
}

fn inside(p: Coord, [lo, hi]: [Coord; 2]) -> bool {
    (0..3).all(|k| p[k] >= lo[k] && p[k] < hi[k])
}

fn read(ds: &Dataset, f: usize) -> AlignedBuf {
    let mut buf = AlignedBuf::new();
    ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
    buf
}

/// Every voxel of every leaf of `grid`: origin → (values, active mask).
fn leaves_of(grid: &Grid<'_>) -> HashMap<Coord, (Vec<u32>, [u64; 8])> {
    grid.leaves()
        .map(|l| {
            let values = l
                .values_f32()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            (l.origin(), (values, l.active_mask()))
        })
        .collect()
}

/// Checks frame `f` of the bricked `bricked` against the whole-grid `whole`: every brick's
/// grid holds exactly the whole grid's leaves inside its halo box (so every index there
/// reads the same value and state), a sweep of every index of the box and halo for the
/// model-grid attributes agrees, and the owned boxes hold every active voxel exactly once.
fn check_frame(whole: &Dataset, bricked: &Dataset, f: usize) {
    let (wm, bm) = (whole.manifest(), bricked.manifest());
    let (wbuf, bbuf) = (read(whole, f), read(bricked, f));
    let whole_grids = whole.frame_grids(f, &wbuf).unwrap();
    let brick_grids = bricked.frame_grids(f, &bbuf).unwrap();
    assert_eq!(brick_grids.len(), wm.attributes.len() * bm.bricks.len());
    for (i, (entry, bytes)) in brick_grids.iter().enumerate() {
        let (a, b) = (entry.attribute as usize, entry.brick.unwrap() as usize);
        assert_eq!((a, b), (i % wm.attributes.len(), i / wm.attributes.len()));
        let brick = &bm.bricks[b];
        let r = refine(bm, a);
        let wg = Grid::parse(whole_grids[a].1).unwrap();
        let bg = Grid::parse(bytes).unwrap();
        let what = format!("frame {f} attribute {a} brick {b}");
        let mut expected = leaves_of(&wg);
        expected.retain(|&origin, _| inside(origin, must_hold(brick, r)));
        assert_eq!(leaves_of(&bg), expected, "{what}: leaves");
        assert_eq!(bg.background().unwrap(), wg.background().unwrap(), "{what}");
        if r != 1 {
            continue; // the nested grid's box is 4³ times larger: its leaves were compared
        }
        let [lo, hi] = must_hold(brick, r);
        let (mut wa, mut ba) = (wg.accessor(), bg.accessor());
        for x in lo[0]..hi[0] {
            for y in lo[1]..hi[1] {
                for z in lo[2]..hi[2] {
                    let p = [x, y, z];
                    assert_eq!(
                        ba.value(p).unwrap(),
                        wa.value(p).unwrap(),
                        "{what} at {p:?}"
                    );
                    assert_eq!(ba.is_active(p), wa.is_active(p), "{what} at {p:?}");
                }
            }
        }
    }
    // Every active voxel of every whole grid: owned by exactly one brick.
    for (a, (_, bytes)) in whole_grids.iter().enumerate() {
        let r = refine(bm, a);
        let grid = Grid::parse(bytes).unwrap();
        for leaf in grid.leaves() {
            let o = leaf.origin();
            for n in (0..512).filter(|&n| leaf.is_active(n)) {
                let p = [
                    o[0] + (n >> 6) as i32,
                    o[1] + ((n >> 3) & 7) as i32,
                    o[2] + (n & 7) as i32,
                ];
                let owners = (bm.bricks.iter())
                    .filter(|b| {
                        (0..3)
                            .all(|k| p[k] >= b.index_box[0][k] * r && p[k] < b.index_box[1][k] * r)
                    })
                    .count();
                assert_eq!(
                    owners, 1,
                    "frame {f} attribute {a}: voxel {p:?} owned {owners} times"
                );
            }
        }
    }
}

#[test]
fn bricked_grids_hold_the_whole_grids_values_over_box_and_halo() {
    let tmp = tempfile::tempdir().unwrap();
    let params = storm();
    let whole = generate(&params, GridType::Fp16, 0, &tmp.path().join("whole"));
    for n in [2, 3, 4] {
        let bricked = generate(
            &params,
            GridType::Fp16,
            n,
            &tmp.path().join(format!("b{n}")),
        );
        let m = bricked.manifest();
        assert_eq!(m.bricks.len(), n as usize);
        // Statistics stay the whole domain's.
        for (a, b) in whole.manifest().attributes.iter().zip(&m.attributes) {
            assert_eq!(a.value_range, b.value_range, "{}", a.name);
            assert_eq!(a.index_bbox, b.index_bbox, "{}", a.name);
        }
        for f in 0..bricked.frame_count() {
            check_frame(&whole, &bricked, f);
        }
        // Code that binds one grid per attribute is refused, with the way to play it.
        let err = bricked.check_whole_grids().unwrap_err().to_string();
        assert!(
            err.contains("manifest.json") && err.contains("--split space"),
            "{err}"
        );
        let buf = read(&bricked, 0);
        assert!(matches!(
            bricked.grid_bytes(0, 0, &buf),
            Err(DatasetError::Bricked { .. })
        ));
        whole.check_whole_grids().unwrap();
    }
}

/// Overwrites every byte that extents of frame `f` outside `keep` (a slot range) point at.
fn clobber_outside(ds: &Dataset, f: usize, keep: std::ops::Range<u64>) {
    use std::os::unix::fs::FileExt;
    for e in ds.frame_extents(f) {
        if keep.contains(&e.dst) {
            continue;
        }
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(ds.lane_file_path(e.lane, e.file))
            .unwrap();
        file.write_all_at(&vec![0xA5; e.len as usize], e.offset)
            .unwrap();
    }
}

#[test]
fn retain_brick_reads_only_its_bricks_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let params = storm();
    for brick in 0..3u32 {
        let dir = tmp.path().join(format!("b{brick}"));
        let ds = generate(&params, GridType::Fp16, 3, &dir);
        let m = ds.manifest().clone();
        let attributes = m.attributes.len();
        let full: Vec<AlignedBuf> = (0..ds.frame_count()).map(|f| read(&ds, f)).collect();
        let part = ds.retain_brick(brick).unwrap();
        assert_eq!(part.manifest().retained_brick(), Some(brick));
        part.check_whole_grids().unwrap();
        assert_eq!(part.bricks(), m.bricks.as_slice());
        assert_eq!(part.manifest().attributes, m.attributes);
        for (f, full) in full.iter().enumerate() {
            let grids = &m.frames[f].grids;
            let b = brick as usize;
            let start = grids[b * attributes].offset;
            let end = grids
                .get((b + 1) * attributes)
                .map_or(m.frames[f].slot_size, |g| g.offset);
            // Only extents inside the brick's range, none straddling it.
            let pf = part.frame(f).unwrap();
            assert_eq!(pf.slot_size, end - start);
            let covered: u64 = pf.extents.iter().map(|e| e.len).sum();
            assert_eq!(covered, end - start, "frame {f}");
            for e in &pf.extents {
                let orig = m.frames[f]
                    .extents
                    .iter()
                    .find(|o| o.lane == e.lane && o.file == e.file && o.offset == e.offset)
                    .unwrap();
                assert!(
                    orig.dst >= start && orig.dst + orig.len <= end,
                    "frame {f}: {e:?}"
                );
            }
            // The bytes of every other brick garbled: the brick still reads, CRCs right.
            clobber_outside(&ds, f, start..end);
            let buf = read(&part, f);
            assert_eq!(&buf[..], &full[start as usize..end as usize], "frame {f}");
            for (a, g) in pf.grids.iter().enumerate() {
                assert_eq!((g.attribute as usize, g.brick), (a, Some(brick)));
                let bytes = part.grid_bytes(f, a, &buf).unwrap();
                let grid = Grid::parse(bytes).unwrap();
                assert_eq!(grid.stored_checksum(), g.checksum, "frame {f} grid {a}");
                assert_eq!(
                    grid.verify_checksum(),
                    ChecksumState::Valid,
                    "frame {f} grid {a}"
                );
            }
            // ... and reading the whole frame now fails its CRCs: the garbling took.
            let mut whole = AlignedBuf::new();
            assert!(ds.read_frame(f, &mut whole, CrcCheck::Verify).is_err());
        }
        assert!(ds.retain_brick(3).is_err());
        assert!(part.retain_brick(0).is_err());
    }
}

/// A change to a manifest's JSON.
type Edit = dyn Fn(&mut serde_json::Value);

/// `manifest.json` of `dir` edited by `edit`, loaded: the error text.
fn load_edited(dir: &Path, edit: impl Fn(&mut serde_json::Value)) -> String {
    let path = dir.join("manifest.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    edit(&mut v);
    let bad = dir.join("edited.json");
    std::fs::write(&bad, serde_json::to_vec(&v).unwrap()).unwrap();
    let Err(err) = Manifest::load(&bad) else {
        panic!("{} loaded", bad.display());
    };
    let err = err.to_string();
    assert!(err.contains(&bad.display().to_string()), "{err}");
    err
}

#[test]
fn hostile_brick_lists_are_refused_with_the_manifest_named() {
    let tmp = tempfile::tempdir().unwrap();
    let params = StormParams {
        frames: 1,
        ..storm()
    };
    let dir = tmp.path().join("b2");
    generate(&params, GridType::Fp16, 2, &dir);
    let cases: Vec<(&str, Box<Edit>)> = vec![
        (
            "overlap",
            Box::new(|v| v["bricks"][1]["index_box"][0][0] = 8.into()),
        ),
        (
            "holes",
            Box::new(|v| {
                v["bricks"][1]["index_box"][0][0] = 32.into();
                v["bricks"][1]["world_box"][0][0] = 25600.0.into();
            }),
        ),
        (
            "does not map",
            Box::new(|v| v["bricks"][1]["index_box"][1][0] = 32.into()),
        ),
        (
            "leaf boundary",
            Box::new(|v| v["bricks"][0]["index_box"][1][0] = 20.into()),
        ),
        (
            "inverted",
            Box::new(|v| v["bricks"][0]["world_box"][1][1] = (-1.0).into()),
        ),
        (
            "grids listed",
            Box::new(|v| {
                v["frames"][0]["grids"].as_array_mut().unwrap().pop();
            }),
        ),
        (
            "not a brick index",
            Box::new(|v| v["frames"][0]["grids"][0]["brick"] = 7.into()),
        ),
        (
            "has no brick",
            Box::new(|v| {
                v["frames"][0]["grids"][0]
                    .as_object_mut()
                    .unwrap()
                    .remove("brick");
            }),
        ),
        (
            "brick by brick",
            Box::new(|v| {
                let g = v["frames"][0]["grids"].as_array_mut().unwrap();
                g[0]["brick"] = 1.into();
                let last = g.len() - 1;
                g[last - 5]["brick"] = 0.into();
            }),
        ),
        (
            "12 grids listed",
            Box::new(|v| {
                v.as_object_mut().unwrap().remove("bricks");
            }),
        ),
        (
            "outside the bricks' domain",
            Box::new(|v| {
                // Both bricks shrunk, consistently, to x < 32 voxels (25600 m): the
                // storm reaches further.
                v["bricks"][0]["index_box"][1][0] = 16.into();
                v["bricks"][0]["world_box"][1][0] = 12800.0.into();
                v["bricks"][1]["index_box"][0][0] = 16.into();
                v["bricks"][1]["world_box"][0][0] = 12800.0.into();
                v["bricks"][1]["index_box"][1][0] = 32.into();
                v["bricks"][1]["world_box"][1][0] = 25600.0.into();
            }),
        ),
    ];
    for (want, edit) in cases {
        let err = load_edited(&dir, edit);
        assert!(err.contains(want), "{want}: {err}");
    }
    // An extent holding bytes of two bricks: two extents at brick 1's start merged.
    let err = load_edited(&dir, |v| {
        let start = v["frames"][0]["grids"][6]["offset"].as_u64().unwrap();
        let ex = v["frames"][0]["extents"].as_array_mut().unwrap();
        let i = ex
            .iter()
            .position(|e| e[4].as_u64() == Some(start))
            .unwrap();
        let len = ex[i][3].as_u64().unwrap();
        ex[i - 1][3] = (ex[i - 1][3].as_u64().unwrap() + len).into();
        ex.remove(i);
    });
    assert!(
        err.contains("two bricks") || err.contains("share bytes"),
        "{err}"
    );
}

#[test]
fn a_manifest_without_bricks_reads_and_writes_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("whole");
    let ds = generate(
        &StormParams {
            frames: 1,
            ..storm()
        },
        GridType::Fp16,
        0,
        &dir,
    );
    let text = std::fs::read(dir.join("manifest.json")).unwrap();
    let s = String::from_utf8_lossy(&text);
    assert!(!s.contains("brick"), "a whole-grid manifest names no brick");
    let again = String::from_utf8(ds.manifest().to_json()).unwrap();
    assert!(
        !again.contains("brick"),
        "nor does it once read and written again"
    );
    assert!(ds.frame(0).unwrap().grids.iter().all(|g| g.brick.is_none()));
    ds.check_whole_grids().unwrap();
    let buf = read(&ds, 0);
    ds.grid_bytes(0, 0, &buf).unwrap();
    assert!(ds.bricks().is_empty());
    assert!(ds.retain_brick(0).is_err());
}

#[test]
fn a_bricked_write_across_ranks_is_the_one_process_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let params = StormParams {
        frames: 5,
        ..storm()
    };
    let one = tmp.path().join("one");
    generate(&params, GridType::Fp16, 3, &one);
    for ranks in [2, 3] {
        let dir = tmp.path().join(format!("ranks{ranks}"));
        let results = run_on(ranks, ranks, |r| {
            generate_dataset_ranks(
                &params,
                &opts(GridType::Fp16, params.bricks(3).unwrap()),
                &dir,
                LaneSpec::Count(3),
                CHUNK,
                provenance(),
                supercell::dataset::ranks::WriteRanks {
                    ranks: r,
                    wait: Some(std::time::Duration::from_secs(120)),
                },
                |_| {},
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
        });
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        assert_eq!(first_difference(&one, &dir).unwrap(), None, "{ranks} ranks");
    }
}

/// A tool of Debian's, or why the test skips.
fn tool(path: &str) -> Option<PathBuf> {
    Path::new(path).exists().then(|| PathBuf::from(path))
}

const CHECK_PY: &str = r#"
import json, sys, pyopenvdb as vdb
whole_path, bricked_path, bricks_json, names_json = sys.argv[1:5]
bricks = json.loads(bricks_json); names = json.loads(names_json)
whole = {g.name: g for g in vdb.readAll(whole_path)[0]}
# OpenVDB hands grids of one name back together, each name's in file (brick) order.
parts = {}
for g in vdb.readAll(bricked_path)[0]:
    parts.setdefault(g.name, []).append(g)
assert sorted(parts) == sorted(names), (sorted(parts), names)
checked = 0
for name, bi, b in [(n, bi, b) for n in names for bi, b in enumerate(bricks)]:
    assert len(parts[name]) == len(bricks), (name, len(parts[name]))
    part = parts[name][bi]
    lo = [v - 8 for v in b[0]]; hi = [v + 8 for v in b[1]]
    w = whole[name]
    wa, pa = w.getConstAccessor(), part.getConstAccessor()
    for x in range(lo[0], hi[0]):
        for y in range(lo[1], hi[1]):
            for z in range(lo[2], hi[2]):
                (wv, wact), (pv, pact) = wa.probeValue((x, y, z)), pa.probeValue((x, y, z))
                if wv != pv or wact != pact:
                    sys.exit("%s brick %d at %s: whole %r/%r, brick %r/%r" % (name, bi, (x, y, z), wv, wact, pv, pact))
                checked += 1
# Every active voxel of each whole grid lies in exactly one owned box.
for name in names:
    for item in whole[name].citerOnValues():
        if item.count != 1:
            sys.exit("%s: an active tile" % name)
        p = item.min
        owners = sum(all(b[0][k] <= p[k] < b[1][k] for k in range(3)) for b in bricks)
        if owners != 1:
            sys.exit("%s: voxel %s owned %d times" % (name, p, owners))
print("checked", checked)
"#;

#[test]
fn one_frame_checked_by_nanovdb_convert_and_pyopenvdb() {
    const TEST: &str = "one_frame_checked_by_nanovdb_convert_and_pyopenvdb";
    let Some(convert) = tool("/usr/bin/nanovdb_convert") else {
        return eprintln!(
            "{TEST}: skipped, nanovdb_convert not installed (apt install libnanovdb-tools)"
        );
    };
    let ok = Command::new("/usr/bin/python3")
        .args(["-c", "import pyopenvdb"])
        .status();
    if !ok.is_ok_and(|s| s.success()) {
        return eprintln!(
            "{TEST}: skipped, /usr/bin/python3 cannot import pyopenvdb (apt install python3-openvdb)"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    // Float grids of the model grid only (nanovdb_convert turns Float grids into OpenVDB).
    let params = StormParams {
        resolution: 32,
        frames: 1,
        attributes: default_params()
            .attributes
            .into_iter()
            .filter(|a| !a.is_nested())
            .collect(),
        ..default_params()
    };
    let whole = generate(&params, GridType::Float, 0, &tmp.path().join("whole"));
    let bricked = generate(&params, GridType::Float, 3, &tmp.path().join("b3"));
    let mut vdbs = Vec::new();
    for (ds, name) in [(&whole, "whole"), (&bricked, "b3")] {
        let nvdb = tmp.path().join(format!("{name}.nvdb"));
        export_frame(ds, 0, &nvdb, Codec::None).unwrap();
        let vdb = tmp.path().join(format!("{name}.vdb"));
        let out = Command::new(&convert)
            .arg(&nvdb)
            .arg(&vdb)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "nanovdb_convert: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        vdbs.push(vdb);
    }
    let boxes: Vec<[Coord; 2]> = bricked.bricks().iter().map(|b| b.index_box).collect();
    let names: Vec<&str> = whole
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    let out = Command::new("/usr/bin/python3")
        .args(["-c", CHECK_PY])
        .arg(&vdbs[0])
        .arg(&vdbs[1])
        .arg(serde_json::to_string(&boxes).unwrap())
        .arg(serde_json::to_string(&names).unwrap())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{TEST}: {}", String::from_utf8_lossy(&out.stdout).trim());
}

/// A bricked write of opaque frames (2 attributes, 2 bricks) into `dir`, interrupted before
/// its manifest lands where `crash` is set.
fn write_opaque_bricked(dir: &Path, seed: u8, crash: bool) -> Result<Manifest, DatasetError> {
    use supercell::dataset::{AttributeSpec, CrashPoint, DatasetWriter};
    let attrs = vec![AttributeSpec::new("a"), AttributeSpec::new("b")];
    let mut w = DatasetWriter::create(dir, LaneSpec::Count(2), 8192, attrs, provenance())?;
    let boxes = [[[0, 0, 0], [8, 8, 8]], [[8, 0, 0], [16, 8, 8]]];
    w.set_bricks(supercell::dataset::bricks::bricks_of(
        &boxes, [1.0; 3], [0.0; 3],
    ))?;
    for f in 0..3u8 {
        let grids = (0..4u8).map(|g| vec![seed ^ f ^ g; 5000 + usize::from(g) * 3000]);
        w.push_frame_opaque(f64::from(f), grids.collect())?;
    }
    if crash {
        w.crash_at(CrashPoint::BeforeManifestRename);
    }
    w.finish()
}

#[test]
fn an_interrupted_bricked_write_leaves_the_old_dataset_and_is_cleaned_up() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    write_opaque_bricked(&dir, 1, false).unwrap();
    let before = std::fs::read(dir.join("manifest.json")).unwrap();
    assert!(write_opaque_bricked(&dir, 2, true).is_err());
    // The old dataset, untouched and whole.
    assert_eq!(std::fs::read(dir.join("manifest.json")).unwrap(), before);
    let ds = Dataset::open(&dir).unwrap();
    assert_eq!(ds.bricks().len(), 2);
    for f in 0..ds.frame_count() {
        read(&ds, f);
        let part = ds.retain_brick(1).unwrap();
        assert_eq!(
            read(&part, f)[0],
            1 ^ f as u8 ^ 2,
            "frame {f}: brick 1's first grid"
        );
    }
    // The next write removes the interrupted one's files.
    write_opaque_bricked(&dir, 3, false).unwrap();
    let ds = Dataset::open(&dir).unwrap();
    let mut referenced: Vec<PathBuf> = Vec::new();
    for (l, lane) in ds.manifest().lanes.iter().enumerate() {
        referenced.extend((0..lane.files.len()).map(|f| ds.lane_file_path(l as u32, f as u32)));
    }
    let mut present: Vec<PathBuf> = Vec::new();
    for lane in std::fs::read_dir(dir.join("lanes")).unwrap() {
        present.extend(
            std::fs::read_dir(lane.unwrap().path())
                .unwrap()
                .map(|e| e.unwrap().path()),
        );
    }
    referenced.sort();
    present.sort();
    assert_eq!(present, referenced, "files left behind");
}
