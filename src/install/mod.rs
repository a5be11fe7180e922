//! Targets, persisted state and the install driver.

pub mod driver;
pub mod infra;
pub mod install_config;
pub mod process;
pub mod state;
pub mod target;
