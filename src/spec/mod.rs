//! The cluster file: types, defaults, validation, kcli aliases.

mod types;
pub use types::*;
