//! One frame path of the player: its [`FrameStream`] (engine, ring, requests) and its
//! [`UploadRoute`], how each is opened, and how it reports itself.

use serde::Serialize;

use super::config::{DirectEngine, HostCopy, PathSel, PlayError, PlayerConfig};
use super::direct::DirectSlots;
use super::route::UploadRoute;
use crate::gpu::{FrameRing, SlotLayout, SlotMemory};
use crate::ingest::{
    Engine, EngineConfig, EngineInfo, EngineKind, IngestEngine, Source, open_engine,
};
use crate::stream::FrameStream;

/// One frame path: its stream (engine, ring, requests) and how its frames reach the
/// buffer the renderer binds.
pub(super) struct FramePath {
    pub(super) stream: FrameStream,
    pub(super) route: UploadRoute,
    pub(super) info: EngineInfo,
}

/// A path's availability and how it runs, for the overlay and the JSON.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathReport {
    /// "direct" or "host".
    pub path: PathSel,
    /// Whether the path can run here.
    pub available: bool,
    /// Why not, when it cannot.
    pub unavailable_reason: Option<String>,
    /// Short label: "GDS P2P", "GDS compat", "staged", "cpu-only (io_uring)" (or
    /// "cpu-only (pread)", "…, page cache" where reads cannot be O_DIRECT), "portable".
    pub label: String,
    /// Engine that runs (gds, staged, cpu-only, portable).
    pub engine: Option<String>,
    /// How it runs (the engine's words, e.g. cuFile mode, io_uring, O_DIRECT).
    pub mode: Option<String>,
    /// Why the engine asked for is not the one running (gds → staged).
    pub fallback: Option<String>,
    /// cuFile's live mode from its counters (P2P / compatibility), where known.
    pub cufile_mode: Option<String>,
    /// Ring slots.
    pub slots: usize,
    /// Host path: how frames get from the host slots to the GPU.
    pub upload: Option<String>,
    /// Notes from the engine.
    pub notes: Vec<String>,
}

/// Frames a ring should hold: at least 3 (one shown, one arriving, one ahead), at most 8,
/// and no more than a quarter of `budget` bytes.
pub fn ring_slots(slot_len: usize, budget: u64) -> usize {
    let by_memory = budget / 4 / (slot_len.max(1) as u64);
    (by_memory as usize).clamp(3, 8)
}

impl PathReport {
    /// A path that cannot run here, and why (where known).
    pub(super) fn unavailable(path: PathSel, reason: Option<String>) -> PathReport {
        PathReport {
            path,
            available: false,
            unavailable_reason: reason,
            label: "unavailable".into(),
            engine: None,
            mode: None,
            fallback: None,
            cufile_mode: None,
            slots: 0,
            upload: None,
            notes: Vec::new(),
        }
    }
}

impl FramePath {
    /// The host path: the cpu-only engine (the portable one, with the reason, where it
    /// cannot start) into `slots` page-aligned host slots of `layout`, and the best upload
    /// route the device allows (`label` names its GPU buffers).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn host(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        cfg: &PlayerConfig,
        ecfg: &EngineConfig,
        source: &Source,
        slots: usize,
        layout: SlotLayout,
        label: &str,
    ) -> Result<FramePath, PlayError> {
        // Host memory on the pages the run asks for (`SUPERCELL_HOST_HUGEPAGES`).
        let layout = layout.with_pages(cfg.host_pages);
        if cfg.host_copy == HostCopy::Ring {
            return FramePath::host_ring(device, queue, cfg, ecfg, source, slots, layout, label);
        }
        let ring = FrameRing::host(slots, layout)?;
        // Best: the GPU copies straight out of the host slots (imported host memory); else
        // each frame is copied by the CPU into a staging buffer first.
        let route = UploadRoute::for_host_slots(device, &ring, cfg.host_copy, cfg.verify, label)?;
        let ecfg = EngineConfig {
            verify: cfg.verify && !route.checks_on_gpu(),
            ..ecfg.clone()
        };
        // cpu-only: io_uring with O_DIRECT straight into the page-aligned host slots (the
        // engine itself notes files whose file system refuses O_DIRECT, e.g. tmpfs, and
        // reads those through the page cache). Where it cannot start at all, the portable
        // engine runs and the reason is kept.
        let open = |kind| open_engine(kind, None, &source.files, ring.memories(), &ecfg);
        let (engine, fallback) = match open(EngineKind::CpuOnly) {
            Ok(e) => (e, None),
            Err(e) => (open(EngineKind::Portable)?, Some(format!("cpu-only: {e}"))),
        };
        let mut info = engine.info().clone();
        if fallback.is_some() {
            info.requested = EngineKind::CpuOnly;
            info.fallback = fallback;
        }
        // Which pages the host slots are on (SUPERCELL_HOST_HUGEPAGES), as the kernel gave them.
        info.notes.push(crate::gpu::describe_pages(
            ring.memories()
                .iter()
                .flat_map(|m| m.parts().iter())
                .filter_map(|p| match p {
                    crate::gpu::PartMemory::Host(b) => Some(b),
                    crate::gpu::PartMemory::Device(_) => None,
                }),
        ));
        if route.checks_on_gpu() {
            info.notes
                .push("--verify: each frame's CRC-32 is computed on the GPU after its copy".into());
        }
        Ok(FramePath {
            info,
            stream: FrameStream::new(engine, ring),
            route,
        })
    }

    /// The host path through a ring of imported host buffers (`--host-copy ring`): the
    /// bounce engine reads into the ring and the GPU copies each read into the slot's
    /// device buffers. The ring's slots hold no host memory (address space only, never
    /// touched): they give the frame ring its layout and states.
    #[allow(clippy::too_many_arguments)]
    fn host_ring(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        cfg: &PlayerConfig,
        ecfg: &EngineConfig,
        source: &Source,
        slots: usize,
        layout: SlotLayout,
        label: &str,
    ) -> Result<FramePath, PlayError> {
        let (route, copier) = UploadRoute::ring(
            device,
            queue,
            slots,
            layout,
            (ecfg.threads, ecfg.queue_depth, ecfg.io_size),
            cfg.verify,
            label,
        )?;
        let memories = (0..slots)
            .map(|_| {
                let parts = (0..layout.parts())
                    .map(|i| {
                        let n = layout.part_len(i) as usize;
                        crate::gpu::HostBuffer::reserve(n)
                            .map(crate::gpu::PartMemory::Host)
                            .map_err(|e| {
                                PlayError::Usage(format!(
                                    "cannot reserve {n} bytes of address space: {e}"
                                ))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                SlotMemory::new(parts, layout.part_bytes())
                    .map_err(|e| PlayError::Usage(e.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ring = FrameRing::new(memories)?;
        let ecfg = EngineConfig {
            // The route checks each frame on the GPU.
            verify: false,
            ..ecfg.clone()
        };
        let engine = Engine::bounce(&source.files, ring.memories(), Box::new(copier), &ecfg)?;
        let mut info = engine.info().clone();
        if route.checks_on_gpu() {
            info.notes
                .push("--verify: each frame's CRC-32 is computed on the GPU after its copy".into());
        }
        Ok(FramePath {
            info,
            stream: FrameStream::new(engine, ring),
            route,
        })
    }

    /// The direct path: the engine `which` picks (gds falls back to staged, with the
    /// reason) into the shared slots; `Ok(Err(why))` where no engine can run on them.
    pub(super) fn direct(
        shared: DirectSlots,
        source: &Source,
        ecfg: &EngineConfig,
        which: DirectEngine,
    ) -> Result<Result<FramePath, String>, PlayError> {
        let DirectSlots {
            gpu,
            memories,
            buffers,
        } = shared;
        let ring = FrameRing::new(memories)?;
        let (kind, why) = direct_engine_kind(which);
        Ok(
            match open_engine(kind, Some(&gpu), &source.files, ring.memories(), ecfg) {
                Ok(engine) => Ok(FramePath {
                    info: {
                        let mut info = engine.info().clone();
                        info.notes.extend(why);
                        info
                    },
                    stream: FrameStream::new(engine, ring),
                    route: UploadRoute::Shared { buffers },
                }),
                Err(e) => Err(e.to_string()),
            },
        )
    }

    /// Availability and mode of the path, as `sel`.
    pub(super) fn report(&self, sel: PathSel) -> PathReport {
        let info = &self.info;
        let cufile = self
            .stream
            .engine()
            .cufile_stats()
            .map(|s| s.live_mode().to_string());
        let label = match info.active {
            EngineKind::Gds => match cufile.as_deref() {
                Some("P2P") => "GDS P2P".to_string(),
                Some(m) if m.starts_with("compat") => "GDS compat".to_string(),
                _ if info.mode.contains("compat") => "GDS compat".to_string(),
                _ => "GDS".to_string(),
            },
            _ if !self.route.is_shared() && sel == PathSel::Direct => "loopback (test)".to_string(),
            // Honest about how the reads really run: io_uring or pread threads, and whether
            // every file is read with O_DIRECT.
            EngineKind::CpuOnly => {
                let io = if info.mode.starts_with("io_uring") {
                    "io_uring"
                } else {
                    "pread"
                };
                if info.mode.contains(", O_DIRECT") {
                    format!("cpu-only ({io})")
                } else {
                    format!("cpu-only ({io}, page cache)")
                }
            }
            k => k.name().to_string(),
        };
        PathReport {
            path: sel,
            available: true,
            unavailable_reason: None,
            label,
            engine: Some(info.active.name().into()),
            mode: Some(info.mode.clone()),
            fallback: info.fallback.clone(),
            cufile_mode: cufile,
            slots: self.stream.ring().len(),
            upload: self.route.description(),
            notes: info.notes.clone(),
        }
    }
}

/// The engine the direct path opens for `which`, and why, where `Auto` chose staged.
fn direct_engine_kind(which: DirectEngine) -> (EngineKind, Option<String>) {
    match which {
        DirectEngine::Gds => (EngineKind::Gds, None),
        DirectEngine::Staged => (EngineKind::Staged, None),
        DirectEngine::Auto => match crate::ingest::gds::cufile_open() {
            // Compatibility mode: cuFile's own threads read into its bounce buffers and copy
            // from there, slower than the staged engine; peer-to-peer reads are the point
            // of GDS, so only they are worth choosing it for.
            Ok(info) if !info.p2p() => (
                EngineKind::Staged,
                Some(format!(
                    "direct engine: staged CUDA copies, chosen over cuFile, which runs in {} \
                     here (slower than staged); --direct-engine gds uses cuFile anyway",
                    info.mode_text()
                )),
            ),
            // P2P, or cuFile cannot run (gds falls back to staged and says why).
            _ => (EngineKind::Gds, None),
        },
    }
}
