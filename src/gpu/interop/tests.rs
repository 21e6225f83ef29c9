use super::*;

/// The Vulkan half alone, or `None` (with the reason printed) where no adapter can
/// export memory and `SUPERCELL_REQUIRE_GPU` is unset.
fn vulkan_only() -> Option<InteropDevice> {
    match InteropDevice::open_vulkan(None) {
        Ok(d) => {
            eprintln!("exportable memory on {}", d.describe());
            Some(d)
        }
        Err(e) => {
            if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                panic!("SUPERCELL_REQUIRE_GPU is set but: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[test]
fn probe_without_cuda_says_why() {
    if cuda_probe().is_ok() {
        eprintln!("CUDA present: probe(None) = {:?}", probe(None));
        return;
    }
    let e = probe(None).expect_err("no CUDA here");
    assert!(e.contains("CUDA"), "{e}");
    eprintln!("probe(None): {e}");
}

#[test]
fn handles_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<InteropDevice>();
    send_sync::<SharedBuffer>();
    send_sync::<InteropError>();
}

#[test]
fn uuids_print_like_nvidia_smi() {
    let u = [
        0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 0xff,
    ];
    assert_eq!(uuid_str(&u), "12345678-9abc-def0-0001-0203040506ff");
}

#[test]
fn exportable_buffer_round_trips_and_exports_an_fd() {
    let Some(dev) = vulkan_only() else { return };
    assert!(matches!(
        Exportable::new(&dev, 0),
        Err(InteropError::Usage(_))
    ));
    assert!(matches!(
        Exportable::new(&dev, 6),
        Err(InteropError::Usage(_))
    ));
    let len = (1u64 << 20) + 4100;
    let buf = Exportable::new(&dev, len).unwrap();
    assert_eq!(buf.buffer.size(), len);
    assert!(buf.alloc_size >= len);
    let pattern: Vec<u8> = (0..len)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    dev.queue.write_buffer(&buf.buffer, 0, &pattern);
    let back = read_buffer(&dev.device, &dev.queue, &buf.buffer, 0, len).unwrap();
    assert!(back == pattern, "whole buffer differs");
    let back = read_buffer(&dev.device, &dev.queue, &buf.buffer, 4096 + 12, 8192).unwrap();
    assert!(back == pattern[4108..4108 + 8192], "sub-range differs");
    // Two exports: two distinct, open descriptors.
    let a = buf.export_fd().unwrap();
    let b = buf.export_fd().unwrap();
    use std::os::fd::AsRawFd;
    assert_ne!(a.as_raw_fd(), b.as_raw_fd());
    // SAFETY: fcntl on descriptors we own.
    assert!(unsafe { libc::fcntl(a.as_raw_fd(), libc::F_GETFD) } >= 0);
    // The descriptor is the same memory: import it as a second allocation on the same
    // device and read the pattern through that (what CUDA's import does on NVIDIA).
    if let Some(alias) = import_alias(&dev, b, &buf) {
        let back = read_buffer(&dev.device, &dev.queue, &alias, 0, len).unwrap();
        assert!(back == pattern, "the imported alias does not see the bytes");
        eprintln!("the fd imported back into Vulkan sees the same {len} bytes");
    }
}

/// Imports `fd` into a new allocation of `dev` bound to a new buffer, wrapped for wgpu
/// (owning its memory): the Vulkan stand-in for CUDA's import. `None` when the driver
/// cannot import (printed).
fn import_alias(dev: &InteropDevice, fd: OwnedFd, of: &Exportable) -> Option<wgpu::Buffer> {
    use std::os::fd::AsRawFd;
    let d = &dev.vk.device;
    let mut props = vk::MemoryFdPropertiesKHR::default();
    // SAFETY: a valid opaque fd of this device.
    if let Err(e) = unsafe {
        dev.vk
            .external_fd
            .get_memory_fd_properties(HANDLE, fd.as_raw_fd(), &mut props)
    } {
        // Opaque fds need not support the query (the spec leaves it to the driver).
        eprintln!("vkGetMemoryFdPropertiesKHR: {e} (continuing)");
    }
    let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
    let info = vk::BufferCreateInfo::default()
        .size(of.len)
        .usage(VK_USAGE)
        .push_next(&mut external);
    // SAFETY: valid create info.
    let buffer = unsafe { d.create_buffer(&info, None) }.unwrap();
    // SAFETY: our buffer.
    let req = unsafe { d.get_buffer_memory_requirements(buffer) };
    let type_index = dev.memory_type(req.memory_type_bits).unwrap();
    let mut import = vk::ImportMemoryFdInfoKHR::default()
        .handle_type(HANDLE)
        .fd(fd.as_raw_fd());
    let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
    let ai = vk::MemoryAllocateInfo::default()
        .allocation_size(of.alloc_size)
        .memory_type_index(type_index)
        .push_next(&mut import)
        .push_next(&mut dedicated);
    // SAFETY: valid allocate info; on success Vulkan owns the fd.
    let memory = match unsafe { d.allocate_memory(&ai, None) } {
        Ok(m) => {
            let _ = fd.into_raw_fd();
            m
        }
        Err(e) => {
            eprintln!("this driver cannot import its own opaque fd: {e}; alias check skipped");
            // SAFETY: our unbound buffer.
            unsafe { d.destroy_buffer(buffer, None) };
            return None;
        }
    };
    // SAFETY: fresh buffer and memory.
    unsafe { d.bind_buffer_memory(buffer, memory, 0) }.unwrap();
    // SAFETY: wgpu owns buffer and memory from here (freed when the buffer goes).
    let hal = unsafe {
        wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, of.alloc_size)
    };
    // SAFETY: created on this device with this usage.
    Some(unsafe {
        dev.device.create_buffer_from_hal::<Vulkan>(
            hal,
            &wgpu::BufferDescriptor {
                label: Some("alias"),
                size: of.len,
                usage: WGPU_USAGE,
                mapped_at_creation: false,
            },
        )
    })
}

#[test]
fn vulkan_memory_is_freed_once_after_every_holder() {
    let Some(dev) = vulkan_only() else { return };
    // Dropped alone: freed at once.
    let a = Exportable::new(&dev, 4096).unwrap();
    let weak = Arc::downgrade(&a.alloc);
    drop(a);
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    assert!(weak.upgrade().is_none(), "memory not freed");
    // A wgpu clone (e.g. bound by the renderer) keeps it alive after its owner is gone.
    let b = Exportable::new(&dev, 4096).unwrap();
    let weak = Arc::downgrade(&b.alloc);
    let clone = b.buffer.clone();
    drop(b);
    assert!(weak.upgrade().is_some(), "freed while wgpu still holds it");
    dev.queue.write_buffer(&clone, 0, &[7u8; 16]);
    let back = read_buffer(&dev.device, &dev.queue, &clone, 0, 16).unwrap();
    assert_eq!(back, [7u8; 16]);
    drop(clone);
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    assert!(
        weak.upgrade().is_none(),
        "memory not freed after the last holder"
    );
    // The owner outliving wgpu's handle (the CUDA side holds it): alive until it goes.
    let c = Exportable::new(&dev, 4096).unwrap();
    let weak = Arc::downgrade(&c.alloc);
    let owner = c.alloc.clone();
    drop(c);
    dev.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    assert_eq!(weak.strong_count(), 1, "only the CUDA-side holder is left");
    drop(owner);
    assert!(weak.upgrade().is_none());
}

/// A small Float grid: a blob over 4³ bricks.
fn blob_grid() -> Vec<u8> {
    use crate::format::{BuildOptions, LEAF_DIM, LeafBrick, SparseVolume, build_grid};
    let mut bricks = Vec::new();
    for bx in (0..32).step_by(8) {
        for by in (0..32).step_by(8) {
            for bz in (0..32).step_by(8) {
                let mut b = LeafBrick::filled([bx, by, bz], 0.0);
                for x in 0..LEAF_DIM {
                    for y in 0..LEAF_DIM {
                        for z in 0..LEAF_DIM {
                            let p = [bx + x as i32, by + y as i32, bz + z as i32];
                            let d2: i32 = p.iter().map(|&c| (c - 16) * (c - 16)).sum();
                            let v = (1.0 - d2 as f32 / 200.0).max(0.0);
                            if v > 0.0 {
                                b.set_active(LeafBrick::index(x, y, z), v);
                            }
                        }
                    }
                }
                bricks.push(b);
            }
        }
    }
    let vol = SparseVolume {
        background: 0.0,
        bricks,
    };
    build_grid(&vol, &BuildOptions::default()).unwrap()
}

/// The renderer binds an exported buffer (wrapped, not created, by wgpu) like one of its
/// own: the same grid renders identically from both.
#[test]
fn renderer_reads_an_exported_buffer_like_an_uploaded_one() {
    use crate::format::Grid;
    use crate::render::{AttributeView, GridSlice, Renderer, TransferFunction, View};
    let Some(dev) = vulkan_only() else { return };
    let g = blob_grid();
    let grid = Grid::parse(&g).unwrap();
    let b = grid.world_bbox();
    let bbox = [b[0].map(|v| v as f32), b[1].map(|v| v as f32)];
    let attrs = vec![Some(AttributeView {
        enabled: true,
        tf: TransferFunction::preset("cloud", [0.0, 1.0], bbox[1][0] - bbox[0][0]),
    })];
    let (w, h) = (48, 32);
    let view = View::new(
        bbox,
        grid.voxel_size()[0] as f32,
        attrs,
        w as f32 / h as f32,
    );
    let len = (g.len() as u64 + 8192).div_ceil(4096) * 4096;
    let shared = Exportable::new(&dev, len).unwrap();
    // The grid at a 4 KiB offset, as in a slot image.
    let mut padded = g.clone();
    padded.resize(g.len().div_ceil(4) * 4, 0);
    dev.queue.write_buffer(&shared.buffer, 4096, &padded);
    let uploaded = crate::render::upload_slot(&dev.device, &dev.queue, &g);
    let mut r = Renderer::new(&dev.device, &dev.queue).unwrap();
    let mut draw = |buffer: &wgpu::Buffer, offset: u64| {
        r.set_grids(&[Some(GridSlice {
            buffer,
            offset,
            size: g.len() as u64,
        })])
        .unwrap();
        r.render(&view, w, h).unwrap();
        r.read_image().unwrap()
    };
    let a = draw(&shared.buffer, 4096);
    let b = draw(&uploaded, 0);
    let lit = b.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(lit > 50, "only {lit} pixels lit");
    assert_eq!(a.rgba8, b.rgba8);
    assert!(
        a.linear
            .iter()
            .zip(&b.linear)
            .all(|(p, q)| p.map(f32::to_bits) == q.map(f32::to_bits))
    );
}

#[test]
fn too_large_a_buffer_is_refused_with_the_limit() {
    let Some(dev) = vulkan_only() else { return };
    let max = dev.max_shared_bytes();
    let Some(too_big) = max.checked_add(4).map(|v| v / 4 * 4) else {
        eprintln!("no buffer-size limit to exceed ({max})");
        return;
    };
    match Exportable::new(&dev, too_big) {
        Err(InteropError::Usage(m)) => assert!(m.contains("larger"), "{m}"),
        other => panic!("expected a usage error, got {:?}", other.map(|e| e.len)),
    }
}
