//! A small, bounded element tree over quick-xml, for reading SIFEN's answers and (in the
//! simulator) its requests.
//!
//! Elements are matched by local name, because the prefixes SIFEN and SOAP stacks use vary
//! (`ns2:`, `env:`, `soap:`, none); the resolved namespace is kept for the few places that care
//! (the envelope, the DE's own namespace). Every element remembers where it sits in the source
//! text, so that signed content can be taken out byte for byte instead of re-serialised.
//!
//! The tree is built without recursion and refuses documents nested deeper than [`MAX_DEPTH`],
//! so that hostile input can neither overflow the stack while parsing nor while dropping.

use quick_xml::escape::resolve_predefined_entity;
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use std::ops::Range;

/// Deepest nesting accepted. A signed DE inside a SOAP answer is about 15 levels deep.
pub const MAX_DEPTH: usize = 100;

/// Most elements accepted in one document (a lot of 50 DEs has a few thousand).
pub const MAX_ELEMENTS: usize = 500_000;

/// Why a text is not an XML document we can read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum XmlError {
    /// No element at all.
    #[error("no root element")]
    Empty,
    /// Not well-formed.
    #[error("not well-formed XML: {0}")]
    Malformed(String),
    /// Nested deeper than [`MAX_DEPTH`] or more than [`MAX_ELEMENTS`] elements.
    #[error("the document is too deep or too large")]
    TooLarge,
}

/// An attribute, by local name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// The name as written (`xsi:schemaLocation`).
    pub qname: String,
    /// The value, entities resolved.
    pub value: String,
}

impl Attr {
    /// The name without its prefix.
    pub fn local(&self) -> &str {
        local_part(&self.qname)
    }
}

/// One element and its subtree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// The name as written (`ns2:rRetEnviDe`).
    pub qname: String,
    /// The namespace the prefix (or the default namespace) resolves to.
    pub ns: Option<String>,
    /// Attributes, namespace declarations included.
    pub attrs: Vec<Attr>,
    /// Child elements in document order.
    pub children: Vec<Element>,
    /// The element's own character data (text and CDATA directly inside it), entities resolved.
    pub text: String,
    /// Byte range of the whole element in the source (start tag to end tag).
    pub outer: Range<usize>,
    /// Byte range of its content (between the tags; empty for `<a/>`).
    pub inner: Range<usize>,
}

fn local_part(qname: &str) -> &str {
    qname.rsplit_once(':').map_or(qname, |(_, local)| local)
}

impl Element {
    /// The name without its prefix.
    pub fn local(&self) -> &str {
        local_part(&self.qname)
    }

    /// Whether the name has a prefix.
    pub fn has_prefix(&self) -> bool {
        self.qname.contains(':')
    }

    /// The first child with this local name.
    pub fn child(&self, local: &str) -> Option<&Element> {
        self.children.iter().find(|c| c.local() == local)
    }

    /// Every child with this local name.
    pub fn children_named<'a>(&'a self, local: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.local() == local)
    }

    /// The trimmed text of the first child with this local name.
    pub fn child_text(&self, local: &str) -> Option<&str> {
        self.child(local).map(|c| c.text.trim())
    }

    /// The value of the attribute with this local name (namespace declarations excluded).
    pub fn attr(&self, local: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|a| a.local() == local && a.qname != "xmlns" && !a.qname.starts_with("xmlns:"))
            .map(|a| a.value.as_str())
    }

    /// The first element with this local name in the subtree (this element included), depth
    /// first. Iterative: the tree is bounded, but a stack of references is cheap.
    pub fn find(&self, local: &str) -> Option<&Element> {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            if e.local() == local {
                return Some(e);
            }
            stack.extend(e.children.iter().rev());
        }
        None
    }

    /// Whether any element of the subtree (this one included) has a prefix, ignoring the
    /// subtrees of elements named `skip`.
    pub fn any_prefix_outside(&self, skip: &str) -> bool {
        let mut stack = vec![self];
        while let Some(e) = stack.pop() {
            if e.local() == skip {
                continue;
            }
            if e.has_prefix() {
                return true;
            }
            stack.extend(e.children.iter());
        }
        false
    }
}

impl Drop for Element {
    // Dropping a tree is recursive by default; take the children out iteratively instead so
    // that even a tree at the depth limit drops in constant stack.
    fn drop(&mut self) {
        let mut stack = std::mem::take(&mut self.children);
        while let Some(mut e) = stack.pop() {
            stack.append(&mut e.children);
        }
    }
}

struct Open {
    element: Element,
    /// Namespace declarations this element made (prefix, uri); `""` is the default namespace.
    declared: Vec<(String, Option<String>)>,
}

fn lookup(stack: &[Open], prefix: &str) -> Option<String> {
    for open in stack.iter().rev() {
        if let Some((_, uri)) = open.declared.iter().rev().find(|(p, _)| p == prefix) {
            return uri.clone();
        }
    }
    match prefix {
        "xml" => Some("http://www.w3.org/XML/1998/namespace".to_owned()),
        _ => None,
    }
}

fn malformed(e: impl std::fmt::Display) -> XmlError {
    XmlError::Malformed(e.to_string())
}

fn open_element(start: &BytesStart<'_>, stack: &[Open], from: usize, to: usize) -> Result<Open, XmlError> {
    let qname = start.name().as_ref().to_owned();
    if qname.is_empty() {
        return Err(XmlError::Malformed("an element without a name".into()));
    }
    let mut attrs = Vec::new();
    let mut declared = Vec::new();
    for attr in start.attributes() {
        let attr = attr.map_err(malformed)?;
        let name = attr.key.as_ref().to_owned();
        let value = attr
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(malformed)?
            .into_owned();
        if name == "xmlns" {
            declared.push((String::new(), (!value.is_empty()).then(|| value.clone())));
        } else if let Some(prefix) = name.strip_prefix("xmlns:") {
            declared.push((prefix.to_owned(), Some(value.clone())));
        }
        attrs.push(Attr { qname: name, value });
    }
    let prefix = qname.rsplit_once(':').map_or("", |(p, _)| p);
    // Own declarations count for the element itself.
    let ns = declared
        .iter()
        .rev()
        .find(|(p, _)| p == prefix)
        .map(|(_, uri)| uri.clone())
        .unwrap_or_else(|| lookup(stack, prefix));
    if !prefix.is_empty() && ns.is_none() && prefix != "xml" {
        return Err(XmlError::Malformed(format!("undeclared prefix {prefix}")));
    }
    Ok(Open {
        element: Element {
            qname,
            ns,
            attrs,
            children: Vec::new(),
            text: String::new(),
            outer: from..to,
            inner: to..to,
        },
        declared,
    })
}

/// Parses one XML document (optional declaration, one root element, nothing else but
/// whitespace, comments and processing instructions around it).
pub fn parse(text: &str) -> Result<Element, XmlError> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Open> = Vec::new();
    let mut root: Option<Element> = None;
    let mut count = 0usize;
    loop {
        let before = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        let event = reader.read_event().map_err(malformed)?;
        let after = usize::try_from(reader.buffer_position()).unwrap_or(usize::MAX);
        match event {
            Event::Start(start) | Event::Empty(start) if root.is_some() => {
                return Err(XmlError::Malformed(format!(
                    "a second root element {}",
                    start.name().as_ref()
                )));
            }
            Event::Start(start) => {
                count += 1;
                if stack.len() >= MAX_DEPTH || count > MAX_ELEMENTS {
                    return Err(XmlError::TooLarge);
                }
                let open = open_element(&start, &stack, before, after)?;
                stack.push(open);
            }
            Event::Empty(start) => {
                count += 1;
                if stack.len() >= MAX_DEPTH || count > MAX_ELEMENTS {
                    return Err(XmlError::TooLarge);
                }
                let open = open_element(&start, &stack, before, after)?;
                match stack.last_mut() {
                    Some(parent) => parent.element.children.push(open.element),
                    None => root = Some(open.element),
                }
            }
            Event::End(end) => {
                let Some(mut open) = stack.pop() else {
                    return Err(XmlError::Malformed(format!(
                        "an end tag {} without a start",
                        end.name().as_ref()
                    )));
                };
                if open.element.qname != end.name().as_ref() {
                    return Err(XmlError::Malformed(format!(
                        "{} closed by {}",
                        open.element.qname,
                        end.name().as_ref()
                    )));
                }
                open.element.inner.end = before;
                open.element.outer.end = after;
                let element = std::mem::replace(
                    &mut open.element,
                    Element {
                        qname: String::new(),
                        ns: None,
                        attrs: Vec::new(),
                        children: Vec::new(),
                        text: String::new(),
                        outer: 0..0,
                        inner: 0..0,
                    },
                );
                match stack.last_mut() {
                    Some(parent) => parent.element.children.push(element),
                    None => root = Some(element),
                }
            }
            Event::Text(t) => {
                let content = t.xml10_content();
                match stack.last_mut() {
                    Some(open) => open.element.text.push_str(&content),
                    None if content.trim().is_empty() => {}
                    None => return Err(XmlError::Malformed("text outside the root element".into())),
                }
            }
            Event::CData(c) => match stack.last_mut() {
                Some(open) => open.element.text.push_str(&c.xml10_content()),
                None => return Err(XmlError::Malformed("CDATA outside the root element".into())),
            },
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().map_err(malformed)? {
                    Some(c) => c.to_string(),
                    None => resolve_predefined_entity(&r)
                        .ok_or_else(|| XmlError::Malformed(format!("unknown entity &{};", &*r)))?
                        .to_owned(),
                };
                match stack.last_mut() {
                    Some(open) => open.element.text.push_str(&resolved),
                    None => return Err(XmlError::Malformed("a reference outside the root element".into())),
                }
            }
            Event::DocType(_) => return Err(XmlError::Malformed("a DOCTYPE is not accepted".into())),
            Event::Decl(_) | Event::PI(_) | Event::Comment(_) => {}
            Event::Eof => break,
        }
    }
    if let Some(open) = stack.last() {
        return Err(XmlError::Malformed(format!(
            "{} is never closed",
            open.element.qname
        )));
    }
    root.ok_or(XmlError::Empty)
}

/// Escapes text for element content or a double-quoted attribute.
pub fn escape(text: &str) -> String {
    quick_xml::escape::escape(text).into_owned()
}

/// Strips what may precede the root element of a stand-alone document (a BOM, the XML
/// declaration, whitespace, comments) and trailing whitespace, so that the element can be
/// placed inside another document unchanged.
pub fn strip_prolog(text: &str) -> &str {
    let mut rest = text.strip_prefix('\u{feff}').unwrap_or(text);
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("<?")
            && let Some(end) = after.find("?>")
        {
            rest = &after[end + 2..];
            continue;
        }
        if let Some(after) = rest.strip_prefix("<!--")
            && let Some(end) = after.find("-->")
        {
            rest = &after[end + 3..];
            continue;
        }
        break;
    }
    rest.trim_end()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_are_found_by_local_name_whatever_their_prefix() {
        let doc = r#"<?xml version="1.0"?><env:Envelope xmlns:env="urn:e"><env:Body><ns2:a xmlns:ns2="urn:s"><ns2:b x="1">t &amp; u&#65;</ns2:b><c/></ns2:a></env:Body></env:Envelope>"#;
        let root = parse(doc).unwrap();
        assert_eq!(root.local(), "Envelope");
        assert_eq!(root.ns.as_deref(), Some("urn:e"));
        let a = root.find("a").unwrap();
        assert_eq!(a.ns.as_deref(), Some("urn:s"));
        assert_eq!(a.child_text("b"), Some("t & uA"));
        assert_eq!(a.child("b").unwrap().attr("x"), Some("1"));
        assert_eq!(
            &doc[a.outer.clone()],
            r#"<ns2:a xmlns:ns2="urn:s"><ns2:b x="1">t &amp; u&#65;</ns2:b><c/></ns2:a>"#
        );
        assert_eq!(
            &doc[a.inner.clone()],
            r#"<ns2:b x="1">t &amp; u&#65;</ns2:b><c/>"#
        );
        let c = a.child("c").unwrap();
        assert_eq!(&doc[c.outer.clone()], "<c/>");
        assert!(c.inner.is_empty());
    }

    #[test]
    fn broken_documents_are_errors() {
        for bad in [
            "",
            "   ",
            "<a>",
            "<a></b>",
            "</a>",
            "<a/><b/>",
            "text<a/>",
            "<a>&nbsp;</a>",
            "<p:a/>",
            "<!DOCTYPE a><a/>",
            "<a x='1' x='2'/>",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflowing_the_stack() {
        let deep = "<a>".repeat(100_000);
        assert_eq!(parse(&deep), Err(XmlError::TooLarge));
        let ok = format!("{}{}", "<a>".repeat(MAX_DEPTH), "</a>".repeat(MAX_DEPTH));
        assert!(parse(&ok).is_ok());
    }

    #[test]
    fn the_prolog_is_stripped_but_not_the_element() {
        assert_eq!(
            strip_prolog("\u{feff}<?xml version=\"1.0\"?>\n<!-- c --><rDE a=\"1\"/>\n"),
            "<rDE a=\"1\"/>"
        );
        assert_eq!(strip_prolog("<rDE/>"), "<rDE/>");
    }
}
