//! The parser's own tests: structural issues with their paths and codes, defaults, round trips.

use super::*;
use crate::document::issues::Issue;

fn codes_of(result: Result<CanonicalDocument, Vec<Issue>>) -> Vec<(String, String)> {
    result
        .expect_err("refused")
        .into_iter()
        .map(|i| (i.field, i.code))
        .collect()
}

fn with(path: &[&str], value: Value) -> Value {
    let mut doc = sample_invoice();
    let mut slot = &mut doc;
    for key in path {
        slot = match key.parse::<usize>() {
            Ok(i) => &mut slot[i],
            Err(_) => &mut slot[*key],
        };
    }
    *slot = value;
    doc
}

#[test]
fn the_sample_parses_and_round_trips_digit_for_digit() {
    let doc = from_value(sample_invoice()).expect("valid");
    assert_eq!(doc.items.len(), 2);
    assert_eq!(doc.items[1].tax_amount, Amount::from(2619));
    let again = serde_json::to_value(&doc).expect("json");
    assert_eq!(again["items"][1]["unit_price"], serde_json::json!(27500));
    let exact = parse(br#"{"x": 0}"#);
    assert!(exact.is_err());
    let tenth = with(
        &["items", "0", "quantity"],
        serde_json::from_str("0.1").expect("n"),
    );
    let doc = from_value(tenth).expect("valid");
    assert_eq!(doc.items[0].quantity.get().to_string(), "0.1");
    assert_eq!(
        (doc.items[0].quantity.get() * Decimal::from(3)).to_string(),
        "0.3",
        "exact decimals, not binary floating point"
    );
}

#[test]
fn structural_problems_name_their_path_and_code() {
    assert_eq!(
        codes_of(parse(b"{not json")),
        vec![("$".to_owned(), "malformed_json".to_owned())]
    );
    assert_eq!(
        codes_of(from_value(with(
            &["items", "1", "tax_ratee"],
            serde_json::json!(5)
        ))),
        vec![("items[1].tax_ratee".to_owned(), "unknown_field".to_owned())]
    );
    assert_eq!(
        codes_of(from_value(with(&["type"], serde_json::json!("factura")))),
        vec![("type".to_owned(), "invalid_enum".to_owned())]
    );
    assert_eq!(
        codes_of(from_value(with(
            &["items", "0", "unit_price"],
            serde_json::json!("110000")
        ))),
        vec![("items[0].unit_price".to_owned(), "invalid_type".to_owned())]
    );
    assert_eq!(
        codes_of(from_value(with(
            &["issue_datetime"],
            serde_json::json!("2026-03-02T10:15:00")
        ))),
        vec![("issue_datetime".to_owned(), "invalid_format".to_owned())]
    );
    let issues = from_value(with(
        &["issue_datetime"],
        serde_json::json!("2026-11-26T10:15:00"),
    ))
    .expect_err("no offset");
    assert!(
        issues[0].message.contains("no UTC offset")
            && issues[0].message.contains("2026-11-26T10:15:00-03:00"),
        "{issues:?}"
    );
    let issues = from_value(with(
        &["payment_terms", "due_date"],
        serde_json::json!("26/11/2026"),
    ))
    .expect_err("not a date");
    assert_eq!(issues[0].field, "payment_terms.due_date");
    assert_eq!(issues[0].code, "invalid_format");
    assert!(issues[0].message.contains("2026-11-26"), "{issues:?}");
    let mut missing = sample_invoice();
    missing.as_object_mut().expect("object").remove("totals");
    assert_eq!(
        codes_of(from_value(missing)),
        vec![("$".to_owned(), "required".to_owned())]
    );
}

#[test]
fn only_pyg_and_the_three_tax_rates_are_accepted() {
    let doc = with(&["currency"], serde_json::json!("USD"));
    let doc = {
        let mut d = doc;
        d["items"][0]["tax_rate"] = serde_json::json!(7);
        d
    };
    assert_eq!(
        codes_of(from_value(doc)),
        vec![
            ("currency".to_owned(), "unsupported_currency".to_owned()),
            ("items[0].tax_rate".to_owned(), "invalid_tax_rate".to_owned())
        ]
    );
}
#[test]
fn any_transport_object_parses_into_its_keys_and_serializes_back_as_sent() {
    let sent = serde_json::json!({"kind": "own", "mode": "boat", "freight_payer": 2,
        "responsible": null, "distance_km": "12", "invoice_date": "2026-3-5",
        "vehicle": {"type": "Camión", "colour": "red"}, "carrier": 5, "zz": [1]});
    let doc = from_value(with(&["transport"], sent.clone())).expect("any object parses");
    let t = doc.transport.as_ref().expect("transport");
    assert_eq!(t.kind.as_ref().and_then(Given::value), Some(&TransportKind::Own));
    assert!(
        t.mode
            .as_ref()
            .is_some_and(|g| g.value().is_none() && g.sent() == "boat")
    );
    assert_eq!(t.freight_payer.as_ref().and_then(Given::value), Some(&2));
    assert!(t.responsible.as_ref().is_some_and(Given::is_null));
    assert!(t.distance_km.as_ref().is_some_and(|g| g.value().is_none()));
    assert_eq!(
        t.invoice_date.as_ref().and_then(Given::value),
        NaiveDate::from_ymd_opt(2026, 3, 5).as_ref()
    );
    let vehicle = t.vehicle.as_ref().and_then(Given::value).expect("an object");
    assert_eq!(
        vehicle.kind.as_ref().and_then(Given::value).map(String::as_str),
        Some("Camión")
    );
    assert_eq!(vehicle.other.keys().collect::<Vec<_>>(), ["colour"]);
    assert!(t.carrier.as_ref().is_some_and(|g| g.value().is_none()));
    assert_eq!(t.other.keys().collect::<Vec<_>>(), ["zz"]);
    assert!(!t.is_empty());
    assert_eq!(serde_json::to_value(&doc).expect("json")["transport"], sent);
    let empty = from_value(with(&["transport"], serde_json::json!({}))).expect("valid");
    assert!(empty.transport.as_ref().is_some_and(Transport::is_empty));
    assert_eq!(
        codes_of(from_value(with(&["transport"], serde_json::json!("x")))),
        vec![("transport".to_owned(), "invalid_type".to_owned())]
    );
}

#[test]
fn parties_may_name_their_city() {
    let doc = from_value(with(
        &["buyer", "city_name"],
        serde_json::json!("CIUDAD DEL ESTE"),
    ))
    .expect("valid");
    let buyer = doc.buyer.expect("buyer");
    assert_eq!(buyer.city_name.as_deref(), Some("CIUDAD DEL ESTE"));
    let doc = from_value(with(&["seller", "city_name"], serde_json::json!("LUQUE"))).expect("valid");
    assert_eq!(doc.seller.city_name.as_deref(), Some("LUQUE"));
    assert_eq!(
        codes_of(from_value(with(&["buyer", "city_name"], serde_json::json!(182)))),
        vec![("buyer.city_name".to_owned(), "invalid_type".to_owned())]
    );
}
