//! One module per subcommand of the `supercell` binary.

pub mod bench;
pub mod doctor;
pub mod info;
pub mod play;
pub mod render;
