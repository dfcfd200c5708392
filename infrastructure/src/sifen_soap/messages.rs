//! The SOAP 1.2 messages of SIFEN's web services, as pure functions: request builders and
//! answer parsers (the `WS_*.xsd` files).
//!
//! Requests follow the manual's example (`soap:Envelope`, an empty `soap:Header`, the request
//! root with SIFEN's default namespace). Signed content (`rDE`, `rGesEve`) is checked to be
//! well-formed and then inserted byte for byte: re-serialising it would change what the
//! signature covers.
//!
//! Answers are read by local name, since prefixes vary (`ns2:`, `env:`, none). Every parser
//! returns either the typed result, which keeps SIFEN's code and message as they came, or a
//! [`SoapError`]: `NotSoap` for anything that is not a SOAP envelope, `Fault` for a SOAP Fault,
//! `UnexpectedResponse` for an envelope with the wrong content. A property test feeds them
//! arbitrary bytes and mutated answers.

use super::xml::{self, Element};
use super::{SIFEN_NS, SOAP12_NS, Service, SoapError, XSI_NS};
use base64::Engine;
pub use kuatia_domain::sifen::exchange::{
    ContainedDe, DeQuery, DeReception, DocumentStatus, EventOutcome, EventReception, LotDocument, LotQuery,
    LotReception, LotResult, LotState, MAX_EVENTS, MAX_LOT_DOCUMENTS, ResultCode, RucQuery, Taxpayer,
};
use std::io::Write;

/// Largest `dId` (15 digits).
pub const MAX_D_ID: u64 = 999_999_999_999_999;

// ---------------------------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------------------------

/// Wraps a request element in a SOAP 1.2 envelope.
pub fn envelope(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><soap:Envelope xmlns:soap=\"{SOAP12_NS}\"><soap:Header/><soap:Body>{body}</soap:Body></soap:Envelope>"
    )
}

fn check_d_id(d_id: u64) -> Result<(), SoapError> {
    if (1..=MAX_D_ID).contains(&d_id) {
        Ok(())
    } else {
        Err(SoapError::InvalidRequest(format!(
            "dId must have 1 to 15 digits and be positive, not {d_id}"
        )))
    }
}

/// Checks that `signed` is one well-formed element named `root` (after an optional XML
/// declaration) and returns the element's text exactly as given.
fn verbatim<'a>(signed: &'a str, root: &[&str], what: &str) -> Result<&'a str, SoapError> {
    let element = xml::strip_prolog(signed);
    let parsed = xml::parse(element)
        .map_err(|e| SoapError::InvalidRequest(format!("the {what} is not well-formed: {e}")))?;
    if !root.contains(&parsed.local()) {
        return Err(SoapError::InvalidRequest(format!(
            "the {what} must be a {} element, not {}",
            root.join(" or "),
            parsed.qname
        )));
    }
    Ok(element)
}

/// A CDC as SIFEN's `tCDC` writes it: 44 characters, digits but the RUC's last one (A–D).
pub fn is_cdc_shaped(cdc: &str) -> bool {
    let b = cdc.as_bytes();
    b.len() == 44
        && b.iter()
            .enumerate()
            .all(|(i, c)| c.is_ascii_digit() || (i == 9 && (b'A'..=b'D').contains(c)))
}

/// siRecepDE: `rEnviDe{dId, xDE{rDE}}` with the signed `rDE` inserted verbatim (its XML
/// declaration, if any, dropped).
pub fn recep_de(d_id: u64, signed_rde: &str) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    let rde = verbatim(signed_rde, &["rDE"], "DE")?;
    Ok(envelope(&format!(
        "<rEnviDe xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId><xDE>{rde}</xDE></rEnviDe>"
    )))
}

/// The name of the single entry of a lot's zip file. SIFEN does not specify it;
/// RSHK writes `DE_ddMMyyyy.xml`.
pub fn lot_entry_name(date: chrono::NaiveDate) -> String {
    format!("DE_{}.xml", date.format("%d%m%Y"))
}

/// The lot file: one XML declaration, `rLoteDE` holding the signed `rDE`s verbatim (each keeps
/// its own namespace declaration, MT §7.2.2.2).
pub fn lot_xml(signed_rdes: &[&str]) -> Result<String, SoapError> {
    if signed_rdes.is_empty() || signed_rdes.len() > MAX_LOT_DOCUMENTS {
        return Err(SoapError::InvalidRequest(format!(
            "a lot holds 1 to {MAX_LOT_DOCUMENTS} DEs, not {}",
            signed_rdes.len()
        )));
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?><rLoteDE>");
    for rde in signed_rdes {
        out.push_str(verbatim(rde, &["rDE"], "DE")?);
    }
    out.push_str("</rLoteDE>");
    Ok(out)
}

/// Deflate level of a lot's zip: the fastest. A lot's XML (≤ 900 KB) shrinks about tenfold at any
/// level, far under SIFEN's 1 000 KB per message, and the default level (6) cost the end-to-end
/// benchmark 2 % of its CPU.
const LOT_DEFLATE_LEVEL: i64 = 1;

/// Zips the lot file (deflate, one entry).
pub fn lot_zip(signed_rdes: &[&str], entry_name: &str) -> Result<Vec<u8>, SoapError> {
    let lot = lot_xml(signed_rdes)?;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .compression_level(Some(LOT_DEFLATE_LEVEL));
    let zip_error = |e: &dyn std::fmt::Display| SoapError::InvalidRequest(format!("zip: {e}"));
    zip.start_file(entry_name, options).map_err(|e| zip_error(&e))?;
    zip.write_all(lot.as_bytes()).map_err(|e| zip_error(&e))?;
    let cursor = zip.finish().map_err(|e| zip_error(&e))?;
    Ok(cursor.into_inner())
}

/// siRecepLoteDE: `rEnvioLote{dId, xDE = base64(zip)}`.
pub fn recep_lote(d_id: u64, signed_rdes: &[&str], entry_name: &str) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    let zip = lot_zip(signed_rdes, entry_name)?;
    let b64 = base64::engine::general_purpose::STANDARD.encode(zip);
    Ok(envelope(&format!(
        "<rEnvioLote xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId><xDE>{b64}</xDE></rEnvioLote>"
    )))
}

/// siResultLoteDE: `rEnviConsLoteDe{dId, dProtConsLote | dCDC}`.
pub fn result_lote(d_id: u64, query: &LotQuery) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    let inner = match query {
        LotQuery::Number(n) if !n.is_empty() && n.len() <= 28 && n.bytes().all(|b| b.is_ascii_digit()) => {
            format!("<dProtConsLote>{n}</dProtConsLote>")
        }
        LotQuery::Cdc(cdc) if is_cdc_shaped(cdc) => format!("<dCDC>{cdc}</dCDC>"),
        other => {
            return Err(SoapError::InvalidRequest(format!(
                "not a lot number or CDC: {other:?}"
            )));
        }
    };
    Ok(envelope(&format!(
        "<rEnviConsLoteDe xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId>{inner}</rEnviConsLoteDe>"
    )))
}

/// siConsDE: `rEnviConsDeRequest{dId, dCDC}`.
pub fn cons_de(d_id: u64, cdc: &str) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    if !is_cdc_shaped(cdc) {
        return Err(SoapError::InvalidRequest(format!("not a CDC: {cdc:?}")));
    }
    Ok(envelope(&format!(
        "<rEnviConsDeRequest xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId><dCDC>{cdc}</dCDC></rEnviConsDeRequest>"
    )))
}

/// siConsRUC: `rEnviConsRUC{dId, dRUCCons}`; the RUC without check digit (`tRuc`: 3–8
/// characters, `[1-9][0-9]*[0-9A-D]?`). A `-DV` suffix is dropped.
pub fn cons_ruc(d_id: u64, ruc: &str) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    let number = ruc.split_once('-').map_or(ruc, |(n, _)| n).trim();
    let b = number.as_bytes();
    let shaped = (3..=8).contains(&b.len())
        && b[0] != b'0'
        && b[..b.len() - 1].iter().all(u8::is_ascii_digit)
        && (b[b.len() - 1].is_ascii_digit() || (b'A'..=b'D').contains(&b[b.len() - 1]));
    if !shaped {
        return Err(SoapError::InvalidRequest(format!("not a RUC: {ruc:?}")));
    }
    Ok(envelope(&format!(
        "<rEnviConsRUC xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId><dRUCCons>{number}</dRUCCons></rEnviConsRUC>"
    )))
}

/// siRecepEvento: `rEnviEventoDe{dId, dEvReg{gGroupGesEve{rGesEve…}}}`. Give either one
/// signed `gGroupGesEve` (inserted verbatim) or 1–15 signed `rGesEve` elements, which are
/// wrapped in a `gGroupGesEve` carrying the same namespace declarations a signer of a
/// stand-alone event sees, so that either canonicalisation of `rEve` is unchanged.
pub fn recep_evento(d_id: u64, signed_events: &[&str]) -> Result<String, SoapError> {
    check_d_id(d_id)?;
    if signed_events.is_empty() || signed_events.len() > MAX_EVENTS {
        return Err(SoapError::InvalidRequest(format!(
            "a message holds 1 to {MAX_EVENTS} events, not {}",
            signed_events.len()
        )));
    }
    let group = if let [one] = signed_events
        && xml::parse(xml::strip_prolog(one)).is_ok_and(|e| e.local() == "gGroupGesEve")
    {
        verbatim(one, &["gGroupGesEve"], "event group")?.to_owned()
    } else {
        let mut group = format!(
            "<gGroupGesEve xmlns=\"{SIFEN_NS}\" xmlns:xsi=\"{XSI_NS}\" xsi:schemaLocation=\"{SIFEN_NS} siRecepEvento_v150.xsd\">"
        );
        for event in signed_events {
            group.push_str(verbatim(event, &["rGesEve"], "event")?);
        }
        group.push_str("</gGroupGesEve>");
        group
    };
    Ok(envelope(&format!(
        "<rEnviEventoDe xmlns=\"{SIFEN_NS}\"><dId>{d_id}</dId><dEvReg>{group}</dEvReg></rEnviEventoDe>"
    )))
}

const SNIPPET_CHARS: usize = 300;

/// The beginning of a body, printable, for error messages and logs.
pub fn snippet(body: &[u8]) -> String {
    String::from_utf8_lossy(&body[..body.len().min(SNIPPET_CHARS * 4)])
        .chars()
        .take(SNIPPET_CHARS)
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect()
}

/// What a body that is not the answer expected is recorded as: its size and SHA-256, never its
/// text. The endpoint is a tenant's, and whatever it answers would otherwise reach the
/// document's events (written forever) and its readers.
pub fn body_digest(body: &[u8]) -> String {
    use sha2::Digest;
    format!(
        "{} bytes, SHA-256 {}",
        body.len(),
        hex::encode(sha2::Sha256::digest(body))
    )
}

fn not_soap(status: u16, body: &[u8]) -> SoapError {
    SoapError::NotSoap {
        status,
        snippet: body_digest(body),
    }
}

fn unexpected(status: u16, body: &[u8], reason: impl Into<String>) -> SoapError {
    SoapError::UnexpectedResponse {
        status,
        reason: reason.into(),
        snippet: body_digest(body),
    }
}

fn fault(status: u16, text: &str, f: &Element) -> SoapError {
    // SOAP 1.2: Code/Value, Code/Subcode/Value, Reason/Text, Detail. SOAP 1.1: faultcode,
    // faultstring, detail.
    let code = f
        .child("Code")
        .and_then(|c| c.child_text("Value"))
        .or_else(|| f.child_text("faultcode"))
        .unwrap_or_default()
        .to_owned();
    let subcode = f
        .child("Code")
        .and_then(|c| c.child("Subcode"))
        .and_then(|s| s.child_text("Value"))
        .map(str::to_owned);
    let reason = f
        .child("Reason")
        .and_then(|r| r.child_text("Text"))
        .or_else(|| f.child_text("faultstring"))
        .unwrap_or_default()
        .to_owned();
    let detail = f
        .child("Detail")
        .or_else(|| f.child("detail"))
        .and_then(|d| text.get(d.inner.clone()))
        .map(|d| d.trim().to_owned())
        .filter(|d| !d.is_empty());
    SoapError::Fault {
        status,
        code,
        subcode,
        reason,
        detail,
    }
}

/// Opens an answer: a SOAP envelope whose body holds `expected` (or a Fault), and hands the
/// answer element and the text to `read`.
fn answer<T>(
    status: u16,
    body: &[u8],
    expected: &str,
    read: impl FnOnce(&Element, &str) -> Result<T, String>,
) -> Result<T, SoapError> {
    let text = std::str::from_utf8(body).map_err(|_| not_soap(status, body))?;
    let root = xml::parse(text).map_err(|_| not_soap(status, body))?;
    if root.local() != "Envelope" {
        return Err(not_soap(status, body));
    }
    let Some(soap_body) = root.child("Body") else {
        return Err(unexpected(status, body, "an envelope without a Body"));
    };
    if let Some(f) = soap_body.child("Fault") {
        return Err(fault(status, text, f));
    }
    let Some(payload) = soap_body.children.first() else {
        return Err(unexpected(status, body, "an empty Body"));
    };
    if payload.local() != expected {
        return Err(unexpected(
            status,
            body,
            format!("expected {expected}, found {}", payload.qname),
        ));
    }
    read(payload, text).map_err(|reason| unexpected(status, body, reason))
}

fn required(e: &Element, local: &str) -> Result<String, String> {
    e.child_text(local)
        .map(str::to_owned)
        .ok_or_else(|| format!("{} lacks {local}", e.local()))
}

fn optional(e: &Element, local: &str) -> Option<String> {
    e.child_text(local).filter(|t| !t.is_empty()).map(str::to_owned)
}

fn results(e: &Element) -> Vec<ResultCode> {
    e.children_named("gResProc")
        .map(|r| ResultCode {
            code: r.child_text("dCodRes").unwrap_or_default().to_owned(),
            message: r.child_text("dMsgRes").unwrap_or_default().to_owned(),
        })
        .collect()
}

/// Parses siRecepDE's answer.
pub fn parse_recep_de(status: u16, body: &[u8]) -> Result<DeReception, SoapError> {
    answer(status, body, Service::RecepDe.response_root(), |root, _| {
        let prot = root.child("rProtDe").ok_or("rRetEnviDe lacks rProtDe")?;
        let results = results(prot);
        let status = match optional(prot, "dEstRes") {
            Some(s) => DocumentStatus::parse(&s),
            None if results.is_empty() => return Err("rProtDe has neither dEstRes nor gResProc".into()),
            None => DocumentStatus::Other(String::new()),
        };
        Ok(DeReception {
            cdc: optional(prot, "Id").or_else(|| optional(prot, "dId")),
            processed_at: optional(prot, "dFecProc"),
            digest_value: optional(prot, "dDigVal"),
            status,
            authorization: optional(prot, "dProtAut"),
            results,
        })
    })
}

/// Parses siRecepLoteDE's answer.
pub fn parse_recep_lote(status: u16, body: &[u8]) -> Result<LotReception, SoapError> {
    answer(status, body, Service::RecepLoteDe.response_root(), |root, _| {
        Ok(LotReception {
            processed_at: optional(root, "dFecProc"),
            code: required(root, "dCodRes")?,
            message: optional(root, "dMsgRes").unwrap_or_default(),
            lot_number: optional(root, "dProtConsLote"),
            processing_seconds: optional(root, "dTpoProces").and_then(|s| s.parse().ok()),
        })
    })
}

/// Parses siResultLoteDE's answer.
pub fn parse_result_lote(status: u16, body: &[u8]) -> Result<LotResult, SoapError> {
    answer(status, body, Service::ResultLoteDe.response_root(), |root, _| {
        let documents = root
            .children_named("gResProcLote")
            .map(|g| {
                Ok(LotDocument {
                    cdc: required(g, "id")?,
                    status: DocumentStatus::parse(&optional(g, "dEstRes").unwrap_or_default()),
                    authorization: optional(g, "dProtAut"),
                    results: results(g),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(LotResult {
            processed_at: optional(root, "dFecProc"),
            code: required(root, "dCodResLot")?,
            message: optional(root, "dMsgResLot").unwrap_or_default(),
            documents,
        })
    })
}

/// Reads a DE container: SIFEN sends `xContenDE` as escaped text (`xs:string`); nested elements
/// are accepted too.
fn contained(e: &Element, text: &str) -> Option<ContainedDe> {
    let xml = if e.children.is_empty() {
        e.text.trim().to_owned()
    } else {
        text.get(e.inner.clone())?.trim().to_owned()
    };
    if xml.is_empty() {
        return None;
    }
    let parsed = xml::parse(xml::strip_prolog(&xml)).ok();
    let (cdc, authorization, cancelled) = match &parsed {
        Some(tree) => (
            tree.find("DE").and_then(|de| de.attr("Id")).map(str::to_owned),
            tree.find("dProtAut").map(|p| p.text.trim().to_owned()),
            tree.find("rGeVeCan").is_some(),
        ),
        None => (None, None, false),
    };
    Some(ContainedDe {
        xml,
        cdc,
        authorization,
        cancelled,
    })
}

/// Parses siConsDE's answer.
pub fn parse_cons_de(status: u16, body: &[u8]) -> Result<DeQuery, SoapError> {
    answer(status, body, Service::ConsDe.response_root(), |root, text| {
        Ok(DeQuery {
            processed_at: optional(root, "dFecProc"),
            code: required(root, "dCodRes")?,
            message: optional(root, "dMsgRes").unwrap_or_default(),
            container: root.child("xContenDE").and_then(|c| contained(c, text)),
        })
    })
}

/// Parses siConsRUC's answer.
pub fn parse_cons_ruc(status: u16, body: &[u8]) -> Result<RucQuery, SoapError> {
    answer(status, body, Service::ConsRuc.response_root(), |root, _| {
        let taxpayer = match root.child("xContRUC") {
            Some(c) => Some(Taxpayer {
                ruc: required(c, "dRUCCons")?,
                name: optional(c, "dRazCons").unwrap_or_default(),
                status_code: optional(c, "dCodEstCons").unwrap_or_default(),
                status: optional(c, "dDesEstCons").unwrap_or_default(),
                electronic_invoicing: optional(c, "dRUCFactElec")
                    .is_some_and(|s| s.eq_ignore_ascii_case("S")),
            }),
            None => None,
        };
        Ok(RucQuery {
            code: required(root, "dCodRes")?,
            message: optional(root, "dMsgRes").unwrap_or_default(),
            taxpayer,
        })
    })
}

/// Parses siRecepEvento's answer.
pub fn parse_recep_evento(status: u16, body: &[u8]) -> Result<EventReception, SoapError> {
    answer(status, body, Service::RecepEvento.response_root(), |root, _| {
        let events = root
            .children_named("gResProcEVe")
            .map(|g| {
                Ok(EventOutcome {
                    id: required(g, "id")?,
                    status: DocumentStatus::parse(&optional(g, "dEstRes").unwrap_or_default()),
                    authorization: optional(g, "dProtAut"),
                    results: results(g),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        if events.is_empty() {
            return Err("rRetEnviEventoDe has no gResProcEVe".into());
        }
        Ok(EventReception {
            processed_at: optional(root, "dFecProc"),
            events,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const CDC: &str = "01800695631001001000000122025011511234567899";

    fn rde() -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<rDE xmlns=\"{SIFEN_NS}\"><dVerFor>150</dVerFor><DE Id=\"{CDC}\"><dDVId>9</dDVId></DE></rDE>\n"
        )
    }

    fn wrap(body: &str) -> Vec<u8> {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><env:Envelope xmlns:env=\"{SOAP12_NS}\"><env:Header/><env:Body>{body}</env:Body></env:Envelope>"
        )
        .into_bytes()
    }

    fn approved() -> Vec<u8> {
        wrap(&format!(
            "<ns2:rRetEnviDe xmlns:ns2=\"{SIFEN_NS}\"><ns2:rProtDe><ns2:Id>{CDC}</ns2:Id><ns2:dFecProc>2026-01-15T10:00:00-03:00</ns2:dFecProc><ns2:dDigVal>uoG1E/r8Yg=</ns2:dDigVal><ns2:dEstRes>Aprobado</ns2:dEstRes><ns2:dProtAut>1234567890</ns2:dProtAut><ns2:gResProc><ns2:dCodRes>0260</ns2:dCodRes><ns2:dMsgRes>Autorización del DE satisfactoria</ns2:dMsgRes></ns2:gResProc></ns2:rProtDe></ns2:rRetEnviDe>"
        ))
    }

    fn lot_received() -> Vec<u8> {
        wrap(&format!(
            "<ns2:rResEnviLoteDe xmlns:ns2=\"{SIFEN_NS}\"><ns2:dFecProc>2026-01-15T10:00:00-03:00</ns2:dFecProc><ns2:dCodRes>0300</ns2:dCodRes><ns2:dMsgRes>Lote recibido con éxito</ns2:dMsgRes><ns2:dProtConsLote>123456789012345</ns2:dProtConsLote><ns2:dTpoProces>0</ns2:dTpoProces></ns2:rResEnviLoteDe>"
        ))
    }

    fn lot_done() -> Vec<u8> {
        wrap(&format!(
            "<ns2:rResEnviConsLoteDe xmlns:ns2=\"{SIFEN_NS}\"><ns2:dFecProc>2026-01-15T10:00:00-03:00</ns2:dFecProc><ns2:dCodResLot>0362</ns2:dCodResLot><ns2:dMsgResLot>Procesamiento de lote {{123}} concluido</ns2:dMsgResLot><ns2:gResProcLote><ns2:id>{CDC}</ns2:id><ns2:dEstRes>Aprobado</ns2:dEstRes><ns2:dProtAut>1234567890</ns2:dProtAut><ns2:gResProc><ns2:dCodRes>0260</ns2:dCodRes><ns2:dMsgRes>Autorización del DE satisfactoria</ns2:dMsgRes></ns2:gResProc></ns2:gResProcLote><ns2:gResProcLote><ns2:id>01800695631001001000000222025011511234567893</ns2:id><ns2:dEstRes>Rechazado</ns2:dEstRes><ns2:gResProc><ns2:dCodRes>0160</ns2:dCodRes><ns2:dMsgRes>XML malformado: [El valor del elemento: dDirRec es invalido]</ns2:dMsgRes></ns2:gResProc></ns2:gResProcLote></ns2:rResEnviConsLoteDe>"
        ))
    }

    fn found() -> Vec<u8> {
        let container = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><rContDe xmlns=\"{SIFEN_NS}\">{}<dProtAut>1234567890</dProtAut></rContDe>",
            xml::strip_prolog(&rde())
        );
        wrap(&format!(
            "<ns2:rEnviConsDeResponse xmlns:ns2=\"{SIFEN_NS}\"><ns2:dFecProc>2026-01-15T10:00:00-03:00</ns2:dFecProc><ns2:dCodRes>0422</ns2:dCodRes><ns2:dMsgRes>CDC encontrado</ns2:dMsgRes><ns2:xContenDE>{}</ns2:xContenDE></ns2:rEnviConsDeResponse>",
            xml::escape(&container)
        ))
    }

    fn ruc_found() -> Vec<u8> {
        wrap(&format!(
            "<ns2:rResEnviConsRUC xmlns:ns2=\"{SIFEN_NS}\"><ns2:dCodRes>0502</ns2:dCodRes><ns2:dMsgRes>RUC encontrado</ns2:dMsgRes><ns2:xContRUC><ns2:dRUCCons>80069563</ns2:dRUCCons><ns2:dRazCons>DEMO S.A.</ns2:dRazCons><ns2:dCodEstCons>ACT</ns2:dCodEstCons><ns2:dDesEstCons>ACTIVO</ns2:dDesEstCons><ns2:dRUCFactElec>S</ns2:dRUCFactElec></ns2:xContRUC></ns2:rResEnviConsRUC>"
        ))
    }

    fn event_registered() -> Vec<u8> {
        wrap(&format!(
            "<ns2:rRetEnviEventoDe xmlns:ns2=\"{SIFEN_NS}\"><ns2:dFecProc>2026-01-15T10:00:00-03:00</ns2:dFecProc><ns2:gResProcEVe><ns2:dEstRes>Aprobado</ns2:dEstRes><ns2:dProtAut>42</ns2:dProtAut><ns2:id>1</ns2:id><ns2:gResProc><ns2:dCodRes>0600</ns2:dCodRes><ns2:dMsgRes>Evento registrado correctamente</ns2:dMsgRes></ns2:gResProc></ns2:gResProcEVe></ns2:rRetEnviEventoDe>"
        ))
    }

    #[test]
    fn the_sync_request_carries_the_signed_rde_byte_for_byte() {
        let request = recep_de(7, &rde()).unwrap();
        assert!(request.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?><soap:Envelope xmlns:soap=\"http://www.w3.org/2003/05/soap-envelope\"><soap:Header/><soap:Body><rEnviDe xmlns=\"http://ekuatia.set.gov.py/sifen/xsd\"><dId>7</dId><xDE><rDE "));
        assert!(request.contains(xml::strip_prolog(&rde())));
        assert_eq!(request.matches("<?xml").count(), 1);
        let tree = xml::parse(&request).unwrap();
        assert_eq!(tree.find("rDE").unwrap().ns.as_deref(), Some(SIFEN_NS));
    }

    #[test]
    fn requests_refuse_what_sifen_would_refuse_before_sending() {
        assert!(matches!(recep_de(0, &rde()), Err(SoapError::InvalidRequest(_))));
        assert!(recep_de(MAX_D_ID + 1, &rde()).is_err());
        assert!(recep_de(1, "<rDE><DE></rDE>").is_err());
        assert!(recep_de(1, "<DE/>").is_err());
        assert!(lot_xml(&[]).is_err());
        let many = vec![rde(); 51];
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(lot_xml(&many).is_err());
        assert!(cons_de(1, "0180069563").is_err());
        assert!(cons_ruc(1, "0123").is_err());
        assert!(cons_ruc(1, "12").is_err());
        assert!(result_lote(1, &LotQuery::Number("12a".into())).is_err());
        assert!(recep_evento(1, &[]).is_err());
        assert!(recep_evento(1, &["<rEve/>"]).is_err());
    }

    #[test]
    fn a_lot_is_a_zip_of_one_rlotede_with_every_rde_verbatim() {
        let a = rde();
        let b = a.replace(CDC, "01800695631001001000000222025011511234567893");
        let entry = lot_entry_name(chrono::NaiveDate::from_ymd_opt(2026, 1, 15).unwrap());
        assert_eq!(entry, "DE_15012026.xml");
        let request = recep_lote(3, &[&a, &b], &entry).unwrap();
        let tree = xml::parse(&request).unwrap();
        let b64 = tree.find("xDE").unwrap().text.clone();
        let zip = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        let mut archive = zip::ZipArchive::new(std::io::Cursor::new(zip)).unwrap();
        assert_eq!(archive.len(), 1);
        let mut file = archive.by_name(&entry).unwrap();
        let mut lot = String::new();
        std::io::Read::read_to_string(&mut file, &mut lot).unwrap();
        assert!(lot.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?><rLoteDE><rDE "));
        assert_eq!(lot.matches("<?xml").count(), 1);
        assert!(lot.contains(xml::strip_prolog(&a)) && lot.contains(xml::strip_prolog(&b)));
    }

    #[test]
    fn queries_and_events_have_the_xsd_shapes() {
        let q = result_lote(1, &LotQuery::Number("123".into())).unwrap();
        assert!(q.contains("<rEnviConsLoteDe xmlns=\"http://ekuatia.set.gov.py/sifen/xsd\"><dId>1</dId><dProtConsLote>123</dProtConsLote></rEnviConsLoteDe>"));
        let q = result_lote(1, &LotQuery::Cdc(CDC.into())).unwrap();
        assert!(q.contains(&format!("<dCDC>{CDC}</dCDC>")));
        assert!(cons_de(2, CDC).unwrap().contains(&format!(
            "<rEnviConsDeRequest xmlns=\"{SIFEN_NS}\"><dId>2</dId><dCDC>{CDC}</dCDC></rEnviConsDeRequest>"
        )));
        assert!(
            cons_ruc(3, "80069563-1")
                .unwrap()
                .contains("<dRUCCons>80069563</dRUCCons>")
        );
        let ev = "<rGesEve><rEve Id=\"1\"/></rGesEve>";
        let msg = recep_evento(4, &[ev, ev]).unwrap();
        assert!(msg.contains(&format!("<dEvReg><gGroupGesEve xmlns=\"{SIFEN_NS}\" xmlns:xsi=\"{XSI_NS}\" xsi:schemaLocation=\"{SIFEN_NS} siRecepEvento_v150.xsd\">{ev}{ev}</gGroupGesEve></dEvReg>")));
        let group = format!("<?xml version=\"1.0\"?><gGroupGesEve xmlns=\"{SIFEN_NS}\">{ev}</gGroupGesEve>");
        let msg = recep_evento(5, &[&group]).unwrap();
        assert!(msg.contains(&format!(
            "<dEvReg><gGroupGesEve xmlns=\"{SIFEN_NS}\">{ev}</gGroupGesEve></dEvReg>"
        )));
    }

    #[test]
    fn every_answer_reads_into_its_typed_result() {
        let r = parse_recep_de(200, &approved()).unwrap();
        assert_eq!(r.status, DocumentStatus::Approved);
        assert_eq!(r.code(), Some("0260"));
        assert_eq!(r.authorization.as_deref(), Some("1234567890"));
        assert_eq!(r.cdc.as_deref(), Some(CDC));
        assert!(!r.is_duplicate());

        let l = parse_recep_lote(200, &lot_received()).unwrap();
        assert!(l.is_received());
        assert_eq!(l.lot_number.as_deref(), Some("123456789012345"));

        let l = parse_result_lote(200, &lot_done()).unwrap();
        assert_eq!(l.state(), LotState::Done);
        assert_eq!(l.documents.len(), 2);
        assert!(l.documents[0].status.is_approved());
        assert_eq!(l.documents[1].status, DocumentStatus::Rejected);
        assert_eq!(l.documents[1].results[0].code, "0160");

        let q = parse_cons_de(200, &found()).unwrap();
        assert!(q.is_found());
        let c = q.container.unwrap();
        assert_eq!(c.cdc.as_deref(), Some(CDC));
        assert_eq!(c.authorization.as_deref(), Some("1234567890"));
        assert!(!c.cancelled);

        let r = parse_cons_ruc(200, &ruc_found()).unwrap();
        let t = r.taxpayer.unwrap();
        assert_eq!(
            (t.ruc.as_str(), t.status_code.as_str(), t.electronic_invoicing),
            ("80069563", "ACT", true)
        );

        let e = parse_recep_evento(200, &event_registered()).unwrap();
        assert_eq!(e.events[0].results[0].code, "0600");
        assert!(e.events[0].status.is_approved());
    }

    #[test]
    fn html_empty_truncated_and_foreign_answers_are_typed_errors() {
        let html = b"<html><body><h1>502 Bad Gateway</h1></body></html>";
        assert!(matches!(
            parse_recep_de(502, html),
            Err(SoapError::NotSoap { status: 502, .. })
        ));
        assert!(matches!(parse_recep_de(200, b""), Err(SoapError::NotSoap { .. })));
        let full = approved();
        assert!(matches!(
            parse_recep_de(200, &full[..full.len() / 2]),
            Err(SoapError::NotSoap { .. })
        ));
        assert!(matches!(
            parse_recep_de(200, &[0xff, 0xfe, 0x00]),
            Err(SoapError::NotSoap { .. })
        ));
        assert!(matches!(
            parse_recep_lote(200, &approved()),
            Err(SoapError::UnexpectedResponse { .. })
        ));
        assert!(matches!(
            parse_recep_de(200, &wrap("")),
            Err(SoapError::UnexpectedResponse { .. })
        ));
    }

    #[test]
    fn soap_faults_of_both_versions_are_typed() {
        let f12 = wrap(
            "<env:Fault><env:Code><env:Value>env:Receiver</env:Value><env:Subcode><env:Value>x:Busy</env:Value></env:Subcode></env:Code><env:Reason><env:Text xml:lang=\"es\">Servicio no disponible</env:Text></env:Reason><env:Detail><e>1</e></env:Detail></env:Fault>",
        );
        assert_eq!(
            parse_cons_de(500, &f12),
            Err(SoapError::Fault {
                status: 500,
                code: "env:Receiver".into(),
                subcode: Some("x:Busy".into()),
                reason: "Servicio no disponible".into(),
                detail: Some("<e>1</e>".into()),
            })
        );
        let f11 = b"<s:Envelope xmlns:s=\"http://schemas.xmlsoap.org/soap/envelope/\"><s:Body><s:Fault><faultcode>s:Server</faultcode><faultstring>boom</faultstring></s:Fault></s:Body></s:Envelope>";
        assert!(
            matches!(parse_recep_lote(500, f11), Err(SoapError::Fault { ref code, ref reason, .. }) if code == "s:Server" && reason == "boom")
        );
    }

    fn all_parsers(status: u16, body: &[u8]) {
        let _ = parse_recep_de(status, body);
        let _ = parse_recep_lote(status, body);
        let _ = parse_result_lote(status, body);
        let _ = parse_cons_de(status, body);
        let _ = parse_cons_ruc(status, body);
        let _ = parse_recep_evento(status, body);
    }

    fn valid_answers() -> Vec<Vec<u8>> {
        vec![
            approved(),
            lot_received(),
            lot_done(),
            found(),
            ruc_found(),
            event_registered(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn no_parser_panics_on_arbitrary_bytes(body in proptest::collection::vec(any::<u8>(), 0..2048), status in 100u16..600) {
            all_parsers(status, &body);
        }

        #[test]
        fn no_parser_panics_on_mutated_answers(
            which in 0usize..6,
            edits in proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>(), 0u8..3), 1..8),
            cut in any::<proptest::sample::Index>(),
        ) {
            let mut body = valid_answers().swap_remove(which);
            for (at, byte, kind) in edits {
                if body.is_empty() { break; }
                let i = at.index(body.len());
                match kind {
                    0 => body[i] = byte,
                    1 => { body.remove(i); }
                    _ => body.insert(i, byte),
                }
            }
            all_parsers(200, &body);
            let n = cut.index(body.len() + 1);
            all_parsers(500, &body[..n]);
        }

        #[test]
        fn truncated_answers_are_never_taken_for_complete_ones(which in 0usize..6, cut in any::<proptest::sample::Index>()) {
            let body = valid_answers().swap_remove(which);
            // Everything up to (not including) the closing tag of the envelope is cut short.
            let end = body.len() - "</env:Envelope>".len();
            let n = cut.index(end);
            prop_assert!(parse_recep_de(200, &body[..n]).is_err());
            prop_assert!(parse_recep_lote(200, &body[..n]).is_err());
            prop_assert!(parse_result_lote(200, &body[..n]).is_err());
            prop_assert!(parse_cons_de(200, &body[..n]).is_err());
            prop_assert!(parse_cons_ruc(200, &body[..n]).is_err());
            prop_assert!(parse_recep_evento(200, &body[..n]).is_err());
        }
    }
}
