//! Lab bundles (docs/bundles.md): an installed cluster's disks and state in one
//! directory, from which fresh copies of that lab come up in the time its VMs
//! take to boot and its kubelets to rejoin.
//!
//! - [`manifest`]: `bundle.json`, the node identities, the restore's plan (pure);
//! - [`create`]: stop the cluster as `stop` does, flatten its disks, copy its state;
//! - [`restore`]: import the disks once, a thin overlay per node, the same identity;
//! - [`store`]: bundles found by name or path, listed, verified, deleted.

pub mod create;
pub mod manifest;
pub mod restore;
pub mod store;

/// The file that marks a directory as a bundle shiftlab writes (or wrote): an
/// unfinished one (no manifest) with it is shiftlab's to start over.
pub const OWNER_MARK: &str = ".shiftlab-bundle";
