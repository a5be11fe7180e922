//! Rehearsal: a method's whole install on this host with stand-ins for what a
//! release brings (the installer, its client, the node images).

pub mod installer;
