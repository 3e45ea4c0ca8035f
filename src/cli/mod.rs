//! One module per subcommand: clap arguments and the glue to the library.

pub mod api;
pub mod crds;
pub mod emulator;
pub mod operator;
