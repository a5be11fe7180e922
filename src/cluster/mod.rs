//! A cluster as a whole, across the modules that each hold a part of it: its
//! status (its backend's nodes, host services, install targets — one value, for `status`
//! in every output format and for anything else that shows it), its
//! destruction (host services, then libvirt objects, then its state), and day
//! 2: opening it (`open`: state, lock, plan, host), scaling its workers
//! (`scale`) and powering it off and on (`power`).

pub mod access;
mod destroy;
pub mod list;
mod open;
pub mod power;
pub mod scale;
mod status;
pub mod storage;
pub mod users;

pub use destroy::{destroy, destroy_kubevirt};
pub use open::{
    host, host_named, host_or_why, host_uri, known, open, record_scaled, recorded_source, Opened,
    Recorded,
};
pub use status::{status, Status};
