//! Disk images shiftlab builds itself.

pub mod standin;
