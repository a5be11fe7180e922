//! Disk images shiftlab builds itself.

pub mod live_iso;
pub mod standin;
