//! SIFEN v150 adapters that need cryptography: the XMLDSig signer of documents (DE) and events,
//! and the writer of the QR group that follows the signature.
//!
//! Start reading at [`sign`]. The QR string itself is pure and lives in
//! `kuatia_domain::sifen::qr`.

pub mod sign;
