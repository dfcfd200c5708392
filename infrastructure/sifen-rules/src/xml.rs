//! A small XML tree for reading a DE: elements by local name (prefixes dropped; the simulator
//! has checked the namespaces before), their attributes and their text. Its own parser, so that
//! nothing of the code under test reads the XML for its checker.

use quick_xml::Reader;
use quick_xml::events::{BytesStart, Event};

/// Deepest nesting read (a DE nests about eight levels).
const MAX_DEPTH: usize = 64;

/// An element.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Node {
    /// The local name (`dRucEm`).
    pub name: String,
    /// Attributes by local name, namespace declarations left out.
    pub attrs: Vec<(String, String)>,
    /// The children, in order.
    pub children: Vec<Node>,
    /// The text content (entities resolved), untrimmed.
    pub text: String,
}

impl Node {
    /// The first child with this name.
    pub fn child(&self, name: &str) -> Option<&Node> {
        self.children.iter().find(|c| c.name == name)
    }

    /// Every child with this name.
    pub fn children<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Node> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }

    /// The element at a `/`-separated path of child names (`gDatGralOpe/gEmis/dRucEm`); the
    /// empty path is this element.
    pub fn at(&self, path: &str) -> Option<&Node> {
        path.split('/')
            .filter(|s| !s.is_empty())
            .try_fold(self, |node, name| node.child(name))
    }

    /// Every element at a path, following every child of each name on the way
    /// (`gDtipDE/gCamItem` gives each item).
    pub fn all<'a>(&'a self, path: &'a str) -> Vec<&'a Node> {
        let mut found = vec![self];
        for name in path.split('/').filter(|s| !s.is_empty()) {
            found = found.iter().flat_map(|n| n.children(name)).collect();
        }
        found
    }

    /// The trimmed text at a path, when the element is there.
    pub fn text_at(&self, path: &str) -> Option<&str> {
        self.at(path).map(|n| n.text.trim())
    }

    /// An attribute's value.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

fn local(qname: &str) -> String {
    qname
        .rsplit_once(':')
        .map_or(qname, |(_, local)| local)
        .to_owned()
}

fn open(start: &BytesStart<'_>) -> Result<Node, String> {
    let mut attrs = Vec::new();
    for attr in start.attributes() {
        let attr = attr.map_err(|e| e.to_string())?;
        let key: &str = attr.key.as_ref();
        if key == "xmlns" || key.starts_with("xmlns:") {
            continue;
        }
        let value = attr
            .normalized_value(quick_xml::XmlVersion::Implicit1_0)
            .map_err(|e| e.to_string())?
            .into_owned();
        attrs.push((local(key), value));
    }
    Ok(Node {
        name: local(start.name().as_ref()),
        attrs,
        ..Node::default()
    })
}

/// Parses one XML document into its root element.
pub fn parse(text: &str) -> Result<Node, String> {
    let mut reader = Reader::from_str(text);
    reader.config_mut().check_end_names = true;
    let mut stack: Vec<Node> = Vec::new();
    let mut root = None;
    loop {
        let event = reader.read_event().map_err(|e| e.to_string())?;
        match event {
            Event::Start(start) => {
                if stack.len() >= MAX_DEPTH {
                    return Err("too deep".into());
                }
                stack.push(open(&start)?);
            }
            Event::Empty(start) => {
                let node = open(&start)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => root = Some(node),
                }
            }
            Event::End(_) => {
                let node = stack.pop().ok_or("an end tag without a start")?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => root = Some(node),
                }
            }
            Event::Text(t) => {
                if let Some(node) = stack.last_mut() {
                    node.text.push_str(&t.xml10_content());
                }
            }
            Event::CData(c) => {
                if let Some(node) = stack.last_mut() {
                    node.text.push_str(&c.xml10_content());
                }
            }
            Event::GeneralRef(r) => {
                let resolved = match r.resolve_char_ref().map_err(|e| e.to_string())? {
                    Some(c) => c.to_string(),
                    None => quick_xml::escape::resolve_predefined_entity(&r)
                        .ok_or_else(|| "unknown entity".to_owned())?
                        .to_owned(),
                };
                if let Some(node) = stack.last_mut() {
                    node.text.push_str(&resolved);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    root.ok_or_else(|| "no root element".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_paths_texts_and_attributes_without_prefixes() {
        let root = parse(
            r#"<?xml version="1.0"?><rDE xmlns="http://ekuatia.set.gov.py/sifen/xsd"><DE Id="01"><g><a> x &amp; y </a><a>2</a></g></DE><ds:Signature xmlns:ds="urn:x"/></rDE>"#,
        )
        .unwrap();
        assert_eq!(root.at("DE").and_then(|d| d.attr("Id")), Some("01"));
        assert_eq!(root.text_at("DE/g/a"), Some("x & y"));
        assert_eq!(root.all("DE/g/a").len(), 2);
        assert!(root.child("Signature").is_some());
        assert!(parse("<a><b></a>").is_err());
    }
}
