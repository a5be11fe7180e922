//! Pure renderers: from spec and plan to the text of configuration files (libvirt
//! XML is `libvirt::xml::write`).

pub mod chrony;
pub mod haproxy;
pub mod install_config;
pub mod lvms;
pub mod manifests;
pub mod monitoring;
pub mod storage;
pub mod users;
