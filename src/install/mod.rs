//! Targets, persisted state and the install driver.

pub mod dirs;
pub mod install_config;
