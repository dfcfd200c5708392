use super::*;
use crate::document::canonical::{self, sample_invoice};
use chrono::{SecondsFormat, TimeZone};
use proptest::prelude::*;
use serde_json::{Value, json};

/// An electronic invoice's CDC.
const INVOICE_CDC: &str = "01800695631001001000000122025011511234567899";
/// A remisión's CDC (SET's example).
const REMISION_CDC: &str = "07800044649001001900018322019031217200146403";

fn company() -> Ruc {
    Ruc::parse("80069563-1").expect("the SET test emitter")
}

/// Forty-five minutes after the sample's issue (2026-03-02T10:15:00-03:00).
fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 2, 14, 0, 0).unwrap()
}

fn check_with(doc: Value, adjust: impl FnOnce(&mut ValidationContext<'_>)) -> Validation {
    let ruc = company();
    let mut ctx = ValidationContext {
        channel: ChannelKind::Sifen,
        company_ruc: &ruc,
        environment: Some(SifenEnvironment::Test),
        now: now(),
        certificate_expires_in_days: Some(200),
        buyer_registry: RegistryAnswer::NotLoaded,
    };
    adjust(&mut ctx);
    let doc = canonical::from_value(doc).expect("structurally valid");
    validate(&doc, &ctx)
}

fn check(doc: Value) -> Validation {
    check_with(doc, |_| {})
}

fn pairs(issues: &[Issue]) -> Vec<(&str, &str)> {
    issues
        .iter()
        .map(|i| (i.field.as_str(), i.code.as_str()))
        .collect()
}

/// The (field, code) pairs of the errors of `doc`.
fn errors_of(doc: Value) -> Vec<(String, String)> {
    check(doc).errors.into_iter().map(|i| (i.field, i.code)).collect()
}

fn expect(doc: Value, expected: &[(&str, &str)]) {
    let v = check(doc);
    assert_eq!(pairs(&v.errors), expected, "{:#?}", v.errors);
}

fn valid(doc: Value) {
    expect(doc, &[]);
}

/// The sample invoice, edited.
fn edit(change: impl FnOnce(&mut Value)) -> Value {
    let mut doc = sample_invoice();
    change(&mut doc);
    doc
}

/// A JSON number with exactly these digits.
fn n(text: &str) -> Value {
    serde_json::from_str(text).expect("a number")
}

/// An invoice of one line, totals from `total` and `tax`.
fn one_line(quantity: Value, price: Value, rate: u8, tax: i64, total: i64) -> Value {
    edit(|d| {
        d["items"] = json!([{"description": "Línea", "quantity": quantity, "unit_price": price,
            "tax_rate": rate, "tax_amount": tax, "total_amount": total}]);
        d["totals"] = json!({"subtotal": total - tax, "tax_total": tax, "grand_total": total});
    })
}

fn message_of(v: &Validation, field: &str) -> String {
    v.errors
        .iter()
        .chain(&v.warnings)
        .find(|i| i.field == field)
        .map(|i| i.message.clone())
        .unwrap_or_default()
}

fn vendor() -> Value {
    json!({"legal_name": "Juan Benítez", "document_type": "ci", "document_number": "1234567",
           "address": "Compañía Potrero", "house_number": "0", "department_code": 11,
           "city_code": 3383})
}

fn autofactura() -> Value {
    edit(|d| {
        d["type"] = json!("autofactura");
        d["seller"] = vendor();
        d.as_object_mut().expect("object").remove("buyer");
        d["items"] = json!([{"description": "Mandioca (kg)", "quantity": 100, "unit_price": 3000,
            "tax_rate": 0, "tax_amount": 0, "total_amount": 300000, "unit": 83}]);
        d["totals"] = json!({"subtotal": 300000, "tax_total": 0, "grand_total": 300000});
        d["payment_terms"] = json!({"condition": "cash", "method": "cash"});
        d["associated_document"] = json!({"constancia_type": 1,
            "constancia_number": "12345678901", "constancia_control": "AB12-CD3"});
    })
}

fn remision() -> Value {
    edit(|d| {
        d["type"] = json!("remision");
        d["reason"] = json!(1);
        d["transport"] = json!({"kind": "own", "vehicle": "ABC 123"});
        d["buyer"]["address"] = json!("Av. Mariscal López");
        d["buyer"]["house_number"] = json!("1234");
        d["buyer"]["department_code"] = json!(1);
        d["buyer"]["city_code"] = json!(1);
    })
}

#[test]
fn a_remision_between_the_company_s_premises_goes_to_the_company_itself() {
    // Rule 2606: reason 7 needs the receiver's RUC to be the issuer's.
    let moved = |buyer_ruc: Option<&str>| {
        edit(|d| {
            *d = remision();
            d["reason"] = json!(7);
            match buyer_ruc {
                Some(ruc) => d["buyer"]["ruc"] = json!(ruc),
                None => {
                    d["buyer"] = json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
                        "document_type": "ci", "document_number": "1234567",
                        "address": "Av. Mariscal López", "house_number": "1234",
                        "department_code": 1, "city_code": 1});
                }
            }
        })
    };
    valid(moved(Some("80069563-1")));
    let v = check(moved(Some("80013884-8")));
    assert_eq!(pairs(&v.errors), vec![("buyer.ruc", "remision_buyer_not_issuer")]);
    assert!(
        message_of(&v, "buyer.ruc").contains("80069563-1"),
        "{:#?}",
        v.errors
    );
    expect(moved(None), &[("buyer.ruc", "remision_buyer_not_issuer")]);
    // Other motives may go to anyone.
    valid(remision());
}

fn note(kind: &str) -> Value {
    edit(|d| {
        d["type"] = json!(kind);
        d["reason"] = json!(2);
        d["associated_document"] = json!({"cdc": INVOICE_CDC});
    })
}

#[test]
fn the_sample_invoice_is_valid_without_warnings() {
    let v = check(sample_invoice());
    assert!(v.is_valid(), "{:#?}", v.errors);
    assert!(v.warnings.is_empty(), "{:#?}", v.warnings);
}

#[test]
fn every_issue_is_reported_at_once() {
    let doc = edit(|d| {
        d["external_id"] = json!("   ");
        d["type"] = json!("receipt");
        d["buyer"]["ruc"] = json!("80013884-1");
        d["items"][1]["tax_amount"] = json!(2700);
    });
    let v = check(doc);
    assert_eq!(
        pairs(&v.errors),
        vec![
            ("external_id", "invalid_length"),
            ("type", "unsupported_document_type"),
            ("buyer.ruc", "invalid_check_digit"),
            ("items[1].tax_amount", "amount_mismatch"),
        ]
    );
    assert_eq!(
        message_of(&v, "buyer.ruc"),
        "the check digit of RUC 80013884 is 8, not 1"
    );
    assert_eq!(
        message_of(&v, "items[1].tax_amount"),
        "items[1].tax_amount: expected 2619, got 2700"
    );
}

#[test]
fn one_guarani_off_passes_and_two_fail_with_the_expected_value() {
    valid(edit(|d| d["items"][1]["tax_amount"] = json!(2620)));
    valid(edit(|d| d["items"][1]["tax_amount"] = json!(2618)));
    valid(edit(|d| d["totals"]["grand_total"] = json!(165001)));
    let v = check(edit(|d| d["items"][1]["tax_amount"] = json!(2621)));
    assert_eq!(pairs(&v.errors), vec![("items[1].tax_amount", "amount_mismatch")]);
    assert!(message_of(&v, "items[1].tax_amount").ends_with("expected 2619, got 2621"));
    let v = check(edit(|d| d["totals"]["grand_total"] = json!(165002)));
    assert_eq!(pairs(&v.errors), vec![("totals.grand_total", "amount_mismatch")]);
    assert!(message_of(&v, "totals.grand_total").ends_with("expected 165000, got 165002"));
    expect(
        edit(|d| d["items"][0]["total_amount"] = json!(109998)),
        &[("items[0].total_amount", "amount_mismatch")],
    );
    expect(
        edit(|d| d["totals"]["subtotal"] = json!(165000)),
        &[("totals.subtotal", "amount_mismatch")],
    );
    expect(
        edit(|d| d["totals"]["tax_total"] = json!(0)),
        &[("totals.tax_total", "amount_mismatch")],
    );
}

#[test]
fn a_wrong_line_counts_at_its_right_value_in_the_totals() {
    // The caller summed its wrong tax: the line and the total are both wrong, and the
    // total's expected value is that of the corrected document.
    let v = check(edit(|d| {
        d["items"][1]["tax_amount"] = json!(5000);
        d["totals"]["tax_total"] = json!(15000);
        d["totals"]["subtotal"] = json!(150000);
    }));
    assert_eq!(
        pairs(&v.errors),
        vec![
            ("items[1].tax_amount", "amount_mismatch"),
            ("totals.tax_total", "amount_mismatch"),
            ("totals.subtotal", "amount_mismatch"),
        ]
    );
    assert!(message_of(&v, "totals.tax_total").ends_with("expected 12619, got 15000"));
    assert!(message_of(&v, "totals.subtotal").ends_with("expected 152381, got 150000"));
}

#[test]
fn rounding_is_half_up_to_whole_guaranies() {
    // 10 500 at 5 %: 500 exactly; 110 000 at 10 %: 10 000; 55 000 at 5 %: 2 619.04… → 2 619.
    valid(one_line(json!(1), json!(10500), 5, 500, 10500));
    let v = check(one_line(json!(1), json!(10500), 5, 502, 10500));
    assert!(message_of(&v, "items[0].tax_amount").ends_with("expected 500, got 502"));
    // 2.5 × 1 = 2.5 → 3 (half-even would say 2 and accept 1).
    valid(one_line(n("2.5"), json!(1), 0, 0, 3));
    let v = check(one_line(n("2.5"), json!(1), 0, 0, 1));
    // The totals summed the wrong line: they are expected at the corrected value too.
    assert_eq!(
        pairs(&v.errors),
        vec![
            ("items[0].total_amount", "amount_mismatch"),
            ("totals.grand_total", "amount_mismatch"),
            ("totals.subtotal", "amount_mismatch"),
        ]
    );
    assert!(message_of(&v, "items[0].total_amount").ends_with("expected 3, got 1"));
    // 10 % of 16 500: 1 500 exactly; of 16 505: 1 500.45… → 1 500; of 16 506: 1 500.54… → 1 501.
    valid(one_line(json!(1), json!(16500), 10, 1500, 16500));
    valid(one_line(json!(1), json!(16505), 10, 1500, 16505));
    let v = check(one_line(json!(1), json!(16506), 10, 1503, 16506));
    assert!(message_of(&v, "items[0].tax_amount").ends_with("expected 1501, got 1503"));
}

#[test]
fn decimal_quantities_are_exact() {
    // In binary floating point 1.15 × 10 = 11.499…, which would round to 11.
    let v = check(one_line(n("1.15"), json!(10), 0, 0, 10));
    assert!(message_of(&v, "items[0].total_amount").ends_with("expected 12, got 10"));
    valid(one_line(n("1.15"), json!(10), 0, 0, 12));
    // 0.3 × 5 = 1.5 → 2 (floating point: 1.4999…).
    let v = check(one_line(n("0.3"), json!(5), 0, 0, 0));
    assert!(message_of(&v, "items[0].total_amount").ends_with("expected 2, got 0"));
    // 0.1 × 3 000 = 300, three times: 900, not 900.0000000000001.
    valid(edit(|d| {
        let line = json!({"description": "Décimo", "quantity": n("0.1"), "unit_price": 3000,
            "tax_rate": 10, "tax_amount": 27, "total_amount": 300});
        d["items"] = json!([line.clone(), line.clone(), line]);
        d["totals"] = json!({"subtotal": 819, "tax_total": 81, "grand_total": 900});
    }));
    // A unit price may have decimals; amounts may not.
    valid(one_line(json!(3), n("3333.33"), 0, 0, 10000));
    expect(
        one_line(n("0.123456789"), json!(1000), 0, 0, 123),
        &[("items[0].quantity", "too_many_decimals")],
    );
}

#[test]
fn quantities_prices_and_amounts_have_their_ranges() {
    expect(
        edit(|d| d["items"][0]["quantity"] = json!(0)),
        &[("items[0].quantity", "must_be_positive")],
    );
    expect(
        edit(|d| d["items"][0]["unit_price"] = json!(-110000)),
        &[("items[0].unit_price", "must_not_be_negative")],
    );
    expect(
        edit(|d| d["items"][0]["total_amount"] = n("110000.4")),
        &[("items[0].total_amount", "fractional_guaranies")],
    );
    expect(
        edit(|d| d["items"][0]["quantity"] = n("100000000000")),
        &[("items[0].quantity", "amount_out_of_range")],
    );
    expect(
        edit(|d| {
            d["items"][0]["quantity"] = n("9999999999");
            d["items"][0]["unit_price"] = n("999999999999999");
        }),
        &[("items[0].total_amount", "amount_out_of_range")],
    );
    expect(
        edit(|d| d["totals"]["grand_total"] = n("1e28")),
        &[("totals.grand_total", "amount_out_of_range")],
    );
}

#[test]
fn lines_have_their_counts_texts_and_codes() {
    expect(edit(|d| d["items"] = json!([])), &[("items", "no_items")]);
    let line = json!({"description": "x", "quantity": 1, "unit_price": 100, "tax_rate": 0,
        "tax_amount": 0, "total_amount": 100});
    expect(
        edit(|d| {
            d["items"] = Value::Array(vec![line; 1000]);
            d["totals"] = json!({"subtotal": 100000, "tax_total": 0, "grand_total": 100000});
        }),
        &[("items", "too_many_items")],
    );
    expect(
        edit(|d| {
            d["items"][0]["description"] = json!(" ");
            d["items"][0]["code"] = json!("C".repeat(51));
            d["items"][0]["unit"] = json!(78);
            d["items"][0]["exemption"] = json!("exempt");
            d["items"][1]["description"] = json!("é".repeat(121));
            d["items"][1]["unit"] = json!(77);
        }),
        &[
            ("items[0].description", "invalid_length"),
            ("items[0].code", "invalid_length"),
            ("items[0].unit", "invalid_code"),
            ("items[0].exemption", "not_allowed"),
            ("items[1].description", "invalid_length"),
        ],
    );
    valid(one_line(json!(1), json!(5000), 0, 0, 5000));
}

#[test]
fn the_seller_is_the_company() {
    expect(
        edit(|d| d["seller"]["ruc"] = json!("80013884-8")),
        &[("seller.ruc", "seller_ruc_mismatch")],
    );
    expect(
        edit(|d| d["seller"]["ruc"] = json!("80069563-2")),
        &[("seller.ruc", "invalid_check_digit")],
    );
    expect(
        edit(|d| d["seller"]["ruc"] = json!("80069563")),
        &[("seller.ruc", "invalid_ruc")],
    );
    valid(edit(|d| {
        d["seller"].as_object_mut().expect("object").remove("ruc");
    }));
    let test_name = edit(|d| d["seller"]["legal_name"] = json!(TEST_ISSUER_NAME));
    assert!(
        check(test_name.clone()).is_valid(),
        "the literal is right in test"
    );
    let v = check_with(test_name, |c| {
        c.environment = Some(SifenEnvironment::Production);
    });
    assert_eq!(
        pairs(&v.errors),
        vec![("seller.legal_name", "test_name_in_production")]
    );
}

fn at(when: DateTime<Utc>) -> Value {
    let local = when.with_timezone(&local_time::offset());
    edit(|d| d["issue_datetime"] = json!(local.to_rfc3339_opts(SecondsFormat::Secs, false)))
}

#[test]
fn the_issue_datetime_is_within_sifens_window() {
    let hours = TimeDelta::hours;
    valid(at(now() - hours(719)));
    valid(at(now() + hours(119)));
    let v = check(at(now() - hours(721)));
    assert_eq!(
        pairs(&v.errors),
        vec![("issue_datetime", "issue_datetime_too_old")]
    );
    assert!(message_of(&v, "issue_datetime").contains("721 hours ago"));
    expect(
        at(now() + hours(121)),
        &[("issue_datetime", "issue_datetime_in_future")],
    );
    let autoimpresor = |c: &mut ValidationContext<'_>| c.channel = ChannelKind::Autoimpresor;
    assert!(check_with(at(now() - hours(2000)), autoimpresor).is_valid());
    assert!(check_with(at(now() + hours(2000)), autoimpresor).is_valid());
    let first = Utc.with_ymd_and_hms(2018, 11, 22, 3, 0, 0).unwrap();
    assert!(check_with(at(first), autoimpresor).is_valid());
    let v = check_with(at(first - hours(1)), autoimpresor);
    assert_eq!(
        pairs(&v.errors),
        vec![("issue_datetime", "issue_datetime_too_old")]
    );
    assert!(message_of(&v, "issue_datetime").contains("2018-11-22"));
}

#[test]
fn each_document_type_has_a_valid_minimal_example() {
    valid(sample_invoice());
    valid(edit(|d| {
        d.as_object_mut().expect("object").remove("buyer");
    }));
    valid(note("credit_note"));
    valid(note("debit_note"));
    valid(edit(|d| {
        d["type"] = json!("credit_note");
        d["reason"] = json!(8);
        d["associated_document"] = json!({"timbrado": "12345678", "establishment": "001",
            "point": "002", "number": "0000123", "issue_date": "2026-02-01"});
    }));
    valid(remision());
    valid(autofactura());
    let receipt = edit(|d| d["type"] = json!("receipt"));
    assert_eq!(
        pairs(&check(receipt.clone()).errors),
        vec![("type", "unsupported_document_type")]
    );
    let on_autoimpresor = check_with(receipt, |c| {
        c.channel = ChannelKind::Autoimpresor;
        c.environment = None;
    });
    assert!(on_autoimpresor.is_valid(), "{:#?}", on_autoimpresor.errors);
}

#[test]
fn notes_refer_to_an_invoice_with_a_reason() {
    assert_eq!(modulo11(&INVOICE_CDC[..43]), 9);
    // Without `reason`, motive 1: only the reference is missing.
    expect(
        edit(|d| d["type"] = json!("credit_note")),
        &[("associated_document", "conditionally_required")],
    );
    for kind in ["credit_note", "debit_note", "remision"] {
        let parsed =
            crate::document::canonical::from_value(edit(|d| d["type"] = json!(kind))).expect("parses");
        assert_eq!(parsed.reason, Some(1), "{kind}");
    }
    let invoice = crate::document::canonical::from_value(edit(|_| {})).expect("parses");
    assert_eq!(invoice.reason, None, "an invoice gets no motive");
    let wrong_digit = format!("{}8", &INVOICE_CDC[..43]);
    let v = check(edit(|d| {
        d["type"] = json!("debit_note");
        d["reason"] = json!(9);
        d["associated_document"] = json!({"cdc": wrong_digit});
    }));
    assert_eq!(
        pairs(&v.errors),
        vec![
            ("associated_document.cdc", "invalid_check_digit"),
            ("reason", "invalid_code"),
        ]
    );
    assert!(message_of(&v, "associated_document.cdc").ends_with("is 9, not 8"));
    expect(
        edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(1);
            d["associated_document"] = json!({"cdc": &INVOICE_CDC[..43], "timbrado": "12345678",
                "constancia_type": 1});
        }),
        &[
            ("associated_document.constancia_type", "not_allowed"),
            ("associated_document.timbrado", "not_allowed"),
            ("associated_document.cdc", "invalid_pattern"),
        ],
    );
    expect(
        edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(1);
            d["associated_document"] = json!({"cdc": REMISION_CDC});
        }),
        &[
            ("associated_document.cdc", "associated_document_not_invoice"),
            ("associated_document.cdc", "associated_document_other_issuer"),
        ],
    );
    // An invoice of another taxpayer (SET's example FE, RUC 80013884-8): the CDC carries it.
    let v = check(edit(|d| {
        d["type"] = json!("credit_note");
        d["reason"] = json!(1);
        d["associated_document"] = json!({"cdc": "01800138848001001123456412018121817819792239"});
    }));
    assert_eq!(
        pairs(&v.errors),
        vec![("associated_document.cdc", "associated_document_other_issuer")]
    );
    assert!(
        message_of(&v, "associated_document.cdc").contains("RUC 80013884-8, not 80069563-1"),
        "{:?}",
        v.errors
    );
    expect(
        edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(1);
            d["associated_document"] = json!({"timbrado": "12345678", "establishment": "001",
                "point": "1", "issue_date": "2026-02-01"});
        }),
        &[
            ("associated_document.point", "invalid_pattern"),
            ("associated_document.number", "conditionally_required"),
        ],
    );
    expect(
        edit(|d| {
            d["type"] = json!("credit_note");
            d["reason"] = json!(1);
            d["associated_document"] = json!({});
        }),
        &[("associated_document.cdc", "conditionally_required")],
    );
    expect(edit(|d| d["reason"] = json!(1)), &[("reason", "not_allowed")]);
    // An invoice may refer to a remisión.
    valid(edit(|d| d["associated_document"] = json!({"cdc": REMISION_CDC})));
}

#[test]
fn a_remision_moves_goods_to_an_address_and_ignores_prices() {
    valid(edit(|d| {
        *d = remision();
        d["items"][0]["tax_amount"] = json!(1);
        d["totals"]["grand_total"] = json!(0);
        d["payment_terms"] = json!({"condition": "credit"});
    }));
    expect(
        edit(|d| {
            d["type"] = json!("remision");
            d["transport"] = json!({});
        }),
        &[
            ("buyer.address", "conditionally_required"),
            ("buyer.house_number", "conditionally_required"),
            ("buyer.department_code", "conditionally_required"),
            ("buyer.city_code", "conditionally_required"),
            ("transport", "conditionally_required"),
        ],
    );
    expect(
        edit(|d| {
            *d = remision();
            d["reason"] = json!(15);
            d["items"][0]["quantity"] = json!(0);
        }),
        &[
            ("items[0].quantity", "must_be_positive"),
            ("reason", "invalid_code"),
        ],
    );
    expect(edit(|d| d["transport"] = json!({"vehicle": "x"})), &[]);
    expect(
        edit(|d| {
            *d = note("credit_note");
            d["transport"] = json!({"vehicle": "x"});
        }),
        &[("transport", "not_allowed")],
    );
}

#[test]
fn an_autofactura_is_bought_by_the_company_from_a_non_taxpayer_without_iva() {
    valid(edit(|d| {
        *d = autofactura();
        d["buyer"] = json!({"ruc": "80069563-1", "operation_type": "b2c"});
    }));
    expect(
        edit(|d| {
            *d = autofactura();
            d["seller"]["ruc"] = json!("80069563-1");
            d["buyer"] = sample_invoice()["buyer"].clone();
            d["payment_terms"] = json!({"condition": "credit", "due_date": "2026-04-01"});
            d["associated_document"] = json!({"cdc": INVOICE_CDC});
        }),
        &[
            ("seller.ruc", "not_allowed"),
            ("buyer.ruc", "autofactura_buyer_not_issuer"),
            ("buyer.operation_type", "not_allowed"),
            ("payment_terms.condition", "not_allowed"),
            ("associated_document.cdc", "not_allowed"),
            ("associated_document.constancia_type", "conditionally_required"),
        ],
    );
    expect(
        edit(|d| {
            *d = autofactura();
            d["items"][0]["tax_rate"] = json!(10);
            d["items"][0]["tax_amount"] = json!(27273);
        }),
        &[
            ("items[0].tax_rate", "not_allowed"),
            ("items[0].tax_amount", "amount_mismatch"),
        ],
    );
    expect(
        edit(|d| {
            *d = autofactura();
            d["seller"] = json!({"legal_name": "Ana", "document_type": "ruc"});
            d["associated_document"] = json!({"constancia_type": 3, "constancia_number": "1"});
        }),
        &[
            ("seller.document_type", "not_allowed"),
            ("seller.document_number", "conditionally_required"),
            ("seller.legal_name", "invalid_length"),
            ("seller.address", "conditionally_required"),
            ("seller.house_number", "conditionally_required"),
            ("seller.department_code", "conditionally_required"),
            ("seller.city_code", "conditionally_required"),
            ("associated_document.constancia_type", "invalid_code"),
            ("associated_document.constancia_number", "invalid_pattern"),
        ],
    );
}

#[test]
fn credit_needs_a_due_date_or_installments_that_add_up() {
    let credit = |terms: Value| edit(|d| d["payment_terms"] = terms);
    valid(credit(json!({"condition": "credit", "due_date": "2026-04-01"})));
    valid(credit(json!({"condition": "credit", "installments": [
        {"due_date": "2026-04-01", "amount": 100000}, {"due_date": "2026-05-01", "amount": 65000}]})));
    expect(
        credit(json!({"condition": "credit"})),
        &[("payment_terms.due_date", "conditionally_required")],
    );
    let v = check(credit(json!({"condition": "credit", "installments": [
        {"due_date": "2026-03-01", "amount": 100000}, {"due_date": "2026-05-01", "amount": 60000}]})));
    assert_eq!(
        pairs(&v.errors),
        vec![
            (
                "payment_terms.installments[0].due_date",
                "due_date_before_issue_date"
            ),
            ("payment_terms.installments", "amount_mismatch"),
        ]
    );
    assert!(message_of(&v, "payment_terms.installments").ends_with("expected 165000, got 160000"));
    expect(
        credit(
            json!({"condition": "credit", "due_date": "2026-03-01", "installments": [
            {"due_date": "2026-04-01", "amount": 0}, {"due_date": "2026-05-01", "amount": n("165000.5")}]}),
        ),
        &[
            ("payment_terms.installments[0].amount", "must_be_positive"),
            ("payment_terms.installments[1].amount", "fractional_guaranies"),
            ("payment_terms.due_date", "due_date_before_issue_date"),
            ("payment_terms.installments", "amount_mismatch"),
        ],
    );
    expect(
        credit(json!({"condition": "cash", "due_date": "2026-04-01", "installments": []})),
        &[
            ("payment_terms.due_date", "not_allowed"),
            ("payment_terms.installments", "not_allowed"),
        ],
    );
    // Notes carry no payment condition in SIFEN: their terms are not checked.
    valid(edit(|d| {
        *d = note("credit_note");
        d["payment_terms"] = json!({"condition": "credit"});
    }));
}

#[test]
fn cards_and_cheques_come_with_their_details() {
    let terms = |t: Value| edit(|d| d["payment_terms"] = t);
    valid(terms(json!({"condition": "cash", "method": "card",
        "card": {"brand": "visa", "kind": "debit"}})));
    valid(terms(json!({"condition": "cash", "method": "check",
        "check": {"number": "1234", "bank": "Banco Continental"}})));
    expect(
        terms(json!({"condition": "cash", "method": "card"})),
        &[("payment_terms.card", "conditionally_required")],
    );
    expect(
        terms(json!({"condition": "cash", "method": "check"})),
        &[("payment_terms.check", "conditionally_required")],
    );
    expect(
        terms(json!({"condition": "cash", "method": "bank_transfer",
            "card": {"brand": "diners", "kind": "credit"},
            "check": {"number": "123456789", "bank": "BNF"}})),
        &[
            ("payment_terms.card", "not_allowed"),
            ("payment_terms.card.brand", "invalid_code"),
            ("payment_terms.check", "not_allowed"),
            ("payment_terms.check.number", "invalid_pattern"),
            ("payment_terms.check.bank", "invalid_length"),
        ],
    );
}

fn with_buyer(buyer: Value) -> Value {
    edit(|d| d["buyer"] = buyer)
}

#[test]
fn the_operation_type_decides_what_identifies_the_buyer() {
    valid(with_buyer(
        json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
        "document_type": "ci", "document_number": "1234567"}),
    ));
    valid(with_buyer(
        json!({"operation_type": "b2c", "legal_name": "Juan Pérez",
        "ruc": ruc_of("4444440")}),
    ));
    valid(with_buyer(json!({"operation_type": "anonymous"})));
    valid(with_buyer(json!({"document_type": "innominado"})));
    expect(
        with_buyer(json!({"operation_type": "b2b", "legal_name": "CLIENTE S.A.",
            "document_type": "ruc"})),
        &[("buyer.ruc", "conditionally_required")],
    );
    expect(
        with_buyer(json!({"operation_type": "b2c", "legal_name": "Juan Pérez"})),
        &[
            ("buyer.document_type", "conditionally_required"),
            ("buyer.document_number", "conditionally_required"),
        ],
    );
    expect(
        with_buyer(json!({"ruc": "80013884-8", "legal_name": "CLIENTE S.A.",
            "document_type": "ci", "document_number": "12 34"})),
        &[
            ("buyer.document_type", "not_allowed"),
            ("buyer.document_number", "invalid_pattern"),
        ],
    );
    expect(
        with_buyer(json!({"operation_type": "anonymous", "ruc": "80013884-8",
            "document_type": "ci"})),
        &[
            ("buyer.ruc", "not_allowed"),
            ("buyer.document_type", "not_allowed"),
        ],
    );
    expect(
        with_buyer(
            json!({"operation_type": "b2b", "ruc": "80013884-8", "legal_name": "CLI",
            "document_type": "innominado"}),
        ),
        &[
            ("buyer.document_type", "not_allowed"),
            ("buyer.document_type", "not_allowed"),
            ("buyer.legal_name", "invalid_length"),
        ],
    );
    expect(
        edit(|d| {
            *d = note("credit_note");
            d.as_object_mut().expect("object").remove("buyer");
        }),
        &[("buyer", "conditionally_required")],
    );
}

/// A RUC with its right check digit.
fn ruc_of(number: &str) -> String {
    Ruc::from_number(number).expect("a number").to_string()
}

#[test]
fn a_buyer_email_or_trade_name_sifen_cannot_write_is_refused_on_the_sifen_channel() {
    // Found by the canonical_document fuzz target: validation accepted the blank inside the
    // address, and build_rde then refused the document it had let in.
    expect(
        edit(|d| d["buyer"]["email"] = json!("c ompras@cliente.com.py")),
        &[("buyer.email", "invalid_pattern")],
    );
    expect(
        edit(|d| d["buyer"]["email"] = json!("compras@localhost")),
        &[("buyer.email", "invalid_pattern")],
    );
    expect(
        edit(|d| d["buyer"]["trade_name"] = json!("ABC")),
        &[("buyer.trade_name", "invalid_length")],
    );
    valid(edit(|d| {
        d["buyer"]["email"] = json!(" compras_01@cliente-sa.com.py ");
        d["buyer"]["trade_name"] = json!("Cliente");
    }));
    let printed = check_with(
        edit(|d| d["buyer"]["email"] = json!("c ompras@cliente.com.py")),
        |ctx| {
            ctx.channel = ChannelKind::Autoimpresor;
            ctx.environment = None;
        },
    );
    assert!(
        !pairs(&printed.errors)
            .iter()
            .any(|(field, _)| *field == "buyer.email"),
        "autoimpresor prints the email as given: {:#?}",
        printed.errors
    );
}

#[test]
fn control_characters_sifen_refuses_are_refused_on_the_sifen_channel() {
    // Found by the canonical_document fuzz target: an autofactura seller's address with a
    // carriage return, accepted here and refused by build_rde.
    expect(
        edit(|d| {
            d["buyer"]["legal_name"] = json!("CLIENTE\tS.A.");
            d["items"][1]["description"] = json!("Soporte\r\n(horas)");
        }),
        &[
            ("buyer.legal_name", "invalid_pattern"),
            ("items[1].description", "invalid_pattern"),
        ],
    );
    expect(
        edit(|d| {
            d["buyer"]["address"] = json!("Palma\u{0}");
            d["buyer"]["house_number"] = json!("12");
            d["buyer"]["department_code"] = json!(1);
            d["buyer"]["city_code"] = json!(1);
            d["buyer"]["city_name"] = json!("ASUNCION\n");
            d["metadata"] = json!({"note": "free\ntext"});
        }),
        &[
            ("buyer.city_name", "invalid_pattern"),
            ("buyer.address", "invalid_pattern"),
        ],
    );
    let printed = check_with(
        edit(|d| d["items"][0]["description"] = json!("Línea 1\nLínea 2")),
        |ctx| {
            ctx.channel = ChannelKind::Autoimpresor;
            ctx.environment = None;
        },
    );
    assert!(
        !pairs(&printed.errors)
            .iter()
            .any(|(field, _)| *field == "items[0].description"),
        "{:#?}",
        printed.errors
    );
}

#[test]
fn foreign_buyers_are_abroad_with_an_address_and_no_ruc() {
    valid(with_buyer(
        json!({"operation_type": "foreign", "legal_name": "ACME Corp",
        "country": "ARG", "address": "Av. Corrientes", "house_number": "1234",
        "document_type": "passport", "document_number": "AB123456"}),
    ));
    expect(
        with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
            "ruc": "80013884-8"})),
        &[
            ("buyer.ruc", "not_allowed"),
            ("buyer.country", "conditionally_required"),
            ("buyer.address", "conditionally_required"),
            ("buyer.house_number", "conditionally_required"),
        ],
    );
    expect(
        with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
            "country": "PRY", "address": "Palma", "house_number": "12"})),
        &[("buyer.country", "buyer_country_mismatch")],
    );
    expect(
        edit(|d| d["buyer"]["country"] = json!("ARG")),
        &[("buyer.country", "buyer_country_mismatch")],
    );
    expect(
        edit(|d| d["buyer"]["country"] = json!("py")),
        &[("buyer.country", "invalid_code")],
    );
    // Three capital letters, but no country SIFEN knows (the fuzzer's "ARO").
    expect(
        with_buyer(json!({"operation_type": "foreign", "legal_name": "ACME Corp",
            "country": "ARO", "address": "Av. Corrientes", "house_number": "1234"})),
        &[("buyer.country", "invalid_code")],
    );
    expect(
        edit(|d| {
            d["buyer"]["address"] = json!("Palma");
            d["buyer"]["house_number"] = json!("12a");
            d["buyer"]["department_code"] = json!(21);
            d["buyer"]["city_code"] = json!(0);
        }),
        &[
            ("buyer.house_number", "invalid_pattern"),
            ("buyer.department_code", "invalid_code"),
            ("buyer.city_code", "invalid_code"),
        ],
    );
    assert_eq!(
        operation_type(&Party {
            country: Some("BRA".into()),
            ..Party::default()
        }),
        OperationType::Foreign
    );
    assert_eq!(
        operation_type(&Party {
            ruc: Some("80013884-8".into()),
            ..Party::default()
        }),
        OperationType::B2b
    );
    assert_eq!(operation_type(&Party::default()), OperationType::Anonymous);
}

#[test]
fn an_unnamed_buyer_is_allowed_below_sixty_million_guaranies() {
    let big = |buyer: Option<Value>, transaction_type: Option<u8>| {
        let mut d = one_line(json!(1), json!(60_000_000), 10, 5_454_545, 60_000_000);
        match buyer {
            Some(b) => d["buyer"] = b,
            None => {
                d.as_object_mut().expect("object").remove("buyer");
            }
        }
        if let Some(t) = transaction_type {
            d["transaction_type"] = json!(t);
        }
        d
    };
    expect(big(None, None), &[("buyer", "anonymous_total_limit")]);
    expect(
        big(Some(json!({"document_type": "innominado"})), None),
        &[("buyer", "anonymous_total_limit")],
    );
    valid(big(None, Some(13)));
    valid(big(Some(sample_invoice()["buyer"].clone()), None));
    valid(one_line(json!(1), json!(59_999_999), 10, 5_454_545, 59_999_999));
}

#[test]
fn extension_codes_are_in_their_lists() {
    valid(edit(|d| {
        d["presence"] = json!(9);
        d["transaction_type"] = json!(13);
        d["items"][0]["unit"] = json!(2366);
    }));
    expect(
        edit(|d| {
            d["presence"] = json!(7);
            d["transaction_type"] = json!(14);
            d["items"][0]["unit"] = json!(0);
        }),
        &[
            ("items[0].unit", "invalid_code"),
            ("presence", "invalid_code"),
            ("transaction_type", "invalid_code"),
        ],
    );
}

#[test]
fn warnings_never_make_a_document_invalid() {
    let v = check_with(sample_invoice(), |c| {
        c.buyer_registry = RegistryAnswer::NotFound;
        c.certificate_expires_in_days = Some(12);
    });
    assert!(v.is_valid());
    assert_eq!(
        pairs(&v.warnings),
        vec![
            ("buyer.ruc", "buyer_ruc_not_found"),
            ("$", "certificate_expiring_soon"),
        ]
    );
    assert!(message_of(&v, "$").contains("expires in 12 days"));
    let v = check_with(sample_invoice(), |c| {
        c.buyer_registry = RegistryAnswer::Found {
            state: "SUSPENSION TEMPORAL".into(),
        };
    });
    assert!(v.is_valid());
    assert_eq!(pairs(&v.warnings), vec![("buyer.ruc", "buyer_ruc_not_active")]);
    assert!(message_of(&v, "buyer.ruc").contains("SUSPENSION TEMPORAL"));
    let quiet = check_with(sample_invoice(), |c| {
        c.buyer_registry = RegistryAnswer::Found {
            state: "ACTIVO".into(),
        };
        c.certificate_expires_in_days = Some(31);
    });
    assert!(quiet.warnings.is_empty());
    let autoimpresor = check_with(sample_invoice(), |c| {
        c.channel = ChannelKind::Autoimpresor;
        c.certificate_expires_in_days = Some(3);
    });
    assert!(autoimpresor.warnings.is_empty());
    let v = check_with(edit(|d| d["external_id"] = json!("")), |c| {
        c.certificate_expires_in_days = Some(-2);
    });
    assert!(!v.is_valid());
    assert!(message_of(&v, "$").contains("expired 2 days ago"));
}

/// A line: quantity in hundredths, unit price, rate.
fn arb_line() -> impl Strategy<Value = (i128, i128, u8)> {
    (
        1i128..=100_000,
        0i128..=5_000_000,
        prop::sample::select(vec![0u8, 5, 10]),
    )
}

/// Half-up of `a / b` for `a ≥ 0`, `b > 0`, in integers.
fn half_up_div(a: i128, b: i128) -> i128 {
    (2 * a + b) / (2 * b)
}

/// A valid invoice of these lines, computed with integer arithmetic, and its tax amounts.
fn invoice_of(lines: &[(i128, i128, u8)]) -> (Value, Vec<i128>) {
    let mut items = Vec::new();
    let mut taxes = Vec::new();
    let (mut grand, mut tax_total) = (0, 0);
    for &(hundredths, price, rate) in lines {
        let total = half_up_div(hundredths * price, 100);
        let tax = half_up_div(total * i128::from(rate), 100 + i128::from(rate));
        grand += total;
        tax_total += tax;
        taxes.push(tax);
        items.push(json!({"description": "Línea",
            "quantity": n(&format!("{}.{:02}", hundredths / 100, hundredths % 100)),
            "unit_price": n(&price.to_string()), "tax_rate": rate,
            "tax_amount": n(&tax.to_string()), "total_amount": n(&total.to_string())}));
    }
    let doc = edit(|d| {
        d["items"] = Value::Array(items);
        d["totals"] = json!({"subtotal": n(&(grand - tax_total).to_string()),
            "tax_total": n(&tax_total.to_string()), "grand_total": n(&grand.to_string())});
    });
    (doc, taxes)
}

proptest! {
    #[test]
    fn random_valid_invoices_pass_and_one_bad_tax_is_one_error_at_its_line(
        lines in prop::collection::vec(arb_line(), 1..12),
        pick in any::<prop::sample::Index>(),
        off in 2i128..100_000,
        down in any::<bool>(),
    ) {
        let (doc, taxes) = invoice_of(&lines);
        let v = check(doc.clone());
        prop_assert!(v.errors.is_empty(), "{:#?}", v.errors);
        let k = pick.index(lines.len());
        let wrong = if down { taxes[k] - off } else { taxes[k] + off };
        let mut bad = doc;
        bad["items"][k]["tax_amount"] = n(&wrong.to_string());
        let found = errors_of(bad);
        prop_assert_eq!(
            found,
            vec![(format!("items[{k}].tax_amount"), "amount_mismatch".to_owned())]
        );
    }
}
#[test]
fn a_city_name_is_one_line_of_one_to_thirty_characters() {
    let with_city = |name: &str| {
        edit(|d| {
            d["buyer"]["address"] = json!("Ruta 2");
            d["buyer"]["house_number"] = json!("0");
            d["buyer"]["department_code"] = json!(11);
            d["buyer"]["city_code"] = json!(3383);
            d["buyer"]["city_name"] = json!(name);
        })
    };
    valid(with_city("CIUDAD DEL ESTE"));
    expect(
        with_city("CIUDAD DEL ESTE, ALTO PARANA, PARAGUAY"),
        &[("buyer.city_name", "invalid_length")],
    );
    expect(with_city("  "), &[("buyer.city_name", "invalid_length")]);
    expect(
        with_city("CIUDAD\nDEL ESTE"),
        &[("buyer.city_name", "invalid_pattern")],
    );
    let mut seller = autofactura();
    seller["seller"]["city_name"] = json!("x".repeat(31));
    expect(seller, &[("seller.city_name", "invalid_length")]);
}

/// A sample invoice whose buyer lives at department `department`, city `city`.
fn buyer_at(department: u16, city: u32, name: Option<&str>) -> Value {
    edit(|d| {
        d["buyer"]["address"] = json!("Ruta 2");
        d["buyer"]["house_number"] = json!("0");
        d["buyer"]["department_code"] = json!(department);
        d["buyer"]["city_code"] = json!(city);
        if let Some(name) = name {
            d["buyer"]["city_name"] = json!(name);
        }
    })
}

#[test]
fn a_buyer_in_luque_is_valid_with_or_without_the_tables_name() {
    valid(buyer_at(12, 5946, None));
    valid(buyer_at(12, 5946, Some("Luque")));
    valid(buyer_at(1, 1, Some("Asunción (Distrito)")));
}

#[test]
fn a_department_that_is_not_the_citys_is_refused_naming_the_right_one() {
    // Department 11 (Alto Paraná) with city 6: Aguará is in Concepción.
    let doc = buyer_at(11, 6, None);
    expect(
        doc.clone(),
        &[("buyer.department_code", "city_department_mismatch")],
    );
    let message = message_of(&check(doc), "buyer.department_code");
    assert!(message.contains("department 2 CONCEPCION"), "{message}");
    // 19 is in the XSD's list but no city of SET's table is there.
    expect(
        buyer_at(19, 1, None),
        &[("buyer.department_code", "city_department_mismatch")],
    );
}

#[test]
fn a_city_name_that_is_not_the_tables_is_refused_naming_the_right_one() {
    let doc = buyer_at(2, 6, Some("LUQUE"));
    expect(doc.clone(), &[("buyer.city_name", "city_name_mismatch")]);
    let message = message_of(&check(doc), "buyer.city_name");
    assert!(message.contains("\"AGUARA\""), "{message}");
    // Both wrong: each field its issue.
    expect(
        buyer_at(11, 6, Some("LUQUE")),
        &[("buyer.department_code", "city_department_mismatch")],
    );
}

#[test]
fn a_city_code_outside_the_table_is_unknown() {
    expect(
        buyer_at(1, 99_999, None),
        &[("buyer.city_code", "unknown_city_code")],
    );
    // Out of SIFEN's range: invalid_code alone.
    expect(buyer_at(1, 100_000, None), &[("buyer.city_code", "invalid_code")]);
}

#[test]
fn the_autofactura_seller_and_the_remision_delivery_are_placed_too() {
    let mut seller = autofactura();
    seller["seller"]["department_code"] = json!(12);
    expect(
        seller.clone(),
        &[("seller.department_code", "city_department_mismatch")],
    );
    seller["seller"]["department_code"] = json!(11);
    seller["seller"]["city_name"] = json!("CIUDAD PTE. FRANCO");
    expect(seller, &[("seller.city_name", "city_name_mismatch")]);
    let mut far = remision();
    far["buyer"]["department_code"] = json!(1);
    far["buyer"]["city_code"] = json!(5946);
    let message = message_of(&check(far.clone()), "buyer.department_code");
    assert!(message.contains("department 12 CENTRAL"), "{message}");
    expect(far, &[("buyer.department_code", "city_department_mismatch")]);
}

#[test]
fn places_are_not_checked_off_sifen_where_no_printable_shows_them() {
    let autoimpresor = |doc: Value| {
        let v = check_with(doc, |ctx| {
            ctx.channel = ChannelKind::Autoimpresor;
            ctx.environment = None;
            ctx.certificate_expires_in_days = None;
        });
        v.errors
            .into_iter()
            .map(|i| (i.field, i.code))
            .collect::<Vec<_>>()
    };
    assert_eq!(autoimpresor(buyer_at(11, 6, Some("LUQUE"))), vec![]);
    assert_eq!(
        autoimpresor(buyer_at(21, 6, None)),
        vec![("buyer.department_code".to_owned(), "invalid_code".to_owned())]
    );
}
