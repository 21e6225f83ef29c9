//! The renderer's path mode: showing the accumulated mean raw or denoised, reading the
//! accumulation back, restarting it, and the path tracer's work counters and speed knobs.

use super::*;

impl Renderer {
    /// Path mode: whether renders show the denoised mean (`shaders/denoise.wgsl`) instead of
    /// the accumulated mean itself (off by default; the accumulation is the same either
    /// way). The filter's knobs come from the renderer's [`RenderConfig::denoise`].
    pub fn set_path_denoise(&mut self, on: bool) {
        self.path_denoise = on;
    }

    /// Whether path-mode renders show the denoised mean.
    pub fn path_denoise(&self) -> bool {
        self.path_denoise
    }

    /// The denoiser's knobs (what the next filtering uses).
    pub fn denoise_params(&mut self) -> DenoiseParams {
        let (device, params) = (&self.device, self.config.denoise);
        self.denoiser
            .get_or_insert_with(|| Denoiser::new(device, params))
            .params()
    }

    /// Records the denoiser on the current accumulation, writing the output images
    /// (`filtered`) or the unfiltered mean (no levels).
    pub(super) fn encode_denoise(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        filtered: bool,
    ) -> Result<(), RenderError> {
        let (tracer, t, sums, sums_sq) = accumulation(&self.path, &self.targets)?;
        let (device, params) = (&self.device, self.config.denoise);
        let denoiser = self
            .denoiser
            .get_or_insert_with(|| Denoiser::new(device, params));
        let saved = denoiser.params();
        if !filtered {
            denoiser.set_params(DenoiseParams { levels: 0, ..saved });
        }
        let r = denoiser.encode(
            device,
            &self.queue,
            encoder,
            DenoiseInput {
                sums,
                sums_sq,
                samples: tracer.samples(),
                width: t.width,
                height: t.height,
                exposure: self.path_exposure,
                targets: Some((&t.ldr_view, &t.hdr_view)),
            },
        );
        denoiser.set_params(saved);
        r
    }

    /// Path mode: shows the current accumulation again without adding samples, denoised
    /// (`denoised`) or as its plain mean, in the output images; submits the work (returns
    /// without waiting). An error before anything was path traced.
    pub fn show_path(&mut self, denoised: bool) -> Result<wgpu::SubmissionIndex, RenderError> {
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        self.encode_denoise(&mut enc, denoised)?;
        Ok(self.queue.submit([enc.finish()]))
    }

    /// Path mode: the accumulation read back (waits for the GPU): per pixel the sum of the
    /// samples' RGB radiance and coverage, and the sum of their squared luminance (what
    /// [`denoise_cpu`](super::denoise_cpu) takes), over [`path_samples`](Self::path_samples)
    /// samples.
    pub fn path_sums(&self) -> Result<(Vec<[f32; 4]>, Vec<f32>), RenderError> {
        let (_, t, sums, sums_sq) = accumulation(&self.path, &self.targets)?;
        let pixels = u64::from(t.width) * u64::from(t.height);
        let read =
            |b, bytes| super::super::denoise::read_buffer(&self.device, &self.queue, b, bytes);
        let s = read(sums, pixels * 16)?;
        let q = read(sums_sq, pixels * 4)?;
        Ok((
            bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&s),
            bytemuck::pod_collect_to_vec::<u8, f32>(&q),
        ))
    }

    /// Path mode: samples per pixel accumulated in the current image (0 before the first
    /// path-traced render).
    pub fn path_samples(&self) -> u32 {
        self.path.as_ref().map_or(0, PathTracer::samples)
    }

    /// Path mode: the next render starts its accumulation afresh (with the view's
    /// `frame_seed`), as it does by itself whenever the frame or the view changes.
    pub fn restart_path(&mut self) {
        if let Some(p) = &mut self.path {
            p.restart();
        }
    }

    /// Path mode: from the next render on, count the path tracer's work (zeroing the
    /// counters), or stop counting. Counting runs a kernel built with the counters: leave
    /// it off when timing.
    pub fn set_path_stats(&mut self, on: bool) {
        let (device, config, caps) = (&self.device, &self.config, &self.caps);
        self.path
            .get_or_insert_with(|| config.path_tracer(device, caps))
            .set_stats(&self.queue, on);
    }

    /// Path mode: the kernel's speed knobs (by default the configuration's,
    /// [`RenderConfig::path_knobs`]); a change restarts the accumulation.
    pub fn set_path_knobs(&mut self, knobs: PathKnobs) {
        let (device, config, caps) = (&self.device, &self.config, &self.caps);
        self.path
            .get_or_insert_with(|| config.path_tracer(device, caps))
            .set_knobs(knobs);
    }

    /// Path mode: the kernel's speed knobs in use.
    pub fn path_knobs(&mut self) -> PathKnobs {
        let (device, config, caps) = (&self.device, &self.config, &self.caps);
        self.path
            .get_or_insert_with(|| config.path_tracer(device, caps))
            .knobs()
    }

    /// Path mode: the work counted since [`set_path_stats`](Self::set_path_stats)`(true)`
    /// (waits for the GPU).
    pub fn path_stats(&self) -> Result<PathStats, RenderError> {
        match &self.path {
            Some(p) => p.read_stats(&self.device, &self.queue),
            None => Ok(PathStats::default()),
        }
    }
}

/// The path tracer, the output images and the accumulation's two buffers (sums of radiance
/// and coverage, sums of squared luminance), when something of the images' size has been
/// path traced.
fn accumulation<'a>(
    path: &'a Option<PathTracer>,
    targets: &'a Option<Targets>,
) -> Result<
    (
        &'a PathTracer,
        &'a Targets,
        &'a wgpu::Buffer,
        &'a wgpu::Buffer,
    ),
    RenderError,
> {
    let (Some(tracer), Some(t)) = (path, targets) else {
        return Err(RenderError::Usage("nothing path traced yet".into()));
    };
    let Some((sums, sums_sq)) = tracer.sums() else {
        return Err(RenderError::Usage("nothing path traced yet".into()));
    };
    if sums.size() != u64::from(t.width) * u64::from(t.height) * 16 {
        return Err(RenderError::Usage(
            "the accumulation is not of the output images' size: path trace first".into(),
        ));
    }
    Ok((tracer, t, sums, sums_sq))
}
