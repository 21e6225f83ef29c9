//! How big a slot's parts are, and how many slots a run holds: chosen to fit the GPU and
//! host memory there is, and reported ([`SlotPlan`]).
//!
//! The part size is the renderer's (`Renderer::part_bytes`: a power of two no larger than
//! the device's largest buffer and storage binding), so every part is one buffer the shader
//! can bind whole; a benchmark, which opens no renderer, uses [`DEFAULT_PART_BYTES`]. Tests force
//! small parts (a configuration field; the binary's `SUPERCELL_PART_BYTES`) so that small
//! frames span several parts on machines without a large GPU.

use serde::Serialize;

use super::error::{GpuError, Result};
use super::ring::{MIN_PART_BYTES, SlotLayout};

/// The part size where no device says (a benchmark opens no renderer): 2 GiB, what devices
/// whose buffers and bindings reach 4 GiB get, so a benchmark's slots are laid out as the
/// player's on such GPUs.
pub const DEFAULT_PART_BYTES: u64 = 1 << 31;

/// Checks a forced part size (`what` names where it came from): a power of two of at least
/// [`MIN_PART_BYTES`].
pub fn check_part_bytes(bytes: u64, what: &str) -> Result<u64> {
    if bytes.is_power_of_two() && bytes >= MIN_PART_BYTES {
        Ok(bytes)
    } else {
        Err(GpuError::Usage(format!(
            "{what}: a part size of {bytes} bytes is not a power of two of at least {MIN_PART_BYTES} bytes"
        )))
    }
}

/// The part size a run uses where no renderer chooses it (a benchmark): `forced` (a
/// configuration field), else `default`.
pub fn choose_part_bytes(forced: Option<u64>, default: u64) -> Result<u64> {
    match forced {
        Some(b) => check_part_bytes(b, "the part size"),
        None => Ok(default),
    }
}

/// What a run's slots take: the largest frame and, per ring slot, how many copies of a slot
/// each memory holds (a player holds a host ring and a device buffer per slot, and the direct
/// path's shared slots), plus copies that do not grow with the slot count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotDemand {
    /// The largest frame (its index, for messages).
    pub frame: u32,
    /// Bytes of the largest frame: a slot's size.
    pub frame_bytes: u64,
    /// Bytes of a part.
    pub part_bytes: u64,
    /// Most parts a slot may have (what the renderer binds at once; `usize::MAX`: no limit).
    pub max_parts: usize,
    /// Slot-sized copies in host memory per ring slot.
    pub host_per_slot: u64,
    /// Slot-sized copies in GPU memory per ring slot.
    pub gpu_per_slot: u64,
    /// Slot-sized copies in GPU memory whatever the slot count.
    pub gpu_fixed: u64,
}

/// The slots a run holds and the memory they take, as chosen ([`plan_slots`]) and reported
/// (one line of output, [`SlotPlan::line`], and the JSON).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SlotPlan {
    /// Ring slots (per path).
    pub slots: usize,
    /// Bytes of a slot (the largest frame).
    pub slot_bytes: u64,
    /// Bytes of every part but a slot's last.
    pub part_bytes: u64,
    /// Parts per slot.
    pub parts: usize,
    /// Host memory the slots take, bytes.
    pub host_bytes: u64,
    /// GPU memory the slots take, bytes.
    pub gpu_bytes: u64,
    /// Host memory available when chosen, bytes (`None`: unknown).
    pub host_available: Option<u64>,
    /// GPU memory free when chosen, bytes (`None`: unknown, or no GPU).
    pub gpu_available: Option<u64>,
    /// How the count was chosen.
    pub chosen: String,
}

impl SlotPlan {
    /// The slot layout.
    pub fn layout(&self) -> Result<SlotLayout> {
        SlotLayout::new(self.slot_bytes, self.part_bytes)
    }

    /// One line for the output, e.g. "slots: 4 of 6.5 GiB (4 parts of at most 2.0 GiB):
    /// host 26.1 GiB of 120.0 GiB available, GPU 52.2 GiB of 139.0 GiB free (fitted to
    /// memory)".
    pub fn line(&self) -> String {
        let h = crate::memory::human;
        let of = |avail: Option<u64>, what: &str| {
            avail.map_or(String::new(), |a| format!(" of {} {what}", h(a)))
        };
        // The memories the slots take (a benchmark on a GPU takes no host memory for them).
        let mut uses = Vec::new();
        if self.host_bytes > 0 {
            uses.push(format!(
                "host {}{}",
                h(self.host_bytes),
                of(self.host_available, "available")
            ));
        }
        if self.gpu_bytes > 0 {
            uses.push(format!(
                "GPU {}{}",
                h(self.gpu_bytes),
                of(self.gpu_available, "free")
            ));
        }
        format!(
            "slots: {} of {} ({} part{} of at most {}): {} ({})",
            self.slots,
            h(self.slot_bytes),
            self.parts,
            if self.parts == 1 { "" } else { "s" },
            h(self.part_bytes.min(self.slot_bytes)),
            uses.join(", "),
            self.chosen
        )
    }
}

/// Share of the available memory slots may take: the rest is left for the renderer, the
/// engines' buffers and everything else on the machine.
const USABLE_NUM: u64 = 7;
const USABLE_DEN: u64 = 8;

/// Chooses how many slots of `demand` a run holds: with `strict` (a count the user gave)
/// exactly `wanted` (the ring itself refuses a count the memory cannot hold, naming it);
/// else `wanted` where it fits the memory available (seven eighths of each), or the most
/// that fit, down to `min_slots`. A frame that fits no slot count is refused naming the
/// frame, its bytes and the memory available.
pub fn plan_slots(
    demand: &SlotDemand,
    wanted: usize,
    strict: bool,
    min_slots: usize,
    host_available: Option<u64>,
    gpu_available: Option<u64>,
) -> std::result::Result<SlotPlan, String> {
    let layout =
        SlotLayout::new(demand.frame_bytes.max(1), demand.part_bytes).map_err(|e| e.to_string())?;
    if layout.parts() > demand.max_parts {
        return Err(format!(
            "frame {} of {} bytes needs {} parts of {} bytes, but the renderer binds at most {} parts (a larger part size, up to the device's, fits it in fewer)",
            demand.frame,
            demand.frame_bytes,
            layout.parts(),
            demand.part_bytes,
            demand.max_parts
        ));
    }
    let slot = layout.len();
    let host_need = |k: usize| {
        (k as u64)
            .saturating_mul(demand.host_per_slot)
            .saturating_mul(slot)
    };
    let gpu_need = |k: usize| {
        (k as u64)
            .saturating_mul(demand.gpu_per_slot)
            .saturating_add(demand.gpu_fixed)
            .saturating_mul(slot)
    };
    let usable = |a: Option<u64>| a.map_or(u64::MAX, |a| a / USABLE_DEN * USABLE_NUM);
    let fits =
        |k: usize| host_need(k) <= usable(host_available) && gpu_need(k) <= usable(gpu_available);
    let h = crate::memory::human;
    let (slots, chosen) = if strict {
        (wanted, "as asked".to_string())
    } else if fits(wanted.max(min_slots)) {
        (wanted.max(min_slots), "fitted to memory".to_string())
    } else if let Some(k) = (min_slots..wanted).rev().find(|&k| fits(k)) {
        (k, format!("{wanted} wanted, {k} fit the memory"))
    } else {
        let k = min_slots;
        let mut short = Vec::new();
        if host_need(k) > usable(host_available) {
            short.push(format!(
                "{} of host memory ({} available)",
                h(host_need(k)),
                host_available.map_or("unknown".into(), h)
            ));
        }
        if gpu_need(k) > usable(gpu_available) {
            short.push(format!(
                "{} of GPU memory ({} free)",
                h(gpu_need(k)),
                gpu_available.map_or("unknown".into(), h)
            ));
        }
        return Err(format!(
            "frame {} of {} bytes ({}) fits no slot configuration: {k} slots of it need {} (at most {USABLE_NUM}/{USABLE_DEN} of each memory is used for slots)",
            demand.frame,
            demand.frame_bytes,
            h(demand.frame_bytes),
            short.join(" and ")
        ));
    };
    Ok(SlotPlan {
        slots,
        slot_bytes: slot,
        part_bytes: layout.part_bytes(),
        parts: layout.parts(),
        host_bytes: host_need(slots),
        gpu_bytes: gpu_need(slots),
        host_available,
        gpu_available,
        chosen,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const GB: u64 = 1_000_000_000;
    const GIB: u64 = 1 << 30;

    #[test]
    fn forced_part_sizes_are_powers_of_two_of_at_least_64_kib() {
        assert!(check_part_bytes(64 << 10, "t").is_ok());
        assert!(check_part_bytes(32 << 10, "t").is_err());
        assert!(check_part_bytes(96 << 10, "t").is_err());
        assert_eq!(choose_part_bytes(Some(1 << 20), 2 * GIB).unwrap(), 1 << 20);
        assert!(choose_part_bytes(Some(3 << 20), 2 * GIB).is_err());
    }

    /// 7 GB frames on a 139 GiB H200 with 128 GiB of host memory: the player's two GPU copies
    /// per slot fit four slots of four parts each.
    #[test]
    fn seven_gigabyte_frames_fit_an_h200() {
        let d = SlotDemand {
            frame: 0,
            frame_bytes: 7_007_526_912,
            part_bytes: 2 * GIB,
            max_parts: 8,
            host_per_slot: 1,
            gpu_per_slot: 2,
            gpu_fixed: 0,
        };
        let p = plan_slots(&d, 4, false, 2, Some(120 * GIB), Some(139 * GIB)).unwrap();
        assert_eq!((p.slots, p.parts), (4, 4));
        assert!(
            p.gpu_bytes <= 139 * GIB && p.host_bytes <= 120 * GIB,
            "{p:?}"
        );
        assert_eq!(
            p.line(),
            "slots: 4 of 6.5 GiB (4 parts of at most 2.0 GiB): host 26.1 GiB of 120.0 GiB \
             available, GPU 52.2 GiB of 139.0 GiB free (fitted to memory)"
        );
        // Eight wanted: as many as fit.
        let p = plan_slots(&d, 8, false, 2, Some(120 * GIB), Some(139 * GIB)).unwrap();
        assert_eq!(p.slots, 8, "{p:?}");
        let p = plan_slots(&d, 8, false, 2, Some(40 * GIB), Some(139 * GIB)).unwrap();
        assert_eq!(p.slots, 5, "{p:?}");
        assert!(p.chosen.contains("8 wanted"), "{p:?}");
        // Asked for explicitly: kept (the ring refuses what does not fit, naming the count).
        let p = plan_slots(&d, 8, true, 2, Some(40 * GIB), Some(139 * GIB)).unwrap();
        assert_eq!((p.slots, p.chosen.as_str()), (8, "as asked"));
    }

    #[test]
    fn a_frame_that_fits_nowhere_is_named_with_the_memory() {
        let d = SlotDemand {
            frame: 3,
            frame_bytes: 70 * GB,
            part_bytes: 2 * GIB,
            max_parts: usize::MAX,
            host_per_slot: 1,
            gpu_per_slot: 1,
            gpu_fixed: 0,
        };
        let e = plan_slots(&d, 3, false, 2, Some(128 * GIB), Some(139 * GIB)).unwrap_err();
        assert!(e.contains("frame 3 of 70000000000 bytes"), "{e}");
        assert!(e.contains("GPU memory") && e.contains("host memory"), "{e}");
        // More parts than the renderer binds.
        let d = SlotDemand {
            frame_bytes: 20 * GB,
            max_parts: 8,
            ..d
        };
        let e = plan_slots(&d, 3, false, 2, None, None).unwrap_err();
        assert!(
            e.contains("needs 10 parts") && e.contains("at most 8"),
            "{e}"
        );
    }
}
