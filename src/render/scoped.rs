//! GPU errors that no error scope caught, kept instead of panicking (wgpu's default), and
//! resources created inside error scopes so that their failures come back as errors.

use std::sync::{Arc, Mutex, PoisonError};

use super::RenderError;
use crate::device::block_on;

/// The first GPU error of this process that no error scope caught (see
/// [`catch_uncaptured_errors`]).
static UNCAPTURED: Mutex<Option<String>> = Mutex::new(None);

/// Makes `device` keep errors that no error scope caught for
/// [`take_uncaptured_error`] (and print them), instead of panicking, wgpu's default. The
/// renderer installs it on every device it draws with; its fallible calls then return the
/// error.
pub fn catch_uncaptured_errors(device: &wgpu::Device) {
    device.on_uncaptured_error(Arc::new(|e: wgpu::Error| {
        log::error!("GPU error: {e}");
        let mut first = UNCAPTURED.lock().unwrap_or_else(PoisonError::into_inner);
        first.get_or_insert_with(|| e.to_string());
    }));
}

/// The first GPU error no error scope caught since the last call, if any.
pub fn take_uncaptured_error() -> Option<String> {
    UNCAPTURED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take()
}

/// Runs `make` (which creates GPU resources) under out-of-memory and validation error
/// scopes, so a refused allocation comes back as an error naming `what` rather than a panic.
pub fn create_scoped<T>(
    device: &wgpu::Device,
    what: impl FnOnce() -> String,
    make: impl FnOnce() -> T,
) -> Result<T, RenderError> {
    let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let validation = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let made = make();
    let invalid = block_on(validation.pop());
    let out_of_memory = block_on(oom.pop());
    match invalid.or(out_of_memory) {
        Some(e) => Err(RenderError::Gpu(format!("{}: {e}", what()))),
        None => Ok(made),
    }
}
