//! Striped datasets on disk: manifest, lanes, extents, crash-safe writing, import and export.
