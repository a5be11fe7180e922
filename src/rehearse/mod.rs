pub mod probe;
pub mod report;
