//! shiftlab: OpenShift and OKD labs on one libvirt/KVM host.

pub mod addressing;
pub mod backend;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod doctor;
pub mod files;
pub mod gather;
pub mod host;
pub mod httpd;
pub mod ignition;
pub mod image;
pub mod install;
pub mod kube;
pub mod kubevirt;
pub mod libvirt;
pub mod output;
pub mod plan;
pub mod process;
pub mod redact;
pub mod redfish;
pub mod release;
pub mod render;
pub mod serve;
pub mod spec;
pub mod state;
