//! Reading the frame on screen at world positions, for probes, slices and line plots: any
//! of the dataset's attributes (shown or not), read on the GPU from the resident frame with
//! the march's accessor and interpolation ([`Renderer::sample_points`]).

use super::*;
use crate::render::{
    GridInParts, MAX_ATTRIBUTES, PointSample, RenderError, TransferFunction, parts_of_buffers,
};

impl Presenter {
    /// The dataset's attributes in manifest order: name and units (`None` where the
    /// manifest gives none).
    pub(crate) fn attribute_units(&self) -> Vec<(String, Option<String>)> {
        self.scene
            .dataset
            .manifest()
            .attributes
            .iter()
            .map(|a| (a.name.clone(), a.units.clone()))
            .collect()
    }

    /// The shown attributes: dataset attribute (manifest order) and its look, slot order.
    pub(crate) fn shown_looks(&self) -> Vec<(usize, TransferFunction)> {
        self.view
            .attributes
            .iter()
            .zip(&self.scene.slots)
            .filter_map(|(v, &a)| {
                let v = v.as_ref().filter(|v| v.enabled)?;
                Some((a?, v.tf.clone()))
            })
            .collect()
    }

    /// The look attribute `a` (manifest order) has in its view slot, shown or not; `None`
    /// where no slot holds it.
    pub(crate) fn look_of(&self, a: usize) -> Option<TransferFunction> {
        let i = self.scene.slots.iter().position(|&s| s == Some(a))?;
        self.view.attributes.get(i)?.as_ref().map(|v| v.tf.clone())
    }

    /// The values of dataset attributes `attributes` (manifest order) at world positions
    /// `points` in the frame on screen: per point, one entry per attribute asked (`None`
    /// where the frame has no grid of it, or the grid is one the march does not read).
    /// Waits for the GPU; an error before a frame is on screen.
    pub(crate) fn sample_world(
        &mut self,
        attributes: &[usize],
        points: &[[f64; 3]],
    ) -> Result<Vec<Vec<Option<PointSample>>>, PlayError> {
        let bound = self
            .bound
            .as_ref()
            .ok_or_else(|| PlayError::Usage("no frame is on screen yet".into()))?;
        let frame = self.scene.dataset.frame(bound.frame).ok_or_else(|| {
            PlayError::Usage(format!("frame {} is not in the dataset", bound.frame))
        })?;
        let part_bytes = self.part_bytes;
        let grids: Vec<Option<GridInParts>> = attributes
            .iter()
            .map(|&a| {
                let g = frame.grids.iter().find(|g| g.attribute as usize == a)?;
                Some(GridInParts::locate(g.offset, g.size, part_bytes))
            })
            .collect();
        let parts = parts_of_buffers(&bound.parts, part_bytes);
        let mut out: Vec<Vec<Option<PointSample>>> = points
            .iter()
            .map(|_| Vec::with_capacity(attributes.len()))
            .collect();
        // The sampler reads as many grids at once as the march composites; a batch whose
        // grids span more parts than the device binds at once is read a grid at a time.
        for batch in grids.chunks(MAX_ATTRIBUTES) {
            let read = match self.renderer.sample_points(&parts, batch, points) {
                Ok(read) => read,
                Err(RenderError::Usage(_)) if batch.len() > 1 => {
                    let mut read: Vec<Vec<Option<PointSample>>> = vec![Vec::new(); points.len()];
                    for one in batch.chunks(1) {
                        let r = self.renderer.sample_points(&parts, one, points)?;
                        for (o, r) in read.iter_mut().zip(r) {
                            o.extend(r);
                        }
                    }
                    read
                }
                Err(e) => return Err(e.into()),
            };
            for (o, r) in out.iter_mut().zip(read) {
                o.extend(r);
            }
        }
        Ok(out)
    }
}
