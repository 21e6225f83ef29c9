//! Opening the GPUs of `--gpus`: each CUDA ordinal's wgpu device, matched to it by PCI bus
//! (or UUID), as the single-GPU player would open it.

use super::{GpuName, LocalGpu, open_part};
use crate::app::PlayerGpu;
use crate::app::config::{PlayError, PlayerConfig};
use crate::cluster::Ranks;
use crate::render::RenderError;

/// One GPU of `--gpus`: its wgpu device and how it was matched to the CUDA device.
pub struct OpenedGpu {
    /// The ordinal named on the command line (CUDA's numbering where CUDA runs).
    pub ordinal: usize,
    /// The device.
    pub gpu: PlayerGpu,
    /// How the wgpu adapter was chosen for this ordinal, in words.
    pub matched: String,
}

/// PCI bus ids compared as numbers (CUDA writes `00000000:1B:00.0`, Vulkan `0000:1b:00.0`).
fn same_pci_bus(a: &str, b: &str) -> bool {
    fn parts(s: &str) -> Option<Vec<u64>> {
        let s = s.trim();
        let (head, func) = s.rsplit_once('.')?;
        let mut v: Vec<u64> = head
            .split(':')
            .map(|p| u64::from_str_radix(p, 16).ok())
            .collect::<Option<_>>()?;
        v.push(u64::from_str_radix(func, 16).ok()?);
        // Domain, bus, device, function: a missing domain is 0.
        while v.len() < 4 {
            v.insert(0, 0);
        }
        Some(v)
    }
    matches!((parts(a), parts(b)), (Some(x), Some(y)) if x == y)
}

/// Opens the device of GPU `ordinal`: CUDA's device of that ordinal and the Vulkan adapter
/// with the same device UUID (memory sharing: the direct path) where that works; else a
/// plain device on the wgpu adapter with CUDA's PCI bus id where both report one, else the
/// adapter of that place in wgpu's list (discrete GPUs first, as the single-GPU player
/// prefers them). `matched` says which.
pub fn open_gpu(ordinal: usize) -> Result<OpenedGpu, RenderError> {
    let why = match PlayerGpu::open_shared_on(ordinal) {
        Ok(gpu) => {
            let uuid = gpu
                .caps
                .uuid
                .map_or_else(|| "?".into(), |u| crate::device::uuid_str(&u));
            let bus = gpu
                .interop
                .as_ref()
                .map_or_else(String::new, |(g, _)| format!(" (PCI {})", g.pci_bus_id));
            let matched = format!(
                "CUDA device {ordinal}{bus} is Vulkan adapter {}: the same device UUID {uuid}",
                gpu.describe()
            );
            return Ok(OpenedGpu {
                ordinal,
                gpu,
                matched,
            });
        }
        Err(why) => why,
    };
    let cuda_bus = crate::gpu::cuda_probe()
        .ok()
        .and_then(|()| crate::gpu::Gpu::open(ordinal).ok())
        .map(|g| g.pci_bus_id.clone());
    let instance = PlayerGpu::instance();
    let mut adapters = crate::device::block_on(instance.enumerate_adapters(wgpu::Backends::all()));
    let rank = |t: wgpu::DeviceType| match t {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Other => 3,
        wgpu::DeviceType::Cpu => 4,
    };
    adapters.sort_by_key(|a| rank(a.get_info().device_type));
    let by_bus = cuda_bus.as_deref().and_then(|bus| {
        adapters
            .iter()
            .position(|a| same_pci_bus(&a.get_info().device_pci_bus_id, bus))
            .map(|i| (i, format!("by PCI bus id {bus}")))
    });
    let (index, how) = match by_bus {
        Some(found) => found,
        None if ordinal < adapters.len() => (
            ordinal,
            format!(
                "by order: adapter {ordinal} of the {} wgpu lists ({})",
                adapters.len(),
                match &cuda_bus {
                    Some(bus) => format!("no adapter reports CUDA's PCI bus id {bus}"),
                    None => "no CUDA PCI bus id to match".into(),
                }
            ),
        ),
        None => {
            return Err(RenderError::NoDevice(format!(
                "GPU {ordinal} (--gpus): wgpu lists {} adapter(s) here",
                adapters.len()
            )));
        }
    };
    let adapter = adapters.swap_remove(index);
    let g = crate::device::open_chosen(instance, adapter, true, "supercell play")
        .map_err(|e| RenderError::NoDevice(format!("GPU {ordinal}: {e}")))?;
    let gpu = PlayerGpu::without_sharing(g, Some(why.clone()));
    let matched = format!("{} {how}; no memory sharing: {why}", gpu.describe());
    Ok(OpenedGpu {
        ordinal,
        gpu,
        matched,
    })
}

/// The GPU of this rank of a run across ranks: the GPU of its local rank's ordinal on its
/// host (as `--gpus` opens an ordinal: [`open_gpu`]), else, for a local rank past the
/// host's adapters, the best adapter (said in the name's `matched`). The headless run and
/// the window across ranks open their rank's GPU alike.
pub fn open_rank_gpu(ranks: &dyn Ranks) -> Result<(PlayerGpu, GpuName), RenderError> {
    let local = ranks.local_rank();
    let (gpu, how) = match open_gpu(local) {
        Ok(o) => (o.gpu, o.matched),
        Err(e) if local > 0 => {
            let g = PlayerGpu::open_best()?;
            let how = format!("no GPU of ordinal {local} ({e}): the best adapter");
            (g, how)
        }
        Err(e) => return Err(e),
    };
    let name = GpuName {
        ordinal: local,
        matched: format!("local rank {local} on {}: {how}", ranks.host()),
        device: gpu.describe(),
        host: Some(ranks.host()),
        rank: Some(ranks.rank()),
    };
    Ok((gpu, name))
}

/// The GPUs this rank plays in a run across ranks: those of `ordinals` (`--gpus`, resolved
/// on this rank's host as in one process; one may be named twice), else its local rank's
/// GPU ([`open_rank_gpu`]); each named with the rank and host.
pub fn open_rank_gpus(
    ranks: &dyn Ranks,
    ordinals: Option<&[usize]>,
) -> Result<Vec<(PlayerGpu, GpuName)>, RenderError> {
    let Some(ordinals) = ordinals else {
        return Ok(vec![open_rank_gpu(ranks)?]);
    };
    let (rank, host) = (ranks.rank(), ranks.host());
    let mut out = Vec::with_capacity(ordinals.len());
    for (slot, o) in open_gpus(ordinals)?.into_iter().enumerate() {
        let name = GpuName {
            ordinal: o.ordinal,
            matched: format!(
                "rank {rank}'s GPU {slot} (--gpus {}) on {host}: {}",
                o.ordinal, o.matched
            ),
            device: o.gpu.describe(),
            host: Some(host.clone()),
            rank: Some(rank),
        };
        out.push((o.gpu, name));
    }
    Ok(out)
}

/// Each of this rank's GPUs `opened` with its player over the frames it owns: worker
/// `rank × G + slot` of the `size × G` workers of the run (every rank plays `G`, as many as
/// this one: rank 0 refuses a rank that does not), alternate frames over them; and the
/// timeline's frame count.
pub fn open_rank_parts(
    opened: Vec<(PlayerGpu, GpuName)>,
    ranks: &dyn Ranks,
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
) -> Result<(Vec<LocalGpu>, u32), PlayError> {
    let per_rank = opened.len();
    let workers = ranks.size() * per_rank;
    let mut locals = Vec::with_capacity(per_rank);
    let mut frame_count = 0;
    for (slot, (gpu, name)) in opened.into_iter().enumerate() {
        let k = ranks.rank() * per_rank + slot;
        let (player, n) = open_part(&gpu, scene, cfg, workers, k)?;
        frame_count = n;
        locals.push(LocalGpu::new(name, Some(gpu), player));
    }
    Ok((locals, frame_count))
}

/// Opens every GPU of `ordinals` (one may be named twice: two devices on one adapter).
pub fn open_gpus(ordinals: &[usize]) -> Result<Vec<OpenedGpu>, RenderError> {
    ordinals.iter().map(|&k| open_gpu(k)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_bus_ids_compare_as_numbers() {
        assert!(same_pci_bus("00000000:1B:00.0", "0000:1b:00.0"));
        assert!(same_pci_bus("1b:00.0", "0000:1b:00.0"));
        assert!(!same_pci_bus("0000:1b:00.0", "0000:1c:00.0"));
        assert!(!same_pci_bus("", "0000:1c:00.0"));
        assert!(!same_pci_bus("garbage", "garbage"));
    }
}
