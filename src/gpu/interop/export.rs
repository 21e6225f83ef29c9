//! The Vulkan half of a shared buffer: an exportable allocation wrapped for wgpu.

use super::*;

/// The Vulkan buffer and its memory. Freed (buffer destroyed, memory freed) exactly once,
/// when the last holder lets go: wgpu's drop callback and the buffer's owners each hold an
/// `Arc`.
pub(super) struct VulkanAlloc {
    device: ash::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Drop for VulkanAlloc {
    fn drop(&mut self) {
        // SAFETY: created on `device`, which outlives every holder (see `Exportable`);
        // no holder is left, so neither wgpu nor CUDA uses them.
        unsafe {
            if self.buffer != vk::Buffer::null() {
                self.device.destroy_buffer(self.buffer, None);
            }
            if self.memory != vk::DeviceMemory::null() {
                self.device.free_memory(self.memory, None);
            }
        }
    }
}

/// The Vulkan half of a [`SharedBuffer`]: an exportable allocation wrapped as a wgpu buffer.
pub(super) struct Exportable {
    // Drop order: the wgpu handle, then our reference to the memory, then the device
    // (kept alive so the memory can be freed on it if we are the last holder).
    pub(super) buffer: wgpu::Buffer,
    pub(super) alloc: Arc<VulkanAlloc>,
    /// Bytes of the Vulkan allocation (≥ `len`).
    pub(super) alloc_size: u64,
    pub(super) len: u64,
    pub(super) external_fd: ash::khr::external_memory_fd::Device,
    pub(super) _device: wgpu::Device,
}

impl Exportable {
    pub(super) fn new(dev: &InteropDevice, len: u64) -> IResult<Exportable> {
        if len == 0 {
            return Err(InteropError::Usage(
                "a shared buffer needs at least one byte".into(),
            ));
        }
        if !len.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
            return Err(InteropError::Usage(format!(
                "a shared buffer's size must be a multiple of {} bytes ({len} is not)",
                wgpu::COPY_BUFFER_ALIGNMENT
            )));
        }
        let max = dev.max_shared_bytes();
        if len > max {
            return Err(InteropError::Usage(format!(
                "a shared buffer of {len} bytes is larger than this device allows ({max} bytes)"
            )));
        }
        let d = &dev.vk.device;
        let mut alloc = VulkanAlloc {
            device: d.clone(),
            buffer: vk::Buffer::null(),
            memory: vk::DeviceMemory::null(),
        };
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(len)
            .usage(VK_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info; the handle is owned by `alloc` from here on.
        alloc.buffer = unsafe { d.create_buffer(&info, None) }
            .map_err(vk_err(format!("vkCreateBuffer of {len} bytes")))?;
        // SAFETY: a buffer of this device.
        let req = unsafe { d.get_buffer_memory_requirements(alloc.buffer) };
        let type_index =
            dev.memory_type(req.memory_type_bits)
                .ok_or_else(|| InteropError::Unsupported {
                    adapter: dev.caps.name.clone(),
                    what: format!(
                        "a memory type for exportable buffers (type bits {:#x})",
                        req.memory_type_bits
                    ),
                })?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
        // Always dedicated (whether or not the driver requires it, `dedicated_only`): CUDA
        // imports it with the matching flag.
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(alloc.buffer);
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index)
            .push_next(&mut export)
            .push_next(&mut dedicated);
        let over = if dev.vk.sharing.max_allocation != 0 && req.size > dev.vk.sharing.max_allocation
        {
            format!(
                ", above the driver's maxMemoryAllocationSize of {} bytes",
                dev.vk.sharing.max_allocation
            )
        } else {
            String::new()
        };
        // SAFETY: valid allocate info; the memory is owned by `alloc` from here on.
        alloc.memory = unsafe { d.allocate_memory(&ai, None) }.map_err(vk_err(format!(
            "vkAllocateMemory of {} bytes (exportable, dedicated, memory type {type_index}{over})",
            req.size
        )))?;
        // SAFETY: fresh buffer and memory of sufficient size, offset 0.
        unsafe { d.bind_buffer_memory(alloc.buffer, alloc.memory, 0) }
            .map_err(vk_err("vkBindBufferMemory"))?;
        let alloc = Arc::new(alloc);
        let raw = alloc.buffer;
        let for_wgpu = alloc.clone();
        // SAFETY: `raw` lives until the callback's reference (and ours) are gone; wgpu never
        // maps it (no MAP_* usage).
        let hal = unsafe {
            wgpu::hal::vulkan::Buffer::from_raw_externally_owned(
                raw,
                Box::new(move || drop(for_wgpu)),
            )
        };
        let scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // SAFETY: created on this device with the usage the descriptor states, bound to
        // memory, non-zero size. wgpu treats it as initialised (no clear on first use).
        let buffer = unsafe {
            dev.device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some("supercell shared slot"),
                    size: len,
                    usage: WGPU_USAGE,
                    mapped_at_creation: false,
                },
            )
        };
        if let Some(e) = block_on(scope.pop()) {
            return Err(InteropError::Wgpu(format!(
                "wrapping the shared buffer: {e}"
            )));
        }
        Ok(Exportable {
            buffer,
            alloc,
            alloc_size: req.size,
            len,
            external_fd: dev.vk.external_fd.clone(),
            _device: dev.device.clone(),
        })
    }

    /// A new opaque file descriptor of the memory (the caller owns it).
    pub(super) fn export_fd(&self) -> IResult<OwnedFd> {
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(self.alloc.memory)
            .handle_type(HANDLE);
        // SAFETY: exportable memory of this device.
        let fd =
            unsafe { self.external_fd.get_memory_fd(&info) }.map_err(vk_err("vkGetMemoryFdKHR"))?;
        if fd < 0 {
            return Err(InteropError::Vulkan {
                what: format!("vkGetMemoryFdKHR returned fd {fd}"),
                result: vk::Result::ERROR_UNKNOWN,
            });
        }
        // SAFETY: a fresh descriptor returned to us.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
