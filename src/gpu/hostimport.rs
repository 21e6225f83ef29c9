//! Host memory the GPU copies from directly (`VK_EXT_external_memory_host`).
//!
//! The host path reads frames into page-aligned host slots. Without this, each frame is
//! copied once more by the CPU into a wgpu staging buffer before the GPU copies it to device
//! memory. With it, each host slot is imported into Vulkan as a transfer-source buffer, and
//! the GPU's copy engine reads the slot itself over PCIe: the same route as CUDA's
//! `cuMemHostRegister` + `cudaMemcpy` in the classic "read into pinned memory, then copy"
//! pipeline that GPUDirect Storage is compared with. The driver pins the pages for as long
//! as the import lives.
//!
//! - [`crate::device::open`] with [`Want::HostImport`](crate::device::Want::HostImport)
//!   adds the extension to the device where the adapter has it (the player opens its devices
//!   so).
//! - [`HostImporter::new`] says whether a device can import, and why not.
//! - [`HostImporter::import`] wraps one part of a host ring slot as a `COPY_SRC`
//!   [`wgpu::Buffer`] (a slot of several parts is imported part by part: one import each).
//!
//! Lifetime: the Vulkan buffer and its imported memory are destroyed by wgpu's drop callback
//! (after the last handle is gone and every submission using it has completed), and that
//! callback also holds a reference to the host memory, so the pages are never unmapped while
//! the GPU may still read them.

use std::sync::Arc;

use ash::vk;
use wgpu::hal::api::Vulkan;

use super::{PartMemory, SlotMemory};
use crate::device::block_on;

const HANDLE: vk::ExternalMemoryHandleTypeFlags =
    vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;

/// Imports host memory into one Vulkan device; see the module documentation.
pub struct HostImporter {
    device: ash::Device,
    ext: ash::ext::external_memory_host::Device,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// `minImportedHostPointerAlignment`: address and size must be multiples of it.
    alignment: u64,
}

impl std::fmt::Debug for HostImporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostImporter")
            .field("alignment", &self.alignment)
            .finish()
    }
}

/// Owns the Vulkan side of one import, and keeps the host memory mapped while it lives.
struct Imported {
    device: ash::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
    _host: Arc<SlotMemory>,
}

impl Drop for Imported {
    fn drop(&mut self) {
        // SAFETY: created on this device, used by no submission still running (wgpu calls
        // the drop callback only after that), destroyed exactly once here. The host memory
        // (`_host`) is released after the Vulkan objects, as the struct's field order says.
        unsafe {
            self.device.destroy_buffer(self.buffer, None);
            self.device.free_memory(self.memory, None);
        }
    }
}

impl HostImporter {
    /// An importer for `device`, or why it cannot import: not Vulkan, or created without
    /// `VK_EXT_external_memory_host` (open it with [`Want::HostImport`](crate::device::Want::HostImport)).
    pub fn new(device: &wgpu::Device) -> Result<HostImporter, String> {
        // SAFETY: handles are read, not destroyed; they live as long as `device`, which the
        // importer's users keep (every import is wrapped as a buffer of that device).
        let hal = unsafe { device.as_hal::<Vulkan>() }
            .ok_or_else(|| "the device is not a Vulkan device".to_string())?;
        let alignment = crate::device::vulkan::host_import_alignment(&hal)?;
        let instance = hal.shared_instance().raw_instance();
        let raw = hal.raw_device().clone();
        // SAFETY: valid physical device.
        let memory =
            unsafe { instance.get_physical_device_memory_properties(hal.raw_physical_device()) };
        Ok(HostImporter {
            ext: ash::ext::external_memory_host::Device::new(instance, &raw),
            device: raw,
            memory,
            alignment,
        })
    }

    /// Address and size alignment imports need (`minImportedHostPointerAlignment`).
    pub fn alignment(&self) -> u64 {
        self.alignment
    }

    /// Wraps all of part `part` of the host slot `host` as a `COPY_SRC` buffer of `device`
    /// (the device this importer was made for). The GPU reads the host pages themselves:
    /// whoever writes `host` must not do so while a copy from the buffer may run (the frame
    /// ring's states see to that).
    pub fn import(
        &self,
        device: &wgpu::Device,
        host: Arc<SlotMemory>,
        part: usize,
        label: &str,
    ) -> Result<wgpu::Buffer, String> {
        let h = match host.parts().get(part) {
            Some(PartMemory::Host(h)) => h,
            Some(PartMemory::Device(_)) => return Err("only host slots can be imported".into()),
            None => {
                return Err(format!(
                    "the slot has {} parts, not {}",
                    host.parts().len(),
                    part + 1
                ));
            }
        };
        let (ptr, len) = (h.as_mut_ptr(), h.len() as u64);
        if !(ptr as u64).is_multiple_of(self.alignment) || !len.is_multiple_of(self.alignment) {
            return Err(format!(
                "host memory at {ptr:p} of {len} bytes is not aligned to the {} bytes imports need",
                self.alignment
            ));
        }
        let d = &self.device;
        let mut props = vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: `ptr` is the start of a live mapping of `len` bytes, aligned as required.
        let r = unsafe {
            (self.ext.fp().get_memory_host_pointer_properties_ext)(
                self.ext.device(),
                HANDLE,
                ptr.cast::<std::ffi::c_void>(),
                &mut props,
            )
        };
        if r != vk::Result::SUCCESS {
            return Err(format!("vkGetMemoryHostPointerPropertiesEXT: {r}"));
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(len)
            .usage(vk::BufferUsageFlags::TRANSFER_SRC)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info.
        let buffer = unsafe { d.create_buffer(&info, None) }
            .map_err(|e| format!("vkCreateBuffer of {len} bytes over host memory: {e}"))?;
        let destroy_buffer = || {
            // SAFETY: the buffer is unused and destroyed once, on this failure path only.
            unsafe { d.destroy_buffer(buffer, None) }
        };
        // SAFETY: a buffer of this device.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let bits = req.memory_type_bits & props.memory_type_bits;
        // Prefer a coherent type: host writes then need no flush before a copy reads them.
        let allowed = |i: &u32| bits & (1 << i) != 0;
        let coherent = |i: &u32| {
            self.memory.memory_types[*i as usize]
                .property_flags
                .contains(vk::MemoryPropertyFlags::HOST_COHERENT)
        };
        let types = 0..self.memory.memory_type_count;
        let Some(type_index) = types
            .clone()
            .find(|i| allowed(i) && coherent(i))
            .or_else(|| types.clone().find(allowed))
        else {
            destroy_buffer();
            return Err(format!(
                "no memory type can hold imported host memory for a buffer (buffer types {:#x}, host pointer types {:#x})",
                req.memory_type_bits, props.memory_type_bits
            ));
        };
        if req.size > len {
            destroy_buffer();
            return Err(format!(
                "a {len}-byte buffer needs {} bytes of memory, more than the host memory has",
                req.size
            ));
        }
        let mut import = vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(HANDLE)
            .host_pointer(ptr.cast::<std::ffi::c_void>());
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(len)
            .memory_type_index(type_index)
            .push_next(&mut import);
        // SAFETY: valid allocate info over live, aligned host memory that `Imported` keeps
        // mapped until the memory is freed.
        let memory = match unsafe { d.allocate_memory(&ai, None) } {
            Ok(m) => m,
            Err(e) => {
                destroy_buffer();
                return Err(format!(
                    "importing {len} bytes of host memory (memory type {type_index}): {e}"
                ));
            }
        };
        let owner = Imported {
            device: d.clone(),
            buffer,
            memory,
            _host: host,
        };
        // SAFETY: fresh buffer and memory of sufficient size, offset 0.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }
            .map_err(|e| format!("vkBindBufferMemory of imported host memory: {e}"))?;
        // SAFETY: `buffer` lives until the callback drops `owner`; wgpu never maps it (no
        // MAP_* usage) and uses it only as a copy source, as the descriptor says.
        let hal = unsafe {
            wgpu::hal::vulkan::Buffer::from_raw_externally_owned(
                buffer,
                Box::new(move || drop(owner)),
            )
        };
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        // SAFETY: created on this device, bound to memory, non-zero size, usage as stated.
        let wrapped = unsafe {
            device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some(label),
                    size: len,
                    usage: wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                },
            )
        };
        if let Some(e) = block_on(scope.pop()) {
            return Err(format!("wrapping imported host memory: {e}"));
        }
        Ok(wrapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::FrameRing;

    fn device() -> Option<(wgpu::Device, wgpu::Queue)> {
        let g = crate::device::open(&crate::device::Want::HostImport, "host import test").ok()?;
        Some((g.device, g.queue))
    }

    /// Copies `len` bytes of `src` into a device buffer (what the player does), and reads
    /// that back.
    fn read_back(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        src: &wgpu::Buffer,
        len: u64,
    ) -> Vec<u8> {
        let dst = device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size: len,
            usage: wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut enc = device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &dst, 0, len);
        queue.submit([enc.finish()]);
        crate::device::read_buffer(device, queue, &dst, 0, len).expect("read back")
    }

    /// The GPU copies exactly the host bytes, sees later host writes (no stale copy), and
    /// the host memory stays mapped until wgpu has destroyed the import.
    #[test]
    fn imported_host_memory_is_copied_byte_exact_and_kept_alive() {
        let Some((device, queue)) = device() else {
            eprintln!("skipping: no Vulkan adapter");
            return;
        };
        let importer = match HostImporter::new(&device) {
            Ok(i) => i,
            Err(why) => {
                eprintln!("skipping: {why}");
                return;
            }
        };
        let len = (3 << 20) + 4096;
        // A host ring slot of two parts, as the player imports them (the ring keeps one
        // reference); the test imports its second part.
        let layout = crate::gpu::SlotLayout::new(len as u64 + (1 << 20), 1 << 20).unwrap();
        let ring = FrameRing::host(1, layout).unwrap();
        let host = ring.memory(0).unwrap().clone();
        assert_eq!(host.parts().len(), 5);
        let PartMemory::Host(hb) = &host.parts()[1] else {
            unreachable!("a host ring has host slots")
        };
        let (ptr, hlen) = (hb.as_mut_ptr(), hb.len());
        let fill = |seed: u8| {
            // SAFETY: no copy from the buffer is in flight while the test writes it, and
            // `host` keeps the mapping alive.
            let bytes = unsafe { std::slice::from_raw_parts_mut(ptr, hlen) };
            for (i, b) in bytes.iter_mut().enumerate() {
                *b = (i as u32)
                    .wrapping_mul(2_654_435_761)
                    .rotate_left(u32::from(seed)) as u8;
            }
            bytes.to_vec()
        };
        let want = fill(3);
        let buf = importer
            .import(&device, host.clone(), 1, "test import")
            .unwrap();
        assert_eq!(buf.size(), hlen as u64);
        assert_eq!(read_back(&device, &queue, &buf, buf.size()), want);
        let want = fill(11);
        assert_eq!(
            read_back(&device, &queue, &buf, buf.size()),
            want,
            "stale bytes"
        );
        // wgpu's buffer keeps the host memory alive; dropping it lets go.
        assert_eq!(
            Arc::strong_count(&host),
            3,
            "the ring, the test, the import"
        );
        drop(buf);
        device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        assert_eq!(Arc::strong_count(&host), 2, "import not released");
    }

    /// The device's capabilities say what the importer finds: import support and its
    /// alignment.
    #[test]
    fn caps_say_what_the_importer_finds() {
        let g = match crate::device::open(&crate::device::Want::HostImport, "host import test") {
            Ok(g) => g,
            Err(e) => {
                eprintln!("skipping: no device ({e})");
                return;
            }
        };
        let importer = HostImporter::new(&g.device);
        eprintln!("{}: {:?}", g.caps.describe(), importer);
        assert_eq!(
            g.caps.host_import_alignment,
            importer.ok().map(|i| i.alignment())
        );
    }

    /// A device opened without the extension (plain `request_device`) is refused with the
    /// reason, so the player takes the staging route instead of failing.
    #[test]
    fn a_device_without_the_extension_is_refused_with_the_reason() {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle().with_env());
        let adapters = block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
        let Some(adapter) = adapters.first() else {
            eprintln!("skipping: no Vulkan adapter");
            return;
        };
        let (device, _queue) =
            block_on(adapter.request_device(&wgpu::DeviceDescriptor::default())).unwrap();
        let why = HostImporter::new(&device).expect_err("no extension, no importer");
        assert!(why.contains("VK_EXT_external_memory_host"), "{why}");
    }
}
