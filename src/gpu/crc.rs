//! CRC-32 of extents in device memory, computed on the GPU: one thread per 4 KiB block
//! (slicing-by-4 tables in shared memory), each block's CRC moved past the bytes after it
//! in its extent and XORed into the extent's result (see [`crate::crc32`], whose
//! [`blocked_crc32`](crate::crc32::blocked_crc32) is the same algorithm on the host).
//! Only a few bytes per extent come back to the host.
//!
//! The kernel is compiled with NVRTC once per process and loaded once per context. Where
//! NVRTC is missing or fails, [`GpuCrc::new`] says why and callers check on the CPU instead.

use std::sync::{Arc, OnceLock};

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::cuda::{Gpu, cuda_error};
use super::error::{GpuError, Result};
use crate::crc32::{BYTE_POWERS, CrcTables};

/// Bytes per GPU thread. Extents are 4 KiB multiples, so most blocks are whole.
pub const GPU_CRC_BLOCK: u64 = 4096;

const THREADS_PER_BLOCK: u32 = 256;

/// The kernel. Arguments: the base address, per extent its offset from the base and its
/// length and the index of its first block (`n_ext + 1` prefix entries), the total block
/// count, the 4 × 256 slicing tables followed by the 64 byte powers, and the zeroed
/// per-extent results.
const KERNEL: &str = r#"
#define CRC_BLOCK 4096ULL
extern "C" __global__ void crc32_extents(
    const unsigned char* __restrict__ base,
    const unsigned long long* __restrict__ ext_off,
    const unsigned long long* __restrict__ ext_len,
    const unsigned long long* __restrict__ ext_first_block,
    unsigned int n_ext,
    unsigned long long n_blocks,
    const unsigned int* __restrict__ tables,
    unsigned int* __restrict__ out)
{
    __shared__ unsigned int t[4 * 256 + 64];
    for (unsigned int i = threadIdx.x; i < 4 * 256 + 64; i += blockDim.x) t[i] = tables[i];
    __syncthreads();
    const unsigned int* t0 = t;
    const unsigned int* t1 = t + 256;
    const unsigned int* t2 = t + 512;
    const unsigned int* t3 = t + 768;
    const unsigned int* powers = t + 1024;

    unsigned long long b = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n_blocks) return;
    // The extent holding block b: the last e with ext_first_block[e] <= b.
    unsigned int lo = 0, hi = n_ext;
    while (hi - lo > 1) {
        unsigned int mid = (lo + hi) / 2;
        if (ext_first_block[mid] <= b) lo = mid; else hi = mid;
    }
    const unsigned int e = lo;
    const unsigned long long start = (b - ext_first_block[e]) * CRC_BLOCK;
    const unsigned long long total = ext_len[e];
    const unsigned long long len = total - start < CRC_BLOCK ? total - start : CRC_BLOCK;
    const unsigned char* p = base + ext_off[e] + start;

    unsigned int c = 0xFFFFFFFFu;
    unsigned long long done = 0;
    if ((((unsigned long long)p) & 15ULL) == 0) {
        const uint4* q = (const uint4*)p;
        const unsigned long long n16 = len / 16;
        for (unsigned long long i = 0; i < n16; ++i) {
            uint4 v = q[i];
            unsigned int w[4] = {v.x, v.y, v.z, v.w};
            #pragma unroll
            for (int k = 0; k < 4; ++k) {
                c ^= w[k];
                c = t3[c & 0xFF] ^ t2[(c >> 8) & 0xFF] ^ t1[(c >> 16) & 0xFF] ^ t0[c >> 24];
            }
        }
        done = n16 * 16;
    }
    for (unsigned long long i = done; i < len; ++i) c = (c >> 8) ^ t0[(c ^ p[i]) & 0xFF];
    c = ~c;

    // Move the block's CRC past the rest of the extent: multiply by x^(8*rest) mod P.
    unsigned long long rest = total - (start + len);
    for (int k = 0; rest != 0; ++k, rest >>= 1) {
        if (rest & 1ULL) {
            unsigned int a = powers[k], prod = 0, bx = c;
            for (int i = 0; i < 32; ++i) {
                if (a & (0x80000000u >> i)) prod ^= bx;
                bx = (bx >> 1) ^ (0xEDB88320u & (0u - (bx & 1u)));
            }
            c = prod;
        }
    }
    atomicXor(&out[e], c);
}
"#;

/// The kernel's extent table for `ranges` (offset, length): the offsets, the lengths, then
/// the index of each extent's first block followed by the total block count
/// (`3 · n + 1` words); and that block count.
fn extent_table(ranges: &[(u64, u64)]) -> (Vec<u64>, u64) {
    let mut desc = Vec::with_capacity(3 * ranges.len() + 1);
    desc.extend(ranges.iter().map(|r| r.0));
    desc.extend(ranges.iter().map(|r| r.1));
    let mut blocks = 0u64;
    for &(_, len) in ranges {
        desc.push(blocks);
        blocks += len.div_ceil(GPU_CRC_BLOCK);
    }
    desc.push(blocks);
    (desc, blocks)
}

/// The PTX, compiled once per process (or why it could not be).
fn ptx() -> std::result::Result<String, String> {
    static PTX: OnceLock<std::result::Result<String, String>> = OnceLock::new();
    PTX.get_or_init(|| {
        // SAFETY: only tries to dlopen libnvrtc.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(
                "NVRTC (libnvrtc.so) is not installed or not on the loader path".to_string(),
            );
        }
        // cudarc panics where a symbol it expects is missing from the library it found;
        // that must cost the GPU check, not the process.
        std::panic::catch_unwind(|| {
            cudarc::nvrtc::compile_ptx(KERNEL)
                .map(|p| p.to_src())
                .map_err(|e| format!("NVRTC could not compile the CRC kernel: {e}"))
        })
        .unwrap_or_else(|_| Err("NVRTC failed (the library lacks an expected symbol)".into()))
    })
    .clone()
}

/// The CRC kernel loaded into one GPU's context, with its tables uploaded and its own
/// stream.
pub struct GpuCrc {
    gpu: Gpu,
    stream: Arc<CudaStream>,
    func: CudaFunction,
    tables: CudaSlice<u32>,
}

impl std::fmt::Debug for GpuCrc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuCrc")
            .field("gpu", &self.gpu.ordinal)
            .finish()
    }
}

impl GpuCrc {
    /// Compiles (once per process) and loads the kernel. Fails with
    /// [`GpuError::Unavailable`] saying why when NVRTC is missing or the driver cannot
    /// load the result.
    pub fn new(gpu: &Gpu) -> Result<GpuCrc> {
        let ptx = ptx().map_err(GpuError::Unavailable)?;
        gpu.bind()?;
        let module = gpu
            .context()
            .load_module(cudarc::nvrtc::Ptx::from_src(ptx))
            .map_err(|e| {
                GpuError::Unavailable(format!(
                    "the CUDA driver cannot load the CRC kernel: {}",
                    super::cuda::driver_err(e.0)
                ))
            })?;
        let func = module
            .load_function("crc32_extents")
            .map_err(cuda_error("loading crc32_extents"))?;
        let stream = gpu
            .context()
            .new_stream()
            .map_err(cuda_error("cuStreamCreate"))?;
        let mut host_tables = CrcTables::new().flat();
        host_tables.extend_from_slice(&BYTE_POWERS);
        let tables = stream
            .clone_htod(&host_tables)
            .map_err(cuda_error("uploading the CRC tables"))?;
        Ok(GpuCrc {
            gpu: gpu.clone(),
            stream,
            func,
            tables,
        })
    }

    /// The CRC-32 of each `(offset, len)` range at device address `base`, in order.
    /// Waits for the result.
    ///
    /// # Safety
    /// Every range must lie inside device memory of this GPU's context that stays allocated
    /// and is not written until this returns.
    pub unsafe fn extent_crcs(&self, base: u64, ranges: &[(u64, u64)]) -> Result<Vec<u32>> {
        if ranges.is_empty() {
            return Ok(Vec::new());
        }
        let n_ext = u32::try_from(ranges.len())
            .map_err(|_| GpuError::Usage("too many extents for one CRC launch".into()))?;
        let (desc, blocks) = extent_table(ranges);
        let grid = u32::try_from(blocks.div_ceil(u64::from(THREADS_PER_BLOCK)))
            .map_err(|_| GpuError::Usage("extents too large for one CRC launch".into()))?;
        self.gpu.bind()?;
        let s = &self.stream;
        let desc = s
            .clone_htod(&desc)
            .map_err(cuda_error("uploading extent descriptors"))?;
        let mut out = s
            .alloc_zeros::<u32>(ranges.len())
            .map_err(cuda_error("allocating CRC results"))?;
        let n = ranges.len();
        let off = desc.slice(0..n);
        let len = desc.slice(n..2 * n);
        let first = desc.slice(2 * n..3 * n + 1);
        let mut launch = s.launch_builder(&self.func);
        launch
            .arg(&base)
            .arg(&off)
            .arg(&len)
            .arg(&first)
            .arg(&n_ext)
            .arg(&blocks)
            .arg(&self.tables)
            .arg(&mut out);
        let cfg = LaunchConfig {
            grid_dim: (grid.max(1), 1, 1),
            block_dim: (THREADS_PER_BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: the argument list matches the kernel's signature; the descriptors and
        // results are live allocations of the sizes the kernel indexes (n_ext + 1 prefix
        // entries, n_ext results); the ranges are readable device memory (caller's
        // contract), and the kernel reads exactly them.
        unsafe { launch.launch(cfg) }.map_err(cuda_error("launching crc32_extents"))?;
        let crcs = s
            .clone_dtoh(&out)
            .map_err(cuda_error("reading CRC results back"))?;
        s.synchronize()
            .map_err(cuda_error("waiting for the CRC kernel"))?;
        Ok(crcs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crc32::shift;

    /// What the kernel does, thread by thread, on the host: the same extent table, the
    /// same search for a block's extent, the same block bounds, shift and XOR.
    fn emulate(base: &[u8], ranges: &[(u64, u64)]) -> Vec<u32> {
        let tables = CrcTables::new();
        let (desc, n_blocks) = extent_table(ranges);
        let n = ranges.len();
        let (off, len, first) = (&desc[..n], &desc[n..2 * n], &desc[2 * n..]);
        let mut out = vec![0u32; n];
        for b in 0..n_blocks {
            let (mut lo, mut hi) = (0usize, n);
            while hi - lo > 1 {
                let mid = (lo + hi) / 2;
                if first[mid] <= b {
                    lo = mid;
                } else {
                    hi = mid;
                }
            }
            let e = lo;
            let start = (b - first[e]) * GPU_CRC_BLOCK;
            let block_len = (len[e] - start).min(GPU_CRC_BLOCK);
            let at = (off[e] + start) as usize;
            let c = tables.crc32(&base[at..at + block_len as usize]);
            out[e] ^= shift(c, len[e] - (start + block_len));
        }
        out
    }

    #[test]
    fn the_kernels_extent_table_and_search_give_crc32fast() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let data: Vec<u8> = (0..(3 << 20))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        let n = data.len() as u64;
        let mut ranges = vec![
            (0, 0),
            (0, n),
            (5, 4096),
            (4096, 0),
            (17, 100_003),
            (n - 1, 1),
            (8192, 3 * 4096),
        ];
        ranges.extend((0..40u64).map(|i| (i * 65536, 65536 - i * 48)));
        ranges.push((0, 0));
        let got = emulate(&data, &ranges);
        for (r, g) in ranges.iter().zip(got) {
            let want = crc32fast::hash(&data[r.0 as usize..(r.0 + r.1) as usize]);
            assert_eq!(g, want, "range {r:?}");
        }
    }
}
