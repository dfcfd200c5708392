//! The XMLDSig signer of SIFEN v150 documents (`rDE/DE`) and events (`rGesEve/rEve`), and the
//! writer of `gCamFuFD/dCarQR`.
//!
//! Profile: enveloped signature, `Signature` in its own default namespace as the next sibling of
//! the signed element; SignedInfo canonicalized with exclusive C14N; RSA-SHA256 (PKCS#1 v1.5);
//! one Reference to `#Id` with the transforms enveloped-signature then exclusive C14N, digest
//! SHA-256; KeyInfo with exactly one X509Certificate (base64 DER of the signer, no chain).
//! The manual's own example uses inclusive C14N for SignedInfo; every maintained library uses
//! exclusive, and for these documents both give the same bytes.
//!
//! **Canonical by construction, no DOM.** Our generator writes the unsigned XML in one exact
//! shape: the fixed `rDE` (or `gGroupGesEve`) opening with the SIFEN default namespace, then
//! elements with no prefixes, no attributes but `Id` on the signed element, no self-closing
//! tags, no comments, and text escaped exactly as C14N writes it (`&amp; &lt; &gt; &#xD;`). For
//! such a document the exclusive C14N of `DE` is its own bytes with
//! ` xmlns="http://ekuatia.set.gov.py/sifen/xsd"` inserted after `<DE` (namespace declarations
//! come before attributes; `xsi` is not used inside `DE`, so exclusive C14N leaves it out).
//! The same holds for SignedInfo, written here already canonical (expanded empty elements),
//! whose canonical form adds the inherited xmldsig namespace. A linear check refuses any input
//! that leaves that shape, so the shortcut can never silently digest the wrong bytes; tests
//! compare against `xmllint --exc-c14n` and verify with `xmlsec1`. The rejected alternatives
//! were a DOM plus a C14N library (libxml2/xmlsec bindings need bindgen and libclang; the
//! pure-Rust `xml-sec` is very young), for documents whose shape we control anyway.
//!
//! RSA goes through OpenSSL, not the `rsa` crate (timing side channel in signing, RUSTSEC-2023-0071;
//! docs/adr/0005-rsa-signing-openssl.md). Signing is CPU-bound (about a millisecond for RSA-2048):
//! [`sign_de`] and [`sign_event`] are synchronous, and async callers run them in
//! `tokio::task::spawn_blocking`.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use kuatia_application::process::ports;
use openssl::error::ErrorStack;
use openssl::hash::MessageDigest;
use openssl::pkey::{Id, PKey, Private};
use openssl::rsa::Padding;
use openssl::sign::Signer;
use openssl::x509::X509;
use sha2::{Digest, Sha256};

/// The XML declaration our generator writes (optional in the input).
const XML_DECLARATION: &str = r#"<?xml version="1.0" encoding="UTF-8"?>"#;
/// The opening of an unsigned DE, up to the value of `DE@Id`.
const RDE_OPEN: &str = concat!(
    r#"<rDE xmlns="http://ekuatia.set.gov.py/sifen/xsd""#,
    r#" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#,
    r#" xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepDE_v150.xsd">"#,
    r#"<dVerFor>150</dVerFor><DE Id=""#,
);
const RDE_CLOSE: &str = "</DE></rDE>";
/// The opening of an unsigned event group.
const GES_EVE_OPEN: &str = concat!(
    r#"<gGroupGesEve xmlns="http://ekuatia.set.gov.py/sifen/xsd""#,
    r#" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance""#,
    r#" xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepEvento_v150.xsd">"#,
);
const GES_EVE_CLOSE: &str = "</gGroupGesEve>";
const REVE_OPEN: &str = r#"<rGesEve><rEve Id=""#;
const REVE_CLOSE: &str = "</rEve></rGesEve>";
/// Events per message (`rGesEve{1..15}`).
const MAX_EVENTS: usize = 15;

/// The declaration exclusive C14N gives a signed SIFEN element (inherited from its root).
const SIFEN_XMLNS: &str = r#" xmlns="http://ekuatia.set.gov.py/sifen/xsd""#;
/// The declaration exclusive C14N gives SignedInfo (inherited from Signature).
const DSIG_XMLNS: &str = r#" xmlns="http://www.w3.org/2000/09/xmldsig#""#;

const SIGNATURE_OPEN: &str = r#"<Signature xmlns="http://www.w3.org/2000/09/xmldsig#">"#;
const SIGNED_INFO_OPEN: &str = "<SignedInfo>";
const SIGNED_INFO_HEAD: &str = concat!(
    "<SignedInfo>",
    r#"<CanonicalizationMethod Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"></CanonicalizationMethod>"#,
    r#"<SignatureMethod Algorithm="http://www.w3.org/2001/04/xmldsig-more#rsa-sha256"></SignatureMethod>"#,
    r##"<Reference URI="#"##,
);
const REFERENCE_MIDDLE: &str = concat!(
    r#""><Transforms>"#,
    r#"<Transform Algorithm="http://www.w3.org/2000/09/xmldsig#enveloped-signature"></Transform>"#,
    r#"<Transform Algorithm="http://www.w3.org/2001/10/xml-exc-c14n#"></Transform>"#,
    "</Transforms>",
    r#"<DigestMethod Algorithm="http://www.w3.org/2001/04/xmlenc#sha256"></DigestMethod>"#,
    "<DigestValue>",
);
const SIGNED_INFO_TAIL: &str = "</DigestValue></Reference></SignedInfo>";
const SIGNATURE_VALUE_OPEN: &str = "<SignatureValue>";
const KEY_INFO_OPEN: &str = "</SignatureValue><KeyInfo><X509Data><X509Certificate>";
const SIGNATURE_CLOSE: &str = "</X509Certificate></X509Data></KeyInfo></Signature>";

const QR_OPEN: &str = "<gCamFuFD><dCarQR>";
const QR_CLOSE: &str = "</dCarQR></gCamFuFD></rDE>";
/// Room reserved for `gCamFuFD` (dCarQR is at most 600 characters, a few more once escaped).
const QR_RESERVE: usize = 720;

/// A private key and its certificate, ready to sign. Cheap to share behind an `Arc`; build one
/// per certificate, not per document.
pub struct SigningKey {
    /// The RSA private key (OpenSSL zeroes it when dropped).
    key: PKey<Private>,
    /// The signer certificate, DER.
    cert_der: Vec<u8>,
    /// `cert_der` in base64, as written in every X509Certificate.
    cert_base64: String,
}

/// Why a key and certificate cannot sign.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The PEM holds no private key.
    #[error("the PEM holds no private key")]
    NoKey,
    /// The PEM holds no certificate.
    #[error("the PEM holds no certificate")]
    NoCertificate,
    /// SIFEN signatures are RSA-SHA256.
    #[error("the key is not an RSA key")]
    NotRsa,
    /// The first certificate is not the key's.
    #[error("the certificate does not belong to the private key")]
    Mismatch,
    /// OpenSSL could not read them.
    #[error("the key or certificate could not be read: {0}")]
    Crypto(#[from] ErrorStack),
}

impl SigningKey {
    /// A key and the certificate that belongs to it.
    pub fn new(key: PKey<Private>, certificate: &X509) -> Result<Self, KeyError> {
        if key.id() != Id::RSA {
            return Err(KeyError::NotRsa);
        }
        let certified = certificate.public_key()?;
        if !key.public_eq(&certified) {
            return Err(KeyError::Mismatch);
        }
        let cert_der = certificate.to_der()?;
        let cert_base64 = STANDARD.encode(&cert_der);
        Ok(Self {
            key,
            cert_der,
            cert_base64,
        })
    }

    /// From what the vault keeps for a certificate (`OpenedPfx::pem`): the private key (PKCS#8,
    /// unencrypted) and the chain, leaf first, as PEM blocks in one text. The leaf signs; the
    /// rest of the chain is not sent (SIFEN builds it).
    pub fn from_pem(pem: &[u8]) -> Result<Self, KeyError> {
        let key = PKey::private_key_from_pem(pem).map_err(|_| KeyError::NoKey)?;
        let chain = X509::stack_from_pem(pem)?;
        let leaf = chain.first().ok_or(KeyError::NoCertificate)?;
        Self::new(key, leaf)
    }

    /// The signer certificate (DER), as embedded in every signature.
    pub fn certificate_der(&self) -> &[u8] {
        &self.cert_der
    }

    /// RSA-SHA256 (PKCS#1 v1.5, deterministic) of the concatenation of `parts`.
    fn sign(&self, parts: &[&[u8]]) -> Result<Vec<u8>, ErrorStack> {
        let mut signer = Signer::new(MessageDigest::sha256(), &self.key)?;
        signer.set_rsa_padding(Padding::PKCS1)?;
        for part in parts {
            signer.update(part)?;
        }
        signer.sign_to_vec()
    }
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("key", &"<redacted>")
            .field("cert_der", &format_args!("{} bytes", self.cert_der.len()))
            .finish()
    }
}

/// Why a document could not be signed.
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The input is not in the shape the canonical-by-construction signer accepts (a generator
    /// bug, never a user error): byte offset and what was found.
    #[error("the unsigned XML is not in the expected shape at byte {at}: {reason}")]
    Shape {
        /// Byte offset in the input.
        at: usize,
        /// What is wrong there.
        reason: &'static str,
    },
    /// OpenSSL failed to sign.
    #[error("signing failed: {0}")]
    Crypto(#[from] ErrorStack),
}

fn shape(at: usize, reason: &'static str) -> SignError {
    SignError::Shape { at, reason }
}

/// A signed DE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedDe {
    /// The `rDE` with its Signature (and room reserved for [`append_qr`]).
    pub xml: String,
    /// The Reference's DigestValue (base64), which the QR carries.
    pub digest_value: String,
}

/// Signs an unsigned `rDE` as our generator writes it:
/// `[<?xml version="1.0" encoding="UTF-8"?>]<rDE xmlns=… xmlns:xsi=… xsi:schemaLocation=…>`
/// `<dVerFor>150</dVerFor><DE Id="{CDC}">…</DE></rDE>`. The Signature goes right after
/// `</DE>`; everything else is copied byte for byte. Add the QR with [`append_qr`].
///
/// Synchronous and CPU-bound: from async code, call it inside `tokio::task::spawn_blocking`.
pub fn sign_de(unsigned: &str, key: &SigningKey) -> Result<SignedDe, SignError> {
    let root = skip_declaration(unsigned);
    let Some(after_open) = unsigned[root..].strip_prefix(RDE_OPEN) else {
        return Err(shape(root, "the rDE does not open as the generator writes it"));
    };
    let id_at = unsigned.len() - after_open.len();
    let (id, content_at) = read_id(unsigned, id_at)?;
    if id.len() != 44 {
        return Err(shape(id_at, "DE@Id is not a 44-character CDC"));
    }
    let Some(content) = unsigned[content_at..].strip_suffix(RDE_CLOSE) else {
        return Err(shape(
            unsigned.len(),
            "the document does not end with </DE></rDE>",
        ));
    };
    check_canonical(content, content_at)?;

    let de_start = id_at - r#"<DE Id=""#.len();
    let de_end = unsigned.len() - "</rDE>".len();
    let mut xml = String::with_capacity(unsigned.len() + signature_len(key, id) + QR_RESERVE);
    xml.push_str(&unsigned[..de_end]);
    let digest_value = push_signature(&mut xml, &unsigned[de_start..de_end], "DE", id, key)?;
    xml.push_str("</rDE>");
    Ok(SignedDe { xml, digest_value })
}

/// Writes `<gCamFuFD><dCarQR>{qr_url, XML-escaped}</dCarQR></gCamFuFD>` after the Signature of
/// a DE signed by [`sign_de`]. `qr_url` is the plain URL of `kuatia_domain::sifen::qr::qr_url`
/// (with `&`); escaping it is done here.
pub fn append_qr(signed: &mut String, qr_url: &str) -> Result<(), SignError> {
    let Some(body) = signed.strip_suffix("</Signature></rDE>") else {
        return Err(shape(
            signed.len(),
            "a signed rDE without gCamFuFD ends with </Signature></rDE>",
        ));
    };
    let end = body.len() + "</Signature>".len();
    signed.truncate(end);
    signed.reserve(QR_OPEN.len() + qr_url.len() + qr_url.len() / 4 + QR_CLOSE.len());
    signed.push_str(QR_OPEN);
    for c in qr_url.chars() {
        match c {
            '&' => signed.push_str("&amp;"),
            '<' => signed.push_str("&lt;"),
            '>' => signed.push_str("&gt;"),
            c => signed.push(c),
        }
    }
    signed.push_str(QR_CLOSE);
    Ok(())
}

/// Signs every event of an unsigned event group as our generator writes it:
/// `[<?xml …?>]<gGroupGesEve xmlns=… xmlns:xsi=… xsi:schemaLocation="… siRecepEvento_v150.xsd">`
/// then 1 to 15 `<rGesEve><rEve Id="{n}">…</rEve></rGesEve>`, then `</gGroupGesEve>`. Each
/// Signature goes right after its `</rEve>`, referring to `#{rEve@Id}`; the Ids must differ.
///
/// Synchronous and CPU-bound: from async code, call it inside `tokio::task::spawn_blocking`.
pub fn sign_event(unsigned: &str, key: &SigningKey) -> Result<String, SignError> {
    let root = skip_declaration(unsigned);
    let Some(mut rest) = unsigned[root..].strip_prefix(GES_EVE_OPEN) else {
        return Err(shape(
            root,
            "the gGroupGesEve does not open as the generator writes it",
        ));
    };
    let mut xml = String::with_capacity(unsigned.len() + 2 * signature_len(key, "1"));
    let mut copied = 0;
    let mut ids: Vec<&str> = Vec::with_capacity(MAX_EVENTS);
    while let Some(after_open) = rest.strip_prefix(REVE_OPEN) {
        let id_at = unsigned.len() - after_open.len();
        let (id, content_at) = read_id(unsigned, id_at)?;
        if ids.len() == MAX_EVENTS {
            return Err(shape(id_at, "more than 15 events in one group"));
        }
        if ids.contains(&id) {
            return Err(shape(id_at, "two events with the same rEve@Id"));
        }
        ids.push(id);
        let Some(len) = unsigned[content_at..].find(REVE_CLOSE) else {
            return Err(shape(content_at, "an rEve without </rEve></rGesEve>"));
        };
        check_canonical(&unsigned[content_at..content_at + len], content_at)?;
        let reve_start = id_at - r#"<rEve Id=""#.len();
        let reve_end = content_at + len + "</rEve>".len();
        reserve_for(&mut xml, reve_end - copied + signature_len(key, id));
        xml.push_str(&unsigned[copied..reve_end]);
        push_signature(&mut xml, &unsigned[reve_start..reve_end], "rEve", id, key)?;
        copied = reve_end;
        rest = &unsigned[content_at + len + REVE_CLOSE.len()..];
    }
    if ids.is_empty() {
        return Err(shape(
            unsigned.len() - rest.len(),
            "no <rGesEve><rEve Id=…> in the group",
        ));
    }
    if rest != GES_EVE_CLOSE {
        return Err(shape(
            unsigned.len() - rest.len(),
            "after the events, the group must end with </gGroupGesEve>",
        ));
    }
    xml.push_str(&unsigned[copied..]);
    Ok(xml)
}

fn reserve_for(xml: &mut String, additional: usize) {
    if xml.capacity() - xml.len() < additional {
        xml.reserve(additional);
    }
}

/// Upper bound of the bytes [`push_signature`] writes.
fn signature_len(key: &SigningKey, id: &str) -> usize {
    let signature_base64 = key.key.size().div_ceil(3) * 4;
    SIGNATURE_OPEN.len()
        + SIGNED_INFO_HEAD.len()
        + id.len()
        + REFERENCE_MIDDLE.len()
        + 44
        + SIGNED_INFO_TAIL.len()
        + SIGNATURE_VALUE_OPEN.len()
        + signature_base64
        + KEY_INFO_OPEN.len()
        + key.cert_base64.len()
        + SIGNATURE_CLOSE.len()
}

/// The offset of the root element: after an optional XML declaration and whitespace.
fn skip_declaration(xml: &str) -> usize {
    let rest = xml.strip_prefix(XML_DECLARATION).unwrap_or(xml);
    xml.len() - rest.trim_start_matches(['\n', ' ', '\t']).len()
}

/// Reads an `Id` attribute value starting at `at` (just after `Id="`), which must be followed by
/// `">`. Returns the id and the offset after `">`.
fn read_id(xml: &str, at: usize) -> Result<(&str, usize), SignError> {
    let Some(len) = xml[at..].find('"') else {
        return Err(shape(at, "an unterminated Id attribute"));
    };
    let id = &xml[at..at + len];
    // Letters and digits need no escaping, neither in the attribute nor in the Reference URI.
    if id.is_empty() || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(shape(at, "an Id that is not 1 to 64 letters and digits"));
    }
    if !xml[at + len..].starts_with("\">") {
        return Err(shape(at + len, "the signed element has attributes other than Id"));
    }
    Ok((id, at + len + 2))
}

/// Checks that `content` (the inside of the signed element; `at` is its offset in the input)
/// is already in exclusive-C14N form given our generator's rules: balanced plain start and end
/// tags, text with only the references C14N itself writes, nothing else.
fn check_canonical(content: &str, at: usize) -> Result<(), SignError> {
    let bytes = content.as_bytes();
    let mut open: Vec<&[u8]> = Vec::with_capacity(16);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'<' => {
                let Some(len) = bytes[i..].iter().position(|&b| b == b'>') else {
                    return Err(shape(at + i, "an unterminated tag"));
                };
                let tag = &bytes[i + 1..i + len];
                if let Some(name) = tag.strip_prefix(b"/") {
                    if open.pop() != Some(name) {
                        return Err(shape(at + i, "an end tag that closes no open element"));
                    }
                } else if is_plain_name(tag) {
                    open.push(tag);
                } else {
                    return Err(shape(
                        at + i,
                        "a tag with attributes, a prefix, or a comment, CDATA section, processing \
                         instruction or self-closing tag",
                    ));
                }
                i += len + 1;
            }
            b'&' => {
                let rest = &bytes[i..];
                let Some(reference) = ["&amp;", "&lt;", "&gt;", "&#xD;"]
                    .into_iter()
                    .find(|r| rest.starts_with(r.as_bytes()))
                else {
                    return Err(shape(
                        at + i,
                        "a reference that C14N writes otherwise (only &amp; &lt; &gt; &#xD; are kept)",
                    ));
                };
                i += reference.len();
            }
            b'>' => return Err(shape(at + i, "a '>' in text (C14N writes &gt;)")),
            b'\r' => {
                return Err(shape(
                    at + i,
                    "a raw carriage return (a parser reads a line feed)",
                ));
            }
            b if b < 0x20 && b != b'\t' && b != b'\n' => {
                return Err(shape(at + i, "a control character"));
            }
            _ => i += 1,
        }
    }
    if !open.is_empty() {
        return Err(shape(at + content.len(), "an element left open"));
    }
    Ok(())
}

/// An unprefixed ASCII element name.
fn is_plain_name(name: &[u8]) -> bool {
    matches!(name.first(), Some(b) if b.is_ascii_alphabetic() || *b == b'_')
        && name
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Appends the Signature of `element_xml` (`<{name} Id="{id}">…</{name}>`, checked canonical
/// apart from its inherited SIFEN namespace) and returns the DigestValue.
fn push_signature(
    xml: &mut String,
    element_xml: &str,
    name: &str,
    id: &str,
    key: &SigningKey,
) -> Result<String, SignError> {
    // Exclusive C14N of the element: the SIFEN default namespace goes right after the name.
    let after_name = 1 + name.len();
    let digest = Sha256::new()
        .chain_update(&element_xml.as_bytes()[..after_name])
        .chain_update(SIFEN_XMLNS)
        .chain_update(&element_xml.as_bytes()[after_name..])
        .finalize();

    xml.push_str(SIGNATURE_OPEN);
    let signed_info = xml.len();
    xml.push_str(SIGNED_INFO_HEAD);
    xml.push_str(id);
    xml.push_str(REFERENCE_MIDDLE);
    let digest_at = xml.len();
    STANDARD.encode_string(digest.as_slice(), xml);
    let digest_value = xml[digest_at..].to_owned();
    xml.push_str(SIGNED_INFO_TAIL);

    // Exclusive C14N of SignedInfo: as written, plus the xmldsig namespace it inherits.
    let after_name = signed_info + SIGNED_INFO_OPEN.len() - 1;
    let signature = key.sign(&[
        &xml.as_bytes()[signed_info..after_name],
        DSIG_XMLNS.as_bytes(),
        &xml.as_bytes()[after_name..],
    ])?;
    xml.push_str(SIGNATURE_VALUE_OPEN);
    STANDARD.encode_string(&signature, xml);
    xml.push_str(KEY_INFO_OPEN);
    xml.push_str(&key.cert_base64);
    xml.push_str(SIGNATURE_CLOSE);
    Ok(digest_value)
}

/// OpenSSL behind the workflows' signing ports (`kuatia_application::process::ports`).
#[derive(Debug, Default, Clone, Copy)]
pub struct OpensslSigner;

impl ports::Signer for OpensslSigner {
    fn key(&self, pem: &[u8]) -> Result<std::sync::Arc<dyn ports::SigningKey>, String> {
        SigningKey::from_pem(pem)
            .map(|key| std::sync::Arc::new(key) as std::sync::Arc<dyn ports::SigningKey>)
            .map_err(|e| e.to_string())
    }
}

impl ports::SigningKey for SigningKey {
    fn sign_de(&self, unsigned: &str) -> Result<ports::SignedXml, String> {
        sign_de(unsigned, self)
            .map(|signed| ports::SignedXml {
                xml: signed.xml,
                digest_value: signed.digest_value,
            })
            .map_err(|e| e.to_string())
    }

    fn append_qr(&self, signed: &mut String, qr_url: &str) -> Result<(), String> {
        append_qr(signed, qr_url).map_err(|e| e.to_string())
    }

    fn sign_event(&self, unsigned: &str) -> Result<String, String> {
        sign_event(unsigned, self).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::selfsigned::SelfSigned;
    use kuatia_application::vault::PfxReader;
    use std::path::PathBuf;
    use std::process::Command;
    use std::sync::OnceLock;

    const CDC: &str = "01800695631001001000000122025011511234567899";

    /// The DE of `shared/sifen/vectors/generated/fe-xmlgen-unsigned.xml` (XMLGEN output), under
    /// our generator's exact header.
    const FE_DE: &str = concat!(
        r#"<DE Id="01800695631001001000000122025011511234567899"><dDVId>9</dDVId><dFecFirma>2026-11-22T03:07:59</dFecFirma><dSisFact>1</dSisFact><gOpeDE><iTipEmi>1</iTipEmi><dDesTipEmi>Normal</dDesTipEmi><dCodSeg>123456789</dCodSeg></gOpeDE><gTimb><iTiDE>1</iTiDE><dDesTiDE>Factura electrónica</dDesTiDE><dNumTim>12558946</dNumTim><dEst>001</dEst><dPunExp>001</dPunExp><dNumDoc>0000001</dNumDoc><dFeIniT>2022-08-25</dFeIniT></gTimb>"#,
        r#"<gDatGralOpe><dFeEmiDE>2025-01-15T10:00:00</dFeEmiDE><gOpeCom><iTipTra>1</iTipTra><dDesTipTra>Venta de mercadería</dDesTipTra><iTImp>1</iTImp><dDesTImp>IVA</dDesTImp><cMoneOpe>PYG</cMoneOpe><dDesMoneOpe>Guarani</dDesMoneOpe></gOpeCom><gEmis><dRucEm>80069563</dRucEm><dDVEmi>1</dDVEmi><iTipCont>2</iTipCont><cTipReg>8</cTipReg><dNomEmi>DE generado en ambiente de prueba - sin valor comercial ni fiscal</dNomEmi><dNomFanEmi>Demo</dNomFanEmi><dDirEmi>Calle 1</dDirEmi><dNumCas>0</dNumCas><cDepEmi>1</cDepEmi><dDesDepEmi>CAPITAL</dDesDepEmi><cDisEmi>1</cDisEmi><dDesDisEmi>ASUNCION (DISTRITO)</dDesDisEmi><cCiuEmi>1</cCiuEmi><dDesCiuEmi>ASUNCION (DISTRITO)</dDesCiuEmi><dTelEmi>021123456</dTelEmi><dEmailE>demo@example.com</dEmailE><dDenSuc>Casa central</dDenSuc><gActEco><cActEco>62010</cActEco><dDesActEco>Actividades de programacion informatica</dDesActEco></gActEco></gEmis>"#,
        r#"<gDatRec><iNatRec>1</iNatRec><iTiOpe>1</iTiOpe><cPaisRec>PRY</cPaisRec><dDesPaisRe>Paraguay</dDesPaisRe><iTiContRec>2</iTiContRec><dRucRec>80013884</dRucRec><dDVRec>8</dDVRec><dNomRec>Cliente SA</dNomRec></gDatRec></gDatGralOpe>"#,
        r#"<gDtipDE><gCamFE><iIndPres>1</iIndPres><dDesIndPres>Operación presencial</dDesIndPres></gCamFE><gCamCond><iCondOpe>1</iCondOpe><dDCondOpe>Contado</dDCondOpe><gPaConEIni><iTiPago>1</iTiPago><dDesTiPag>Efectivo</dDesTiPag><dMonTiPag>165000.0000</dMonTiPag><cMoneTiPag>PYG</cMoneTiPag><dDMoneTiPag>Guarani</dDMoneTiPag></gPaConEIni></gCamCond>"#,
        r#"<gCamItem><dCodInt>A1</dCodInt><dDesProSer>Item 10%</dDesProSer><cUniMed>77</cUniMed><dDesUniMed>UNI</dDesUniMed><dCantProSer>1</dCantProSer><gValorItem><dPUniProSer>110000</dPUniProSer><dTotBruOpeItem>110000</dTotBruOpeItem><gValorRestaItem><dDescItem>0</dDescItem><dDescGloItem>0</dDescGloItem><dAntPreUniIt>0</dAntPreUniIt><dAntGloPreUniIt>0</dAntGloPreUniIt><dTotOpeItem>110000</dTotOpeItem></gValorRestaItem></gValorItem><gCamIVA><iAfecIVA>1</iAfecIVA><dDesAfecIVA>Gravado IVA</dDesAfecIVA><dPropIVA>100</dPropIVA><dTasaIVA>10</dTasaIVA><dBasGravIVA>100000</dBasGravIVA><dLiqIVAItem>10000</dLiqIVAItem><dBasExe>0</dBasExe></gCamIVA></gCamItem>"#,
        r#"<gCamItem><dCodInt>B1</dCodInt><dDesProSer>Item 5%</dDesProSer><cUniMed>77</cUniMed><dDesUniMed>UNI</dDesUniMed><dCantProSer>2</dCantProSer><gValorItem><dPUniProSer>27500</dPUniProSer><dTotBruOpeItem>55000</dTotBruOpeItem><gValorRestaItem><dDescItem>0</dDescItem><dDescGloItem>0</dDescGloItem><dAntPreUniIt>0</dAntPreUniIt><dAntGloPreUniIt>0</dAntGloPreUniIt><dTotOpeItem>55000</dTotOpeItem></gValorRestaItem></gValorItem><gCamIVA><iAfecIVA>1</iAfecIVA><dDesAfecIVA>Gravado IVA</dDesAfecIVA><dPropIVA>100</dPropIVA><dTasaIVA>5</dTasaIVA><dBasGravIVA>52380.95238095</dBasGravIVA><dLiqIVAItem>2619.04761905</dLiqIVAItem><dBasExe>0</dBasExe></gCamIVA></gCamItem></gDtipDE>"#,
        r#"<gTotSub><dSubExe>0</dSubExe><dSubExo>0</dSubExo><dSub5>55000</dSub5><dSub10>110000</dSub10><dTotOpe>165000</dTotOpe><dTotDesc>0</dTotDesc><dTotDescGlotem>0</dTotDescGlotem><dTotAntItem>0</dTotAntItem><dTotAnt>0</dTotAnt><dPorcDescTotal>0</dPorcDescTotal><dDescTotal>0</dDescTotal><dAnticipo>0</dAnticipo><dRedon>0</dRedon><dTotGralOpe>165000</dTotGralOpe><dIVA5>2619</dIVA5><dIVA10>10000</dIVA10><dLiqTotIVA5>0</dLiqTotIVA5><dLiqTotIVA10>0</dLiqTotIVA10><dTotIVA>12619</dTotIVA><dBaseGrav5>52381</dBaseGrav5><dBaseGrav10>100000</dBaseGrav10><dTBasGraIVA>152381</dTBasGraIVA></gTotSub></DE>"#,
    );
    /// What xmlsec1 computed for that DE (`fe-signed-selfsigned-qr.xml`).
    const FE_DIGEST: &str = "uoG1E/r8YgIS2nXO9e0N72x7ZEu2v5qbHfQAWM/N1Xw=";

    /// `cancel-event-signed-selfsigned.xml` without its Signature (newline after the declaration
    /// kept, as XMLGEN writes it).
    const CANCEL_EVENT: &str = concat!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n",
        r#"<gGroupGesEve xmlns="http://ekuatia.set.gov.py/sifen/xsd" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://ekuatia.set.gov.py/sifen/xsd siRecepEvento_v150.xsd">"#,
        r#"<rGesEve><rEve Id="1"><dFecFirma>2026-11-22T03:13:09</dFecFirma><dVerFor>150</dVerFor><gGroupTiEvt><rGeVeCan><Id>01800695631001001000000122025011511234567899</Id><mOtEve>Error en la emision del documento</mOtEve></rGeVeCan></gGroupTiEvt></rEve></rGesEve>"#,
        "</gGroupGesEve>",
    );
    /// What xmlsec1 computed for that rEve.
    const CANCEL_DIGEST: &str = "Cv6dbBz5YcwjooGh1haEZCsiDfPXBvYT/qK7BhLrtLc=";

    fn unsigned_de(de: &str) -> String {
        format!(
            "{XML_DECLARATION}{}{}</rDE>",
            &RDE_OPEN[..RDE_OPEN.len() - r#"<DE Id=""#.len()],
            de
        )
    }

    /// One throw-away RSA-2048 key and self-signed certificate for the whole test binary.
    fn key() -> &'static SigningKey {
        static KEY: OnceLock<SigningKey> = OnceLock::new();
        KEY.get_or_init(|| {
            let (key, cert) = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30)
                .generate()
                .unwrap();
            SigningKey::new(key, &cert).unwrap()
        })
    }

    fn temp_file(name: &str, contents: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("kuatia-sign-{}-{name}", uuid::Uuid::now_v7()));
        std::fs::write(&path, contents).unwrap();
        path
    }

    fn tool(name: &str, package: &str) -> Command {
        let probe = Command::new(name).arg("--version").output();
        assert!(
            probe.is_ok(),
            "`{name}` is not installed; the signer's tests check against it \
             (Debian: apt-get install {package})"
        );
        Command::new(name)
    }

    /// Runs `xmlsec1 --verify --insecure --id-attr:Id {element}` (insecure: the certificate is
    /// self-signed; the signature itself is fully checked). Returns success and the output.
    fn xmlsec1_verify(xml: &str, element: &str) -> (bool, String) {
        let path = temp_file("verify.xml", xml);
        let out = tool("xmlsec1", "xmlsec1")
            .args(["--verify", "--insecure", "--id-attr:Id", element])
            .arg(&path)
            .output()
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let ok = out.status.success() && text.lines().any(|l| l.trim() == "OK");
        (ok, text)
    }

    /// `xmllint --exc-c14n` of a standalone document.
    fn xmllint_exc_c14n(xml: &str) -> String {
        let path = temp_file("c14n.xml", xml);
        let out = tool("xmllint", "libxml2-utils")
            .arg("--exc-c14n")
            .arg(&path)
            .output()
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    }

    fn between<'a>(xml: &'a str, open: &str, close: &str) -> &'a str {
        let start = xml.find(open).unwrap();
        let end = xml[start..].find(close).unwrap() + start + close.len();
        &xml[start..end]
    }

    /// A DE whose text holds every character C14N treats specially.
    fn tricky_de() -> String {
        FE_DE.replace(
            "<dDirEmi>Calle 1</dDirEmi>",
            "<dDirEmi>Calle \"1\" &amp; 'Ñandutí' &lt;2&gt;&#xD;\tfin</dDirEmi>",
        )
    }

    #[test]
    fn a_signed_de_verifies_with_xmlsec1_and_a_tampered_copy_does_not() {
        let signed = sign_de(&unsigned_de(FE_DE), key()).unwrap();
        let (ok, out) = xmlsec1_verify(&signed.xml, "DE");
        assert!(ok, "xmlsec1 refused the signature:\n{out}\n{}", signed.xml);

        let tampered = signed.xml.replace("<dTotGralOpe>165000<", "<dTotGralOpe>165001<");
        assert_ne!(tampered, signed.xml);
        let (ok, out) = xmlsec1_verify(&tampered, "DE");
        assert!(!ok, "a tampered DE verified:\n{out}");

        let tricky = sign_de(&unsigned_de(&tricky_de()), key()).unwrap();
        let (ok, out) = xmlsec1_verify(&tricky.xml, "DE");
        assert!(ok, "xmlsec1 refused the signature of escaped text:\n{out}");
    }

    #[test]
    fn the_digest_is_the_one_xmlsec1_computed_for_the_vector() {
        let signed = sign_de(&unsigned_de(FE_DE), key()).unwrap();
        assert_eq!(signed.digest_value, FE_DIGEST);
        assert!(
            signed
                .xml
                .contains(&format!("<DigestValue>{FE_DIGEST}</DigestValue>"))
        );
        assert!(signed.xml.contains(&format!(r##"<Reference URI="#{CDC}">"##)));
    }

    #[test]
    fn the_shortcut_equals_xmllint_exclusive_c14n() {
        let signed = sign_de(&unsigned_de(&tricky_de()), key()).unwrap();
        // The DE as this signer digests it ...
        let de = between(&signed.xml, "<DE ", "</DE>");
        let canonical_de = format!("<DE{SIFEN_XMLNS}{}", &de["<DE".len()..]);
        assert_eq!(xmllint_exc_c14n(&canonical_de), canonical_de);
        assert_eq!(
            signed.digest_value,
            STANDARD.encode(Sha256::digest(canonical_de.as_bytes()))
        );
        // ... and SignedInfo as it signs it.
        let signed_info = between(&signed.xml, "<SignedInfo>", "</SignedInfo>");
        let canonical_si = format!("<SignedInfo{DSIG_XMLNS}{}", &signed_info["<SignedInfo".len()..]);
        assert_eq!(xmllint_exc_c14n(&canonical_si), canonical_si);
        // The whole signed document is canonical too (xmllint drops only the declaration), so
        // every byte outside DE and SignedInfo is what a parser reads.
        let body = signed.xml.strip_prefix(XML_DECLARATION).unwrap();
        assert_eq!(xmllint_exc_c14n(&signed.xml), body);
    }

    #[test]
    fn the_signature_has_the_sifen_shape_and_sits_between_de_and_the_qr() {
        let mut signed = sign_de(&unsigned_de(FE_DE), key()).unwrap();
        let xml = &signed.xml;
        assert!(xml.starts_with(&unsigned_de(FE_DE)[..unsigned_de(FE_DE).len() - "</rDE>".len()]));
        assert!(xml.contains(r#"</DE><Signature xmlns="http://www.w3.org/2000/09/xmldsig#"><SignedInfo>"#));
        assert!(xml.ends_with("</X509Certificate></X509Data></KeyInfo></Signature></rDE>"));
        assert_eq!(xml.matches("<X509Certificate>").count(), 1);
        assert_eq!(xml.matches("<Transform ").count(), 2);
        for absent in ["X509SubjectName", "X509IssuerSerial", "KeyValue", "\n", "/>"] {
            assert!(!xml.contains(absent), "{absent}");
        }
        let cert = between(xml, "<X509Certificate>", "</X509Certificate>");
        let cert = &cert["<X509Certificate>".len()..cert.len() - "</X509Certificate>".len()];
        assert_eq!(STANDARD.decode(cert).unwrap(), key().certificate_der());

        let capacity = signed.xml.capacity();
        let url = "https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150&Id=1&cHashQR=ab";
        append_qr(&mut signed.xml, url).unwrap();
        assert!(signed.xml.ends_with(
            "</Signature><gCamFuFD><dCarQR>https://ekuatia.set.gov.py/consultas-test/qr?\
             nVersion=150&amp;Id=1&amp;cHashQR=ab</dCarQR></gCamFuFD></rDE>"
        ));
        assert_eq!(signed.xml.capacity(), capacity, "room for the QR was reserved");
        let (ok, out) = xmlsec1_verify(&signed.xml, "DE");
        assert!(ok, "the QR group broke the signature:\n{out}");
        assert!(append_qr(&mut signed.xml, url).is_err(), "a second QR");
    }

    #[test]
    fn the_qr_of_a_signed_de_carries_its_digest() {
        use kuatia_domain::channel::SifenEnvironment;
        use kuatia_domain::sifen::qr::{Csc, QrData, QrReceiver, qr_url};
        let mut signed = sign_de(&unsigned_de(FE_DE), key()).unwrap();
        let url = qr_url(
            &QrData {
                environment: SifenEnvironment::Test,
                cdc: CDC,
                emitted_at: "2025-01-15T10:00:00",
                receiver: QrReceiver::Ruc("80013884"),
                total: "165000",
                total_iva: "12619",
                items: 2,
                digest_value: &signed.digest_value,
            },
            &Csc {
                id: "0001",
                secret: "ABCD0000000000000000000000000000",
            },
        )
        .unwrap();
        append_qr(&mut signed.xml, &url).unwrap();
        // Same DE, same digest, same CSC: the vector's dCarQR exactly.
        assert!(signed.xml.ends_with(concat!(
            "<gCamFuFD><dCarQR>https://ekuatia.set.gov.py/consultas-test/qr?nVersion=150",
            "&amp;Id=01800695631001001000000122025011511234567899",
            "&amp;dFeEmiDE=323032352d30312d31355431303a30303a3030&amp;dRucRec=80013884",
            "&amp;dTotGralOpe=165000&amp;dTotIVA=12619&amp;cItems=2",
            "&amp;DigestValue=756f4731452f723859674953326e584f3965304e373278375a4575327635716248665141574d2f4e3158773d",
            "&amp;IdCSC=0001&amp;cHashQR=0fedfee513c7d8ba9ffca53e046978064fd20a7ef907fef1fbb6a2a959833f68",
            "</dCarQR></gCamFuFD></rDE>"
        )));
    }

    #[test]
    fn signing_twice_gives_the_same_bytes() {
        let unsigned = unsigned_de(FE_DE);
        assert_eq!(
            sign_de(&unsigned, key()).unwrap(),
            sign_de(&unsigned, key()).unwrap()
        );
        assert_eq!(
            sign_event(CANCEL_EVENT, key()).unwrap(),
            sign_event(CANCEL_EVENT, key()).unwrap()
        );
    }

    #[test]
    fn a_signed_event_verifies_with_xmlsec1_and_a_tampered_copy_does_not() {
        let signed = sign_event(CANCEL_EVENT, key()).unwrap();
        assert!(signed.contains(r##"<Reference URI="#1">"##));
        assert!(signed.contains(&format!("<DigestValue>{CANCEL_DIGEST}</DigestValue>")));
        assert!(signed.contains("</rEve><Signature xmlns=\"http://www.w3.org/2000/09/xmldsig#\">"));
        assert!(signed.ends_with("</Signature></rGesEve></gGroupGesEve>"));
        let (ok, out) = xmlsec1_verify(&signed, "rEve");
        assert!(ok, "xmlsec1 refused the event signature:\n{out}\n{signed}");

        let tampered = signed.replace("Error en la emision", "Error en la emisión");
        let (ok, out) = xmlsec1_verify(&tampered, "rEve");
        assert!(!ok, "a tampered event verified:\n{out}");
    }

    #[test]
    fn every_event_of_a_group_gets_its_own_signature() {
        let one = between(CANCEL_EVENT, "<rGesEve>", "</rGesEve>");
        let two = one.replace(r#"<rEve Id="1">"#, r#"<rEve Id="2">"#).replace(
            "Error en la emision del documento",
            "Datos del receptor incorrectos",
        );
        let group = CANCEL_EVENT.replace(one, &format!("{one}{two}"));
        let signed = sign_event(&group, key()).unwrap();
        assert_eq!(signed.matches("<Signature ").count(), 2);
        assert!(signed.contains(r##"<Reference URI="#2">"##));
        // xmlsec1 checks the first Signature it finds: drop the first event to check the second.
        let first = between(&signed, "<rGesEve>", "</rGesEve>");
        let (ok, out) = xmlsec1_verify(&signed.replace(first, ""), "rEve");
        assert!(ok, "the second event's signature:\n{out}");

        let duplicate = CANCEL_EVENT.replace(one, &format!("{one}{one}"));
        assert!(sign_event(&duplicate, key()).is_err());
        let sixteen = CANCEL_EVENT.replace(
            one,
            &(1..=16)
                .map(|n| one.replace(r#"Id="1""#, &format!(r#"Id="{n}""#)))
                .collect::<String>(),
        );
        assert!(sign_event(&sixteen, key()).is_err());
    }

    #[test]
    fn inputs_outside_the_canonical_shape_are_refused() {
        let base = unsigned_de(FE_DE);
        let refused = |xml: String, what: &str| {
            let err = sign_de(&xml, key()).expect_err(what);
            assert!(matches!(err, SignError::Shape { .. }), "{what}: {err}");
        };
        let swap = |from: &str, to: &str| {
            assert!(base.contains(from), "{from}");
            base.replacen(from, to, 1)
        };
        refused(swap("<dSisFact>1</dSisFact>", "<dSisFact/>"), "self-closing");
        refused(
            swap("<dSisFact>1</dSisFact>", "<dSisFact a=\"1\">1</dSisFact>"),
            "attribute",
        );
        refused(
            swap("<dSisFact>1</dSisFact>", "<x:dSisFact>1</x:dSisFact>"),
            "prefix",
        );
        refused(
            swap("<dSisFact>1</dSisFact>", "<!-- c --><dSisFact>1</dSisFact>"),
            "comment",
        );
        refused(swap("Calle 1", "Calle &quot;1&quot;"), "&quot; in text");
        refused(swap("Calle 1", "Calle &#49;"), "character reference");
        refused(swap("Calle 1", "Calle > 1"), "> in text");
        refused(swap("Calle 1", "Calle\r1"), "raw CR");
        refused(
            swap("<dSisFact>1</dSisFact>", "<dSisFact>1</dSisFac>"),
            "mismatched end tag",
        );
        refused(swap("<dSisFact>1</dSisFact>", "<dSisFact>1"), "unclosed element");
        refused(
            swap(r#"<DE Id=""#, r#"<DE xmlns="urn:x" Id=""#),
            "another namespace",
        );
        refused(swap(CDC, "0180069563"), "short CDC");
        refused(swap(r#"xmlns:xsi"#, r#"xmlns:xs"#), "another header");
        refused(format!("{base} "), "trailing text");
        refused(
            swap("</DE></rDE>", "</DE><Signature></Signature></rDE>"),
            "already signed",
        );
        assert!(sign_event(&base, key()).is_err());
        assert!(sign_event(&CANCEL_EVENT.replace("<rGesEve>", "<rGesEve> "), key()).is_err());
        // Without the XML declaration it is the same document.
        let bare = base.strip_prefix(XML_DECLARATION).unwrap();
        assert_eq!(
            sign_de(bare, key()).unwrap().digest_value,
            sign_de(&base, key()).unwrap().digest_value
        );
    }

    #[test]
    fn the_key_comes_from_what_the_vault_keeps_for_an_uploaded_pfx() {
        let spec = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 30);
        let opened = crate::vault::P12Reader
            .open(&spec.pfx("pw").unwrap(), "pw")
            .unwrap();
        let key = SigningKey::from_pem(opened.pem.as_bytes()).unwrap();
        let signed = sign_de(&unsigned_de(FE_DE), &key).unwrap();
        let (ok, out) = xmlsec1_verify(&signed.xml, "DE");
        assert!(ok, "{out}");
        assert!(format!("{key:?}").contains("redacted"));

        // A certificate that is not the key's, and a PEM without one of the two.
        let (other_key, _) = spec.generate().unwrap();
        let (_, cert) = spec.generate().unwrap();
        assert!(matches!(
            SigningKey::new(other_key, &cert),
            Err(KeyError::Mismatch)
        ));
        let cert_pem = String::from_utf8(cert.to_pem().unwrap()).unwrap();
        assert!(matches!(
            SigningKey::from_pem(cert_pem.as_bytes()),
            Err(KeyError::NoKey)
        ));
        let key_only = opened.pem.split("-----BEGIN CERTIFICATE-----").next().unwrap();
        assert!(matches!(
            SigningKey::from_pem(key_only.as_bytes()),
            Err(KeyError::NoCertificate)
        ));
        let ec = PKey::from_ec_key(
            openssl::ec::EcKey::generate(
                &openssl::ec::EcGroup::from_curve_name(openssl::nid::Nid::X9_62_PRIME256V1).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        assert!(matches!(SigningKey::new(ec, &cert), Err(KeyError::NotRsa)));
    }
}
