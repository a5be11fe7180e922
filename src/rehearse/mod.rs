pub mod leftover;
pub mod probe;
pub mod report;
