//! SIFEN's web services: the SOAP 1.2 messages and the HTTP client over mutual TLS.
//!
//! - [`messages`] is pure: it builds the request envelopes (the signed `rDE`/`rGesEve` go in
//!   byte for byte, never re-serialised) and parses every answer into a typed result that keeps
//!   SIFEN's own code (`dCodRes`) and message (`dMsgRes`). Anything that is not a SOAP answer of
//!   the expected kind is a [`SoapError`], never a panic.
//! - [`client`] sends them with reqwest (rustls, the company's certificate as the TLS client
//!   identity) and tells "not sent" apart from "sent, outcome unknown" ([`Delivery`]), which the
//!   pipeline needs to reconcile by CDC before resending.
//!
//! Knows nothing of documents, numbering or retries: the pipeline decides what a code means for
//! a document. The simulator that answers these messages lives in [`crate::sifen_sim`].

pub mod client;
pub mod gateway;
pub mod messages;
pub(crate) mod xml;

/// The XML reader, for the fuzz targets in `fuzz/` only: not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::xml::{Element, XmlError, parse, strip_prolog};
}

pub use client::{ClientIdentity, SifenClient, SoapClientConfig};
pub use gateway::SoapConnector;
pub use kuatia_domain::sifen::answers::{Meaning, Operation, Transport};
pub use kuatia_domain::sifen::exchange::{Delivery, SoapError, codes};
pub use messages::{
    ContainedDe, DeQuery, DeReception, DocumentStatus, EventOutcome, EventReception, LotDocument, LotQuery,
    LotReception, LotResult, LotState, ResultCode, RucQuery, Taxpayer,
};

/// The SOAP 1.2 envelope namespace.
pub const SOAP12_NS: &str = "http://www.w3.org/2003/05/soap-envelope";
/// SIFEN's namespace, default namespace of every request and DE.
pub const SIFEN_NS: &str = "http://ekuatia.set.gov.py/sifen/xsd";
/// `xsi`, used by `xsi:schemaLocation` on `rDE` and `gGroupGesEve`.
pub const XSI_NS: &str = "http://www.w3.org/2001/XMLSchema-instance";

/// SIFEN's test environment host.
pub const TEST_BASE_URL: &str = "https://sifen-test.set.gov.py";
/// SIFEN's production host.
pub const PRODUCTION_BASE_URL: &str = "https://sifen.set.gov.py";

/// Which SIFEN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    /// `sifen-test.set.gov.py`.
    Test,
    /// `sifen.set.gov.py`.
    Production,
}

impl Environment {
    /// The base URL the service paths are appended to.
    pub fn base_url(self) -> &'static str {
        match self {
            Self::Test => TEST_BASE_URL,
            Self::Production => PRODUCTION_BASE_URL,
        }
    }
}

/// The six web services. The endpoint is the `.wsdl` URL itself, posted to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Service {
    /// siRecepDE: one DE, synchronous.
    RecepDe,
    /// siRecepLoteDE: up to 50 DEs, asynchronous.
    RecepLoteDe,
    /// siResultLoteDE: the result of a lot.
    ResultLoteDe,
    /// siConsDE: a DE by CDC.
    ConsDe,
    /// siConsRUC: a taxpayer by RUC.
    ConsRuc,
    /// siRecepEvento: up to 15 events.
    RecepEvento,
}

impl Service {
    /// Every service.
    pub const ALL: [Service; 6] = [
        Self::RecepDe,
        Self::RecepLoteDe,
        Self::ResultLoteDe,
        Self::ConsDe,
        Self::ConsRuc,
        Self::RecepEvento,
    ];

    /// The path under the base URL ([MT §7.10], RSHK `SifenConfig`).
    pub fn path(self) -> &'static str {
        match self {
            Self::RecepDe => "/de/ws/sync/recibe.wsdl",
            Self::RecepLoteDe => "/de/ws/async/recibe-lote.wsdl",
            Self::ResultLoteDe => "/de/ws/consultas/consulta-lote.wsdl",
            Self::ConsDe => "/de/ws/consultas/consulta.wsdl",
            Self::ConsRuc => "/de/ws/consultas/consulta-ruc.wsdl",
            Self::RecepEvento => "/de/ws/eventos/evento.wsdl",
        }
    }

    /// The root element of the request inside `soap:Body`.
    pub fn request_root(self) -> &'static str {
        match self {
            Self::RecepDe => "rEnviDe",
            Self::RecepLoteDe => "rEnvioLote",
            Self::ResultLoteDe => "rEnviConsLoteDe",
            Self::ConsDe => "rEnviConsDeRequest",
            Self::ConsRuc => "rEnviConsRUC",
            Self::RecepEvento => "rEnviEventoDe",
        }
    }

    /// The root element of the answer inside `soap:Body`.
    pub fn response_root(self) -> &'static str {
        match self {
            Self::RecepDe => "rRetEnviDe",
            Self::RecepLoteDe => "rResEnviLoteDe",
            Self::ResultLoteDe => "rResEnviConsLoteDe",
            Self::ConsDe => "rEnviConsDeResponse",
            Self::ConsRuc => "rResEnviConsRUC",
            Self::RecepEvento => "rRetEnviEventoDe",
        }
    }

    /// The `operation` label of the SIFEN metrics (`kuatia_sifen_responses_total`, …).
    pub fn operation(self) -> &'static str {
        match self {
            Self::RecepDe => "recep_de",
            Self::RecepLoteDe => "recep_lote",
            Self::ResultLoteDe => "result_lote",
            Self::ConsDe => "cons_de",
            Self::ConsRuc => "cons_ruc",
            Self::RecepEvento => "recep_evento",
        }
    }

    /// The operation of the answers table.
    pub fn table_operation(self) -> Operation {
        match self {
            Self::RecepDe => Operation::RecepDe,
            Self::RecepLoteDe => Operation::RecepLoteDe,
            Self::ResultLoteDe => Operation::ResultLoteDe,
            Self::ConsDe => Operation::ConsDe,
            Self::ConsRuc => Operation::ConsRuc,
            Self::RecepEvento => Operation::RecepEvento,
        }
    }

    /// SIFEN's name (`siRecepDE`, …), for logs and metrics: the answers table's.
    pub fn name(self) -> &'static str {
        self.table_operation().name()
    }
}
