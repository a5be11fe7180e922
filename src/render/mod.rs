//! Pure renderers: from spec and plan to the text of configuration files.

pub mod haproxy;
pub mod install_config;
pub mod libvirt;
