//! Targets, persisted state and the install driver.

pub mod dirs;
pub mod driver;
pub mod install_config;
pub mod state;
