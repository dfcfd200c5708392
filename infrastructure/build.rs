//! The stores embed the migrations (`sqlx::migrate!`), which names only the files it found: a
//! migration added later would not rebuild this crate by itself, and a service built from a
//! warm target directory would start without it. Cargo reruns this (and rebuilds the crate)
//! whenever anything under `migrations/` changes.

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
