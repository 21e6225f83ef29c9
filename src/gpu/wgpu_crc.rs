//! CRC-32 of extents of a wgpu storage buffer, computed by a compute pass: the same
//! algorithm as the CUDA kernel ([`super::GpuCrc`]): one invocation per 4 KiB block, tables
//! in workgroup memory, each block's CRC moved past the bytes after it in its extent and
//! XORed into the extent's result. Only 4 bytes per extent come back to the host.
//!
//! The player's host route uses it: frames are copied by the GPU from the imported host
//! slots into device buffers anyway, so the check costs no CPU time there.

use std::num::NonZeroU64;

use wgpu::util::DeviceExt;

use crate::crc32::{BYTE_POWERS, CrcTables, combine};

/// Bytes per invocation.
pub const WGPU_CRC_BLOCK: u64 = 4096;

/// Invocations per workgroup (the shader's `@workgroup_size`).
const WORKGROUP: u64 = 64;

/// Words before the per-extent arrays in the extent table.
const HEAD: usize = 3;

/// The compute pipeline and its uploaded tables, built once per device.
#[derive(Debug)]
pub struct WgpuCrc {
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    tables: wgpu::Buffer,
    /// The largest piece of an extent one invocation range covers (a 4 KiB multiple that
    /// fits a storage binding twice over, so a window always holds a whole piece).
    max_piece: u64,
    max_binding: u64,
    offset_align: u64,
    max_groups: u64,
}

fn entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

/// One dispatch: the pieces (offset, length, output index) whose bytes lie in one binding
/// window of the data buffer.
struct Window {
    start: u64,
    end: u64,
    pieces: Vec<(u64, u64)>,
    out_base: u32,
}

impl WgpuCrc {
    /// Builds the pipeline on `device` and uploads the tables.
    pub fn new(device: &wgpu::Device) -> WgpuCrc {
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("supercell crc32"),
            source: wgpu::ShaderSource::Wgsl(include_str!("../../shaders/crc.wgsl").into()),
        });
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("supercell crc32"),
            entries: &[
                entry(0, true),
                entry(1, true),
                entry(2, true),
                entry(3, false),
            ],
        });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("supercell crc32"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some("supercell crc32"),
            layout: Some(&pl),
            module: &module,
            entry_point: Some("main"),
            compilation_options: Default::default(),
            cache: None,
        });
        let mut words = CrcTables::new().flat();
        words.extend_from_slice(&BYTE_POWERS);
        let tables = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("supercell crc32 tables"),
            contents: bytemuck::cast_slice(&words),
            usage: wgpu::BufferUsages::STORAGE,
        });
        let limits = device.limits();
        let max_binding = limits.max_storage_buffer_binding_size & !3;
        let offset_align = u64::from(limits.min_storage_buffer_offset_alignment).max(4);
        // Piece lengths stay below 2³² bytes (the shader counts in u32).
        let max_piece = (max_binding / 2).min(1 << 31) / WGPU_CRC_BLOCK * WGPU_CRC_BLOCK;
        WgpuCrc {
            pipeline,
            layout,
            tables,
            max_piece: max_piece.max(WGPU_CRC_BLOCK),
            max_binding,
            offset_align,
            max_groups: u64::from(limits.max_compute_workgroups_per_dimension).max(1),
        }
    }

    /// The CRC-32 of each extent (byte offset, length) of `buffer` (STORAGE usage), in
    /// order: the crc32fast value of those bytes. Offsets must be multiples of 4; lengths
    /// may be anything, 0 included. Waits for the result.
    pub fn crc32(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        extents: &[(u64, u64)],
    ) -> Result<Vec<u32>, String> {
        let size = buffer.size();
        if !size.is_multiple_of(4) {
            return Err(format!(
                "a {size}-byte buffer is not a whole number of words"
            ));
        }
        // Split extents into pieces (combined on the host below).
        let mut pieces: Vec<(u64, u64)> = Vec::new();
        let mut piece_of: Vec<std::ops::Range<usize>> = Vec::with_capacity(extents.len());
        for &(off, len) in extents {
            if !off.is_multiple_of(4) {
                return Err(format!("extent at {off}: not a multiple of 4"));
            }
            if off.checked_add(len).is_none_or(|end| end > size) {
                return Err(format!(
                    "extent at {off} of {len} bytes runs past the {size}-byte buffer"
                ));
            }
            let first = pieces.len();
            let mut at = 0;
            while at < len {
                let n = (len - at).min(self.max_piece);
                pieces.push((off + at, n));
                at += n;
            }
            piece_of.push(first..pieces.len());
        }
        let mut results = vec![0u32; pieces.len()];
        if !pieces.is_empty() {
            self.run(device, queue, buffer, &pieces, &mut results)?;
        }
        Ok(piece_of
            .into_iter()
            .map(|r| {
                let mut crc = 0u32;
                for i in r {
                    crc = combine(crc, results[i], pieces[i].1);
                }
                crc
            })
            .collect())
    }

    /// Groups `pieces` into binding windows, dispatches each, and reads back the results.
    fn run(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        buffer: &wgpu::Buffer,
        pieces: &[(u64, u64)],
        results: &mut [u32],
    ) -> Result<(), String> {
        let size = buffer.size();
        let mut windows: Vec<Window> = Vec::new();
        for (i, &(off, len)) in pieces.iter().enumerate() {
            let end = (off + len).next_multiple_of(4);
            let fits = windows.last().is_some_and(|w| {
                w.start <= off
                    && end.max(w.end) - w.start <= self.max_binding
                    && w.pieces.len() < (u32::MAX as usize / 4)
            });
            if fits {
                let w = windows.last_mut().expect("checked");
                w.end = w.end.max(end);
                w.pieces.push((off, len));
            } else {
                let start = off / self.offset_align * self.offset_align;
                windows.push(Window {
                    start,
                    end: end.max(start + 4).min(size),
                    pieces: vec![(off, len)],
                    out_base: i as u32,
                });
            }
        }
        let out_len = (pieces.len() as u64 * 4).max(4);
        let out = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("supercell crc32 results"),
            contents: &vec![0u8; out_len as usize],
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("supercell crc32"),
        });
        for w in &windows {
            let n = w.pieces.len();
            let mut table = Vec::with_capacity(HEAD + 3 * n + 1);
            table.extend([n as u32, 0, w.out_base]);
            table.extend(w.pieces.iter().map(|p| ((p.0 - w.start) / 4) as u32));
            table.extend(w.pieces.iter().map(|p| p.1 as u32));
            let mut blocks = 0u64;
            for p in &w.pieces {
                table.push(blocks as u32);
                blocks += p.1.div_ceil(WGPU_CRC_BLOCK);
            }
            table.push(blocks as u32);
            table[1] = blocks as u32;
            if blocks == 0 {
                continue;
            }
            let ext = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("supercell crc32 extents"),
                contents: bytemuck::cast_slice(&table),
                usage: wgpu::BufferUsages::STORAGE,
            });
            let bind = device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("supercell crc32"),
                layout: &self.layout,
                entries: &[
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer,
                            offset: w.start,
                            size: NonZeroU64::new(w.end - w.start),
                        }),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: ext.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 2,
                        resource: self.tables.as_entire_binding(),
                    },
                    wgpu::BindGroupEntry {
                        binding: 3,
                        resource: out.as_entire_binding(),
                    },
                ],
            });
            let groups = blocks.div_ceil(WORKGROUP);
            let x = groups.min(self.max_groups);
            let y = groups.div_ceil(x);
            if y > self.max_groups {
                return Err(format!("{blocks} CRC blocks exceed the dispatch limits"));
            }
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell crc32"),
                timestamp_writes: None,
            });
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &bind, &[]);
            pass.dispatch_workgroups(x as u32, y as u32, 1);
        }
        queue.submit([enc.finish()]);
        if let Some(e) = crate::device::block_on(scope.pop()) {
            return Err(format!("CRC pass: {e}"));
        }
        let back = crate::device::read_buffer(device, queue, &out, 0, out_len)
            .map_err(|e| e.to_string())?;
        for (r, w) in results.iter_mut().zip(back.chunks_exact(4)) {
            *r = u32::from_le_bytes(w.try_into().expect("4 bytes"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{GpuDevice, Want};

    /// The device the player opens (host import where the adapter has it).
    fn gpu() -> Option<GpuDevice> {
        match crate::device::open(&Want::HostImport, "crc test") {
            Ok(g) => Some(g),
            Err(e) => {
                if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                    panic!("no GPU adapter ({e}) and SUPERCELL_REQUIRE_GPU is set");
                }
                eprintln!("skipping: no GPU adapter ({e})");
                None
            }
        }
    }

    fn random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
        (0..n)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect()
    }

    fn upload(g: &GpuDevice, data: &[u8]) -> wgpu::Buffer {
        g.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("crc test data"),
                contents: data,
                usage: wgpu::BufferUsages::STORAGE,
            })
    }

    /// Extents of many shapes: whole blocks, several blocks, unaligned lengths (1, 3,
    /// 4097, …), empty, 4 KiB-aligned offsets and word-aligned ones, out of order, many.
    #[test]
    fn extent_crcs_match_crc32fast() {
        let Some(g) = gpu() else { return };
        let data = random_bytes(3 << 20, 0x9E37_79B9_7F4A_7C15);
        let buf = upload(&g, &data);
        let crc = WgpuCrc::new(&g.device);
        let mut extents: Vec<(u64, u64)> = vec![
            (0, 4096),
            (4096, 0),
            (8192, 1),
            (12288, 3),
            (16384, 4097),
            (24576, 3 * 4096 + 5),
            (65536, 1 << 20),
            (4, 4092),
            (2 << 20, (1 << 20) - 7),
            (40, 40),
            (0, data.len() as u64),
        ];
        // Many small extents, 4 KiB apart.
        extents.extend((0..300u64).map(|i| (1_200_000 + i * 4096, 1 + (i * 37) % 4096)));
        let got = crc.crc32(&g.device, &g.queue, &buf, &extents).unwrap();
        for (&(off, len), got) in extents.iter().zip(&got) {
            let want = crc32fast::hash(&data[off as usize..(off + len) as usize]);
            assert_eq!(*got, want, "extent at {off} of {len} bytes");
        }
        assert!(
            crc.crc32(&g.device, &g.queue, &buf, &[])
                .unwrap()
                .is_empty()
        );
    }

    /// Pieces across several binding windows and extents split into pieces give the same
    /// values (the limits made small on purpose).
    #[test]
    fn small_bindings_split_and_combine() {
        let Some(g) = gpu() else { return };
        let data = random_bytes(1 << 20, 7);
        let buf = upload(&g, &data);
        let mut crc = WgpuCrc::new(&g.device);
        crc.max_binding = 64 << 10;
        crc.max_piece = 16 << 10;
        crc.max_groups = 2;
        let extents = [(0, 1 << 20), (4096, 100_001), (512 << 10, 3), (8, 70_000)];
        let got = crc.crc32(&g.device, &g.queue, &buf, &extents).unwrap();
        for (&(off, len), got) in extents.iter().zip(&got) {
            let want = crc32fast::hash(&data[off as usize..(off + len) as usize]);
            assert_eq!(*got, want, "extent at {off} of {len} bytes");
        }
    }

    /// One flipped byte changes that extent's CRC and no other's.
    #[test]
    fn a_flipped_byte_is_detected() {
        let Some(g) = gpu() else { return };
        let mut data = random_bytes(256 << 10, 99);
        let extents: Vec<(u64, u64)> = (0..8).map(|i| (i * (32 << 10), 32 << 10)).collect();
        let want: Vec<u32> = extents
            .iter()
            .map(|&(o, l)| crc32fast::hash(&data[o as usize..(o + l) as usize]))
            .collect();
        data[5 * (32 << 10) + 1234] ^= 0x10;
        let buf = upload(&g, &data);
        let got = WgpuCrc::new(&g.device)
            .crc32(&g.device, &g.queue, &buf, &extents)
            .unwrap();
        for (i, (got, want)) in got.iter().zip(&want).enumerate() {
            assert_eq!(got != want, i == 5, "extent {i}");
        }
    }

    #[test]
    fn extents_past_the_buffer_are_refused() {
        let Some(g) = gpu() else { return };
        let buf = upload(&g, &[0u8; 4096]);
        let crc = WgpuCrc::new(&g.device);
        assert!(crc.crc32(&g.device, &g.queue, &buf, &[(0, 4097)]).is_err());
        assert!(crc.crc32(&g.device, &g.queue, &buf, &[(2, 4)]).is_err());
        assert!(
            crc.crc32(&g.device, &g.queue, &buf, &[(u64::MAX, 4)])
                .is_err()
        );
    }
}
