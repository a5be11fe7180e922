//! Rehearsal: a method's whole install on this host with stand-ins for what a
//! release brings (the installer, its client, the node images) and for what
//! the bootstrap VM runs (Ironic's Redfish sequence); then what it proved.

pub mod installer;
pub mod ironic;
pub mod leftover;
pub mod probe;
pub mod report;
