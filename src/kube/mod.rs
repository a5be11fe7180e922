//! CSR approval and waits against the cluster API (kube-rs). Unit tests never touch a
//! cluster: the decisions are pure ([`csr`]), the API side is tested over recorded
//! responses.

pub mod approve;
pub mod baremetal;
pub mod bmh_online;
pub mod csr;
pub mod drain;
pub mod health;
pub mod lvms;
pub mod owner;
pub mod ready;
pub mod report;
pub mod rest;
pub mod users;
