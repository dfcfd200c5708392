//! A certificate upload (`POST /v1/certificates`): the PKCS#12 (PFX) file and its password go
//! through the reader the vault uses (`P12Reader`: p12-keystore, then OpenSSL, then x509-parser),
//! and what it reads is checked against a company as the upload checks it. Any file, any
//! password: a file that cannot be used is a `PfxError`, never a panic.
//!
//! Each input is opened twice: whole, with the password the seed files carry (so mutations of a
//! real file get past the MAC when it has none, and into the key and certificate); and split by
//! its last byte `n` into a file and an `n`-byte password before that byte, so that passwords
//! are fuzzed too.

#![no_main]

use chrono::{DateTime, Utc};
use kuatia_application::vault::PfxReader;
use kuatia_domain::ruc::Ruc;
use kuatia_infrastructure::vault::P12Reader;
use libfuzzer_sys::fuzz_target;
use std::sync::LazyLock;

/// The password of the seed files that have one (tests/scripts/fuzz.sh writes them).
const SEED_PASSWORD: &str = "kuatia-fuzz";

static RUC: LazyLock<Ruc> = LazyLock::new(|| Ruc::parse("80069563-1").expect("the company RUC parses"));

fn now() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-03-03T12:00:00Z")
        .map(|t| t.with_timezone(&Utc))
        .unwrap_or_default()
}

fn open(pfx: &[u8], password: &str) {
    if let Ok(opened) = P12Reader.open(pfx, password) {
        let _ = opened.facts.validate(&RUC, now());
        assert!(
            opened.pem.contains("-----BEGIN PRIVATE KEY-----"),
            "an opened PFX yields its key as PEM"
        );
    }
}

fuzz_target!(|data: &[u8]| {
    open(data, SEED_PASSWORD);
    if let Some((&n, rest)) = data.split_last()
        && let Some(split) = rest.len().checked_sub(usize::from(n))
    {
        let (pfx, password) = rest.split_at(split);
        open(pfx, &String::from_utf8_lossy(password));
    }
});
