//! The GPU layer's error type. Layers above turn it into their own error, keeping the
//! text (the ingest layer has a variant for each).

/// What can go wrong with CUDA, device or pinned memory, or a frame ring.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// A CUDA driver call failed; the text names the call.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// CUDA (or NVRTC, or this GPU) is not available on this machine; the text says why and
    /// what to do.
    #[error("{0}")]
    Unavailable(String),
    /// The caller asked for something inconsistent (a range outside a buffer, a slot in the
    /// wrong state, more memory than there is).
    #[error("{0}")]
    Usage(String),
}

/// Result alias for the GPU layer.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;
