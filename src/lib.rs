//! shiftlab: OpenShift and OKD labs on one libvirt/KVM host.

pub mod redfish;
pub mod spec;
