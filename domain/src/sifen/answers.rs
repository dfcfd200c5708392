//! SIFEN's answers in one table: for each web service, every answer code the Manual Técnico v150
//! lists (§12.1–12.3, and the rule ranges of §11.6 and §12.4), and every way an exchange can fail
//! on the wire, each mapped to exactly one [`Meaning`]. The pipeline decides a document's fate
//! from this table and nowhere else, the document's SIFEN explanation reads it
//! ([`super::codes::explain`]), and `docs/sifen-channel.md` publishes it ([`markdown`]).
//!
//! The rule this table exists for: **an answer that is not a verdict is not "not found"**. A CDC
//! is sent again only after SIFEN said it holds no approval of it ([`Meaning::Absent`] from
//! siConsDE, 0420) *and* that no lot holding it is processing (siResultLoteDE asked by CDC:
//! 0360, 0363, 0364, or a finished lot with the CDC's own verdict). Silence, 0161/0162, an HTTP
//! 5xx, a timeout, a body that cannot be read or a code the table does not list are
//! [`Meaning::Operational`]: SIFEN is asked again later, and nothing is concluded from them.
//! Anything not in the table is operational.
//!
//! Pure data and lookups: no IO. Codes are the four digits SIFEN writes in `dCodRes`.

use std::fmt;

/// SIFEN's six web services (MT §9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Operation {
    /// siRecepDE: one DE, synchronous.
    RecepDe,
    /// siRecepLoteDE: up to 50 DEs, asynchronous.
    RecepLoteDe,
    /// siResultLoteDE: a lot's result (by lot number, or by one of its CDCs).
    ResultLoteDe,
    /// siConsDE: a DE by CDC.
    ConsDe,
    /// siRecepEvento: cancelación, inutilización and the other events.
    RecepEvento,
    /// siConsRUC: a taxpayer by RUC.
    ConsRuc,
}

impl Operation {
    /// Every operation, in the table's order.
    pub const ALL: [Operation; 6] = [
        Self::RecepDe,
        Self::RecepLoteDe,
        Self::ResultLoteDe,
        Self::ConsDe,
        Self::RecepEvento,
        Self::ConsRuc,
    ];

    /// SIFEN's name (`siRecepDE`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::RecepDe => "siRecepDE",
            Self::RecepLoteDe => "siRecepLoteDE",
            Self::ResultLoteDe => "siResultLoteDE",
            Self::ConsDe => "siConsDE",
            Self::RecepEvento => "siRecepEvento",
            Self::ConsRuc => "siConsRUC",
        }
    }

    /// The operation SIFEN names `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(name.trim()))
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What an answer means for the document (or event, or question) it answers. Exactly one per
/// row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Meaning {
    /// Definitive approval: SIFEN holds the DE (or event) as approved, the lot as concluded,
    /// the taxpayer as found.
    Approved,
    /// Definitive rejection: SIFEN judged the DE (or event) and refused it; the same bytes would
    /// be refused again.
    Rejected,
    /// Known absent: SIFEN holds no approval of the CDC (siConsDE 0420), or no lot holding the
    /// CDC is processing (siResultLoteDE 0360, 0363, 0364). Only this lets a CDC be sent again,
    /// and only siConsDE's 0420 together with the lot's answer.
    Absent,
    /// Still processing: a lot received (0300) or in processing (0361). Ask again later; never
    /// send its CDCs meanwhile.
    Processing,
    /// Operational failure: nothing can be concluded. Ask again later.
    Operational,
}

impl Meaning {
    /// The words the published table uses.
    pub fn label(self) -> &'static str {
        match self {
            Self::Approved => "definitive approval",
            Self::Rejected => "definitive rejection",
            Self::Absent => "known absent",
            Self::Processing => "still processing",
            Self::Operational => "operational failure: ask again later",
        }
    }
}

/// How an exchange fails before SIFEN's answer can be read. Every one is
/// [`Meaning::Operational`] ([`TRANSPORT`]); the difference is only whether the request may
/// have been processed ([`Transport::may_have_arrived`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// The connection was refused, or the host not found: nothing was sent.
    Refused,
    /// The connection or the TLS handshake timed out: nothing was sent.
    TimeoutBeforeSending,
    /// The TLS handshake failed (certificate refused, protocol): nothing was sent.
    Tls,
    /// The request left and no answer came in time, or the connection closed while waiting.
    TimeoutAfterSending,
    /// An answer came, but not a SOAP envelope (an HTML page, an empty or cut body).
    NotSoap,
    /// HTTP 5xx without a SOAP Fault.
    Http5xx,
    /// A SOAP Fault.
    SoapFault,
    /// A SOAP envelope, but not the answer of the operation asked (another root, a required
    /// field missing).
    Unexpected,
}

impl Transport {
    /// Every transport outcome, in the table's order.
    pub const ALL: [Transport; 8] = [
        Self::Refused,
        Self::TimeoutBeforeSending,
        Self::Tls,
        Self::TimeoutAfterSending,
        Self::NotSoap,
        Self::Http5xx,
        Self::SoapFault,
        Self::Unexpected,
    ];

    /// Whether SIFEN may have processed the request (then its CDC is asked for before anything
    /// is sent again).
    pub fn may_have_arrived(self) -> bool {
        !matches!(self, Self::Refused | Self::TimeoutBeforeSending | Self::Tls)
    }

    /// Short words for the table and failure reasons.
    pub fn label(self) -> &'static str {
        match self {
            Self::Refused => "connection refused or host not found",
            Self::TimeoutBeforeSending => "timeout before sending (connect, TLS handshake)",
            Self::Tls => "TLS failure (handshake, certificate)",
            Self::TimeoutAfterSending => "timeout after sending, or the connection closed while waiting",
            Self::NotSoap => "an answer that is not SOAP (HTML page, empty or cut body)",
            Self::Http5xx => "HTTP 5xx without a SOAP Fault",
            Self::SoapFault => "a SOAP Fault",
            Self::Unexpected => "a SOAP answer of another shape than the operation's",
        }
    }

    /// The outcome's name in failure reasons (`refused`, `timeout_after_sending`, …).
    pub fn name(self) -> &'static str {
        match self {
            Self::Refused => "refused",
            Self::TimeoutBeforeSending => "timeout_before_sending",
            Self::Tls => "tls",
            Self::TimeoutAfterSending => "timeout_after_sending",
            Self::NotSoap => "not_soap",
            Self::Http5xx => "http_5xx",
            Self::SoapFault => "soap_fault",
            Self::Unexpected => "unexpected",
        }
    }

    /// The reason a document records for this failure: `not sent (refused): <detail>` or
    /// `outcome unknown (http_5xx): <detail>`, read back by [`Transport::of_reason`].
    pub fn reason(self, detail: &str) -> String {
        let what = if self.may_have_arrived() {
            "outcome unknown"
        } else {
            "not sent"
        };
        format!("{what} ({}): {detail}", self.name())
    }

    /// The outcome a reason written by [`Transport::reason`] names (also behind `lot `).
    pub fn of_reason(reason: &str) -> Option<Self> {
        let rest = reason.strip_prefix("lot ").unwrap_or(reason);
        let rest = rest
            .strip_prefix("not sent (")
            .or_else(|| rest.strip_prefix("outcome unknown ("))?;
        let name = &rest[..rest.find(')')?];
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// What it means, in plain words, for the person looking at a document.
    pub fn plain(self) -> &'static str {
        match self {
            Self::Refused => {
                "SIFEN could not be reached (the connection was refused or its host not found): nothing was sent."
            }
            Self::TimeoutBeforeSending => {
                "SIFEN could not be reached in time (connecting or the TLS handshake timed out): nothing was sent."
            }
            Self::Tls => {
                "The secure connection to SIFEN failed (a certificate or TLS refusal): nothing was sent."
            }
            Self::TimeoutAfterSending => {
                "The document was sent but SIFEN's answer did not come in time: SIFEN may have processed it."
            }
            Self::NotSoap => {
                "SIFEN (or a proxy before it) answered with something that is not a SOAP answer: it may have processed the document."
            }
            Self::Http5xx => {
                "SIFEN answered with a server error (HTTP 5xx): it may have processed the document."
            }
            Self::SoapFault => "SIFEN answered with a SOAP Fault: it may have processed the document.",
            Self::Unexpected => {
                "SIFEN answered, but not with the answer of the operation asked: it may have processed the document."
            }
        }
    }

    /// What kuatia does and what to do about it, from the table.
    pub fn action(self) -> &'static str {
        TRANSPORT
            .iter()
            .find(|(t, _, _)| *t == self)
            .map_or(UNLISTED, |(_, _, action)| *action)
    }

    /// The meaning: always an operational failure, read from the table.
    pub fn meaning(self) -> Meaning {
        TRANSPORT
            .iter()
            .find(|(t, _, _)| *t == self)
            .map_or(Meaning::Operational, |(_, m, _)| *m)
    }
}

/// One row: the operations it applies to, an inclusive range of codes, SIFEN's words, the
/// meaning, and what it means in plain words and what kuatia does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Row {
    /// The operations whose answers it reads.
    pub operations: &'static [Operation],
    /// First code of the range.
    pub from: u16,
    /// Last code of the range (equal to `from` for one code).
    pub to: u16,
    /// SIFEN's words (the Manual's, or the guide's where the Manual is silent).
    pub sifen: &'static str,
    /// What the answer means.
    pub meaning: Meaning,
    /// What it usually means, for the person looking at a document.
    pub plain: &'static str,
    /// What kuatia does, and what to do about it.
    pub action: &'static str,
}

impl Row {
    /// `0160` or `1000–2999`.
    pub fn codes(&self) -> String {
        if self.from == self.to {
            format!("{:04}", self.from)
        } else {
            format!("{:04}–{:04}", self.from, self.to)
        }
    }

    fn holds(&self, operation: Operation, code: u16) -> bool {
        self.operations.contains(&operation) && (self.from..=self.to).contains(&code)
    }
}

use Meaning::{Absent, Approved, Operational, Processing, Rejected};
use Operation::{ConsDe, ConsRuc, RecepDe, RecepEvento, RecepLoteDe, ResultLoteDe};

const ALL: &[Operation] = &Operation::ALL;
/// The operations that send a signed document (a DE, an event): a refusal of the message is a
/// refusal of what it carries, since the same signed bytes would be refused again.
const SENDS: &[Operation] = &[RecepDe, RecepEvento];
/// The operations whose message-level refusal concludes nothing about a document: questions,
/// and a lot (its documents are sent again alone, each judged on its own).
const ASKS: &[Operation] = &[RecepLoteDe, ResultLoteDe, ConsDe, ConsRuc];
/// A DE's verdict: siRecepDE's answer (each DE's entry in a finished lot reads as one).
const DE: &[Operation] = &[RecepDe];

const fn r(
    operations: &'static [Operation],
    from: u16,
    to: u16,
    sifen: &'static str,
    meaning: Meaning,
    plain: &'static str,
    action: &'static str,
) -> Row {
    Row {
        operations,
        from,
        to,
        sifen,
        meaning,
        plain,
        action,
    }
}

const RETRY: &str = "Nothing: kuatia retries on its schedule (30 s, 2 min, 10 min, … up to 60 h after \
                     signing), asking SIFEN for the CDC before anything is sent again; POST /retry tries now.";
const REISSUE: &str = "Correct what SIFEN names and issue the document again as a new document.";
const LOT_RETRY: &str = "Each document of the lot is retried alone, after asking SIFEN for its CDC.";

/// The table, most specific rows first: the first row holding an (operation, code) decides.
pub static ROWS: &[Row] = &[
    // §12.3.1 siRecepDE; each DE's entry (gResProcLote) in a lot concluded with 0362 reads as
    // siRecepDE's answer to that DE.
    r(
        DE,
        260,
        260,
        "Autorización del DE satisfactoria",
        Approved,
        "SIFEN approved the document.",
        "Nothing: it is valid; deliver the KuDE to the buyer.",
    ),
    r(
        DE,
        1001,
        1002,
        "CDC duplicado / Documento electrónico duplicado",
        Approved,
        "SIFEN already holds this CDC as approved: an earlier attempt was approved and its answer was \
         lost on the way.",
        "kuatia asks SIFEN for the CDC (siConsDE) to take its authorisation; until SIFEN answers that \
         question the document stays submitting or retrying, never rejected.",
    ),
    r(
        DE,
        1005,
        1005,
        "Transmisión extemporánea del DE",
        Approved,
        "Approved with an observation: it was sent more than 72 hours after it was signed.",
        "Nothing for this document; send documents sooner after issuing them.",
    ),
    r(
        DE,
        1264,
        1264,
        "RUC del emisor no está habilitado para utilizar este tipo de servicio",
        Rejected,
        "The issuer's RUC is not enabled for SIFEN's synchronous service.",
        "Ask DNIT to enable it, or send in lots.",
    ),
    r(
        DE,
        1000,
        2999,
        "Validaciones del formato (§12.4): the rule's own message",
        Rejected,
        "SIFEN rejected the document under one of its rules on the DE's fields (§12.4; SIFEN's message \
         names the field).",
        REISSUE,
    ),
    r(
        &[RecepDe],
        200,
        200,
        "Mensaje de datos de entrada del WS siRecepDE superior a 1000 KB",
        Rejected,
        "The signed document is larger than SIFEN accepts (1000 KB).",
        "Issue it again with fewer or shorter items.",
    ),
    // §12.3.2 siRecepLoteDE.
    r(
        &[RecepLoteDe],
        270,
        270,
        "Mensaje de datos de entrada del WS siRecepLoteDE superior a 10.000 KB",
        Operational,
        "The lot was larger than SIFEN accepts; nothing was processed.",
        LOT_RETRY,
    ),
    r(
        &[RecepLoteDe],
        300,
        300,
        "Lote recibido con éxito",
        Processing,
        "SIFEN received the lot and queued it for processing.",
        "Nothing: kuatia asks for the lot's result, and never sends its CDCs while it is processing.",
    ),
    r(
        &[RecepLoteDe],
        301,
        301,
        "Lote no encolado para procesamiento",
        Operational,
        "SIFEN did not queue the lot. Usually: the same CDC was sent again while a result was still \
         pending, a lot mixed document types or issuers, or held more than 50 documents; SIFEN then \
         blocks the issuer's sending for 10 to 60 minutes.",
        "Wait for the block to pass; kuatia queries each CDC before sending again and never resends an \
         approved one.",
    ),
    // §12.3.3 siResultLoteDE (the lot's own code; each DE's entry reads as siRecepDE's above).
    r(
        &[ResultLoteDe],
        320,
        320,
        "Mensaje de datos de entrada del WS siResultLoteDE superior a 1000 KB",
        Operational,
        "SIFEN could not read the question.",
        "kuatia asks again later.",
    ),
    r(
        &[ResultLoteDe],
        340,
        340,
        "RUC del certificado de conexión no autorizado a consultar el lote",
        Operational,
        "Only the RUC that sent a lot may ask for its result: the connection's certificate changed.",
        "kuatia asks again later; point the channel back at the certificate that sent the lot.",
    ),
    r(
        &[ResultLoteDe],
        360,
        360,
        "Lote inexistente",
        Absent,
        "SIFEN holds no such lot (asked by CDC: no lot holds the CDC).",
        "Asked by number: each document of the lot is retried, asking SIFEN for its CDC first. Asked by \
         CDC after siConsDE's 0420: the document is sent again.",
    ),
    r(
        &[ResultLoteDe],
        361,
        361,
        "Lote en procesamiento",
        Processing,
        "SIFEN is still processing the lot (at busy times for hours).",
        "Nothing: kuatia asks again after the poll interval and never sends its CDCs meanwhile.",
    ),
    r(
        &[ResultLoteDe],
        362,
        362,
        "Procesamiento de lote concluido",
        Approved,
        "SIFEN finished the lot: each document's entry carries its own verdict (read as siRecepDE's).",
        "kuatia records each document's verdict; a document the lot does not list is asked for again \
         later.",
    ),
    r(
        &[ResultLoteDe],
        363,
        363,
        "Lotes con tipos distintos de DE",
        Absent,
        "SIFEN refused the lot whole (documents of different types); none was processed.",
        LOT_RETRY,
    ),
    r(
        &[ResultLoteDe],
        364,
        364,
        "Consulta extemporánea de Lote",
        Absent,
        "The lot is older than 48 hours and can no longer be asked for.",
        "Each document of the lot is asked for by CDC (siConsDE) and recorded from that answer.",
    ),
    // §12.3.4 siConsDE.
    r(
        &[ConsDe],
        380,
        380,
        "Mensaje de datos de entrada del WS siConsDE superior a 1000 KB",
        Operational,
        "SIFEN could not read the question.",
        "kuatia asks again later.",
    ),
    r(
        &[ConsDe],
        420,
        420,
        "Documento No Existe en SIFEN o ha sido Rechazado (CDC inexistente)",
        Absent,
        "SIFEN does not hold the document as approved.",
        "Nothing while kuatia is still sending it: it is sent again only if no lot holding it is \
         processing. After a rejection, correct and issue again.",
    ),
    r(
        &[ConsDe],
        421,
        421,
        "RUC Certificado sin permiso (p. 52) / CDC Encontrado (p. 158)",
        Operational,
        "The Manual gives 0421 two meanings (no permission to ask; found), so it settles nothing.",
        "kuatia asks again later and concludes nothing from it.",
    ),
    r(
        &[ConsDe],
        422,
        422,
        "CDC encontrado",
        Approved,
        "SIFEN has the document as approved (found when kuatia asked for its CDC).",
        "Nothing: an earlier attempt was approved and its answer was lost on the way; kuatia records the \
         approval with SIFEN's authorisation.",
    ),
    // §12.3.5 siConsRUC.
    r(
        &[ConsRuc],
        460,
        460,
        "Mensaje de datos de entrada del WS siConsRUC superior a 1000 KB",
        Operational,
        "SIFEN could not read the question.",
        "Ask again later.",
    ),
    r(
        &[ConsRuc],
        500,
        500,
        "RUC inexistente",
        Rejected,
        "SIFEN has no taxpayer with that RUC.",
        "Check the RUC.",
    ),
    r(
        &[ConsRuc],
        501,
        501,
        "RUC no tiene permiso para utilizar el WS",
        Operational,
        "The connection's certificate may not ask for taxpayers.",
        "Ask again later, or with another certificate.",
    ),
    r(
        &[ConsRuc],
        502,
        502,
        "Éxito en la consulta (RUC encontrado)",
        Approved,
        "SIFEN found the taxpayer.",
        "Nothing.",
    ),
    // §12.3.6 siRecepEvento and the event rules (§11.6, §12.1.3: 4000–4399).
    r(
        &[RecepEvento],
        560,
        560,
        "Mensaje de datos de entrada del WS siRecepEvento superior a 1000 KB",
        Rejected,
        "The event is larger than SIFEN accepts.",
        "Shorten the reason and ask again.",
    ),
    r(
        &[RecepEvento],
        600,
        600,
        "Evento registrado correctamente",
        Approved,
        "SIFEN registered the event (the cancelación or inutilización holds).",
        "Nothing.",
    ),
    r(
        &[RecepEvento],
        4003,
        4003,
        "CDC ya se encuentra con el mismo evento solicitado",
        Approved,
        "SIFEN already holds this cancelación: an earlier request was registered and its answer lost.",
        "Nothing: kuatia records the document as cancelled.",
    ),
    r(
        &[RecepEvento],
        4066,
        4066,
        "Existe número inutilizado en el rango solicitado",
        Approved,
        "SIFEN already holds this number as inutilised: an earlier request was registered and its \
         answer lost.",
        "Nothing: kuatia records the number as inutilised.",
    ),
    r(
        &[RecepEvento],
        4000,
        4399,
        "Reglas de validación de los eventos (§11.6): the rule's own message",
        Rejected,
        "SIFEN refused the event under one of its rules (SIFEN's message says which).",
        "Correct what SIFEN names and ask again (POST /cancel or /inutilize).",
    ),
    // §12.2 generic answers of every service.
    r(
        ALL,
        1,
        7,
        "Certificado de transmisión (TLS) inválido, vencido, de otra cadena, revocado, sin RUC",
        Operational,
        "SIFEN refused the connection's certificate; nothing was processed.",
        "Renew or replace the channel's certificate; kuatia keeps asking on its schedule meanwhile.",
    ),
    r(
        SENDS,
        100,
        107,
        "Fallo de schema XML del área de datos (raíz, versión, namespace, caracteres de edición, \
         prefijo, codificación)",
        Rejected,
        "SIFEN could not read the message's structure.",
        REISSUE,
    ),
    r(
        ASKS,
        100,
        107,
        "Fallo de schema XML del área de datos",
        Operational,
        "SIFEN could not read the message's structure; nothing was judged.",
        RETRY,
    ),
    r(
        SENDS,
        120,
        126,
        "Certificado de firma inválido, vencido, sin RUC, cadena inválida, LCR, revocado, raíz",
        Rejected,
        "SIFEN refused the certificate that signed the document.",
        "Check the company's certificate (GET /v1/certificates, validate) and issue again.",
    ),
    r(
        ASKS,
        120,
        126,
        "Certificado de firma inválido",
        Operational,
        "SIFEN refused a certificate; nothing was judged.",
        RETRY,
    ),
    r(
        SENDS,
        140,
        140,
        "Firma difiere del estándar",
        Rejected,
        "The signature does not follow SIFEN's standard (reference, transforms).",
        REISSUE,
    ),
    r(
        SENDS,
        141,
        141,
        "Valor de la firma (SignatureValue) diferente del calculado por el PKI",
        Rejected,
        "The signature does not verify: the document changed after it was signed, or the certificate \
         does not match the key.",
        "Check the company's certificate (GET /v1/certificates, validate) and issue again.",
    ),
    r(
        SENDS,
        142,
        142,
        "RUC del certificado utilizado para firmar no pertenece al Contribuyente emisor",
        Rejected,
        "The certificate that signed belongs to another RUC than the issuer's.",
        "Upload the issuing company's own certificate and point the sifen channel at it.",
    ),
    r(
        ASKS,
        140,
        142,
        "Firma digital inválida",
        Operational,
        "SIFEN refused a signature; nothing was judged.",
        RETRY,
    ),
    r(
        SENDS,
        160,
        160,
        "XML malformado",
        Rejected,
        "SIFEN could not read the XML: it is not well-formed or carries characters SIFEN refuses (line \
         breaks, tabs or control characters in a name, an address or a description).",
        "Correct the text fields of the document and issue it again as a new document.",
    ),
    r(
        ASKS,
        160,
        160,
        "XML malformado",
        Operational,
        "SIFEN could not read the question or the lot; nothing was judged.",
        RETRY,
    ),
    r(
        ALL,
        161,
        161,
        "Servidor de procesamiento momentáneamente sin respuesta",
        Operational,
        "SIFEN's processing servers were unavailable; nothing was processed.",
        RETRY,
    ),
    r(
        ALL,
        162,
        162,
        "Servidor de procesamiento paralizado, sin tiempo de regreso",
        Operational,
        "SIFEN's processing servers were stopped; nothing was processed.",
        RETRY,
    ),
    r(
        SENDS,
        163,
        163,
        "Versión del formato del WS no soportada",
        Rejected,
        "SIFEN does not support the message's format version.",
        REISSUE,
    ),
    r(
        ASKS,
        163,
        163,
        "Versión del formato del WS no soportada",
        Operational,
        "SIFEN does not support the message's format version; nothing was judged.",
        RETRY,
    ),
    r(
        SENDS,
        180,
        180,
        "Elemento deHeaderMsg inexistente en el SOAP Header",
        Rejected,
        "SIFEN refused the message's header.",
        REISSUE,
    ),
    r(
        ASKS,
        180,
        180,
        "Elemento deHeaderMsg inexistente en el SOAP Header",
        Operational,
        "SIFEN refused the message's header; nothing was judged.",
        RETRY,
    ),
    r(
        ALL,
        183,
        183,
        "RUC del certificado utilizado en la conexión no pertenece a un contribuyente activo",
        Operational,
        "The connection's certificate belongs to a RUC SIFEN does not hold as active; nothing was \
         processed.",
        "Check the certificate and the taxpayer's state with DNIT; kuatia keeps asking on its schedule.",
    ),
];

/// The transport outcomes, with their meaning and what kuatia does.
pub static TRANSPORT: &[(Transport, Meaning, &str)] = &[
    (
        Transport::Refused,
        Operational,
        "Nothing was sent: kuatia tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once). Nothing to do unless it lasts: then check the \
         channel's endpoint and SIFEN's service status.",
    ),
    (
        Transport::TimeoutBeforeSending,
        Operational,
        "Nothing was sent: kuatia tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once). Nothing to do unless it lasts: then check the \
         channel's endpoint and SIFEN's service status.",
    ),
    (
        Transport::Tls,
        Operational,
        "Nothing was sent: kuatia tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once). Check the channel's certificate (and its \
         chain) if it lasts.",
    ),
    (
        Transport::TimeoutAfterSending,
        Operational,
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, \
         then tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it lasts.",
    ),
    (
        Transport::NotSoap,
        Operational,
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, \
         then tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it lasts.",
    ),
    (
        Transport::Http5xx,
        Operational,
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, \
         then tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it lasts.",
    ),
    (
        Transport::SoapFault,
        Operational,
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, \
         then tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it lasts.",
    ),
    (
        Transport::Unexpected,
        Operational,
        "SIFEN may have processed it: before anything is sent again kuatia asks SIFEN for the CDC, \
         then tries again at 30 s, 2 min, 10 min, 30 min, 1 h, then every 2 h, until 60 h after \
         signing (`POST /v1/documents/{id}/retry` tries at once); the same CDC is never sent twice. Nothing to do unless it lasts.",
    ),
];

/// What kuatia does with a code the table does not list.
pub const UNLISTED: &str = "A code the table does not list is an operational failure: kuatia asks \
                            again later and concludes nothing from it.";

fn number(code: &str) -> Option<u16> {
    let code = code.trim();
    (code.len() == 4 && code.bytes().all(|b| b.is_ascii_digit()))
        .then(|| code.parse().ok())
        .flatten()
}

/// The row that reads `code` as an answer of `operation`, if the table lists it.
pub fn row(operation: Operation, code: &str) -> Option<&'static Row> {
    let code = number(code)?;
    ROWS.iter().find(|r| r.holds(operation, code))
}

/// A row for `code` whatever the operation (the explanation of a code alone: codes are
/// allocated per service, so one code has one sense but for the generic ones, whose first row
/// is the sending one).
pub fn any_row(code: &str) -> Option<&'static Row> {
    let code = number(code)?;
    Operation::ALL
        .into_iter()
        .find_map(|op| ROWS.iter().find(|r| r.holds(op, code)))
}

/// What `code` means as an answer of `operation`: the table's row, or
/// [`Meaning::Operational`] for a code it does not list.
pub fn meaning(operation: Operation, code: &str) -> Meaning {
    row(operation, code).map_or(Operational, |r| r.meaning)
}

/// `dEstRes`, as far as the table needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// "Aprobado" or "Aprobado con observación".
    Approved,
    /// "Rechazado".
    Rejected,
    /// Missing or anything else.
    Unknown,
}

/// The verdict on one DE or event from `dEstRes` and its first code (siRecepDE's answer, and a
/// DE's entry in a finished lot, read as [`Operation::RecepDe`]; an event's entry in
/// siRecepEvento's answer):
/// - "Aprobado…" is a definitive approval whatever the code (an observation such as 1005);
/// - otherwise the code's row decides, and a definitive rejection needs "Rechazado" as well:
///   without it, a rejecting code is an operational failure;
/// - an approval read from a code alone (1001/1002 duplicate, 4003/4066 already registered)
///   stands, since it says SIFEN holds an earlier approval;
/// - "still processing" or "known absent" cannot answer a DE sent: operational.
pub fn verdict(operation: Operation, status: Status, code: &str) -> Meaning {
    if status == Status::Approved {
        return Approved;
    }
    match (meaning(operation, code), status) {
        (Approved, _) => Approved,
        (Rejected, Status::Rejected) => Rejected,
        _ => Operational,
    }
}

/// Whether an approval was read from the code alone, not from `dEstRes` (a duplicate: SIFEN
/// holds an earlier approval whose authorisation this answer does not carry).
pub fn approved_before(operation: Operation, status: Status, code: &str) -> bool {
    status != Status::Approved && verdict(operation, status, code) == Approved
}

/// The table as Markdown, as `docs/sifen-channel.md` publishes it (a test keeps the two equal).
pub fn markdown() -> String {
    let mut out = String::from(
        "| operation | code | SIFEN's words | meaning | what kuatia does |\n|---|---|---|---|---|\n",
    );
    for op in Operation::ALL {
        for r in ROWS.iter().filter(|r| r.operations.contains(&op)) {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} {} |\n",
                op.name(),
                r.codes(),
                r.sifen,
                r.meaning.label(),
                r.plain,
                r.action
            ));
        }
        out.push_str(&format!(
            "| {} | any other | — | {} | {UNLISTED} |\n",
            op.name(),
            Operational.label()
        ));
    }
    for (t, m, action) in TRANSPORT {
        out.push_str(&format!(
            "| every operation | — | {} | {} | {action} |\n",
            t.label(),
            m.label()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_siconsde_0420_and_the_lot_answers_without_a_processing_lot_are_known_absent() {
        let absent: Vec<(Operation, String)> = ROWS
            .iter()
            .filter(|r| r.meaning == Absent)
            .flat_map(|r| r.operations.iter().map(move |op| (*op, r.codes())))
            .collect();
        assert_eq!(
            absent,
            vec![
                (ResultLoteDe, "0360".to_owned()),
                (ResultLoteDe, "0363".to_owned()),
                (ResultLoteDe, "0364".to_owned()),
                (ConsDe, "0420".to_owned()),
            ]
        );
    }

    #[test]
    fn unavailable_and_unlisted_answers_conclude_nothing_on_any_operation() {
        for op in Operation::ALL {
            for code in ["0161", "0162", "0001", "0183", "9999", "0399", "", "abc", "01610"] {
                assert_eq!(meaning(op, code), Operational, "{op} {code}");
                assert_eq!(verdict(op, Status::Rejected, code), Operational, "{op} {code}");
            }
        }
        for t in Transport::ALL {
            assert_eq!(t.meaning(), Operational, "{t:?}");
        }
    }

    #[test]
    fn a_rejection_needs_rechazado_and_a_rejecting_code() {
        assert_eq!(verdict(RecepDe, Status::Rejected, "1313"), Rejected);
        assert_eq!(verdict(RecepDe, Status::Unknown, "1313"), Operational);
        assert_eq!(verdict(RecepDe, Status::Rejected, "0161"), Operational);
        assert_eq!(verdict(RecepDe, Status::Approved, "1005"), Approved);
        assert_eq!(meaning(ResultLoteDe, "0160"), Operational);
        assert_eq!(meaning(ResultLoteDe, "0260"), Operational);
        assert_eq!(verdict(RecepDe, Status::Rejected, "0160"), Rejected);
        // A duplicate is an approval held from before, not a rejection.
        assert_eq!(verdict(RecepDe, Status::Rejected, "1001"), Approved);
        assert!(approved_before(RecepDe, Status::Rejected, "1002"));
        assert!(!approved_before(RecepDe, Status::Approved, "0260"));
        assert_eq!(verdict(RecepEvento, Status::Rejected, "4003"), Approved);
        assert_eq!(verdict(RecepEvento, Status::Rejected, "4002"), Rejected);
        // A question is never answered "rejected" or "processing" for a DE sent.
        assert_eq!(verdict(RecepDe, Status::Rejected, "0300"), Operational);
    }

    #[test]
    fn siconsde_reads_as_the_guide_says() {
        assert_eq!(meaning(ConsDe, "0422"), Approved);
        assert_eq!(meaning(ConsDe, "0420"), Absent);
        assert_eq!(meaning(ConsDe, "0421"), Operational);
        assert_eq!(meaning(ConsDe, "0160"), Operational);
        assert_eq!(meaning(ResultLoteDe, "0361"), Processing);
        assert_eq!(meaning(RecepLoteDe, "0300"), Processing);
        assert_eq!(meaning(RecepLoteDe, "0301"), Operational);
    }

    #[test]
    fn every_operation_has_its_rows_and_the_markdown_lists_them() {
        let table = markdown();
        for op in Operation::ALL {
            assert!(ROWS.iter().any(|r| r.operations.contains(&op)), "{op}");
            assert!(table.contains(&format!("| {} | any other |", op.name())), "{op}");
            assert_eq!(Operation::from_name(&op.name().to_lowercase()), Some(op));
        }
        for r in ROWS {
            assert!(r.from <= r.to, "{r:?}");
            assert!(!r.plain.is_empty() && !r.action.is_empty(), "{r:?}");
        }
    }
}
