//! The synthetic supercell generator: a deterministic, evolving tornadic storm as sparse volumes.
