//! The PFX work counter (`infrastructure/src/pfx_work.rs`), which reads an uploaded PKCS#12 file
//! before anything derives a key from it: any bytes are either refused or counted, never a panic,
//! and what it lets through stays within the limits it was given. The limits here are small, so
//! that the walk itself (which decrypts encrypted safes within them) stays fast.

#![no_main]

use kuatia_infrastructure::pfx_work::{Limits, check};
use libfuzzer_sys::fuzz_target;

/// The password of the seed files that have one (tests/scripts/fuzz.sh writes them).
const SEED_PASSWORD: &str = "kuatia-fuzz";

const LIMITS: Limits = Limits {
    iterations_per_derivation: 5_000,
    total_iterations: 12_000,
    derivations: 4,
    scrypt_memory_bytes: 1 << 20,
    safes: 4,
    bags: 16,
};

fuzz_target!(|data: &[u8]| {
    if let Ok(work) = check(data, SEED_PASSWORD, LIMITS) {
        assert!(work.iterations <= LIMITS.total_iterations, "{work:?}");
        assert!(work.derivations <= LIMITS.derivations, "{work:?}");
        assert!(work.safes <= LIMITS.safes && work.bags <= LIMITS.bags, "{work:?}");
    }
});
