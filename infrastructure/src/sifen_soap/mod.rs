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
pub mod messages;
pub(crate) mod xml;

/// The XML reader, for the fuzz targets in `fuzz/` only: not part of the crate's API.
#[doc(hidden)]
pub mod fuzzing {
    pub use super::xml::{Element, XmlError, parse, strip_prolog};
}

pub use client::{ClientIdentity, SifenClient, SoapClientConfig};
pub use kuatia_domain::sifen::answers::{Meaning, Operation, Transport};
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

/// Where a failed exchange leaves the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The request never left: it may be sent again as it is.
    NotSent,
    /// It was (or may have been) sent and no usable answer came back: SIFEN may have processed
    /// it. Reconcile by CDC (siConsDE, or siResultLoteDE with `dCDC`) before sending it again.
    Unknown,
}

/// What can go wrong in an exchange with SIFEN. Answers SIFEN gives with its own codes
/// (rejections included) are not errors: they are the typed results of [`messages`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SoapError {
    /// The answer is not a SOAP envelope (an HTML error page, an empty or truncated body, …).
    #[error("the answer (HTTP {status}) is not a SOAP envelope ({snippet})")]
    NotSoap {
        /// HTTP status.
        status: u16,
        /// The body's size and SHA-256 (`messages::body_digest`), never its text: the
        /// endpoint is a tenant's, and this reaches the document's events.
        snippet: String,
    },
    /// A SOAP Fault (1.2 or 1.1).
    #[error("SOAP fault (HTTP {status}) {code}: {reason}")]
    Fault {
        /// HTTP status.
        status: u16,
        /// `Code/Value` (1.2) or `faultcode` (1.1), e.g. `env:Receiver`.
        code: String,
        /// `Code/Subcode/Value`, when present.
        subcode: Option<String>,
        /// `Reason/Text` or `faultstring`.
        reason: String,
        /// The `Detail` content as written, when present.
        detail: Option<String>,
    },
    /// A SOAP envelope, but not the answer expected (another root, a required field missing).
    #[error("unexpected SOAP answer (HTTP {status}): {reason}")]
    UnexpectedResponse {
        /// HTTP status.
        status: u16,
        /// What is wrong.
        reason: String,
        /// The body's size and SHA-256, never its text.
        snippet: String,
    },
    /// The request could not be built (not a well-formed rDE, too many documents, …): a bug
    /// or bad input on our side; nothing was sent.
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// The client could not be configured (a certificate or key that cannot be read).
    #[error("client configuration: {0}")]
    Config(String),
    /// No connection could be made (refused, DNS, TLS handshake, connect timeout): the request
    /// was not sent.
    #[error("not sent to {url}: {reason}")]
    NotSent {
        /// Where.
        url: String,
        /// Why, for the logs.
        reason: String,
    },
    /// The request was sent (or may have been) and no complete answer came: read timeout,
    /// connection closed or reset while waiting, a body cut short.
    #[error("sent to {url}, outcome unknown: {reason}")]
    OutcomeUnknown {
        /// Where.
        url: String,
        /// Whether it was a timeout (as opposed to a connection dropped).
        timeout: bool,
        /// Why, for the logs.
        reason: String,
    },
}

impl SoapError {
    /// Whether the request may have been processed. Anything but "never left" counts as
    /// unknown: an HTML 502 from a proxy, a fault or a garbled body do not prove that SIFEN did
    /// not process the request.
    pub fn delivery(&self) -> Delivery {
        match self {
            Self::InvalidRequest(_) | Self::Config(_) | Self::NotSent { .. } => Delivery::NotSent,
            Self::NotSoap { .. }
            | Self::Fault { .. }
            | Self::UnexpectedResponse { .. }
            | Self::OutcomeUnknown { .. } => Delivery::Unknown,
        }
    }

    /// Whether trying again later can help (an operational failure, not a bug on our side).
    pub fn is_transient(&self) -> bool {
        !matches!(self, Self::InvalidRequest(_) | Self::Config(_))
    }

    /// The transport outcome of the answers table (`kuatia_domain::sifen::answers`), every
    /// one an operational failure; `None` for a request that could not be built or a client
    /// that could not be configured (our side: nothing left).
    pub fn transport(&self) -> Option<Transport> {
        Some(match self {
            Self::InvalidRequest(_) | Self::Config(_) => return None,
            Self::NotSent { reason, .. } => {
                let reason = reason.to_ascii_lowercase();
                if self.is_timeout() {
                    Transport::TimeoutBeforeSending
                } else if reason.contains("tls")
                    || reason.contains("certificate")
                    || reason.contains("handshake")
                {
                    Transport::Tls
                } else {
                    Transport::Refused
                }
            }
            Self::OutcomeUnknown { .. } => Transport::TimeoutAfterSending,
            Self::NotSoap { status, .. } if *status >= 500 => Transport::Http5xx,
            Self::NotSoap { .. } => Transport::NotSoap,
            Self::Fault { .. } => Transport::SoapFault,
            Self::UnexpectedResponse { .. } => Transport::Unexpected,
        })
    }

    /// Whether the request timed out (at connect or while waiting for the answer).
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::OutcomeUnknown { timeout, .. } => *timeout,
            Self::NotSent { reason, .. } => reason.contains("timed out"),
            _ => false,
        }
    }

    /// The HTTP status of the answer, when there was one.
    pub fn http_status(&self) -> Option<u16> {
        match self {
            Self::NotSoap { status, .. }
            | Self::Fault { status, .. }
            | Self::UnexpectedResponse { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// SIFEN result codes this crate and the simulator name.
pub mod codes {
    /// XML malformado.
    pub const MALFORMED: &str = "0160";
    /// Servidor de procesamiento no disponible.
    pub const SERVER_UNAVAILABLE: &str = "0161";
    /// Autorización del DE satisfactoria.
    pub const DE_APPROVED: &str = "0260";
    /// Lote recibido con éxito.
    pub const LOT_RECEIVED: &str = "0300";
    /// Lote no encolado para procesamiento.
    pub const LOT_NOT_QUEUED: &str = "0301";
    /// Número de lote inexistente.
    pub const LOT_UNKNOWN: &str = "0360";
    /// Lote en procesamiento.
    pub const LOT_PROCESSING: &str = "0361";
    /// Procesamiento de lote concluido.
    pub const LOT_DONE: &str = "0362";
    /// Lote con tipos de DE distintos.
    pub const LOT_MIXED_TYPES: &str = "0363";
    /// Consulta extemporánea de lote (after 48 h).
    pub const LOT_EXPIRED: &str = "0364";
    /// CDC no existe en SIFEN o ha sido rechazado.
    pub const CDC_NOT_FOUND: &str = "0420";
    /// CDC encontrado.
    pub const CDC_FOUND: &str = "0422";
    /// RUC inexistente.
    pub const RUC_NOT_FOUND: &str = "0500";
    /// RUC encontrado.
    pub const RUC_FOUND: &str = "0502";
    /// Evento registrado correctamente.
    pub const EVENT_REGISTERED: &str = "0600";
    /// CDC duplicado.
    pub const DUPLICATE_CDC: &str = "1001";
}
