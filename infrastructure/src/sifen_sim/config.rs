//! What a simulator is configured with: the CSCs, taxpayers and timbrados it knows, its rates
//! and delays, the checks it applies, and where it keeps its state.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::str::FromStr;

/// A CSC the simulator accepts for QR hashes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CscEntry {
    /// Only for this RUC (`80069563` or `80069563-1`); `None` for any issuer.
    #[serde(default)]
    pub ruc: Option<String>,
    /// `IdCSC` (`0001`).
    pub id: String,
    /// The 32-character secret.
    pub csc: String,
}

impl FromStr for CscEntry {
    type Err = String;

    /// `RUC:ID:CSC` (the CLI's `--csc`) or `ID:CSC` for any issuer.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        let (ruc, id, csc) = match parts.as_slice() {
            [ruc, id, csc] => (Some((*ruc).to_owned()), *id, *csc),
            [id, csc] => (None, *id, *csc),
            _ => return Err(format!("expected RUC:ID:CSC or ID:CSC, not {text:?}")),
        };
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) || csc.is_empty() {
            return Err(format!("expected RUC:ID:CSC or ID:CSC, not {text:?}"));
        }
        Ok(Self {
            ruc,
            id: id.to_owned(),
            csc: csc.to_owned(),
        })
    }
}

/// A taxpayer siConsRUC knows (besides the issuers it has seen).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTaxpayer {
    /// `80069563` (a `-DV` suffix is ignored).
    pub ruc: String,
    /// `dRazCons`.
    pub name: String,
}

/// A timbrado SIFEN has on file (the rules on the timbrado's dates and numbers read it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SimTimbrado {
    /// The issuer (`80069563`; a `-DV` suffix is ignored).
    pub ruc: String,
    /// `dNumTim`.
    pub number: String,
    /// `dFeIniT`.
    pub start: chrono::NaiveDate,
    /// The last day it is valid, when it has one.
    #[serde(default)]
    pub end: Option<chrono::NaiveDate>,
}

impl FromStr for SimTimbrado {
    type Err = String;

    /// `RUC:NUMBER:START[:END]` (the CLI's `--timbrado`), dates as `2024-01-31`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("expected RUC:NUMBER:START[:END] (dates as 2024-01-31), not {text:?}");
        let parts: Vec<&str> = text.trim().split(':').collect();
        let date = |d: &str| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").map_err(|_| bad());
        let (ruc, number, start, end) = match parts.as_slice() {
            [ruc, number, start] => (*ruc, *number, date(start)?, None),
            [ruc, number, start, end] => (*ruc, *number, date(start)?, Some(date(end)?)),
            _ => return Err(bad()),
        };
        if ruc.is_empty() || number.len() != 8 || !number.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        Ok(Self {
            ruc: ruc.to_owned(),
            number: number.to_owned(),
            start,
            end,
        })
    }
}

/// The generic test CSCs SIFEN's test environment accepts.
pub fn generic_test_cscs() -> Vec<CscEntry> {
    vec![
        CscEntry {
            ruc: None,
            id: "0001".into(),
            csc: "ABCD0000000000000000000000000000".into(),
        },
        CscEntry {
            ruc: None,
            id: "0002".into(),
            csc: "EFGH0000000000000000000000000000".into(),
        },
    ]
}

/// How the simulator behaves. Every field has a default (`SimConfig::default()` is what demo
/// mode runs); durations are milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SimConfig {
    /// How long a lot stays "en procesamiento" (0361) before its results are there.
    pub lot_processing_ms: u64,
    /// Delay added to every SOAP answer.
    pub latency_ms: u64,
    /// Probability (0–1) that a request is processed and its answer withheld (`drop`).
    pub drop_rate: f64,
    /// Probability (0–1) of an HTML HTTP 500 instead of processing (`http500`).
    pub error_rate: f64,
    /// Probability (0–1) of SIFEN's 0161 "server unavailable" instead of processing.
    pub unavailable_rate: f64,
    /// How long a withheld answer keeps the connection open before it is closed with a 504
    /// (clients time out well before).
    pub hang_ms: u64,
    /// Seed of the random faults, for reproducible runs.
    pub seed: Option<u64>,
    /// CSCs accepted for QR hashes; the generic test ones by default.
    pub cscs: Vec<CscEntry>,
    /// Taxpayers siConsRUC answers for, besides the issuers seen.
    pub taxpayers: Vec<SimTaxpayer>,
    /// The taxpayers listed (with the issuers seen) are every taxpayer there is: the rules on
    /// inexistent RUCs (1250, 1306, 1603, 2303) apply. Off by default: SIFEN's registry is not
    /// the simulator's, and a RUC it does not hold is then not judged.
    pub whole_registry: bool,
    /// Timbrados on file; the rules on a timbrado are applied only to those listed.
    pub timbrados: Vec<SimTimbrado>,
    /// Apply the rules of MT §12.4 (`kuatia-sifen-rules`) to every DE; off only for tests of
    /// the transport that send hand-made minimal DEs.
    pub check_rules: bool,
    /// Refuse DEs and events without a Signature. Off by default so that unsigned DEs from
    /// early development pass; SIFEN itself requires it.
    pub require_signature: bool,
    /// Verify the signatures' cryptography (digest and RSA) when a Signature is present.
    pub verify_signature: bool,
    /// Check `dCarQR` (data and hash) when present.
    pub check_qr: bool,
    /// Check the signing and emission dates against the clock (1004, 1005, 1150, 1151).
    pub check_dates: bool,
    /// Whether siRecepDE (sync) is enabled; when not, DEs are refused with 1264.
    pub sync_enabled: bool,
    /// Keep the state in this JSON file (read at start, rewritten after each change).
    pub state_file: Option<PathBuf>,
    /// Validate each `rDE` and event group against SIFEN's v150 schemas in this folder
    /// (`siRecepDE_v150.xsd`, `siRecepEvento_v150.xsd`) with xmllint; off when `None`.
    pub xsd_dir: Option<PathBuf>,
    /// Faults drawn at random per operation, written `OPERATION:FAULT:RATE`
    /// (`siConsDE:0161:0.05`, `*:0162:0.01`; [`RandomFault`]), before the rates above.
    ///
    /// [`RandomFault`]: super::RandomFault
    pub faults: Vec<String>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            lot_processing_ms: 2_000,
            latency_ms: 0,
            drop_rate: 0.0,
            error_rate: 0.0,
            unavailable_rate: 0.0,
            hang_ms: 300_000,
            seed: None,
            cscs: generic_test_cscs(),
            taxpayers: Vec::new(),
            whole_registry: false,
            timbrados: Vec::new(),
            check_rules: true,
            require_signature: false,
            verify_signature: true,
            check_qr: true,
            check_dates: true,
            sync_enabled: true,
            state_file: None,
            xsd_dir: None,
            faults: Vec::new(),
        }
    }
}
