//! The taxpayer lookup service's rules: reading DNIT's registry lines, the search
//! form of names, what a query asks for, how matches rank, plans and their counting month, and
//! the CSV files of designations and registry matches.
//!
//! Pure functions only. The importer, the search index and the storage are in
//! `kuatia_infrastructure::lookup`; the HTTP service is `kuatia_api::lookup`. Start with
//! [`line`] (the file format), then [`normalize`] and [`rank`] (what a search means).

pub mod csv;
pub mod line;
pub mod normalize;
pub mod plan;
pub mod query;
pub mod rank;
pub mod state;
