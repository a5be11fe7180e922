pub mod ironic;
