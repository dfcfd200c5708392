//! SIFEN v150 adapters that need cryptography: the XMLDSig signer of documents (DE) and events
//! with the QR group that follows the signature ([`sign`]).
//!
//! The QR string itself is pure and lives in `kuatia_domain::sifen::qr`; the SOAP layer is
//! `crate::sifen_soap`; the pipeline that drives them is `kuatia_api::pipeline`.

pub mod sign;
