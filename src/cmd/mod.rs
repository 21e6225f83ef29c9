//! One module per subcommand of the `supercell` binary.

pub mod info;
