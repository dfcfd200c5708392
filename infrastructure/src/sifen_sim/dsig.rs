//! XMLDSig verification for the simulator: the Reference's digest over the canonical form of
//! the signed element (`DE` or `rEve`) and the RSA-SHA256 SignatureValue over the canonical
//! SignedInfo, with the certificate in KeyInfo.
//!
//! Canonicalisation is Canonical XML 1.0 without comments, exclusive (`xml-exc-c14n#`) or
//! inclusive (`REC-xml-c14n-20010315`), written here over quick-xml events of the element's
//! exact source text, with the namespaces in scope taken from its ancestors. It covers what
//! signed SIFEN documents contain (elements, attributes, namespaces, text, character
//! references); it does not handle DTD-defined defaults, `xml:` attribute inheritance of
//! inclusive C14N, or `InclusiveNamespaces` prefix lists, none of which SIFEN documents use.
//! The positive tests use vectors signed by xmlsec1, so this code is checked against an
//! independent implementation, not against itself.

use super::checks::Code;
use crate::sifen_soap::xml::Element;
use base64::Engine;
use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;

const EXC_C14N: &str = "http://www.w3.org/2001/10/xml-exc-c14n#";
const C14N: &str = "http://www.w3.org/TR/2001/REC-xml-c14n-20010315";
const ENVELOPED: &str = "http://www.w3.org/2000/09/xmldsig#enveloped-signature";
const SHA256: &str = "http://www.w3.org/2001/04/xmlenc#sha256";
const RSA_SHA256: &str = "http://www.w3.org/2001/04/xmldsig-more#rsa-sha256";

/// Prefix (`""` for the default namespace) → URI (`""` for "no namespace").
type Namespaces = BTreeMap<String, String>;

fn shape(detail: &str) -> Code {
    Code::new("0140", format!("Firma difiere del estándar: [{detail}]"))
}

fn invalid(detail: &str) -> Code {
    Code::new(
        "0141",
        format!("Valor de la firma (SignatureValue) diferente del calculado por el PKI: [{detail}]"),
    )
}

/// The chain of elements from `root` down to the element whose source span is `span`
/// (both included).
fn path_to<'a>(root: &'a Element, span: &std::ops::Range<usize>) -> Option<Vec<&'a Element>> {
    let mut path = vec![root];
    let mut current = root;
    loop {
        if current.outer == *span {
            return Some(path);
        }
        current = current
            .children
            .iter()
            .find(|c| c.outer.start <= span.start && span.end <= c.outer.end)?;
        path.push(current);
    }
}

/// Namespace declarations in force below `ancestors` (root first): the nearest wins.
fn in_scope(ancestors: &[&Element]) -> Namespaces {
    let mut ns = Namespaces::new();
    for e in ancestors {
        for a in &e.attrs {
            if a.qname == "xmlns" {
                ns.insert(String::new(), a.value.clone());
            } else if let Some(p) = a.qname.strip_prefix("xmlns:") {
                ns.insert(p.to_owned(), a.value.clone());
            }
        }
    }
    ns
}

fn escape_text(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

fn escape_attr(text: &str, out: &mut String) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '"' => out.push_str("&quot;"),
            '\t' => out.push_str("&#x9;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

fn prefix_of(qname: &str) -> &str {
    qname.split_once(':').map_or("", |(p, _)| p)
}

struct Frame {
    /// Declarations in force (source).
    scope: Namespaces,
    /// Declarations as rendered so far in the output.
    rendered: Namespaces,
}

fn open(start: &BytesStart<'_>, parent: &Frame, inclusive: bool, out: &mut String) -> Result<Frame, String> {
    let qname = start.name().as_ref().to_owned();
    let mut scope = parent.scope.clone();
    let mut attrs = Vec::new();
    for a in start.attributes() {
        let a = a.map_err(|e| e.to_string())?;
        let name = a.key.as_ref().to_owned();
        let value = a
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| e.to_string())?
            .into_owned();
        if name == "xmlns" {
            scope.insert(String::new(), value);
        } else if let Some(p) = name.strip_prefix("xmlns:") {
            scope.insert(p.to_owned(), value);
        } else {
            attrs.push((name, value));
        }
    }
    // Which namespaces this element renders.
    let candidates: Vec<String> = if inclusive {
        scope.keys().cloned().collect()
    } else {
        let mut used = vec![prefix_of(&qname).to_owned()];
        for (name, _) in &attrs {
            let p = prefix_of(name);
            if !p.is_empty() && p != "xml" {
                used.push(p.to_owned());
            }
        }
        used.sort();
        used.dedup();
        used
    };
    let mut rendered = parent.rendered.clone();
    let mut decls = Vec::new();
    for p in candidates {
        let uri = scope.get(&p).cloned().unwrap_or_default();
        let already = parent.rendered.get(&p).cloned().unwrap_or_default();
        if uri != already {
            decls.push((p.clone(), uri.clone()));
            rendered.insert(p, uri);
        }
    }
    // Attributes by (namespace URI, local name); unqualified ones have no URI and come first.
    let mut keyed: Vec<((String, String), String, String)> = attrs
        .into_iter()
        .map(|(name, value)| {
            let (p, local) = name.split_once(':').map_or(("", name.as_str()), |(p, l)| (p, l));
            let uri = if p.is_empty() {
                String::new()
            } else if p == "xml" {
                "http://www.w3.org/XML/1998/namespace".to_owned()
            } else {
                scope.get(p).cloned().unwrap_or_default()
            };
            ((uri, local.to_owned()), name.clone(), value)
        })
        .collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    out.push('<');
    out.push_str(&qname);
    for (p, uri) in decls {
        if p.is_empty() {
            out.push_str(" xmlns=\"");
        } else {
            out.push_str(" xmlns:");
            out.push_str(&p);
            out.push_str("=\"");
        }
        escape_attr(&uri, out);
        out.push('"');
    }
    for (_, name, value) in keyed {
        out.push(' ');
        out.push_str(&name);
        out.push_str("=\"");
        escape_attr(&value, out);
        out.push('"');
    }
    out.push('>');
    Ok(Frame { scope, rendered })
}

/// Canonical XML 1.0 (no comments) of the element at `span` in `text`, whose ancestors are
/// `ancestors` (root first, the element itself excluded). The subtree at `skip` (an enveloped
/// Signature) is left out.
pub fn canonicalize(
    text: &str,
    span: std::ops::Range<usize>,
    ancestors: &[&Element],
    inclusive: bool,
    skip: Option<std::ops::Range<usize>>,
) -> Result<String, String> {
    let source = text.get(span.clone()).ok_or("span out of the text")?;
    let mut reader = Reader::from_str(source);
    reader.config_mut().check_end_names = true;
    let mut out = String::with_capacity(source.len() + 64);
    let mut stack = vec![Frame {
        scope: in_scope(ancestors),
        rendered: Namespaces::new(),
    }];
    let mut skipping = 0usize;
    loop {
        let before = span.start + usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(|e| e.to_string())?;
        if skipping > 0 {
            match event {
                Event::Start(_) => skipping += 1,
                Event::End(_) => skipping -= 1,
                Event::Eof => return Err("unbalanced".into()),
                _ => {}
            }
            continue;
        }
        match event {
            // The enveloped Signature: its subtree is left out.
            Event::Start(_) if skip.as_ref().is_some_and(|k| k.start == before) => skipping = 1,
            Event::Empty(_) if skip.as_ref().is_some_and(|k| k.start == before) => {}
            Event::Start(s) => {
                let parent = stack.last().ok_or("unbalanced")?;
                let frame = open(&s, parent, inclusive, &mut out)?;
                stack.push(frame);
            }
            Event::Empty(s) => {
                let parent = stack.last().ok_or("unbalanced")?;
                open(&s, parent, inclusive, &mut out)?;
                out.push_str("</");
                out.push_str(s.name().as_ref());
                out.push('>');
            }
            Event::End(e) => {
                stack.pop();
                out.push_str("</");
                out.push_str(e.name().as_ref());
                out.push('>');
            }
            Event::Text(t) => {
                if stack.len() > 1 {
                    escape_text(&t.xml10_content(), &mut out);
                }
            }
            Event::CData(c) => escape_text(&c.xml10_content(), &mut out),
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => c.to_string(),
                    None => resolve_predefined_entity(&r).ok_or("unknown entity")?.to_owned(),
                };
                escape_text(&resolved, &mut out);
            }
            Event::PI(p) => {
                if stack.len() > 1 {
                    out.push_str("<?");
                    out.push_str(&p.into_inner());
                    out.push_str("?>");
                }
            }
            Event::Comment(_) | Event::Decl(_) | Event::DocType(_) => {}
            Event::Eof => break,
        }
    }
    Ok(out)
}

fn algorithm(e: Option<&Element>) -> &str {
    e.and_then(|e| e.attr("Algorithm")).unwrap_or_default()
}

fn find_by_id<'a>(root: &'a Element, id: &str) -> Option<&'a Element> {
    let mut stack = vec![root];
    while let Some(e) = stack.pop() {
        if e.attr("Id") == Some(id) {
            return Some(e);
        }
        stack.extend(e.children.iter().rev());
    }
    None
}

/// Verifies `signature` (an element of the document `root` parsed from `text`): its one
/// Reference's digest and its SignatureValue. Returns the certificate (DER) that signed.
pub fn verify(text: &str, root: &Element, signature: &Element) -> Result<Vec<u8>, Code> {
    let signed_info = signature
        .child("SignedInfo")
        .ok_or_else(|| shape("falta SignedInfo"))?;
    let references: Vec<&Element> = signed_info.children_named("Reference").collect();
    let [reference] = references.as_slice() else {
        return Err(shape("se espera una Reference"));
    };
    let uri = reference.attr("URI").unwrap_or_default();
    let id = uri
        .strip_prefix('#')
        .filter(|id| !id.is_empty())
        .ok_or_else(|| shape("Reference URI"))?;
    let target = find_by_id(root, id).ok_or_else(|| shape("Reference URI sin elemento"))?;

    let transforms: Vec<&str> = reference
        .child("Transforms")
        .map(|t| {
            t.children_named("Transform")
                .map(|t| algorithm(Some(t)))
                .collect()
        })
        .unwrap_or_default();
    if !transforms.contains(&ENVELOPED) || !transforms.iter().any(|t| *t == EXC_C14N || *t == C14N) {
        return Err(shape("Transforms"));
    }
    if transforms
        .iter()
        .any(|t| ![ENVELOPED, EXC_C14N, C14N].contains(t))
    {
        return Err(shape("Transform no soportado"));
    }
    let reference_inclusive = transforms.iter().rev().find(|t| **t != ENVELOPED) == Some(&C14N);
    if algorithm(reference.child("DigestMethod")) != SHA256 {
        return Err(shape("DigestMethod"));
    }
    let c14n_method = algorithm(signed_info.child("CanonicalizationMethod"));
    if c14n_method != EXC_C14N && c14n_method != C14N {
        return Err(shape("CanonicalizationMethod"));
    }
    if algorithm(signed_info.child("SignatureMethod")) != RSA_SHA256 {
        return Err(shape("SignatureMethod"));
    }

    let target_path = path_to(root, &target.outer).ok_or_else(|| shape("Reference URI"))?;
    let skip = (signature.outer.start >= target.outer.start && signature.outer.end <= target.outer.end)
        .then(|| signature.outer.clone());
    let canonical = canonicalize(
        text,
        target.outer.clone(),
        &target_path[..target_path.len() - 1],
        reference_inclusive,
        skip,
    )
    .map_err(|e| shape(&e))?;
    let digest = base64::engine::general_purpose::STANDARD.encode(Sha256::digest(canonical.as_bytes()));
    let stated: String = reference
        .child_text("DigestValue")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    if digest != stated {
        return Err(invalid("DigestValue"));
    }

    let info_path = path_to(root, &signed_info.outer).ok_or_else(|| shape("SignedInfo"))?;
    let canonical_info = canonicalize(
        text,
        signed_info.outer.clone(),
        &info_path[..info_path.len() - 1],
        c14n_method == C14N,
        None,
    )
    .map_err(|e| shape(&e))?;
    let decode =
        |s: &str| base64::engine::general_purpose::STANDARD.decode(s.split_whitespace().collect::<String>());
    let value = decode(signature.child_text("SignatureValue").unwrap_or_default())
        .map_err(|_| invalid("SignatureValue no es base64"))?;
    let der = signature
        .child("KeyInfo")
        .and_then(|k| k.child("X509Data"))
        .and_then(|d| d.child_text("X509Certificate"))
        .and_then(|c| decode(c).ok())
        .ok_or_else(|| Code::new("0120", "Certificado inválido"))?;
    let key = openssl::x509::X509::from_der(&der)
        .and_then(|c| c.public_key())
        .map_err(|_| Code::new("0120", "Certificado inválido"))?;
    let ok = openssl::sign::Verifier::new(openssl::hash::MessageDigest::sha256(), &key)
        .and_then(|mut v| v.verify_oneshot(&value, canonical_info.as_bytes()))
        .unwrap_or(false);
    if !ok {
        return Err(invalid("SignatureValue"));
    }
    Ok(der)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sifen_soap::xml;

    const FE: &str = include_str!("fixtures/fe-signed-selfsigned-qr.xml");
    const CANCEL: &str = include_str!("fixtures/cancel-event-signed-selfsigned.xml");

    fn check(doc: &str) -> Result<Vec<u8>, Code> {
        let text = xml::strip_prolog(doc);
        let root = xml::parse(text).unwrap();
        let signature = root.find("Signature").unwrap();
        verify(text, &root, signature)
    }

    #[test]
    fn documents_signed_by_xmlsec1_verify() {
        assert!(check(FE).is_ok());
        assert!(check(CANCEL).is_ok());
    }

    #[test]
    fn a_changed_value_breaks_the_digest_and_a_changed_signed_info_the_signature() {
        let tampered = FE.replace(
            "<dTotGralOpe>165000</dTotGralOpe>",
            "<dTotGralOpe>165001</dTotGralOpe>",
        );
        assert_ne!(tampered, FE);
        assert_eq!(check(&tampered).unwrap_err().code, "0141");
        let value = FE.replace("<SignatureValue>W3Xd", "<SignatureValue>W3Xe");
        assert_eq!(check(&value).unwrap_err().code, "0141");
        let method = FE.replace(RSA_SHA256, "http://www.w3.org/2000/09/xmldsig#rsa-sha1");
        assert_eq!(check(&method).unwrap_err().code, "0140");
    }

    #[test]
    fn exclusive_canonical_form_declares_only_the_namespaces_used() {
        let doc = r#"<r xmlns="urn:a" xmlns:x="urn:x"><e b="2" a="1&amp;&quot;">t&gt;<f/></e></r>"#;
        let root = xml::parse(doc).unwrap();
        let e = root.child("e").unwrap();
        let exc = canonicalize(doc, e.outer.clone(), &[&root], false, None).unwrap();
        assert_eq!(exc, r#"<e xmlns="urn:a" a="1&amp;&quot;" b="2">t&gt;<f></f></e>"#);
        let inc = canonicalize(doc, e.outer.clone(), &[&root], true, None).unwrap();
        assert_eq!(
            inc,
            r#"<e xmlns="urn:a" xmlns:x="urn:x" a="1&amp;&quot;" b="2">t&gt;<f></f></e>"#
        );
    }
}
