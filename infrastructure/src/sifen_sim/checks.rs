//! What the simulator checks on one `rDE` before it can approve it: the checks SIFEN makes that
//! need no registry data (MT §12.2–12.4). Each failure carries SIFEN's code
//! and message.

use super::{CscEntry, SimConfig};
use crate::sifen_soap::SIFEN_NS;
use crate::sifen_soap::messages::is_cdc_shaped;
use crate::sifen_soap::xml::{self, Element};
use base64::Engine;
use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use kuatia_domain::check_digit::modulo11;
use sha2::{Digest, Sha256};

/// A SIFEN result code and its message.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Code {
    /// `dCodRes`.
    pub code: String,
    /// `dMsgRes`.
    pub message: String,
}

impl Code {
    /// A code and a message.
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        Self {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// The facts of a DE the simulator keeps and the lot rules need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeFacts {
    /// `DE@Id`.
    pub cdc: String,
    /// `iTiDE`.
    pub doc_type: String,
    /// `dRucEm`.
    pub ruc: String,
    /// `dDVEmi`.
    pub ruc_dv: String,
    /// `dNumTim`.
    pub timbrado: String,
    /// `dEst`.
    pub establishment: String,
    /// `dPunExp`.
    pub point: String,
    /// `dNumDoc`.
    pub number: String,
    /// `dSerieNum`, when written.
    pub series: Option<String>,
    /// `dNomEmi`.
    pub issuer_name: Option<String>,
    /// The Signature's `DigestValue`, when signed.
    pub digest_value: Option<String>,
    /// `1005`: transmitted more than 72 h after signing (approved with observation).
    pub late: bool,
}

/// The first facts of an `rDE`, enough for the lot rules (type, issuer, CDC), without judging
/// the document.
pub fn peek(rde: &Element) -> (Option<String>, Option<String>, Option<String>) {
    let de = rde.child("DE");
    (
        de.and_then(|d| d.attr("Id")).map(str::to_owned),
        de.and_then(|d| d.child("gTimb"))
            .and_then(|t| t.child_text("iTiDE"))
            .map(str::to_owned),
        de.and_then(|d| d.child("gDatGralOpe"))
            .and_then(|g| g.child("gEmis"))
            .and_then(|e| e.child_text("dRucEm"))
            .map(str::to_owned),
    )
}

fn malformed(detail: &str) -> Code {
    Code::new("0160", format!("XML malformado: [{detail}]"))
}

fn path<'a>(e: &'a Element, names: &[&str]) -> Option<&'a Element> {
    names.iter().try_fold(e, |e, n| e.child(n))
}

fn field<'a>(de: &'a Element, names: &[&str]) -> Result<&'a str, Code> {
    path(de, names)
        .map(|e| e.text.trim())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| malformed(&format!("falta {}", names.last().copied().unwrap_or_default())))
}

fn pad(value: &str, width: usize) -> String {
    format!("{value:0>width$}")
}

/// The RUC (`80069563-1`) written in a certificate's subject serialNumber (legal persons) or
/// in a directory name of its subjectAltName (natural persons): MT §7.5. Also the RUC of a TLS
/// client certificate (MT §12.2.1, AA07).
pub(super) fn certificate_ruc(der: &[u8]) -> Result<Option<String>, ()> {
    use x509_parser::prelude::{FromDer, GeneralName, X509Certificate, X509Name};
    fn in_name(name: &X509Name<'_>) -> Option<String> {
        name.iter_by_oid(&x509_parser::oid_registry::OID_X509_SERIALNUMBER)
            .filter_map(|a| a.as_str().ok())
            .find_map(|v| {
                let v = v.trim();
                v.strip_prefix("RUC")
                    .or_else(|| v.strip_prefix("ruc"))
                    .map(|n| n.trim().to_owned())
            })
    }
    let (_, cert) = X509Certificate::from_der(der).map_err(|_| ())?;
    let san = cert.subject_alternative_name().ok().flatten().and_then(|san| {
        san.value.general_names.iter().find_map(|n| match n {
            GeneralName::DirectoryName(dn) => in_name(dn),
            _ => None,
        })
    });
    Ok(in_name(cert.subject()).or(san))
}

/// A QR link taken apart.
struct QrLink<'a> {
    /// `key=value` pairs before `cHashQR`, in order.
    params: Vec<(&'a str, &'a str)>,
    /// The text the hash covers (the parameters before `&cHashQR=`).
    hashed: &'a str,
    /// `cHashQR`.
    hash: &'a str,
}

fn qr_parts(link: &str) -> Option<QrLink<'_>> {
    let (_, query) = link.split_once('?')?;
    let (hashed, hash) = query.rsplit_once("&cHashQR=")?;
    let params = hashed
        .split('&')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .collect();
    Some(QrLink { params, hashed, hash })
}

fn csc_for<'a>(cscs: &'a [CscEntry], ruc: &str, id: &str) -> Option<&'a CscEntry> {
    let id = id.trim_start_matches('0');
    cscs.iter()
        .filter(|c| c.id.trim_start_matches('0') == id)
        .find(|c| c.ruc.as_deref().is_none_or(|r| r.split('-').next() == Some(ruc)))
}

/// Checks an `rDE` (its text exactly as received) as SIFEN would before looking at its
/// registries. Duplicates are the state's business.
pub fn check_de(rde_text: &str, config: &SimConfig, now: DateTime<Utc>) -> Result<DeFacts, Code> {
    let text = xml::strip_prolog(rde_text);
    let root = xml::parse(text).map_err(|e| malformed(&e.to_string()))?;
    if root.local() != "rDE" {
        return Err(Code::new(
            "0101",
            format!(
                "Fallo de schema: no existe el campo raíz esperado para el mensaje ({})",
                root.qname
            ),
        ));
    }
    if root.ns.as_deref() != Some(SIFEN_NS) {
        return Err(Code::new(
            "0104",
            "Existe algún namespace diferente del namespace estándar del DE",
        ));
    }
    if root.any_prefix_outside("Signature") {
        return Err(Code::new("0106", "Utilizado prefijo en el namespace"));
    }
    // The schema, before any rule of the manual: lengths, patterns, order, mandatory elements.
    if let Some(dir) = &config.xsd_dir {
        super::xsd::validate(dir, super::xsd::DE_SCHEMA, text)?;
    }
    let de = root.child("DE").ok_or_else(|| malformed("falta DE"))?;
    let cdc = de.attr("Id").unwrap_or_default().to_owned();
    if !is_cdc_shaped(&cdc) {
        return Err(malformed("DE@Id no es un CDC"));
    }

    // A003: the check digit, in the Id and in dDVId.
    let dv = modulo11(&cdc[..43]);
    if cdc[43..] != dv.to_string() || de.child_text("dDVId") != Some(&cdc[43..]) {
        return Err(Code::new("1003", "DV del CDC inválido"));
    }

    // A002: the CDC is the concatenation of the document's own fields.
    let doc_type = field(de, &["gTimb", "iTiDE"])?;
    let ruc = field(de, &["gDatGralOpe", "gEmis", "dRucEm"])?;
    let ruc_dv = field(de, &["gDatGralOpe", "gEmis", "dDVEmi"])?;
    let emitted = field(de, &["gDatGralOpe", "dFeEmiDE"])?;
    let emitted_date = emitted
        .get(..10)
        .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
        .ok_or_else(|| malformed("dFeEmiDE"))?;
    let establishment = field(de, &["gTimb", "dEst"])?;
    let point = field(de, &["gTimb", "dPunExp"])?;
    let number = field(de, &["gTimb", "dNumDoc"])?;
    let composed = format!(
        "{}{}{}{}{}{}{}{}{}{}",
        pad(doc_type, 2),
        pad(ruc, 8),
        ruc_dv,
        establishment,
        point,
        number,
        field(de, &["gDatGralOpe", "gEmis", "iTipCont"])?,
        emitted_date.format("%Y%m%d"),
        field(de, &["gOpeDE", "iTipEmi"])?,
        field(de, &["gOpeDE", "dCodSeg"])?,
    );
    if composed != cdc[..43] {
        return Err(Code::new(
            "1000",
            "CDC no correspondiente con las informaciones del XML",
        ));
    }

    // D102: the issuer's RUC check digit.
    if modulo11(ruc).to_string() != ruc_dv {
        return Err(Code::new(
            "1253",
            "Dígito Verificador del RUC del emisor incorrecto",
        ));
    }

    // A004: signing time (Paraguay's wall clock, no offset in the XML).
    let mut late = false;
    if config.check_dates {
        let local_now = kuatia_domain::local_time::paraguay(now);
        let signed = field(de, &["dFecFirma"])?;
        let signed =
            NaiveDateTime::parse_from_str(signed, "%Y-%m-%dT%H:%M:%S").map_err(|_| malformed("dFecFirma"))?;
        if signed > local_now + chrono::Duration::minutes(10) {
            return Err(Code::new(
                "1004",
                "La fecha y hora de la firma digital es adelantada",
            ));
        }
        late = local_now - signed > chrono::Duration::hours(72);
        let emitted =
            NaiveDateTime::parse_from_str(emitted, "%Y-%m-%dT%H:%M:%S").map_err(|_| malformed("dFeEmiDE"))?;
        if local_now - emitted > chrono::Duration::hours(720) {
            return Err(Code::new(
                "1150",
                "La fecha y hora de emisión del DE informada es inválida por retraso",
            ));
        }
        if emitted - local_now > chrono::Duration::hours(120) {
            return Err(Code::new(
                "1151",
                "La fecha y hora de emisión del DE informada es inválida por envío adelantado",
            ));
        }
    }

    // I001: the signature's shape and the signer's RUC (the cryptography is not verified).
    let signature = root.child("Signature");
    let mut digest_value = None;
    match signature {
        None if config.require_signature => return Err(malformed("falta Signature")),
        None => {}
        Some(sig) => {
            let reference = sig.child("SignedInfo").and_then(|s| s.child("Reference"));
            let uri_ok = reference.and_then(|r| r.attr("URI")) == Some(&format!("#{cdc}"));
            let transforms = reference
                .and_then(|r| r.child("Transforms"))
                .map(|t| {
                    t.children_named("Transform")
                        .filter_map(|t| t.attr("Algorithm"))
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default();
            let enveloped = transforms.iter().any(|a| a.ends_with("#enveloped-signature"));
            let c14n = transforms.iter().any(|a| a.contains("c14n"));
            if !uri_ok || !enveloped || !c14n {
                return Err(Code::new("0140", "Firma difiere del estándar"));
            }
            digest_value = reference
                .and_then(|r| r.child_text("DigestValue"))
                .map(str::to_owned);
            let cert = if config.verify_signature {
                super::dsig::verify(text, &root, sig)?
            } else {
                sig.child("KeyInfo")
                    .and_then(|k| k.child("X509Data"))
                    .and_then(|d| d.child_text("X509Certificate"))
                    .map(|c| c.split_whitespace().collect::<String>())
                    .and_then(|c| base64::engine::general_purpose::STANDARD.decode(c).ok())
                    .ok_or_else(|| Code::new("0120", "Certificado inválido"))?
            };
            let signer = certificate_ruc(&cert).map_err(|()| Code::new("0120", "Certificado inválido"))?;
            let Some(signer) = signer else {
                return Err(Code::new(
                    "0122",
                    "No existe la extensión del RUC en el certificado",
                ));
            };
            if signer != format!("{ruc}-{ruc_dv}") {
                return Err(Code::new(
                    "0142",
                    "RUC del certificado utilizado para firmar no pertenece al Contribuyente emisor",
                ));
            }
        }
    }

    // J002: the QR link matches the document and its hash matches a CSC on file.
    if config.check_qr
        && let Some(link) = path(&root, &["gCamFuFD", "dCarQR"]).map(|q| q.text.trim())
    {
        let Some(QrLink { params, hashed, hash }) = qr_parts(link) else {
            return Err(Code::new("2502", "URL de consulta del QR inválida"));
        };
        let get = |k: &str| params.iter().find(|(key, _)| *key == k).map(|(_, v)| *v);
        let digest_matches = match &digest_value {
            Some(d) => get("DigestValue") == Some(hex::encode(d.as_bytes()).as_str()),
            None => true,
        };
        if get("Id") != Some(cdc.as_str()) || !digest_matches {
            return Err(Code::new("2500", "Datos del QR no corresponden con el XML"));
        }
        let csc = get("IdCSC").and_then(|id| csc_for(&config.cscs, ruc, id));
        let expected = csc.map(|c| hex::encode(Sha256::digest(format!("{hashed}{}", c.csc).as_bytes())));
        if expected.as_deref() != Some(&hash.to_ascii_lowercase()) {
            return Err(Code::new("2501", "Hash del QR no corresponde con el CSC"));
        }
    }

    Ok(DeFacts {
        cdc,
        doc_type: doc_type.to_owned(),
        ruc: ruc.to_owned(),
        ruc_dv: ruc_dv.to_owned(),
        timbrado: path(de, &["gTimb", "dNumTim"])
            .map(|t| t.text.trim().to_owned())
            .unwrap_or_default(),
        establishment: establishment.to_owned(),
        point: point.to_owned(),
        number: number.to_owned(),
        series: path(de, &["gTimb", "dSerieNum"]).map(|t| t.text.trim().to_owned()),
        issuer_name: path(de, &["gDatGralOpe", "gEmis", "dNomEmi"]).map(|t| t.text.trim().to_owned()),
        digest_value,
        late,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A minimal, unsigned rDE whose CDC agrees with its fields, dated `now` in Paraguay.
    pub(crate) fn rde(number: u32, doc_type: u8, now: DateTime<Utc>) -> (String, String) {
        let local = kuatia_domain::local_time::paraguay(now);
        let stamp = local.format("%Y-%m-%dT%H:%M:%S").to_string();
        let base = format!(
            "{doc_type:02}800695631001001{number:07}2{}1123456789",
            local.format("%Y%m%d")
        );
        let cdc = format!("{base}{}", modulo11(&base));
        let xml = format!(
            "<rDE xmlns=\"{SIFEN_NS}\"><dVerFor>150</dVerFor><DE Id=\"{cdc}\"><dDVId>{dv}</dDVId><dFecFirma>{stamp}</dFecFirma><dSisFact>1</dSisFact><gOpeDE><iTipEmi>1</iTipEmi><dDesTipEmi>Normal</dDesTipEmi><dCodSeg>123456789</dCodSeg></gOpeDE><gTimb><iTiDE>{doc_type}</iTiDE><dNumTim>12558946</dNumTim><dEst>001</dEst><dPunExp>001</dPunExp><dNumDoc>{number:07}</dNumDoc></gTimb><gDatGralOpe><dFeEmiDE>{stamp}</dFeEmiDE><gEmis><dRucEm>80069563</dRucEm><dDVEmi>1</dDVEmi><iTipCont>2</iTipCont></gEmis></gDatGralOpe></DE></rDE>",
            dv = &cdc[43..]
        );
        (cdc, xml)
    }

    fn config() -> SimConfig {
        SimConfig::default()
    }

    #[test]
    fn a_consistent_unsigned_de_passes() {
        let now = Utc::now();
        let (cdc, xml) = rde(1, 1, now);
        let facts = check_de(&xml, &config(), now).unwrap();
        assert_eq!(
            (facts.cdc.as_str(), facts.doc_type.as_str(), facts.ruc.as_str()),
            (cdc.as_str(), "1", "80069563")
        );
        assert!(!facts.late);
    }

    #[test]
    fn each_broken_rule_answers_its_code() {
        let now = Utc::now();
        let (cdc, xml) = rde(1, 1, now);
        let code = |x: &str| check_de(x, &config(), now).unwrap_err().code;
        assert_eq!(code("<rDE"), "0160");
        assert_eq!(
            code(&xml.replace("<rDE ", "<xDE ").replace("</rDE>", "</xDE>")),
            "0101"
        );
        assert_eq!(code(&xml.replace(SIFEN_NS, "urn:other")), "0104");
        assert_eq!(
            code(&xml.replace(
                "<dVerFor>150</dVerFor>",
                "<p:dVerFor xmlns:p=\"urn:x\">150</p:dVerFor>"
            )),
            "0106"
        );
        let wrong_dv = format!("{}{}", &cdc[..43], (modulo11(&cdc[..43]) + 1) % 10);
        assert_eq!(code(&xml.replace(&cdc, &wrong_dv)), "1003");
        assert_eq!(
            code(&xml.replace("<dCodSeg>123456789</dCodSeg>", "<dCodSeg>123456788</dCodSeg>")),
            "1000"
        );
        assert_eq!(code(&xml.replace("<dNumDoc>0000001</dNumDoc>", "")), "0160");
        // The RUC's check digit is part of the CDC, so a wrong one needs a CDC built with it.
        let base = format!("{}0{}", &cdc[..10], &cdc[11..43]);
        let bad_ruc_cdc = format!("{base}{}", modulo11(&base));
        let bad_ruc = xml
            .replace(&cdc, &bad_ruc_cdc)
            .replace(
                &format!("<dDVId>{}</dDVId>", &cdc[43..]),
                &format!("<dDVId>{}</dDVId>", &bad_ruc_cdc[43..]),
            )
            .replace("<dDVEmi>1</dDVEmi>", "<dDVEmi>0</dDVEmi>");
        assert_eq!(code(&bad_ruc), "1253");
        let future = kuatia_domain::local_time::paraguay(now + chrono::Duration::hours(2))
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string();
        let stamp = kuatia_domain::local_time::paraguay(now)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string();
        assert_eq!(
            code(&xml.replace(&format!("<dFecFirma>{stamp}"), &format!("<dFecFirma>{future}"))),
            "1004"
        );
        let strict = SimConfig {
            require_signature: true,
            ..config()
        };
        assert_eq!(check_de(&xml, &strict, now).unwrap_err().code, "0160");
    }

    #[test]
    fn a_late_signature_is_approved_with_observation() {
        let now = Utc::now();
        let (_, xml) = rde(1, 1, now - chrono::Duration::hours(80));
        assert!(check_de(&xml, &config(), now).unwrap().late);
    }

    #[test]
    fn the_vector_signed_by_xmlsec1_passes_every_check_and_tampering_is_caught() {
        let fe = include_str!("fixtures/fe-signed-selfsigned-qr.xml");
        // Its dates are fixed in the past: the date rules are not what this test is about.
        let config = SimConfig {
            check_dates: false,
            ..config()
        };
        let now = Utc::now();
        let facts = check_de(fe, &config, now).unwrap();
        assert_eq!(facts.cdc, "01800695631001001000000122025011511234567899");
        assert_eq!(
            facts.digest_value.as_deref(),
            Some("uoG1E/r8YgIS2nXO9e0N72x7ZEu2v5qbHfQAWM/N1Xw=")
        );
        let tampered = fe.replace("<dNomRec>Cliente SA</dNomRec>", "<dNomRec>Cliente SRL</dNomRec>");
        assert_eq!(check_de(&tampered, &config, now).unwrap_err().code, "0141");
        let other_csc = SimConfig {
            cscs: vec!["0001:ZZZZ0000000000000000000000000000".parse().unwrap()],
            ..config.clone()
        };
        assert_eq!(check_de(fe, &other_csc, now).unwrap_err().code, "2501");
    }

    #[test]
    fn the_signer_must_be_the_issuer_and_the_qr_must_hash_with_a_known_csc() {
        use crate::selfsigned::SelfSigned;
        // The signatures here are shapes only; the cryptography has its own tests.
        let config = || SimConfig {
            verify_signature: false,
            ..SimConfig::default()
        };
        let now = Utc::now();
        let (cdc, xml) = rde(1, 1, now);
        let signed = |ruc: &str| {
            let (_, cert) = SelfSigned::for_ruc("X", ruc, 30).generate().unwrap();
            let der = base64::engine::general_purpose::STANDARD.encode(cert.to_der().unwrap());
            let sig = format!(
                "<Signature xmlns=\"http://www.w3.org/2000/09/xmldsig#\"><SignedInfo><Reference URI=\"#{cdc}\"><Transforms><Transform Algorithm=\"http://www.w3.org/2000/09/xmldsig#enveloped-signature\"/><Transform Algorithm=\"http://www.w3.org/2001/10/xml-exc-c14n#\"/></Transforms><DigestValue>abc=</DigestValue></Reference></SignedInfo><KeyInfo><X509Data><X509Certificate>{der}</X509Certificate></X509Data></KeyInfo></Signature>"
            );
            xml.replace("</DE>", &format!("</DE>{sig}"))
        };
        let ok = signed("80069563-1");
        assert_eq!(
            check_de(&ok, &config(), now).unwrap().digest_value.as_deref(),
            Some("abc=")
        );
        assert_eq!(
            check_de(&signed("80013884-8"), &config(), now).unwrap_err().code,
            "0142"
        );
        assert_eq!(
            check_de(
                &ok.replace(&format!("URI=\"#{cdc}\""), "URI=\"\""),
                &config(),
                now
            )
            .unwrap_err()
            .code,
            "0140"
        );

        let hashed = format!(
            "nVersion=150&Id={cdc}&dFeEmiDE=00&dRucRec=80013884&dTotGralOpe=0&dTotIVA=0&cItems=1&DigestValue={}&IdCSC=0001",
            hex::encode("abc=")
        );
        let hash = hex::encode(Sha256::digest(
            format!("{hashed}ABCD0000000000000000000000000000").as_bytes(),
        ));
        let with_qr = |h: &str| {
            ok.replace(
                "</rDE>",
                &format!(
                    "<gCamFuFD><dCarQR>https://ekuatia.set.gov.py/consultas-test/qr?{}&amp;cHashQR={h}</dCarQR></gCamFuFD></rDE>",
                    hashed.replace('&', "&amp;")
                ),
            )
        };
        assert!(check_de(&with_qr(&hash), &config(), now).is_ok());
        assert_eq!(
            check_de(&with_qr(&"0".repeat(64)), &config(), now)
                .unwrap_err()
                .code,
            "2501"
        );
        let other_digest = with_qr(&hash).replace(
            "<DigestValue>abc=</DigestValue>",
            "<DigestValue>xyz=</DigestValue>",
        );
        assert_eq!(check_de(&other_digest, &config(), now).unwrap_err().code, "2500");
    }
}
