//! kuatia's adapters: the event store and job queue on PostgreSQL and SQLite, configuration,
//! and telemetry.
//!
//! Implements the ports of `kuatia-application`; knows nothing of HTTP. Start reading at
//! [`store`] (the two backends behind one `Store` trait), then [`config`].

pub mod artifacts;
pub mod config;
pub mod delivery;
pub mod destination;
pub mod lookup;
pub mod number_reporter;
pub mod pfx_work;
pub mod printing;
pub mod sandbox;
pub mod selfsigned;
pub mod sifen;
pub mod sifen_sim;
pub mod sifen_soap;
pub mod store;
pub mod telemetry;
pub mod vault;
pub mod webhook_sender;

/// Creates `dir` and its missing parents readable by their owner only (0700 on Unix): the data
/// folder holds the database, the master key and the artifacts. A folder that exists keeps the
/// mode its operator gave it.
pub fn create_private_dir_all(dir: &std::path::Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Makes a file the process just created readable by its owner only (0600 on Unix).
pub fn make_private(file: &std::path::Path) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))?;
    }
    #[cfg(not(unix))]
    let _ = file;
    Ok(())
}
