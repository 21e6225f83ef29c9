//! Settings that keep the player interactive on a software Vulkan adapter (lavapipe and
//! llvmpipe, SwiftShader, WARP: [`DeviceCaps::software`]).
//!
//! A software adapter ray-marches on the CPU: a 1280 × 720 frame of the built-in storm
//! takes seconds on two cores. There the player picks a smaller window, renders at a
//! fraction of it (the window scales the image up) and marches with longer steps, and says
//! so once. Each of these gives way to its flag (`--window-size`, `--render-scale`,
//! `--size`, `--step`); on a hardware adapter nothing changes.

use serde::Serialize;

use crate::device::DeviceCaps;
use crate::render::{RenderSettings, View};

/// Window size on a software adapter.
pub const SOFTWARE_WINDOW: (u32, u32) = (960, 540);
/// Render scale on a software adapter: 120 × 68 pixels at [`SOFTWARE_WINDOW`].
pub const SOFTWARE_RENDER_SCALE: f32 = 0.125;
/// Base step length on a software adapter, voxels of the finest grid (the scene's default
/// is 1).
pub const SOFTWARE_STEP_VOXELS: f32 = 2.0;
/// Optical depth of one adaptive step on a software adapter (the default is 0.3).
pub const SOFTWARE_STEP_TAU: f32 = 0.6;
/// Sun-grid marches stop at this optical depth on a software adapter (the default is 12):
/// beyond it less than 0.7 % of the sunlight is left, which no picture shows, and the
/// marches through thick cloud cost preparation time on every new frame (with the sun pass
/// left out, `render --bench` prepared the built-in storm's frame in 236 ms against 328–425
/// ms, lavapipe on the loaded 2-core development machine, 2026-12-01).
pub const SOFTWARE_SHADOW_TAU_MAX: f32 = 5.0;
/// Attributes shown at start on a software adapter: each one shown costs a pass over its
/// grid for every new frame (about 0.1 CPU-seconds per attribute of the built-in storm on
/// lavapipe), so the rest start switched off (keys 1–8 switch them on).
pub const SOFTWARE_ATTRIBUTES: usize = 2;
/// The one size `render --bench` times on a software adapter unless `--bench-sizes` is
/// given.
pub const SOFTWARE_BENCH_SIZE: (u32, u32) = (320, 180);

/// Window size on a hardware adapter.
pub const WINDOW: (u32, u32) = (1280, 720);

/// What the command line fixed; `None`: not given (the adapter's default applies).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requested {
    /// A headless run (the render size is `size`; window and render scale do not apply).
    pub headless: bool,
    /// `--window-size`.
    pub window_size: Option<(u32, u32)>,
    /// `--render-scale`.
    pub render_scale: Option<f32>,
    /// `--size` (headless render size).
    pub size: Option<(u32, u32)>,
    /// `--step` (step length in voxels).
    pub step_voxels: Option<f32>,
    /// `--attributes` was given (every attribute named is shown).
    pub attributes: bool,
}

/// The settings a run uses, and whether the software defaults chose any of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Interactive {
    /// The adapter is a software one.
    pub software_adapter: bool,
    /// Window size at start.
    pub window_size: (u32, u32),
    /// Render at this fraction of the window.
    pub render_scale: f32,
    /// Headless render size: `--size`, else the window size times the render scale.
    pub size: (u32, u32),
    /// Step length in voxels to march with; `None`: the scene's.
    pub step_voxels: Option<f32>,
    /// At least this optical depth per adaptive step; `None`: the scene's.
    pub step_tau_min: Option<f32>,
    /// Sun-grid marches stop by this optical depth; `None`: the scene's.
    pub shadow_tau_max: Option<f32>,
    /// Show at most this many of the scene's attributes at start; `None`: all.
    pub attributes_shown: Option<usize>,
    /// The line to say (stderr, overlay, JSON) when software defaults were applied.
    pub note: Option<String>,
}

impl Interactive {
    /// Applies the choices to a scene's view: [`Interactive::apply`] on its settings, and
    /// attributes past [`Interactive::attributes_shown`] switched off.
    pub fn apply_view(&self, v: &mut View) {
        self.apply(&mut v.settings);
        if let Some(n) = self.attributes_shown {
            v.attributes
                .iter_mut()
                .flatten()
                .filter(|a| a.enabled)
                .skip(n)
                .for_each(|a| a.enabled = false);
        }
    }

    /// Sets the march settings this run chose on `s` (a scene's settings): the step length,
    /// and on a software adapter steps no finer than the software defaults.
    pub fn apply(&self, s: &mut RenderSettings) {
        if let Some(v) = self.step_voxels {
            s.step_voxels = v;
        }
        if let Some(t) = self.step_tau_min {
            s.step_tau = s.step_tau.max(t);
        }
        if let Some(t) = self.shadow_tau_max {
            s.shadow_tau_max = s.shadow_tau_max.min(t);
        }
    }
}

/// The render size for a window of `window` pixels at `scale`.
pub fn scaled((w, h): (u32, u32), scale: f32) -> (u32, u32) {
    let s = |v: u32| ((v as f32 * scale).round() as u32).clamp(1, 16384);
    (s(w), s(h))
}

/// Chooses the settings of a run on `caps`'s adapter: what `req` fixes stands; on a software
/// adapter the rest are the software defaults above, on a hardware one the usual defaults
/// (1280 × 720, full scale, the scene's steps).
pub fn choose(caps: &DeviceCaps, req: &Requested) -> Interactive {
    let software = caps.software;
    let window_size = req
        .window_size
        .unwrap_or(if software { SOFTWARE_WINDOW } else { WINDOW });
    let render_scale =
        req.render_scale
            .unwrap_or(if software { SOFTWARE_RENDER_SCALE } else { 1.0 });
    let size = req
        .size
        .unwrap_or_else(|| scaled(window_size, render_scale));
    let (step_voxels, step_tau_min, shadow_tau_max) = match req.step_voxels {
        Some(v) => (Some(v), None, None),
        None if software => (
            Some(SOFTWARE_STEP_VOXELS),
            Some(SOFTWARE_STEP_TAU),
            Some(SOFTWARE_SHADOW_TAU_MAX),
        ),
        None => (None, None, None),
    };
    let attributes_shown = (software && !req.attributes).then_some(SOFTWARE_ATTRIBUTES);
    let mut chosen = Vec::new();
    if software {
        if req.headless {
            if req.size.is_none() {
                chosen.push(format!("size {}x{}", size.0, size.1));
            }
        } else {
            if req.window_size.is_none() {
                chosen.push(format!("window {}x{}", window_size.0, window_size.1));
            }
            if req.render_scale.is_none() {
                chosen.push(format!("render scale {render_scale}"));
            }
        }
        if req.step_voxels.is_none() {
            chosen.push(format!(
                "step {SOFTWARE_STEP_VOXELS} voxels (adaptive up to tau {SOFTWARE_STEP_TAU}), \
                 sun shadows to tau {SOFTWARE_SHADOW_TAU_MAX}"
            ));
        }
        if !req.attributes {
            chosen.push(format!(
                "the first {SOFTWARE_ATTRIBUTES} attributes shown{}",
                if req.headless {
                    ""
                } else {
                    " (keys 1-8 switch the others on)"
                }
            ));
        }
    }
    let flags = if req.headless {
        "--size, --step, --attributes"
    } else {
        "--window-size, --render-scale, --step, --attributes"
    };
    let note = (!chosen.is_empty()).then(|| {
        format!(
            "software Vulkan adapter ({}): using interactive settings ({}); override with {flags}",
            caps.name,
            chosen.join(", ")
        )
    });
    Interactive {
        software_adapter: software,
        window_size,
        render_scale,
        size,
        step_voxels,
        step_tau_min,
        shadow_tau_max,
        attributes_shown,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(software: bool) -> DeviceCaps {
        DeviceCaps {
            name: if software {
                "llvmpipe (LLVM 15.0.6, 256 bits)".into()
            } else {
                "NVIDIA H200".into()
            },
            driver: String::new(),
            backend: wgpu::Backend::Vulkan,
            device_type: if software {
                wgpu::DeviceType::Cpu
            } else {
                wgpu::DeviceType::DiscreteGpu
            },
            software,
            timestamps: true,
            max_buffer_size: 1 << 30,
            max_storage_binding: 1 << 30,
            storage_offset_alignment: 256,
            max_texture_2d: 16384,
            host_import_alignment: None,
            uuid: None,
            sharing: None,
            device_local_bytes: None,
        }
    }

    #[test]
    fn a_software_adapter_gets_the_interactive_defaults_and_says_so() {
        let i = choose(&caps(true), &Requested::default());
        assert!(i.software_adapter);
        assert_eq!(i.window_size, SOFTWARE_WINDOW);
        assert_eq!(i.render_scale, SOFTWARE_RENDER_SCALE);
        assert_eq!(i.size, (120, 68));
        assert_eq!(i.step_voxels, Some(SOFTWARE_STEP_VOXELS));
        let note = i.note.as_deref().expect("a note");
        assert!(
            note.starts_with("software Vulkan adapter (llvmpipe"),
            "{note}"
        );
        assert!(note.contains("--render-scale"), "{note}");
        let mut s = RenderSettings::default();
        i.apply(&mut s);
        assert_eq!(s.step_voxels, SOFTWARE_STEP_VOXELS);
        assert_eq!(s.step_tau, SOFTWARE_STEP_TAU);
        assert_eq!(s.shadow_tau_max, SOFTWARE_SHADOW_TAU_MAX);
        assert_eq!(i.attributes_shown, Some(SOFTWARE_ATTRIBUTES));
        // A scene that already marches coarser keeps its own step_tau.
        let mut coarse = RenderSettings {
            step_tau: 1.0,
            ..RenderSettings::default()
        };
        i.apply(&mut coarse);
        assert_eq!(coarse.step_tau, 1.0);
    }

    #[test]
    fn attributes_past_the_first_two_start_switched_off_unless_named() {
        use crate::render::{AttributeView, TransferFunction};
        let attr = |name: &str| {
            Some(AttributeView {
                enabled: true,
                tf: TransferFunction::preset(name, [0.0, 1.0], 1.0),
            })
        };
        let bbox = [[0.0; 3], [1.0; 3]];
        let view = View::new(
            bbox,
            0.01,
            vec![attr("cloud"), None, attr("rain"), attr("wind_speed")],
            1.0,
        );
        let shown = |v: &View| -> Vec<bool> {
            v.attributes
                .iter()
                .map(|a| a.as_ref().is_some_and(|a| a.enabled))
                .collect()
        };
        let mut v = view.clone();
        choose(&caps(true), &Requested::default()).apply_view(&mut v);
        assert_eq!(shown(&v), [true, false, true, false]);
        assert_eq!(v.settings.step_voxels, SOFTWARE_STEP_VOXELS);
        let mut v = view.clone();
        let named = Requested {
            attributes: true,
            ..Requested::default()
        };
        choose(&caps(true), &named).apply_view(&mut v);
        assert_eq!(shown(&v), [true, false, true, true]);
        let mut v = view.clone();
        choose(&caps(false), &Requested::default()).apply_view(&mut v);
        assert_eq!(v, view, "a hardware adapter changes nothing");
    }

    #[test]
    fn flags_win_over_the_software_defaults() {
        let req = Requested {
            headless: false,
            window_size: Some((1280, 720)),
            render_scale: Some(1.0),
            size: Some((64, 48)),
            step_voxels: Some(1.0),
            attributes: true,
        };
        let i = choose(&caps(true), &req);
        assert_eq!(i.window_size, (1280, 720));
        assert_eq!(i.render_scale, 1.0);
        assert_eq!(i.size, (64, 48));
        assert_eq!(i.step_voxels, Some(1.0));
        assert_eq!(i.step_tau_min, None);
        assert_eq!(i.shadow_tau_max, None);
        assert_eq!(i.attributes_shown, None);
        assert_eq!(i.note, None, "nothing was chosen for the user");
        let mut s = RenderSettings::default();
        i.apply(&mut s);
        assert_eq!(s, RenderSettings::default());
        // One flag given: the others still get the software defaults, and the note names
        // only those.
        let i = choose(
            &caps(true),
            &Requested {
                render_scale: Some(0.5),
                ..Requested::default()
            },
        );
        assert_eq!(i.render_scale, 0.5);
        assert_eq!(i.window_size, SOFTWARE_WINDOW);
        assert_eq!(i.size, (480, 270));
        let note = i.note.unwrap();
        assert!(!note.contains("render scale"), "{note}");
        assert!(note.contains("window 960x540"), "{note}");
    }

    #[test]
    fn a_headless_run_names_only_what_it_uses() {
        let i = choose(
            &caps(true),
            &Requested {
                headless: true,
                ..Requested::default()
            },
        );
        assert_eq!(i.size, (120, 68));
        let note = i.note.unwrap();
        assert!(
            note.contains("size 120x68") && note.contains("--size"),
            "{note}"
        );
        assert!(!note.contains("window"), "{note}");
        // The size given: only the step is chosen.
        let i = choose(
            &caps(true),
            &Requested {
                headless: true,
                size: Some((64, 48)),
                ..Requested::default()
            },
        );
        assert_eq!(i.size, (64, 48));
        let note = i.note.unwrap();
        assert!(
            note.contains("step 2") && !note.contains("size 64x48"),
            "{note}"
        );
        // Size and step given: nothing to say.
        let i = choose(
            &caps(true),
            &Requested {
                headless: true,
                size: Some((64, 48)),
                step_voxels: Some(1.0),
                attributes: true,
                ..Requested::default()
            },
        );
        assert_eq!(i.note, None);
    }

    #[test]
    fn a_hardware_adapter_keeps_the_usual_defaults() {
        let i = choose(&caps(false), &Requested::default());
        assert!(!i.software_adapter);
        assert_eq!(i.window_size, WINDOW);
        assert_eq!(i.render_scale, 1.0);
        assert_eq!(i.size, WINDOW);
        assert_eq!(i.step_voxels, None);
        assert_eq!(i.attributes_shown, None);
        assert_eq!(i.note, None);
        let mut s = RenderSettings::default();
        i.apply(&mut s);
        assert_eq!(s, RenderSettings::default());
    }
}
