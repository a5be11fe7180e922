//! A Redfish BMC for libvirt domains.
//!
//! Layers, from the wire down:
//! - [`bmc`]: one BMC assembled from its configuration (machines, auth, TLS),
//!   for `shiftlab bmc` and for the lab BMC `shiftlab serve` runs;
//! - `server`: HTTP/1.1 over TCP or TLS (on [`crate::httpd`]), body limits;
//! - [`service`]: routing, authentication, execution over a [`Machine`];
//! - [`request`]: pure parsing of a request into a typed [`request::Action`];
//! - [`resources`]: pure JSON builders;
//! - [`machine`]: the [`Machine`] trait, the boot-override state machine and
//!   an in-memory machine;
//! - [`machine_libvirt`]: the [`Machine`] over libvirt domains, built on
//!   [`crate::libvirt`] (connection, XML parsing and editing), with
//!   [`metadata`] (the BMC's record in a domain) and [`media`] (virtual media
//!   volumes), filled by [`fetch`] under [`source`]'s rule (where images may
//!   come from);
//! - [`trace`]: the hidden request trace (`SHIFTLAB_BMC_TRACE`), for
//!   recording what a client sends.

pub mod auth;
pub mod bmc;
pub mod error;
pub mod fetch;
pub mod inserts;
pub mod machine;
pub mod machine_kubevirt;
pub mod machine_libvirt;
pub mod media;
pub mod metadata;
pub mod model;
pub mod request;
pub mod resources;
pub mod server;
pub mod service;
pub mod source;
pub mod tls;
pub mod trace;

pub use error::RedfishError;
pub use machine::{Machine, MachineError, MemoryMachine, MemorySystem};
pub use server::Server;
pub use service::{Request, Response, Service};
