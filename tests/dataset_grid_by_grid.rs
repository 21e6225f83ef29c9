//! A frame written grid by grid (`begin_frame`, `push_grid`, `end_frame`: how the generator
//! keeps one grid of a frame in memory) is stored as the same bytes as the frame pushed
//! whole, whatever the chunk, lane and segment sizes; misuse is refused by name.

use std::path::Path;

use supercell::dataset::{
    ALIGN, AlignedBuf, CrcCheck, Dataset, DatasetWriter, LaneSpec, Manifest, Provenance, verify,
};
use supercell::synth::{GenerateOptions, Storm, attribute_specs, default_params, encode_frame};

/// Three frames of the storm's six default grids at a small resolution (sizes from a few
/// kilobytes to some hundreds).
fn frames() -> Vec<(f64, Vec<Vec<u8>>)> {
    let mut p = default_params();
    p.resolution = 48;
    p.frames = 3;
    let storm = Storm::new(p);
    (0..3)
        .map(|f| {
            let e = encode_frame(&storm, f, &GenerateOptions::default()).unwrap();
            (e.time, e.grids)
        })
        .collect()
}

fn writer(dir: &Path, lanes: u32, chunk: u64, segment: u64) -> DatasetWriter {
    let mut p = default_params();
    p.resolution = 48;
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(lanes),
        chunk,
        attribute_specs(&p),
        Provenance::new("dataset_grid_by_grid", ["x"]),
    )
    .unwrap();
    w.set_segment_size(segment).unwrap();
    w
}

fn slot_images(dir: &Path) -> (Manifest, Vec<Vec<u8>>) {
    let ds = Dataset::open(dir).unwrap();
    let report = verify(&ds, |_| {});
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut buf = AlignedBuf::new();
    let images = (0..ds.manifest().frames.len())
        .map(|f| {
            ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
            buf.to_vec()
        })
        .collect();
    (ds.manifest().clone(), images)
}

#[test]
fn grid_by_grid_stores_the_bytes_of_whole_frames() {
    let frames = frames();
    let largest = frames
        .iter()
        .flat_map(|(_, g)| g.iter().map(Vec::len))
        .max()
        .unwrap() as u64;
    // Chunks smaller and larger than the grids, one lane and several, segments that roll
    // over every few chunks and never.
    for (lanes, chunk_pages, segment_chunks) in [(1, 1, 3), (3, 2, 2), (4, 7, 1000), (2, 64, 1)] {
        let chunk = chunk_pages * ALIGN;
        let segment = chunk * segment_chunks;
        let (whole, streamed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let mut w = writer(whole.path(), lanes, chunk, segment);
        for (t, grids) in &frames {
            w.push_frame_borrowed(*t, grids).unwrap();
        }
        w.finish().unwrap();
        let mut w = writer(streamed.path(), lanes, chunk, segment);
        for (t, grids) in &frames {
            w.begin_frame(*t).unwrap();
            for g in grids {
                w.push_grid(g).unwrap();
            }
            w.end_frame().unwrap();
        }
        w.finish().unwrap();
        let case =
            format!("{lanes} lanes, chunk {chunk}, segment {segment}, grids up to {largest}");
        let (m_whole, i_whole) = slot_images(whole.path());
        let (m_streamed, i_streamed) = slot_images(streamed.path());
        assert_eq!(i_whole.len(), 3, "{case}");
        assert!(i_whole == i_streamed, "{case}: slot images differ");
        for (a, b) in m_whole.frames.iter().zip(&m_streamed.frames) {
            assert_eq!(a.grids, b.grids, "{case}");
            assert_eq!(a.slot_size, b.slot_size, "{case}");
            // The same chunks on the same lanes; only a frame's last chunk may go to a new
            // segment file where the whole frame's writer knew it was short.
            let spans = |f: &supercell::dataset::Frame| -> Vec<_> {
                f.extents
                    .iter()
                    .map(|e| (e.lane, e.dst, e.len, e.crc32))
                    .collect()
            };
            assert_eq!(spans(a), spans(b), "{case}");
        }
        assert_eq!(m_whole.attributes, m_streamed.attributes, "{case}");
    }
}

#[test]
fn grid_by_grid_misuse_is_refused() {
    let frames = frames();
    let (t, grids) = &frames[0];
    let dir = tempfile::tempdir().unwrap();
    let mut w = writer(dir.path(), 2, ALIGN, 1 << 30);
    let err = |r: supercell::dataset::Result<()>| r.unwrap_err().to_string();
    assert!(err(w.push_grid(&grids[0])).contains("outside begin_frame"));
    assert!(err(w.end_frame()).contains("without begin_frame"));
    w.begin_frame(*t).unwrap();
    assert!(err(w.begin_frame(t + 1.0)).contains("before the previous frame ended"));
    assert!(err(w.push_frame_borrowed(t + 1.0, grids)).contains("is open"));
    assert!(err(w.push_grid(&[])).contains("empty grid"));
    assert!(err(w.push_grid(&[7u8; 4096])).contains("not a valid NanoVDB grid"));
    w.push_grid(&grids[0]).unwrap();
    assert!(err(w.end_frame()).contains("1 grids given, the dataset has 6 attributes"));
    // Refused grids were not written: the frame goes on with the next attribute.
    for g in &grids[1..] {
        w.push_grid(g).unwrap();
    }
    assert!(err(w.push_grid(&grids[0])).contains("more grids than"));
    w.end_frame().unwrap();
    w.begin_frame(t + 1.0).unwrap();
    let e = w.finish().unwrap_err().to_string();
    assert!(e.contains("begun and not ended"), "{e}");
}
