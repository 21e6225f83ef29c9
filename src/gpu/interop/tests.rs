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
    let hal =
        unsafe { wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, of.alloc_size) };
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

/// A compute pass binds an exported buffer (wrapped, not created, by wgpu) as storage like
/// one of its own: the GPU CRC of its bytes, at a slot-like 4 KiB offset, is the host's.
#[test]
fn a_compute_pass_reads_an_exported_buffer_like_an_uploaded_one() {
    let Some(dev) = vulkan_only() else { return };
    let len: u64 = 256 << 10;
    let shared = Exportable::new(&dev, len).unwrap();
    let pattern: Vec<u8> = (0..len - 4096)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    dev.queue.write_buffer(&shared.buffer, 4096, &pattern);
    let extents = [(4096, len - 4096), (8192, 1000), (4096 + 40, 3)];
    let got = crate::gpu::WgpuCrc::new(&dev.device)
        .crc32(&dev.device, &dev.queue, &shared.buffer, &extents)
        .unwrap();
    for (&(off, n), got) in extents.iter().zip(&got) {
        let at = (off - 4096) as usize;
        assert_eq!(
            *got,
            crc32fast::hash(&pattern[at..at + n as usize]),
            "extent at {off} of {n} bytes"
        );
    }
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
