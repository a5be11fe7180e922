//! `storage:`: which persistent storage the lab brings (docs/storage.md).

use super::super::diag::Diagnostics;
use super::super::parse::RawSpec;
use super::super::types::Storage;

pub fn resolve(raw: &RawSpec, d: &mut Diagnostics) -> Storage {
    super::pick(
        &[
            ("none", Storage::None),
            ("nfs", Storage::Nfs),
            ("lvms", Storage::Lvms),
        ],
        &raw.storage,
        Storage::None,
        d,
    )
}
