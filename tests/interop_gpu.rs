//! GPU machine only (`#[ignore]`d; run by scripts/gpu-tests.sh): zero-copy CUDA↔Vulkan
//! sharing. Bytes CUDA writes are the bytes wgpu reads (and back), at offsets beyond 4 GiB
//! where the device allows such a buffer; a NanoVDB frame written by CUDA into a shared
//! frame-ring slot renders exactly like the same frame uploaded through wgpu; the staged and
//! gds engines fill shared slots byte-exact as wgpu sees them; creating and dropping shared
//! buffers leaks no device memory.

mod render_support;

mod test_bytes;
mod test_stream;
use test_bytes::xorshift_bytes as pattern;

use std::sync::Arc;
use std::time::Duration;

use cudarc::driver::sys;
use render_support::{test_grid, view_for};
use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetWriter, LaneSpec, Provenance,
};
use supercell::device::read_buffer;
use supercell::format::{Grid, GridType};
use supercell::gpu::interop;
use supercell::gpu::{
    FrameRing, Gpu, InteropDevice, PartMemory, SharedBuffer, SlotLayout, SlotMemory,
};
use supercell::ingest::{Engine, EngineConfig, EngineKind, IngestEngine, Source, open_engine};
use supercell::render::{GridSlice, Image, Renderer, upload_slot};
use supercell::stream::FrameStream;

const GIB: u64 = 1 << 30;

fn setup() -> (Gpu, InteropDevice) {
    let gpu = Gpu::open(0).expect("CUDA GPU 0");
    let dev = InteropDevice::open(&gpu).expect("Vulkan device of the CUDA GPU");
    eprintln!("interop device: {}", dev.describe());
    (gpu, dev)
}

fn check(r: sys::CUresult, what: &str) {
    assert_eq!(r, sys::CUresult::CUDA_SUCCESS, "{what}");
}

/// CUDA writes `bytes` at `dst` (synchronous copy, then a context synchronise: the
/// `on_gpu` point of the engines' contract).
fn cuda_write(gpu: &Gpu, dst: sys::CUdeviceptr, bytes: &[u8]) {
    gpu.bind().unwrap();
    // SAFETY: the callers pass pointers inside a live shared buffer with room for `bytes`.
    check(
        unsafe { sys::cuMemcpyHtoD_v2(dst, bytes.as_ptr().cast(), bytes.len()) },
        "cuMemcpyHtoD",
    );
    // SAFETY: no preconditions.
    check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize");
}

fn cuda_read(gpu: &Gpu, src: sys::CUdeviceptr, len: usize) -> Vec<u8> {
    gpu.bind().unwrap();
    let mut out = vec![0u8; len];
    // SAFETY: as above.
    check(
        unsafe { sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), src, len) },
        "cuMemcpyDtoH",
    );
    out
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn probe_reports_sharing_works() {
    let gpu = Gpu::open(0).expect("CUDA GPU 0");
    let msg = interop::probe(Some(&gpu)).expect("probe");
    eprintln!("{msg}");
    eprintln!("{}", interop::probe(None).expect("probe(None)"));
}

/// Shared buffers of 64 MiB, then one beyond 4 GiB when the device takes it (else 1 GiB):
/// CUDA writes patterns at several offsets and sizes (unaligned ones too), wgpu reads them
/// back byte-exact with the zeroed bytes around them; wgpu writes, CUDA reads.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn cuda_writes_are_what_wgpu_reads() {
    let (gpu, dev) = setup();
    let big = 5 * GIB + (12 << 20);
    let mut sizes = vec![64u64 << 20];
    let mut fallback = None;
    if dev.max_shared_bytes() >= big {
        match SharedBuffer::new(&dev, &gpu, big) {
            Ok(b) => {
                drop(b);
                sizes.push(big);
            }
            Err(e) => fallback = Some(e.to_string()),
        }
    } else {
        fallback = Some(format!(
            "max_buffer_size is {} bytes",
            dev.max_shared_bytes()
        ));
    }
    if let Some(why) = fallback {
        eprintln!("NOTE: no shared buffer beyond 4 GiB ({why}); testing 1 GiB instead");
        sizes.push(GIB);
    }
    for len in sizes {
        let shared = SharedBuffer::new(&dev, &gpu, len).expect("shared buffer");
        eprintln!("{shared:?}");
        assert_eq!(shared.len(), len);
        assert_eq!(shared.wgpu().size(), len);
        // (offset, size): the start, unaligned sizes, the middle, across 4 GiB, the end.
        let mut regions = vec![
            (0u64, 4096u64),
            (8192 + 4, (1 << 20) + 3),
            (len / 2 - 8, 65_536 + 1),
            (len - (1 << 20), 1 << 20),
        ];
        if len > 4 * GIB + (2 << 20) {
            regions.push((4 * GIB - (512 << 10), 1 << 20));
            regions.push((4 * GIB + (1 << 20) + 4, 12_345));
        }
        for (i, &(off, size)) in regions.iter().enumerate() {
            cuda_write(
                &gpu,
                shared.cuda_ptr() + off,
                &pattern(i as u64 + len, size as usize),
            );
        }
        for (i, &(off, size)) in regions.iter().enumerate() {
            // Read a 4-aligned window with a margin: the margin must still be zero.
            let start = off.saturating_sub(64) / 4 * 4;
            let end = ((off + size + 64).min(len)).div_ceil(4) * 4;
            let got = read_buffer(&dev.device, &dev.queue, shared.wgpu(), start, end - start)
                .expect("read back through wgpu");
            let want = pattern(i as u64 + len, size as usize);
            let a = (off - start) as usize;
            assert!(
                got[a..a + size as usize] == want[..],
                "len {len}: region {i} ({size} bytes at {off}) differs through wgpu"
            );
            assert!(
                got[..a].iter().all(|&b| b == 0)
                    && got[a + size as usize..].iter().all(|&b| b == 0),
                "len {len}: bytes around region {i} are not zero"
            );
        }
        // The other direction: wgpu writes, the renderer's submission completes, CUDA reads.
        let off = len / 3 / 4 * 4;
        let data = pattern(99, 3 << 20);
        dev.queue.write_buffer(shared.wgpu(), off, &data);
        let idx = dev.queue.submit([]);
        dev.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })
            .unwrap();
        assert!(
            cuda_read(&gpu, shared.cuda_ptr() + off, data.len()) == data,
            "len {len}: CUDA does not see wgpu's write"
        );
    }
}

fn same_image(a: &Image, b: &Image) -> bool {
    a.width == b.width
        && a.height == b.height
        && a.rgba8 == b.rgba8
        && a.linear.len() == b.linear.len()
        && a.linear
            .iter()
            .zip(&b.linear)
            .all(|(p, q)| p.map(f32::to_bits) == q.map(f32::to_bits))
}

/// A two-grid frame written by CUDA into a frame-ring slot over shared memory renders
/// byte-identically to the same slot image uploaded with `upload_slot`.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn a_frame_written_by_cuda_renders_like_an_upload() {
    let (gpu, dev) = setup();
    let a = test_grid(GridType::Float, true);
    let b = test_grid(GridType::Fp8, true);
    let off_b = (a.len() as u64).div_ceil(4096) * 4096;
    let slot_len = (off_b + b.len() as u64).div_ceil(4096) * 4096;
    let mut image = vec![0u8; slot_len as usize];
    image[..a.len()].copy_from_slice(&a);
    image[off_b as usize..][..b.len()].copy_from_slice(&b);

    let shared = Arc::new(SharedBuffer::new(&dev, &gpu, slot_len).expect("shared buffer"));
    let mut ring = FrameRing::new(vec![
        SlotMemory::new(vec![shared.part_memory(&gpu)], slot_len).unwrap(),
    ])
    .unwrap();
    let slot = ring.begin_write(7).unwrap();
    let PartMemory::Device(mem) = &ring.memory(slot).unwrap().parts()[0] else {
        panic!("a shared slot is device memory");
    };
    assert_eq!(mem.ptr(), shared.cuda_ptr());
    assert_eq!(mem.len() as u64, slot_len);
    cuda_write(&gpu, mem.ptr(), &image);
    ring.finish_write(slot, true).unwrap();
    assert_eq!(ring.acquire(7), Some(slot));
    let mut back = vec![0u8; image.len()];
    ring.read_back(slot, 0, &mut back).unwrap();
    assert!(back == image, "the ring reads back other bytes");

    let grid = Grid::parse(&a).unwrap();
    let (w, h) = (160, 96);
    let view = view_for(&grid, &["cloud", "rain"], w, h);
    let mut r = Renderer::new(&dev.device, &dev.queue).expect("pipeline");
    let render = |r: &mut Renderer, buf: &wgpu::Buffer| {
        r.set_grids(&[
            Some(GridSlice {
                buffer: buf,
                offset: 0,
                size: a.len() as u64,
            }),
            Some(GridSlice {
                buffer: buf,
                offset: off_b,
                size: b.len() as u64,
            }),
        ])
        .expect("bind");
        let idx = r.render(&view, w, h).expect("render");
        dev.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })
            .unwrap();
        r.read_image().expect("read image")
    };
    let from_cuda = render(&mut r, shared.wgpu());
    // The renderer is done with the slot (submission waited on): release it.
    ring.release(slot);
    let uploaded = upload_slot(&dev.device, &dev.queue, &image);
    let from_upload = render(&mut r, &uploaded);
    let lit = from_upload.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(lit > (w * h / 20) as usize, "only {lit} pixels lit");
    assert!(
        same_image(&from_cuda, &from_upload),
        "shared-slot and uploaded renders differ: {:?}",
        from_cuda.diff(&from_upload)
    );
    // Teardown with the renderer still holding the shared buffer: the ring and our handle
    // go first, wgpu's clone last.
    drop(ring);
    drop(shared);
    r.set_grids(&[]).unwrap();
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
}

/// 200 shared buffers of 64 MiB created and dropped (some bound by the renderer and read
/// by wgpu first): CUDA's free memory comes back to within 1 % of where it started.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn creating_and_dropping_shared_buffers_does_not_leak() {
    let (gpu, dev) = setup();
    let len = 64u64 << 20;
    // Warm up (first-use allocations of the driver and wgpu), then measure.
    drop(SharedBuffer::new(&dev, &gpu, len).unwrap());
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    let (free0, total) = gpu.mem_info().unwrap();
    let mut lowest = free0;
    for i in 0..200u64 {
        let s = SharedBuffer::new(&dev, &gpu, len).unwrap();
        if i % 20 == 0 {
            // Use it from both sides before dropping.
            cuda_write(&gpu, s.cuda_ptr() + 4096, &pattern(i, 4096));
            let got = read_buffer(&dev.device, &dev.queue, s.wgpu(), 4096, 4096).unwrap();
            assert!(got == pattern(i, 4096));
            lowest = lowest.min(gpu.mem_info().unwrap().0);
        }
        drop(s);
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
    }
    let (free1, _) = gpu.mem_info().unwrap();
    eprintln!(
        "free before {free0}, after {free1}, lowest while one was alive {lowest}, total {total}"
    );
    assert!(
        lowest + (len as usize) / 2 < free0,
        "a live 64 MiB shared buffer did not show in CUDA's free memory"
    );
    assert!(
        free1 + free0 / 100 >= free0,
        "leak: {} bytes of device memory gone after 200 create/drop cycles",
        free0 - free1
    );
}

/// The engines write frames into shared slots (cuFile or async copies straight into the
/// Vulkan memory); once a completion reports `on_gpu`, wgpu reads exactly the dataset's bytes.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn engines_fill_shared_slots_that_wgpu_reads_byte_exact() {
    engines_fill_shared_slots(None);
}

/// The same with slots of several shared buffers (1 MiB parts: a frame of about 3.2 MB
/// spans four, its extents cut at part boundaries): one exported allocation per part, and
/// wgpu reads each part's bytes where the frame puts them.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn engines_fill_multi_part_shared_slots_that_wgpu_reads_byte_exact() {
    engines_fill_shared_slots(Some(1 << 20));
}

fn engines_fill_shared_slots(part_bytes: Option<u64>) {
    let (gpu, dev) = setup();
    // On the current directory's file system (cuFile needs a real block device).
    let t = tempfile::tempdir_in(".").unwrap();
    let mut w = DatasetWriter::create(
        t.path(),
        LaneSpec::Count(3),
        1 << 20,
        vec![AttributeSpec::new("a"), AttributeSpec::new("b")],
        Provenance::new("interop test", ["x"]),
    )
    .unwrap();
    for f in 0..5u64 {
        w.push_frame_opaque(
            f as f64,
            vec![
                pattern(f + 1, 2_500_000 + f as usize * 4097),
                pattern(f + 50, 700_001),
            ],
        )
        .unwrap();
    }
    w.finish().unwrap();
    let ds = Dataset::open(t.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let slot_len = source.max_frame_len().div_ceil(4) * 4;
    let layout = SlotLayout::new(slot_len, part_bytes.unwrap_or(slot_len)).unwrap();
    for path in [EngineKind::Staged, EngineKind::Gds] {
        // Per slot, one shared buffer per part.
        let shared: Vec<Vec<Arc<SharedBuffer>>> = (0..3)
            .map(|_| {
                (0..layout.parts())
                    .map(|i| {
                        let len = layout.part_len(i).div_ceil(4) * 4;
                        Arc::new(SharedBuffer::new(&dev, &gpu, len).unwrap())
                    })
                    .collect()
            })
            .collect();
        let ring = FrameRing::new(
            shared
                .iter()
                .map(|parts| {
                    let mems = parts.iter().map(|s| s.part_memory(&gpu)).collect();
                    SlotMemory::new(mems, layout.part_bytes()).unwrap()
                })
                .collect(),
        )
        .unwrap();
        assert_eq!(ring.memory(0).unwrap().parts().len(), layout.parts());
        let cfg = EngineConfig {
            threads: 4,
            io_size: 1 << 20,
            ..EngineConfig::default()
        };
        let engine: Engine =
            open_engine(path, Some(&gpu), &source.files, ring.memories(), &cfg).unwrap();
        eprintln!(
            "{path:?}: active {} — {} — {:?}",
            engine.info().active,
            engine.info().mode,
            engine.info().notes
        );
        let mut stream = FrameStream::new(engine, ring);
        let n = source.frames.len() as u32;
        let mut reference = AlignedBuf::new();
        let shown = test_stream::play_once(
            &mut stream,
            &source,
            n,
            Duration::from_secs(60),
            |_, c| assert!(c.on_gpu.is_some(), "GPU paths report on_gpu"),
            |_, f, slot| {
                ds.read_frame(f as usize, &mut reference, CrcCheck::Verify)
                    .unwrap();
                let mut got = Vec::new();
                for part in &shared[slot] {
                    let b = part.wgpu();
                    got.extend(read_buffer(&dev.device, &dev.queue, b, 0, b.size()).unwrap());
                }
                assert!(
                    got[..reference.len()] == reference[..],
                    "{path:?}: frame {f} in slot {slot} differs through wgpu"
                );
            },
        );
        assert_eq!(shown, (0..n).collect::<Vec<_>>());
        drop(stream);
        drop(shared);
    }
}
