//! Frames bound as parts and up to eight attributes, on whatever Vulkan device is present
//! (Mesa's lavapipe in CI): eight attributes against the CPU reference, a ninth refused,
//! grids split over several parts against the same grids in one part (bit for bit), and the
//! largest frame the device can bind (over 4 GiB on a GPU with 4 GiB bindings; lavapipe's
//! 128 MiB bindings cap it at 8 × 128 MiB) against the same grid unpadded.
//!
//! GPU vs CPU tolerances are those of `render_gpu.rs`.

mod render_support;

use bytemuck::Zeroable;
use render_support::*;
use supercell::format::layout as l;
use supercell::format::{Grid, GridType, build_grid};
use supercell::render::{
    Camera, GridInParts, GridSlice, Image, ImageDiff, MAX_ATTRIBUTES, MAX_PARTS, MIN_PART_BYTES,
    Mode, PARTS_LIMIT, Renderer, SlotPart, View, render_cpu, upload_slot,
};

const W: u32 = 96;
const H: u32 = 64;

fn save(img: &Image, name: &str) {
    let _ = img.write_png(&out_dir().join(format!("{name}.png")));
}

fn check_close(d: &ImageDiff, what: &str) {
    eprintln!("{what}: {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "{what}: GPU and CPU differ: {d:?}"
    );
}

fn not_blank(img: &Image, what: &str) {
    let lit = img.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(
        lit > img.linear.len() / 20,
        "{what}: only {lit} of {} pixels show anything",
        img.linear.len()
    );
}

fn assert_identical(a: &Image, b: &Image, what: &str) {
    assert_eq!(a.rgba8, b.rgba8, "{what}: 8-bit images differ");
    let bits =
        |i: &Image| -> Vec<u32> { i.linear.iter().flat_map(|p| p.map(f32::to_bits)).collect() };
    assert!(bits(a) == bits(b), "{what}: linear images differ");
}

/// Eight grids of every value type, side by side (4 × 2 in x and y) so that each one shows.
fn eight_grids() -> Vec<Vec<u8>> {
    [
        GridType::Float,
        GridType::Half,
        GridType::Fp4,
        GridType::Fp8,
        GridType::Fp16,
        GridType::FpN,
        GridType::Float,
        GridType::Fp16,
    ]
    .iter()
    .enumerate()
    .map(|(i, &t)| {
        let built = if t == GridType::Half {
            GridType::Float
        } else {
            t
        };
        let mut o = options(built);
        // The test volume spans 12 world units a side.
        o.world_origin[0] += 14.0 * (i % 4) as f64;
        o.world_origin[1] += 14.0 * (i / 4) as f64;
        let g = build_grid(&test_volume(), &o).expect("test grid builds");
        if t == GridType::Half { to_half(&g) } else { g }
    })
    .collect()
}

/// A view of all eight grids, each its own attribute and look (the three presets in turn,
/// each slot showing its own band of values).
fn eight_view(grids: &[Grid<'_>]) -> View {
    let presets = ["cloud", "rain", "wind_speed"];
    let names: Vec<&str> = (0..MAX_ATTRIBUTES)
        .map(|i| presets[i % presets.len()])
        .collect();
    let mut view = view_for(&grids[0], &names, W, H);
    let mut bbox = view.world_bbox;
    for g in grids {
        let b = g.world_bbox();
        for k in 0..3 {
            bbox[0][k] = bbox[0][k].min(b[0][k] as f32);
            bbox[1][k] = bbox[1][k].max(b[1][k] as f32);
        }
    }
    view.world_bbox = bbox;
    view.camera = Camera::fit(bbox, W as f32 / H as f32);
    view.settings.mode = Mode::Shaded;
    for (i, a) in view.attributes.iter_mut().enumerate() {
        let a = a.as_mut().unwrap();
        let lo = i as f32 * 0.04;
        a.tf.opacity = vec![(lo, 0.0), (lo + 0.1, 0.6), (1.0, 1.0)];
    }
    view
}

#[test]
fn eight_attributes_match_cpu() {
    let Some(mut gpu) = gpu() else { return };
    let grids = eight_grids();
    let parsed: Vec<Grid> = grids.iter().map(|g| Grid::parse(g).unwrap()).collect();
    let mut view = eight_view(&parsed);
    let refs: Vec<&[u8]> = grids.iter().map(|g| g.as_slice()).collect();
    let g = gpu.render(&refs, &view, W, H);
    let c = render_cpu(&parsed.iter().map(Some).collect::<Vec<_>>(), &view, W, H);
    save(&g, "eight_attributes_gpu");
    save(&c, "eight_attributes_cpu");
    not_blank(&g, "eight attributes");
    check_close(&g.diff(&c), "eight attributes");
    // The eighth slot is composited: switching it off changes the picture.
    view.attributes[MAX_ATTRIBUTES - 1]
        .as_mut()
        .unwrap()
        .enabled = false;
    let off = gpu.render(&refs, &view, W, H);
    let d = off.diff(&g);
    assert!(
        d.max > 0.01,
        "switching the eighth attribute off changed nothing: {d:?}"
    );
    let c_off = render_cpu(&parsed.iter().map(Some).collect::<Vec<_>>(), &view, W, H);
    check_close(&off.diff(&c_off), "seven of eight attributes");
}

#[test]
fn a_ninth_attribute_is_refused() {
    let Some(mut gpu) = gpu() else { return };
    let grid = test_grid(GridType::Float, false);
    let buf = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &grid);
    let slice = GridSlice {
        buffer: &buf,
        offset: 0,
        size: grid.len() as u64,
    };
    let e = gpu
        .r
        .set_grids(&vec![Some(slice); MAX_ATTRIBUTES + 1])
        .expect_err("nine grids bind");
    assert!(
        e.to_string()
            .contains("9 grids given; a frame composites at most 8 attributes"),
        "{e}"
    );
    let part = SlotPart {
        buffer: &buf,
        offset: 0,
        size: buf.size(),
    };
    let at = GridInParts {
        part: 0,
        offset: 0,
        size: grid.len() as u64,
    };
    let e = gpu
        .r
        .set_frame(&[part], &vec![Some(at); MAX_ATTRIBUTES + 1])
        .expect_err("nine grids bind");
    assert!(e.to_string().contains("at most 8 attributes"), "{e}");
    // Eight bind.
    gpu.r.set_grids(&[Some(slice); MAX_ATTRIBUTES]).unwrap();
}

/// `slot` cut into parts of `part_bytes` (each its own buffer; the last one shorter).
fn part_buffers(gpu: &TestGpu, slot: &[u8], part_bytes: usize) -> Vec<wgpu::Buffer> {
    slot.chunks(part_bytes)
        .map(|c| upload_slot(&gpu.ctx.device, &gpu.ctx.queue, c))
        .collect()
}

fn slot_parts(bufs: &[wgpu::Buffer]) -> Vec<SlotPart<'_>> {
    bufs.iter()
        .map(|b| SlotPart {
            buffer: b,
            offset: 0,
            size: b.size(),
        })
        .collect()
}

/// Three grids back to back in one slot at word (not part) boundaries, after an odd
/// lead-in, and a part size small enough that each grid runs over two or three parts.
struct SplitSlot {
    grids: [Vec<u8>; 3],
    slot: Vec<u8>,
    /// Where each grid starts in the slot.
    at: Vec<u64>,
    part_bytes: u64,
}

fn split_slot() -> SplitSlot {
    let grids = [
        test_grid(GridType::Fp16, true),
        test_grid(GridType::Float, true),
        test_grid(GridType::Fp8, false),
    ];
    let mut slot = vec![0u8; 1028];
    let mut at = Vec::new();
    for g in &grids {
        at.push(slot.len() as u64);
        slot.extend_from_slice(g);
        slot.resize(slot.len().next_multiple_of(4) + 4, 0);
    }
    let smallest = grids.iter().map(Vec::len).min().unwrap() as u64;
    // The largest power of two at most half the smallest grid.
    let part_bytes = (1u64 << (63 - (smallest / 2).leading_zeros())).max(MIN_PART_BYTES);
    let parts_needed = (slot.len() as u64).div_ceil(part_bytes);
    eprintln!(
        "grids of {:?} bytes in {parts_needed} parts of {part_bytes} bytes",
        grids.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert!(
        parts_needed <= MAX_PARTS as u64 && grids.iter().all(|g| g.len() as u64 > part_bytes),
        "the test grids fit the parts and each spans more than one"
    );
    SplitSlot {
        grids,
        slot,
        at,
        part_bytes,
    }
}

#[test]
fn grids_split_over_parts_render_as_in_one_part() {
    let Some(mut gpu) = gpu() else { return };
    let s = split_slot();
    let (grids, slot, at, part_bytes) = (&s.grids, &s.slot, &s.at, s.part_bytes);
    let parsed: Vec<Grid> = grids.iter().map(|g| Grid::parse(g).unwrap()).collect();
    let mut view = view_for(&parsed[0], &["cloud", "rain", "wind_speed"], W, H);
    view.camera.zoom(1.3);
    if let Some(a) = view.attributes[2].as_mut() {
        a.tf.opacity = vec![(0.5, 0.0), (1.0, 1.0)];
    }
    let mut split = Renderer::with_part_bytes(&gpu.ctx.device, &gpu.ctx.queue, part_bytes)
        .expect("renderer with small parts");
    assert_eq!(split.part_bytes(), part_bytes);
    let bufs = part_buffers(&gpu, slot, part_bytes as usize);
    let located: Vec<Option<GridInParts>> = grids
        .iter()
        .zip(at)
        .map(|(g, &o)| Some(GridInParts::locate(o, g.len() as u64, part_bytes)))
        .collect();
    assert!(
        located
            .iter()
            .flatten()
            .any(|g| g.offset + g.size > 2 * part_bytes),
        "a grid runs over three parts: {located:?}"
    );
    split.set_frame(&slot_parts(&bufs), &located).unwrap();
    split.render(&view, W, H).unwrap();
    let in_parts = split.read_image().unwrap();
    // The same grids, one buffer (one part) each.
    let refs: Vec<&[u8]> = grids.iter().map(|g| g.as_slice()).collect();
    let whole = gpu.render(&refs, &view, W, H);
    save(&in_parts, "grids_in_parts_gpu");
    not_blank(&whole, "grids in one part");
    assert_identical(&in_parts, &whole, "grids split over parts");
    let one = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, slot);
    let check = |split: &mut Renderer, what: &str| {
        split.render(&view, W, H).unwrap();
        assert_identical(&split.read_image().unwrap(), &whole, what);
    };
    bind_slot_buffers(&mut split, &s, &one);
    check(&mut split, "one buffer cut into parts");
    let _sparse = bind_grids_far_apart(&gpu, &mut split, &s);
    check(&mut split, "grids far apart in one buffer");
    bind_few_of_many_parts(&mut split, &bufs, &located);
    check(&mut split, "grids in a few of more parts than bound");
    bad_frames_are_refused(&gpu, &mut split, &s, &bufs, &located, &one);
}

/// The whole slot bound through `set_grids` on the small-part renderer: it cuts the
/// buffer into parts itself.
fn bind_slot_buffers(split: &mut Renderer, s: &SplitSlot, one: &wgpu::Buffer) {
    let slices: Vec<_> = s
        .grids
        .iter()
        .zip(&s.at)
        .map(|(g, &o)| {
            Some(GridSlice {
                buffer: one,
                offset: o,
                size: g.len() as u64,
            })
        })
        .collect();
    split.set_grids(&slices).unwrap();
}

/// Grids far apart in one buffer (more parts than a frame binds between them) get parts
/// of their own. Returns the buffer, bound until the next frame.
fn bind_grids_far_apart(gpu: &TestGpu, split: &mut Renderer, s: &SplitSlot) -> wgpu::Buffer {
    let (slot, at) = (&s.slot, &s.at);
    let far = 16 * s.part_bytes as usize;
    let mut sparse = vec![0u8; far + slot.len()];
    sparse[..at[1] as usize].copy_from_slice(&slot[..at[1] as usize]);
    sparse[far + at[1] as usize..].copy_from_slice(&slot[at[1] as usize..]);
    let sparse_buf = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &sparse);
    let far_slices: Vec<_> = s
        .grids
        .iter()
        .zip(at)
        .enumerate()
        .map(|(i, (g, &o))| {
            Some(GridSlice {
                buffer: &sparse_buf,
                offset: if i == 0 { o } else { far as u64 + o },
                size: g.len() as u64,
            })
        })
        .collect();
    split.set_grids(&far_slices).unwrap();
    sparse_buf
}

/// A slot of more parts than the device binds, the grids in a few of them (here after
/// max_parts parts no grid touches): only the parts the grids span are bound, each
/// grid's part index remapped.
fn bind_few_of_many_parts(
    split: &mut Renderer,
    bufs: &[wgpu::Buffer],
    located: &[Option<GridInParts>],
) {
    let parts = slot_parts(bufs);
    let max_parts = split.max_parts();
    let mut many = vec![parts[0]; max_parts];
    many.extend_from_slice(&parts);
    let shifted: Vec<Option<GridInParts>> = located
        .iter()
        .map(|g| {
            g.map(|g| GridInParts {
                part: g.part + max_parts,
                ..g
            })
        })
        .collect();
    split.set_frame(&many, &shifted).unwrap();
}

/// Refusals, each naming what is wrong: grids past their parts or off word boundaries,
/// more parts than the device binds, parts larger than the part size, odd part sizes.
fn bad_frames_are_refused(
    gpu: &TestGpu,
    split: &mut Renderer,
    s: &SplitSlot,
    bufs: &[wgpu::Buffer],
    located: &[Option<GridInParts>],
    one: &wgpu::Buffer,
) {
    let part_bytes = s.part_bytes;
    let parts = slot_parts(bufs);
    let max_parts = split.max_parts();
    assert!(
        (MAX_PARTS..=PARTS_LIMIT).contains(&max_parts),
        "{max_parts}"
    );
    let mut err = |parts: &[SlotPart<'_>], grids: &[Option<GridInParts>]| {
        split
            .set_frame(parts, grids)
            .expect_err("bad frame binds")
            .to_string()
    };
    // A grid running past a part shorter than the part size.
    let short = &bufs[bufs.len() - 1];
    let tail = [SlotPart {
        buffer: short,
        offset: 0,
        size: short.size(),
    }];
    let e = err(
        &[tail[0], tail[0]],
        &[Some(GridInParts {
            part: 0,
            offset: 0,
            size: short.size() + 4,
        })],
    );
    assert!(e.contains("runs past the end of part 0"), "{e}");
    // A grid running past the last part.
    let last = located[2].unwrap();
    let e = err(&parts[..parts.len() - 1], &[None, None, Some(last)]);
    assert!(e.contains("runs past the last of the"), "{e}");
    // A grid not at a word boundary, and one in a part that is not there.
    let e = err(&parts, &[Some(GridInParts { offset: 2, ..last })]);
    assert!(e.contains("multiple of 4 bytes"), "{e}");
    let e = err(
        &parts,
        &[Some(GridInParts {
            part: parts.len(),
            ..last
        })],
    );
    assert!(
        e.contains(&format!("starts in part {}", parts.len())),
        "{e}"
    );
    // Grids spanning more parts than the device binds (more parts given bind where the
    // grids span few enough), and parts larger than the part size.
    assert_eq!(parts[0].size, part_bytes);
    let many = vec![parts[0]; max_parts + 1];
    let e = err(
        &many,
        &[Some(GridInParts {
            part: 0,
            offset: 0,
            size: (max_parts as u64 + 1) * part_bytes,
        })],
    );
    assert!(
        e.contains(&format!("span {} parts", max_parts + 1))
            && e.contains(&format!("at most {max_parts} on this device")),
        "{e}"
    );
    let e = err(
        &[SlotPart {
            buffer: one,
            offset: 0,
            size: one.size().next_multiple_of(4),
        }],
        &[],
    );
    assert!(
        e.contains(&format!("parts hold 4 to {part_bytes} bytes")),
        "{e}"
    );
    // The part size must be a power of two of at least 64 KiB.
    for bad in [MIN_PART_BYTES / 2, 3 * MIN_PART_BYTES] {
        let e = Renderer::with_part_bytes(&gpu.ctx.device, &gpu.ctx.queue, bad)
            .err()
            .expect("odd part size accepted")
            .to_string();
        assert!(e.contains("power of two"), "{e}");
    }
}

#[test]
fn locate_maps_frame_offsets_to_parts() {
    let p = 1u64 << 31;
    assert_eq!(
        GridInParts::locate(0, 10, p),
        GridInParts {
            part: 0,
            offset: 0,
            size: 10
        }
    );
    assert_eq!(
        GridInParts::locate(5 * p + 4096, 7 << 32, p),
        GridInParts {
            part: 5,
            offset: 4096,
            size: 7 << 32
        }
    );
    assert_eq!(GridInParts::locate(p - 4, 8, p).part, 0);
    assert_eq!(GridInParts::locate(p, 8, p).part, 1);
}

/// The bytes of `slot` that are not zero, as (offset, bytes) runs of whole 4 KiB pages.
fn written_runs(slot: &[u8], head: usize, tail_from: usize) -> [(usize, &[u8]); 2] {
    [(0, &slot[..head]), (tail_from, &slot[tail_from..])]
}

/// The largest frame this device binds, up to 4.5 GiB (`Renderer::max_frame_bytes`: over
/// 4 GiB on a 4 GiB-binding GPU, in 2 GiB parts; on Mesa 22.3's lavapipe, whose 32 storage
/// buffers per stage leave 26 parts of its 128 MiB bindings, 3.25 GiB): one grid padded to
/// nearly its size, in parts of the device's own size, renders as the unpadded grid does,
/// and as the CPU reference does. On the 2-core development machine's lavapipe (when the
/// renderer kept five buffers of its own, 27 parts): a 3.62 GB grid, 17 s (37 s with the
/// build's start) and 4.1 GB peak
/// resident memory (the padded grid on the host and the parts, which lavapipe keeps in host
/// memory).
#[test]
fn largest_bindable_frame_renders_like_the_unpadded_grid() {
    let Some(mut gpu) = gpu() else { return };
    let part_bytes = gpu.r.part_bytes();
    let frame_bytes = gpu.r.max_frame_bytes().min(9 << 29);
    assert_eq!(frame_bytes % part_bytes, 0);
    // Every part the device's storage buffers per stage leave beside the renderer's six.
    let per_stage = gpu.ctx.device.limits().max_storage_buffers_per_shader_stage as usize;
    assert_eq!(gpu.r.max_parts(), (per_stage - 6).min(PARTS_LIMIT));
    assert!(gpu.r.max_parts() >= MAX_PARTS);
    let grid = test_grid(GridType::Float, true);
    let gap = (frame_bytes - grid.len() as u64 - 4096) / 4096 * 4096;
    let big = padded(&grid, gap);
    eprintln!(
        "{}: a grid of {} bytes in parts of {part_bytes} bytes",
        gpu.ctx.describe(),
        big.len()
    );
    if !gpu.ctx.caps.software {
        assert!(
            big.len() as u64 > 4 << 30,
            "a GPU renders a grid over 4 GiB"
        );
    }
    // The grid needs every part the device binds (more than MAX_PARTS where it has them).
    assert_eq!(
        (big.len() as u64).div_ceil(part_bytes),
        frame_bytes / part_bytes,
        "the padded grid spans the device's parts"
    );
    let parsed_big = Grid::parse(&big).expect("padded grid parses");
    let parsed = Grid::parse(&grid).unwrap();
    let mut view = view_for(&parsed, &["cloud"], W, H);
    view.camera.zoom(1.3);

    // Parts of the device's part size, each its own buffer (zeroed by wgpu); only the head
    // (header, tree, root) and the tail (the nodes) are written.
    let upper = l::GRID_SIZE as usize
        + rd64(
            &grid,
            l::GRID_SIZE as usize + l::TREE_OFF_NODE_OFFSET_UPPER as usize,
        ) as usize;
    let tail_from = upper + gap as usize;
    let n_parts = (big.len() as u64).div_ceil(part_bytes) as usize;
    let bufs: Vec<wgpu::Buffer> = (0..n_parts)
        .map(|k| {
            let size = (big.len() as u64 - k as u64 * part_bytes)
                .min(part_bytes)
                .next_multiple_of(4);
            gpu.ctx.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("padded frame part"),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        })
        .collect();
    for (from, bytes) in written_runs(&big, upper, tail_from) {
        // Split each run at part boundaries.
        let mut at = from;
        for chunk in bytes.chunks(4096) {
            let k = at / part_bytes as usize;
            let mut c = chunk.to_vec();
            c.resize(c.len().next_multiple_of(4), 0);
            let in_part = (at % part_bytes as usize) as u64;
            let room = (bufs[k].size() - in_part) as usize;
            if c.len() <= room {
                gpu.ctx.queue.write_buffer(&bufs[k], in_part, &c);
            } else {
                gpu.ctx.queue.write_buffer(&bufs[k], in_part, &c[..room]);
                gpu.ctx.queue.write_buffer(&bufs[k + 1], 0, &c[room..]);
            }
            at += chunk.len();
        }
    }
    let parts = slot_parts(&bufs);
    let at = GridInParts::locate(0, big.len() as u64, part_bytes);
    gpu.r.set_frame(&parts, &[Some(at)]).unwrap();
    gpu.r.render(&view, W, H).unwrap();
    let g_big = gpu.r.read_image().unwrap();
    drop(bufs);
    let g = gpu.render(&[&grid], &view, W, H);
    save(&g_big, "largest_frame_gpu");
    not_blank(&g, "unpadded grid");
    assert_identical(&g_big, &g, "padded grid over parts");
    let c_big = render_cpu(&[Some(&parsed_big)], &view, W, H);
    check_close(&g_big.diff(&c_big), "padded grid, GPU vs CPU");
}

/// The CPU reference reads grids over 4 GiB (64-bit offsets): a grid padded past 4 GiB
/// renders exactly as the unpadded one.
#[test]
fn cpu_reference_reads_a_grid_over_4_gib() {
    let grid = test_grid(GridType::Fp8, true);
    let big = padded(&grid, (4 << 30) + (64 << 20));
    assert!(big.len() as u64 > 4 << 30);
    let parsed_big = Grid::parse(&big).expect("padded grid parses");
    let parsed = Grid::parse(&grid).unwrap();
    let mut view = view_for(&parsed, &["cloud"], W / 2, H / 2);
    view.camera.zoom(1.3);
    let a = render_cpu(&[Some(&parsed_big)], &view, W / 2, H / 2);
    let b = render_cpu(&[Some(&parsed)], &view, W / 2, H / 2);
    not_blank(&b, "unpadded grid");
    assert_identical(&a, &b, "grid padded past 4 GiB, CPU");
}

/// The shader's child-reference check (`rel`) with a grid of nearly 16 GiB: offsets over
/// 4 GiB forward and back, which lavapipe's 1 GiB of parts cannot reach in a render. An
/// entry point appended to the acceleration module evaluates it case by case.
#[test]
fn child_offsets_over_4_gib_resolve_in_the_shader() {
    let Some(gpu) = gpu() else { return };
    let (device, queue) = (&gpu.ctx.device, &gpu.ctx.queue);
    const BAD: u32 = u32::MAX;
    let len_words: u32 = 0xffff_fff0;
    // (node word address, signed byte offset, child bytes, expected word address)
    let cases: [(u32, i64, u32, u32); 12] = [
        (168, 32, 64, 176),
        (168, 5 << 30, 64, 168 + (5 << 28)),
        (168 + (5 << 28), -(5 << 30), 64, 168),
        (0x4000_0008, -(4 << 30), 64, 8),
        (168, 16 << 30, 64, BAD),
        (168, (16 << 30) - 32, 64, BAD),
        (168, 0, 64, BAD),
        (168, 36, 64, BAD),
        (168, -1024, 64, BAD),
        (0xffff_ff00, 0x100, 64, 0xffff_ff40),
        (0xffff_ff00, 0x100, 1024, BAD),
        (0x8000_0000, -(0x8000_0000 << 2), 32, 0),
    ];
    let input: Vec<u32> = cases
        .iter()
        .flat_map(|&(base, off, size, _)| [base, off as u32, (off >> 32) as u32, size])
        .collect();
    let src = supercell::render::shader_source_of(
        supercell::render::ShaderPart::Accel,
        &supercell::render::ShaderConfig::default(),
    ) + "
@group(0) @binding(15) var<storage, read> rel_cases: array<vec4<u32>>;
@group(0) @binding(16) var<storage, read_write> rel_out: array<u32>;
@compute @workgroup_size(1, 1, 1)
fn rel_cases_main() {
    for (var i = 0u; i < arrayLength(&rel_cases); i++) {
        let c = rel_cases[i];
        rel_out[i] = rel(0u, c.x, c.y, c.z, c.w);
    }
}
";
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("rel cases"),
        source: wgpu::ShaderSource::Wgsl(src.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("rel cases"),
        layout: None,
        module: &module,
        entry_point: Some("rel_cases_main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let mut params = supercell::render::GpuParams::zeroed();
    params.grids[0].words = len_words;
    let buffer = |bytes: &[u8], usage| {
        let b = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: bytes.len() as u64,
            usage: usage | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        queue.write_buffer(&b, 0, bytes);
        b
    };
    // The parameters are a read-only storage buffer (see render::parts::OWN_STORAGE_BUFFERS).
    let uniform = buffer(bytemuck::bytes_of(&params), wgpu::BufferUsages::STORAGE);
    let inputs = buffer(bytemuck::cast_slice(&input), wgpu::BufferUsages::STORAGE);
    let out = buffer(&vec![0u8; cases.len() * 4], wgpu::BufferUsages::STORAGE);
    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &[
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniform.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 15,
                resource: inputs.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 16,
                resource: out.as_entire_binding(),
            },
        ],
    });
    let mut enc = device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipeline);
        pass.set_bind_group(0, Some(&group), &[]);
        pass.dispatch_workgroups(1, 1, 1);
    }
    queue.submit([enc.finish()]);
    let bytes =
        supercell::device::read_buffer(device, queue, &out, 0, cases.len() as u64 * 4).unwrap();
    let got: Vec<u32> = bytemuck::pod_collect_to_vec(&bytes);
    for (c, g) in cases.iter().zip(&got) {
        assert_eq!(
            *g, c.3,
            "rel(base {:#x}, offset {}, {} bytes) in a grid of {len_words:#x} words",
            c.0, c.1, c.2
        );
    }
}

/// A device opened with WebGPU's default limits (8 storage buffers per shader stage) cannot
/// bind the renderer's 14: the renderer says so instead of failing in validation.
#[test]
fn a_device_with_too_few_storage_buffers_is_refused_clearly() {
    let Some(gpu) = gpu() else { return };
    let (device, queue) =
        supercell::device::block_on(gpu.ctx.adapter.request_device(&Default::default()))
            .expect("a default device");
    assert_eq!(device.limits().max_storage_buffers_per_shader_stage, 8);
    let e = Renderer::new(&device, &queue)
        .err()
        .expect("a renderer on 8 storage buffers per stage")
        .to_string();
    assert!(
        e.contains("8 storage buffers per shader stage") && e.contains("binds 14"),
        "{e}"
    );
    // Devices supercell opens ask for enough.
    assert!(
        gpu.ctx.device.limits().max_storage_buffers_per_shader_stage
            >= supercell::device::MIN_STORAGE_BUFFERS_PER_STAGE
    );
}
