//! A Redfish BMC for libvirt domains.
//!
//! Layers, from the wire down:
//! - `server`: HTTP/1.1 over TCP or TLS (hyper, rustls), body limits;
//! - [`service`]: routing, authentication, execution over a [`Machine`];
//! - [`request`]: pure parsing of a request into a typed [`request::Action`];
//! - [`resources`]: pure JSON builders;
//! - [`machine`]: the [`Machine`] trait, the boot-override state machine and
//!   an in-memory machine.

pub mod auth;
pub mod cli;
pub mod domxml;
pub mod error;
pub mod libvirt;
pub mod machine;
pub mod media;
pub mod model;
pub mod request;
pub mod resources;
pub mod server;
pub mod service;
pub mod tls;

pub use error::RedfishError;
pub use machine::{Machine, MachineError, MemoryMachine, MemorySystem};
pub use server::Server;
pub use service::{Request, Response, Service};
