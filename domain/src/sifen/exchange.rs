//! What an exchange with SIFEN's web services can bring back, as data: the typed answers of
//! siRecepDE, siRecepLoteDE, siResultLoteDE, siConsDE, siConsRUC and siRecepEvento, the lot
//! query, and the failures of an exchange sorted by what they mean for the request
//! ([`Delivery`]). The SOAP client (`kuatia_infrastructure::sifen_soap`) writes the requests and
//! reads the answers into these types; the workflows decide from them, through the answers
//! table ([`super::answers`]), and never see XML.

use super::answers::{self, Meaning, Operation, Status, Transport};

/// Most DEs in one lot (siRecepLoteDE).
pub const MAX_LOT_DOCUMENTS: usize = 50;
/// Most events in one siRecepEvento message.
pub const MAX_EVENTS: usize = 15;

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

/// A typed answer and the body it was read from (kept as the `channel_response` artifact).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered<T> {
    /// The typed result.
    pub result: T,
    /// HTTP status.
    pub status: u16,
    /// The answer as received.
    pub raw: String,
}

/// What a lot query asks about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LotQuery {
    /// The lot number (`dProtConsLote`) SIFEN gave at reception.
    Number(String),
    /// A CDC of the lot, when its reception answer was lost (GMP item 3: only in that case).
    Cdc(String),
}

/// One `gResProc`: SIFEN's code and message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ResultCode {
    /// `dCodRes`, four digits (`0260`, `1001`, …).
    pub code: String,
    /// `dMsgRes`.
    pub message: String,
}

/// `dEstRes`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum DocumentStatus {
    /// "Aprobado".
    Approved,
    /// "Aprobado con observación" (e.g. transmitted more than 72 h after signing).
    ApprovedWithObservation,
    /// "Rechazado".
    Rejected,
    /// Anything else, as written.
    Other(String),
}

impl DocumentStatus {
    /// Reads `dEstRes`, forgiving case and accents.
    pub fn parse(text: &str) -> Self {
        let folded: String = text
            .trim()
            .chars()
            .map(|c| match c {
                'ó' | 'Ó' => 'o',
                c => c.to_ascii_lowercase(),
            })
            .collect();
        match folded.as_str() {
            "aprobado" => Self::Approved,
            s if s.starts_with("aprobado con observacion") => Self::ApprovedWithObservation,
            "rechazado" => Self::Rejected,
            _ => Self::Other(text.trim().to_owned()),
        }
    }

    /// The literal SIFEN writes.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Approved => "Aprobado",
            Self::ApprovedWithObservation => "Aprobado con observación",
            Self::Rejected => "Rechazado",
            Self::Other(s) => s,
        }
    }

    /// Approved, with or without observation: the DE is a valid DTE.
    pub fn is_approved(&self) -> bool {
        matches!(self, Self::Approved | Self::ApprovedWithObservation)
    }

    /// As the answers table reads it.
    pub fn table_status(&self) -> Status {
        match self {
            Self::Approved | Self::ApprovedWithObservation => Status::Approved,
            Self::Rejected => Status::Rejected,
            Self::Other(_) => Status::Unknown,
        }
    }
}

/// siRecepDE's answer: `rRetEnviDe/rProtDe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeReception {
    /// `Id`: the CDC processed (the XSD's name; some answers omit it).
    pub cdc: Option<String>,
    /// `dFecProc`, as written (`2026-01-15T10:00:00-03:00`).
    pub processed_at: Option<String>,
    /// `dDigVal`: the DigestValue of the processed DE, to compare with ours.
    pub digest_value: Option<String>,
    /// `dEstRes`.
    pub status: DocumentStatus,
    /// `dProtAut`: the authorisation (transaction) number, when approved.
    pub authorization: Option<String>,
    /// `gResProc`: codes and messages (for a rejection, only the first error).
    pub results: Vec<ResultCode>,
}

impl DeReception {
    /// The first `dCodRes`.
    pub fn code(&self) -> Option<&str> {
        self.results.first().map(|r| r.code.as_str())
    }

    /// What the answer means for the DE (the answers table: `dEstRes` and the first code).
    pub fn meaning(&self) -> Meaning {
        answers::verdict(
            Operation::RecepDe,
            self.status.table_status(),
            self.code().unwrap_or_default(),
        )
    }

    /// Whether SIFEN refused the DE because its CDC was already approved (1001/1002): an
    /// approval held from before, whose authorisation is asked for with siConsDE.
    pub fn is_duplicate(&self) -> bool {
        answers::approved_before(
            Operation::RecepDe,
            self.status.table_status(),
            self.code().unwrap_or_default(),
        )
    }
}

/// siRecepLoteDE's answer: `rResEnviLoteDe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LotReception {
    /// `dFecProc`.
    pub processed_at: Option<String>,
    /// `dCodRes`: 0300 received, 0301 not queued, …
    pub code: String,
    /// `dMsgRes`.
    pub message: String,
    /// `dProtConsLote`: the lot number to poll with (only on 0300).
    pub lot_number: Option<String>,
    /// `dTpoProces`: average processing time in seconds.
    pub processing_seconds: Option<u64>,
}

impl LotReception {
    /// 0300 with a lot number.
    pub fn is_received(&self) -> bool {
        self.meaning() == Meaning::Processing && self.lot_number.is_some()
    }

    /// What the answer means for the lot's documents (the answers table).
    pub fn meaning(&self) -> Meaning {
        answers::meaning(Operation::RecepLoteDe, &self.code)
    }
}

/// The state a lot query reports (`dCodResLot`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum LotState {
    /// 0360: no such lot.
    Unknown,
    /// 0361: still processing; poll again later.
    Processing,
    /// 0362: done; the per-DE results are there.
    Done,
    /// 0363: refused, DEs of different types.
    MixedTypes,
    /// 0364: asked after 48 h; query each CDC instead.
    Expired,
    /// Any other code.
    Other(String),
}

/// One DE of a lot: `gResProcLote`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LotDocument {
    /// `id`: the CDC.
    pub cdc: String,
    /// `dEstRes`.
    pub status: DocumentStatus,
    /// `dProtAut`, when approved.
    pub authorization: Option<String>,
    /// `gResProc`.
    pub results: Vec<ResultCode>,
}

/// siResultLoteDE's answer: `rResEnviConsLoteDe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LotResult {
    /// `dFecProc`.
    pub processed_at: Option<String>,
    /// `dCodResLot`.
    pub code: String,
    /// `dMsgResLot`.
    pub message: String,
    /// `gResProcLote`, one per DE once the lot is done.
    pub documents: Vec<LotDocument>,
}

impl LotResult {
    /// What `dCodResLot` says.
    pub fn state(&self) -> LotState {
        match self.code.as_str() {
            codes::LOT_UNKNOWN => LotState::Unknown,
            codes::LOT_PROCESSING => LotState::Processing,
            codes::LOT_DONE => LotState::Done,
            codes::LOT_MIXED_TYPES => LotState::MixedTypes,
            codes::LOT_EXPIRED => LotState::Expired,
            other => LotState::Other(other.to_owned()),
        }
    }

    /// What the lot's code means (the answers table): 0361 processing, 0362 concluded
    /// (approved: each entry then carries its own verdict), 0360/0363/0364 no lot processing.
    pub fn meaning(&self) -> Meaning {
        answers::meaning(Operation::ResultLoteDe, &self.code)
    }
}

impl LotDocument {
    /// The DE's verdict in a concluded lot: the answers table reads the entry (`dEstRes` and
    /// the first code) as siRecepDE's answer to that DE.
    pub fn meaning(&self) -> Meaning {
        answers::verdict(Operation::RecepDe, self.status.table_status(), self.code())
    }

    /// Whether the approval is read from the code alone (1001/1002: approved before).
    pub fn approved_before(&self) -> bool {
        answers::approved_before(Operation::RecepDe, self.status.table_status(), self.code())
    }

    /// The first `dCodRes`.
    pub fn code(&self) -> &str {
        self.results.first().map_or("", |r| r.code.as_str())
    }
}

/// The DE container of a siConsDE answer (`xContenDE`, holding `rContDe`: the rDE, its
/// `dProtAut` and its events).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ContainedDe {
    /// The container as SIFEN sent it (unescaped when it came as text).
    pub xml: String,
    /// `DE@Id` inside it.
    pub cdc: Option<String>,
    /// `dProtAut`: the authorisation number.
    pub authorization: Option<String>,
    /// Whether a cancellation event (`rGeVeCan`) is attached.
    pub cancelled: bool,
}

/// siConsDE's answer: `rEnviConsDeResponse`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DeQuery {
    /// `dFecProc`.
    pub processed_at: Option<String>,
    /// `dCodRes`: 0422 found, 0420 not found or rejected.
    pub code: String,
    /// `dMsgRes`.
    pub message: String,
    /// `xContenDE`, when found.
    pub container: Option<ContainedDe>,
}

impl DeQuery {
    /// What the answer means for the CDC (the answers table): 0422 approved, 0420 absent,
    /// anything else operational (0421 too: the Manual gives it two senses).
    pub fn meaning(&self) -> Meaning {
        answers::meaning(Operation::ConsDe, &self.code)
    }

    /// Whether SIFEN holds the DE as approved (0422).
    pub fn is_found(&self) -> bool {
        self.meaning() == Meaning::Approved
    }
}

/// The taxpayer of a siConsRUC answer (`xContRUC`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Taxpayer {
    /// `dRUCCons`.
    pub ruc: String,
    /// `dRazCons`.
    pub name: String,
    /// `dCodEstCons`: ACT, SUS, SAD, BLQ, CAN, CDE.
    pub status_code: String,
    /// `dDesEstCons`.
    pub status: String,
    /// `dRUCFactElec`: S/N.
    pub electronic_invoicing: bool,
}

/// siConsRUC's answer: `rResEnviConsRUC`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct RucQuery {
    /// `dCodRes`: 0502 found, 0500 not found, 0501 not allowed.
    pub code: String,
    /// `dMsgRes`.
    pub message: String,
    /// `xContRUC`.
    pub taxpayer: Option<Taxpayer>,
}

/// One event's result: `gResProcEVe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventOutcome {
    /// `id`: the `rEve@Id` it answers.
    pub id: String,
    /// `dEstRes`.
    pub status: DocumentStatus,
    /// `dProtAut`.
    pub authorization: Option<String>,
    /// `gResProc` (0600 when registered).
    pub results: Vec<ResultCode>,
}

impl EventOutcome {
    /// The first `dCodRes`.
    pub fn code(&self) -> &str {
        self.results.first().map_or("", |r| r.code.as_str())
    }

    /// What the answer means for the event (the answers table: `dEstRes` and the first code;
    /// 4003/4066 "already registered" are approvals).
    pub fn meaning(&self) -> Meaning {
        answers::verdict(Operation::RecepEvento, self.status.table_status(), self.code())
    }
}

/// siRecepEvento's answer: `rRetEnviEventoDe`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct EventReception {
    /// `dFecProc`.
    pub processed_at: Option<String>,
    /// One per event sent.
    pub events: Vec<EventOutcome>,
}
