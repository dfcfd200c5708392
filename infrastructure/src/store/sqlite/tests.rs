//! Tests of the SQLite backend's URL handling.

use super::*;

#[test]
fn the_database_file_is_read_from_the_url() {
    assert_eq!(
        database_file("sqlite://./data/kuatia.db"),
        Some("./data/kuatia.db".into())
    );
    assert_eq!(
        database_file("sqlite:/tmp/x.db?mode=rwc"),
        Some("/tmp/x.db".into())
    );
    assert_eq!(database_file("sqlite::memory:"), None);
}
