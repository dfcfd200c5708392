//! The simulator's answers, written the way SIFEN writes them: a SOAP 1.2 envelope with `env:`
//! and SIFEN's elements under the `ns2:` prefix.

use super::checks::Code;
use crate::sifen_soap::xml::escape;
use crate::sifen_soap::{SIFEN_NS, SOAP12_NS};
use chrono::{DateTime, Utc};

/// `dFecProc`: Paraguay's time with its offset.
pub fn processed_at(now: DateTime<Utc>) -> String {
    now.with_timezone(&kuatia_domain::local_time::offset())
        .format("%Y-%m-%dT%H:%M:%S%:z")
        .to_string()
}

fn envelope(body: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><env:Envelope xmlns:env=\"{SOAP12_NS}\"><env:Header/><env:Body>{body}</env:Body></env:Envelope>"
    )
}

fn el(name: &str, text: &str) -> String {
    format!("<ns2:{name}>{}</ns2:{name}>", escape(text))
}

fn results(codes: &[Code]) -> String {
    codes
        .iter()
        .map(|c| {
            format!(
                "<ns2:gResProc>{}{}</ns2:gResProc>",
                el("dCodRes", &c.code),
                el("dMsgRes", &c.message)
            )
        })
        .collect()
}

/// One DE's outcome, as `rProtDe` and `gResProcLote` carry it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Outcome {
    /// The CDC (as sent; may be empty when the DE could not be read).
    pub cdc: String,
    /// `dEstRes`.
    pub status: String,
    /// `dProtAut`.
    pub protocol: Option<String>,
    /// `dDigVal`.
    pub digest_value: Option<String>,
    /// `gResProc`.
    pub results: Vec<Code>,
}

/// siRecepDE: `rRetEnviDe/rProtDe`.
pub fn recep_de(now: DateTime<Utc>, o: &Outcome) -> String {
    let mut prot = String::new();
    if !o.cdc.is_empty() {
        prot.push_str(&el("Id", &o.cdc));
    }
    prot.push_str(&el("dFecProc", &processed_at(now)));
    if let Some(d) = &o.digest_value {
        prot.push_str(&el("dDigVal", d));
    }
    prot.push_str(&el("dEstRes", &o.status));
    if let Some(p) = &o.protocol {
        prot.push_str(&el("dProtAut", p));
    }
    prot.push_str(&results(&o.results));
    envelope(&format!(
        "<ns2:rRetEnviDe xmlns:ns2=\"{SIFEN_NS}\"><ns2:rProtDe>{prot}</ns2:rProtDe></ns2:rRetEnviDe>"
    ))
}

/// siRecepLoteDE: `rResEnviLoteDe`.
pub fn recep_lote(now: DateTime<Utc>, code: &Code, lot: Option<&str>, seconds: u64) -> String {
    let mut body = el("dFecProc", &processed_at(now));
    body.push_str(&el("dCodRes", &code.code));
    body.push_str(&el("dMsgRes", &code.message));
    if let Some(lot) = lot {
        body.push_str(&el("dProtConsLote", lot));
        body.push_str(&el("dTpoProces", &seconds.to_string()));
    }
    envelope(&format!(
        "<ns2:rResEnviLoteDe xmlns:ns2=\"{SIFEN_NS}\">{body}</ns2:rResEnviLoteDe>"
    ))
}

/// siResultLoteDE: `rResEnviConsLoteDe`.
pub fn result_lote(now: DateTime<Utc>, code: &Code, documents: &[Outcome]) -> String {
    let mut body = el("dFecProc", &processed_at(now));
    body.push_str(&el("dCodResLot", &code.code));
    body.push_str(&el("dMsgResLot", &code.message));
    for d in documents {
        body.push_str("<ns2:gResProcLote>");
        body.push_str(&el("id", &d.cdc));
        body.push_str(&el("dEstRes", &d.status));
        if let Some(p) = &d.protocol {
            body.push_str(&el("dProtAut", p));
        }
        body.push_str(&results(&d.results));
        body.push_str("</ns2:gResProcLote>");
    }
    envelope(&format!(
        "<ns2:rResEnviConsLoteDe xmlns:ns2=\"{SIFEN_NS}\">{body}</ns2:rResEnviConsLoteDe>"
    ))
}

/// siConsDE: `rEnviConsDeResponse`, the container as escaped text (`xs:string`).
pub fn cons_de(now: DateTime<Utc>, code: &Code, container: Option<&str>) -> String {
    let mut body = el("dFecProc", &processed_at(now));
    body.push_str(&el("dCodRes", &code.code));
    body.push_str(&el("dMsgRes", &code.message));
    if let Some(c) = container {
        body.push_str(&el("xContenDE", c));
    }
    envelope(&format!(
        "<ns2:rEnviConsDeResponse xmlns:ns2=\"{SIFEN_NS}\">{body}</ns2:rEnviConsDeResponse>"
    ))
}

/// The `rContDe` container of an approved DE: the rDE as received, its `dProtAut`, its events.
pub fn container(rde: &str, protocol: &str, events: &[String]) -> String {
    let mut out = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?><rContDe xmlns=\"{SIFEN_NS}\"><dVerFor>150</dVerFor>{rde}<dProtAut>{protocol}</dProtAut>"
    );
    if !events.is_empty() {
        out.push_str("<xContEv>");
        for e in events {
            out.push_str("<rContEv><xEvento>");
            out.push_str(e);
            out.push_str("</xEvento></rContEv>");
        }
        out.push_str("</xContEv>");
    }
    out.push_str("</rContDe>");
    out
}

/// siConsRUC: `rResEnviConsRUC`.
pub fn cons_ruc(code: &Code, taxpayer: Option<(&str, &str)>) -> String {
    let mut body = el("dCodRes", &code.code);
    body.push_str(&el("dMsgRes", &code.message));
    if let Some((ruc, name)) = taxpayer {
        body.push_str(&format!(
            "<ns2:xContRUC>{}{}{}{}{}</ns2:xContRUC>",
            el("dRUCCons", ruc),
            el("dRazCons", name),
            el("dCodEstCons", "ACT"),
            el("dDesEstCons", "ACTIVO"),
            el("dRUCFactElec", "S"),
        ));
    }
    envelope(&format!(
        "<ns2:rResEnviConsRUC xmlns:ns2=\"{SIFEN_NS}\">{body}</ns2:rResEnviConsRUC>"
    ))
}

/// One event's outcome: `gResProcEVe`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventAnswer {
    /// `rEve@Id`.
    pub id: String,
    /// `dEstRes`.
    pub status: String,
    /// `dProtAut`.
    pub protocol: Option<String>,
    /// `gResProc`.
    pub results: Vec<Code>,
}

/// siRecepEvento: `rRetEnviEventoDe`.
pub fn recep_evento(now: DateTime<Utc>, events: &[EventAnswer]) -> String {
    let mut body = el("dFecProc", &processed_at(now));
    for e in events {
        body.push_str("<ns2:gResProcEVe>");
        body.push_str(&el("dEstRes", &e.status));
        if let Some(p) = &e.protocol {
            body.push_str(&el("dProtAut", p));
        }
        body.push_str(&el("id", &e.id));
        body.push_str(&results(&e.results));
        body.push_str("</ns2:gResProcEVe>");
    }
    envelope(&format!(
        "<ns2:rRetEnviEventoDe xmlns:ns2=\"{SIFEN_NS}\">{body}</ns2:rRetEnviEventoDe>"
    ))
}

/// A SOAP 1.2 Fault (for the `fault` injection and requests that are not SOAP at all).
pub fn fault(sender: bool, reason: &str) -> String {
    let code = if sender { "env:Sender" } else { "env:Receiver" };
    envelope(&format!(
        "<env:Fault><env:Code><env:Value>{code}</env:Value></env:Code><env:Reason><env:Text xml:lang=\"es\">{}</env:Text></env:Reason></env:Fault>",
        escape(reason)
    ))
}
