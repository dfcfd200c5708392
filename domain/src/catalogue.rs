//! Renders `docs/events.md`, the catalogue of event types, from the event enums themselves: each
//! variant's doc comment and fields are read from the enum's source, and its example is a sample
//! event built in Rust (the `samples()` of each aggregate's tests) and serialised as the store
//! keeps it. The test fails when an enum gains a variant without a sample, when a sample is of
//! no variant, or when the file differs from what the code renders
//! (`KUATIA_BLESS=1 cargo test -p kuatia-domain catalogue` writes it).

use cqrs_es::DomainEvent;
use serde::Serialize;
use serde_json::Value;
use std::fmt::Write as _;

/// A field as the source declares it.
struct Field {
    name: String,
    ty: String,
    doc: String,
}

/// A variant as the source declares it: its doc, its fields (inline, or of the struct a tuple
/// variant wraps).
struct Variant {
    name: String,
    doc: String,
    fields: Vec<Field>,
    wraps: Option<String>,
}

/// One stream type's events.
struct Group {
    stream_type: &'static str,
    stream_id: &'static str,
    about: &'static str,
    source: &'static str,
    enum_name: &'static str,
    samples: Vec<(String, Value)>,
}

fn samples<E: DomainEvent + Serialize>(events: Vec<E>) -> Vec<(String, Value)> {
    events
        .into_iter()
        .map(|e| (e.event_type(), serde_json::to_value(&e).expect("serialisable")))
        .collect()
}

/// Joins `///` lines into one paragraph.
fn doc_line(buffer: &mut Vec<String>) -> String {
    let text = buffer.join(" ");
    buffer.clear();
    text
}

/// The fields of `pub struct name { … }` in `source`.
fn struct_fields(source: &str, name: &str) -> Vec<Field> {
    let start = format!("pub struct {name} {{");
    let Some(at) = source.find(&start) else {
        return Vec::new();
    };
    let mut fields = Vec::new();
    let mut docs = Vec::new();
    for line in source[at + start.len()..].lines() {
        if line == "}" {
            break;
        }
        let text = line.trim();
        if let Some(doc) = text.strip_prefix("///") {
            docs.push(doc.trim().to_owned());
        } else if let Some((field, ty)) = text.strip_prefix("pub ").and_then(|t| t.split_once(':')) {
            fields.push(Field {
                name: field.trim().to_owned(),
                ty: ty.trim().trim_end_matches(',').to_owned(),
                doc: doc_line(&mut docs),
            });
        }
    }
    fields
}

/// The variants of `pub enum name { … }` in `source`.
fn variants(source: &str, name: &str) -> Vec<Variant> {
    let start = format!("pub enum {name} {{");
    let at = source.find(&start).unwrap_or_else(|| panic!("no enum {name}"));
    let mut variants: Vec<Variant> = Vec::new();
    let mut docs = Vec::new();
    for line in source[at + start.len()..].lines() {
        if line == "}" {
            break;
        }
        let indent = line.len() - line.trim_start().len();
        let text = line.trim();
        if text.is_empty() || text.starts_with("#[") || text == "}," || text == "}" {
            continue;
        }
        if let Some(doc) = text.strip_prefix("///") {
            docs.push(doc.trim().to_owned());
            continue;
        }
        if indent == 4 {
            let name: String = text.chars().take_while(|c| c.is_ascii_alphanumeric()).collect();
            let wraps = text
                .strip_prefix(&format!("{name}("))
                .map(|rest| rest.trim_end_matches("),").to_owned());
            let fields = wraps
                .as_deref()
                .map_or_else(Vec::new, |w| struct_fields(source, w));
            variants.push(Variant {
                name,
                doc: doc_line(&mut docs),
                fields,
                wraps,
            });
        } else if let Some((field, ty)) = text.split_once(':') {
            let variant = variants.last_mut().expect("a field after its variant");
            variant.fields.push(Field {
                name: field.trim().to_owned(),
                ty: ty.trim().trim_end_matches(',').to_owned(),
                doc: doc_line(&mut docs),
            });
        }
    }
    variants
}

fn groups() -> Vec<Group> {
    vec![
        Group {
            stream_type: "tenant",
            stream_id: "`tenant:<slug>`",
            about: "The tenant, its API keys and its members (people who use the console).",
            source: include_str!("tenant.rs"),
            enum_name: "TenantEvent",
            samples: samples(crate::tenant::tests::samples()),
        },
        Group {
            stream_type: "company",
            stream_id: "`company:<tenant>:<RUC without check digit>`",
            about: "A company (the taxpayer that issues) and its configuration: branches, issuance \
                    points, print settings, certificates and emission channels.",
            source: include_str!("company.rs"),
            enum_name: "CompanyEvent",
            samples: samples(crate::company::tests::samples()),
        },
        Group {
            stream_type: "document",
            stream_id: "`document:<tenant>:<document>`",
            about: "A document's whole life: intake, the SIFEN or autoimpresor pipeline, \
                    cancellation and inutilization, artifacts and deliveries. \
                    `GET /v1/documents/{id}/timeline` shows these.",
            source: include_str!("document/aggregate/event.rs"),
            enum_name: "DocumentEvent",
            samples: samples(crate::document::aggregate::test_support::samples()),
        },
        Group {
            stream_type: "webhook_endpoint",
            stream_id: "`webhook_endpoint:<tenant>:<endpoint>`",
            about: "A webhook endpoint and its signing secret.",
            source: include_str!("webhook.rs"),
            enum_name: "EndpointEvent",
            samples: samples(crate::webhook::tests::samples()),
        },
        Group {
            stream_type: "support",
            stream_id: "`support:<tenant>`",
            about: "What an operator did to the running service: a job retried or discarded (`kuatia jobs \
                    retry`, `discard`, or the console's operators' room) on the job's tenant's stream; who is \
                    an operator (`kuatia operators add`, `remove`), a projection rebuilt and the store verified \
                    from the operators' room on the system's stream (`support:<nil uuid>`). The actor is \
                    `operator:<name>` (the OS user or `--actor` on the command line, the email in the console).",
            source: include_str!("support.rs"),
            enum_name: "SupportEvent",
            samples: samples(crate::support::tests::samples()),
        },
    ]
}

const INTRO: &str = "# Events

<!-- Rendered from the event enums of `domain/` by `domain/src/catalogue.rs`; do not edit by hand.
     After changing an event: KUATIA_BLESS=1 cargo test -p kuatia-domain catalogue -->

Every change kuatia makes is an event appended to one log (docs/adr/0001-event-store.md). This is
the catalogue of event types: for each, what it means, its fields, and an example of its `data`
(the payload as stored: an object named after the type carrying its fields, or just the type's
name, a string, for an event without fields). A test renders this file from the code, so a type
or field is here exactly when the code has it.

## Reading events

`GET /v1/events` (roles with audit access) and `kuatia events export` give the events in commit
order. Each has:

| field | what it is |
| --- | --- |
| `position` (`global_position` in an export) | commit-ordered position across the whole log; pass the last one as `after` to read on |
| `event_id` | UUIDv7 |
| `stream_type`, `stream_id` | the aggregate (table below) |
| `version` (`stream_version`) | 1-based version within the stream |
| `type` (`event_type`) | one of the types below |
| `schema_version` | version of `data`'s shape (all are 1 today) |
| `data` (`payload`) | the event's fields, as below |
| `metadata` | as stored and hashed: `actor` (`api_key:<id>`, `user:<id>`, `system:<worker>`, `operator:<name>`, `anonymous:signup`), `request_id`, `correlation_id`, `causation_id`, `trace_parent` |
| `actor` (API only) | the actor resolved when read: `{type, id, name}`, `name` the key's current name or the user's email, null for a worker, an operator or a key or user that no longer exists |
| `recorded_at` | the database's clock at the commit |
| `prev_hash`, `hash` | the stream's hash chain: `hash` is SHA-256 over the canonical event and `prev_hash` (null for a stream's first event); `kuatia events verify` checks it, `--file` checks an export offline |

`GET /v1/events` filters with `after`, `limit` (1 to 1000), `type` (a type below), `document` (a
document id: that document's stream) and `company` (a company id). Any other parameter is refused
with 400 naming it. A company-scoped key reads its own company's events only.

**A company's events** are its own stream (`company`: its profile, branches, issuance points, print
settings, certificates, channels) and the streams of its documents. Events carry no company column:
the filter reads the streams from the companies and documents read models at query time. Both are
written in the same transaction as the events that create them and rebuilt in one transaction
that holds appends back, so the answer is the same before, during and after
`kuatia projections rebuild`, on SQLite and PostgreSQL alike. Tenant events (keys, members) and
webhook endpoints are the tenant's, not a company's, and never answer a company filter, even for
an endpoint that only sends one company's events.

## Streams

| stream type | stream id | what it holds |
| --- | --- | --- |
";

/// The whole file.
fn render() -> String {
    let groups = groups();
    let mut out = INTRO.to_owned();
    for g in &groups {
        let _ = writeln!(out, "| `{}` | {} | {} |", g.stream_type, g.stream_id, g.about);
    }
    for g in &groups {
        let _ = write!(out, "\n## `{}` stream\n\n{}\n", g.stream_type, g.about);
        let variants = variants(g.source, g.enum_name);
        let declared: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
        for (name, _) in &g.samples {
            assert!(
                declared.contains(&name.as_str()),
                "{}: the sample {name} is no variant of the enum",
                g.enum_name
            );
        }
        for v in &variants {
            let found: Vec<&Value> = g
                .samples
                .iter()
                .filter(|(name, _)| *name == v.name)
                .map(|(_, value)| value)
                .collect();
            assert_eq!(
                found.len(),
                1,
                "{}::{} needs exactly one sample in its module's tests::samples()",
                g.enum_name,
                v.name
            );
            let example = found[0];
            let _ = write!(out, "\n### `{}`\n\n{}\n", v.name, v.doc);
            if v.fields.is_empty() {
                let _ = writeln!(out, "\nNo fields: `data` is the string `\"{}\"`.", v.name);
            } else {
                if let Some(wrapped) = &v.wraps {
                    let _ = writeln!(out, "\nThe fields of `{wrapped}`:");
                }
                out.push_str("\n| field | type | what it is |\n| --- | --- | --- |\n");
                for f in &v.fields {
                    let _ = writeln!(
                        out,
                        "| `{}` | `{}` | {} |",
                        f.name,
                        f.ty.replace('|', "\\|"),
                        f.doc.replace('|', "\\|")
                    );
                }
            }
            let json = serde_json::to_string_pretty(example).expect("json");
            let _ = write!(out, "\n```json\n{json}\n```\n");
        }
    }
    out
}

#[test]
fn docs_events_md_is_the_catalogue_the_code_renders() {
    let rendered = render();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/events.md");
    if std::env::var_os("KUATIA_BLESS").is_some() {
        std::fs::write(&path, &rendered).expect("write docs/events.md");
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == rendered,
        "docs/events.md is out of date: run KUATIA_BLESS=1 cargo test -p kuatia-domain catalogue"
    );
}

#[test]
fn every_variant_of_every_event_enum_is_read_from_the_source() {
    // The parser against what serde knows: an unknown variant's error lists every variant.
    fn serde_variants<E: serde::de::DeserializeOwned>() -> Vec<String> {
        let err = serde_json::from_value::<E>(serde_json::json!({"NoSuchVariant": {}}))
            .err()
            .expect("no such variant")
            .to_string();
        // "expected `A`", "expected `A` or `B`", "expected one of `A`, `B`, …".
        let list = err.split("expected ").nth(1).expect("a list");
        list.split('`').skip(1).step_by(2).map(str::to_owned).collect()
    }
    let by_source = |g: &Group| -> Vec<String> {
        variants(g.source, g.enum_name)
            .into_iter()
            .map(|v| v.name)
            .collect()
    };
    let groups = groups();
    let expected = [
        serde_variants::<crate::tenant::TenantEvent>(),
        serde_variants::<crate::company::CompanyEvent>(),
        serde_variants::<crate::document::aggregate::DocumentEvent>(),
        serde_variants::<crate::webhook::EndpointEvent>(),
        serde_variants::<crate::support::SupportEvent>(),
    ];
    for (g, mut want) in groups.iter().zip(expected) {
        let mut got = by_source(g);
        got.sort();
        want.sort();
        assert_eq!(got, want, "{}", g.enum_name);
    }
}
