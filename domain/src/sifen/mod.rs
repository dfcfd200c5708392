//! SIFEN v150 documents: the pure rules of their fields, identifiers and printed QR.
//!
//! [`cdc`] is the document's key (`DE@Id`), [`de`] writes the unsigned `rDE` XML from a
//! canonical document and the issuer's configuration, [`qr`] builds the `dCarQR` URL from the
//! values the XML holds, [`event`] writes the unsigned cancelación and inutilización events,
//! [`answers`] is the one table of what each SIFEN answer means, [`exchange`] holds the typed
//! answers of SIFEN's web services and the failures of an exchange, and [`facts`] holds the code
//! tables, limits and literals of SIFEN that intake validation and the DE builder share.
//! Nothing here does IO, reads a clock or draws randomness: the security code, the signing time,
//! the event id and the sequence number come in as arguments.

pub mod answers;
pub mod answers_es;
pub mod cdc;
pub mod codes;
pub mod de;
pub mod event;
pub mod exchange;
pub mod facts;
pub mod qr;
