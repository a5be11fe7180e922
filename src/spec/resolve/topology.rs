//! `method`, `rehearsal`, `ctlplanes`, `workers`: how many nodes of which kind, and
//! the rules each install method sets on them.

use super::pick;
use crate::spec::diag::Diagnostics;
use crate::spec::parse::RawSpec;
use crate::spec::types::*;

/// One host's lab: more workers than this is a typo.
pub const MAX_WORKERS: u64 = 500;

#[derive(Debug, Clone, Copy)]
pub struct Topology {
    pub method: Method,
    pub rehearsal: bool,
    pub ctlplanes: u32,
    pub workers: u32,
}

impl Topology {
    pub fn single_node(&self) -> bool {
        self.ctlplanes == 1
    }
}

pub fn resolve(raw: &RawSpec, d: &mut Diagnostics) -> Topology {
    let method = pick(
        &[
            ("upi", Method::Upi),
            ("sno", Method::Sno),
            ("ipi", Method::Ipi),
            ("agent", Method::Agent),
        ],
        &raw.method,
        // As kcli: one control plane and no method is a single node.
        if raw.ctlplanes.as_ref().is_some_and(|c| c.v == 1) {
            Method::Sno
        } else {
            Method::Upi
        },
        d,
    );
    let rehearsal = raw.rehearsal.as_ref().is_some_and(|r| r.v);

    let ctlplanes = match &raw.ctlplanes {
        Some(c) => {
            if ![1, 3, 4, 5].contains(&c.v) {
                d.error(
                    &c.field,
                    format!(
                        "{} control planes is not supported; use 1 (single node), 3, 4 or 5",
                        c.v
                    ),
                );
            } else if c.v == 1 && matches!(method, Method::Upi | Method::Ipi) {
                d.error(
                    &c.field,
                    format!(
                        "1 control plane needs method sno or agent (single node); method {method} needs 3, 4 or 5"
                    ),
                );
            } else if c.v != 1 && method == Method::Sno {
                d.error(
                    &c.field,
                    format!("method sno has exactly 1 control plane, not {}", c.v),
                );
            }
            // An unsupported count is reported above; the rest goes on with a
            // supported one.
            if [1, 3, 4, 5].contains(&c.v) {
                c.v as u32
            } else {
                3
            }
        }
        None if method == Method::Sno => 1,
        None => 3,
    };
    let single_node = ctlplanes == 1;
    let workers = match &raw.workers {
        Some(w) => {
            if single_node && w.v > 0 {
                d.error(
                    &w.field,
                    format!(
                        "a single-node cluster (method {method}) has no workers; set workers: 0 or use 3 control planes"
                    ),
                );
            }
            if w.v > MAX_WORKERS {
                d.error(
                    &w.field,
                    format!(
                        "{} workers is more than shiftlab supports on one host; use at most {MAX_WORKERS}",
                        w.v
                    ),
                );
                0
            } else {
                w.v as u32
            }
        }
        None if single_node => 0,
        None => 2,
    };
    Topology {
        method,
        rehearsal,
        ctlplanes,
        workers,
    }
}
