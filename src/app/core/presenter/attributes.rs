//! The presenter's choice of attributes shown: by view slot or from any of the dataset's
//! attributes, refused where the grids shown would span more parts than the renderer binds.

use super::*;

impl Presenter {
    /// Shows or hides the attribute in view slot `i`. Showing one is refused, with a message
    /// naming the attributes, their bytes and the device's limit, where the attributes then
    /// shown span more parts in some frame than the renderer binds at once (a frame larger
    /// than that renders as long as the grids shown fit).
    pub(crate) fn set_attribute_shown(&mut self, i: usize, on: bool) -> Result<(), String> {
        let Some(Some(a)) = self.view.attributes.get(i) else {
            return Err(format!("slot {} holds no attribute", i + 1));
        };
        if a.enabled == on {
            return Ok(());
        }
        if on {
            let mut shown = shown_slots(&self.view);
            shown[i] = true;
            self.check_shown(&shown)?;
        }
        if let Some(Some(a)) = self.view_mut().attributes.get_mut(i) {
            a.enabled = on;
        }
        Ok(())
    }

    /// The dataset's attributes (all of them, in manifest order) and whether each is shown.
    pub(crate) fn dataset_attributes(&self) -> Vec<(String, bool)> {
        let shown = shown_attributes(&self.view, &self.scene.slots);
        self.scene
            .dataset
            .manifest()
            .attributes
            .iter()
            .enumerate()
            .map(|(a, attr)| (attr.name.clone(), shown.contains(&Some(a))))
            .collect()
    }

    /// Shows or hides dataset attribute `a` (manifest order), whether or not the scene
    /// names it. One not in a slot takes a new slot (the transfer function its name's
    /// preset gives, over the attribute's value range), or the first hidden one where all
    /// [`MAX_ATTRIBUTES`](crate::render::MAX_ATTRIBUTES) are taken; with that many shown
    /// it is refused, as is a choice whose grids do not fit the parts the device binds
    /// ([`Presenter::set_attribute_shown`]).
    pub(crate) fn set_dataset_attribute_shown(&mut self, a: usize, on: bool) -> Result<(), String> {
        let m = self.scene.dataset.manifest();
        let Some(attr) = m.attributes.get(a) else {
            return Err(format!(
                "attribute {a}: the dataset has {}",
                m.attributes.len()
            ));
        };
        let shown = shown_slots(&self.view);
        // The slot already holding it (shown first, then hidden).
        let held = (0..self.scene.slots.len())
            .filter(|&i| self.scene.slots[i] == Some(a))
            .max_by_key(|&i| shown.get(i).copied().unwrap_or(false));
        if let Some(i) = held {
            return self.set_attribute_shown(i, on);
        }
        if !on {
            return Ok(());
        }
        let max = crate::render::MAX_ATTRIBUTES;
        let slot = if self.scene.slots.len() < max {
            self.scene.slots.len()
        } else {
            (0..max)
                .find(|&i| !shown.get(i).copied().unwrap_or(false))
                .ok_or_else(|| {
                    format!(
                        "{}: at most {max} attributes are shown at once; hide one first",
                        attr.name
                    )
                })?
        };
        let mut wanted: Vec<bool> = shown.clone();
        wanted.resize((slot + 1).max(shown.len()), false);
        wanted[slot] = true;
        let mut slots = self.scene.slots.clone();
        slots.resize((slot + 1).max(slots.len()), None);
        slots[slot] = Some(a);
        self.check_selection(&slots, &wanted)?;
        let range = attr
            .value_range
            .map_or([0.0, 1.0], |r| [r[0] as f32, r[1] as f32]);
        let b = self.view.world_bbox;
        let extent = (0..3).map(|k| b[1][k] - b[0][k]).fold(1e-6f32, f32::max);
        let look = crate::render::AttributeView {
            enabled: true,
            tf: crate::render::TransferFunction::preset(&attr.name, range, extent),
        };
        self.scene.slots = slots;
        let view = self.view_mut();
        view.attributes
            .resize((slot + 1).max(view.attributes.len()), None);
        view.attributes[slot] = Some(look);
        Ok(())
    }

    /// Refuses a choice of shown slots (`shown[i]`: slot i shown) whose grids span, in some
    /// frame, more parts than the renderer binds: the message names the attributes and their
    /// bytes in the frame that needs the most parts, the parts and the limit.
    pub(crate) fn check_shown(&self, shown: &[bool]) -> Result<(), String> {
        self.check_selection(&self.scene.slots, shown)
    }

    /// [`Presenter::check_shown`] for the slots `slots` (dataset attribute per slot).
    fn check_selection(&self, slots: &[Option<usize>], shown: &[bool]) -> Result<(), String> {
        let m = self.scene.dataset.manifest();
        let capacity = FrameCapacity {
            part_bytes: self.part_bytes,
            max_parts: self.renderer.max_parts(),
        };
        let attrs: Vec<usize> = slots
            .iter()
            .zip(shown)
            .filter(|&(_, &on)| on)
            .filter_map(|(s, _)| *s)
            .collect();
        let grids_of = |f: &crate::dataset::Frame| -> Vec<(usize, u64, u64)> {
            f.grids
                .iter()
                .filter(|g| attrs.contains(&(g.attribute as usize)))
                .map(|g| (g.attribute as usize, g.offset, g.size))
                .collect()
        };
        let mut worst: Option<(usize, u64)> = None;
        for (k, f) in m.frames.iter().enumerate() {
            let parts = capacity.parts_for_grids(grids_of(f).iter().map(|&(_, o, s)| (o, s)));
            if parts > capacity.max_parts as u64 && worst.is_none_or(|(_, p)| parts > p) {
                worst = Some((k, parts));
            }
        }
        let Some((k, parts)) = worst else {
            return Ok(());
        };
        let names: Vec<String> = grids_of(&m.frames[k])
            .iter()
            .map(|&(a, _, size)| {
                let name = m.attributes.get(a).map_or("?", |a| a.name.as_str());
                format!("{name} {}", mb(size))
            })
            .collect();
        Err(format!(
            "showing {} needs {parts} parts of {} in frame {k}; this device binds {} at once \
             ({}): show fewer attributes",
            names.join(", "),
            mb(capacity.part_bytes),
            capacity.max_parts,
            mb(capacity.max_frame_bytes())
        ))
    }

    /// The dataset attribute (manifest index) each view slot shows, per slot: what a
    /// legend keys ([`crate::app::legend::Annotation::for_view`]).
    pub(crate) fn attribute_slots(&self) -> &[Option<usize>] {
        &self.scene.slots
    }

    /// Attribute names per view slot.
    pub(crate) fn attribute_names(&self) -> Vec<String> {
        let m = self.scene.dataset.manifest();
        self.scene
            .slots
            .iter()
            .map(|s| {
                s.and_then(|a| m.attributes.get(a))
                    .map_or_else(String::new, |a| a.name.clone())
            })
            .collect()
    }
}

/// Bytes in decimal megabytes, for messages.
fn mb(n: u64) -> String {
    format!("{:.1} MB", n as f64 / 1e6)
}
