//! The rules of the parties: the seller (and an autofactura's vendor), the buyer's identity,
//! address, place, country and contact, and what the DE cannot carry.

use super::*;

pub(super) fn seller_rules(doc: &CanonicalDocument, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    let seller = &doc.seller;
    if doc.doc_type == DocumentType::Autofactura {
        vendor_rules(seller, ctx, out);
        return;
    }
    if let Some(text) = &seller.ruc
        && let Some(ruc) = parse_ruc(out, "seller.ruc", text)
        && &ruc != ctx.company_ruc
    {
        push(
            out,
            "seller.ruc",
            codes::SELLER_RUC_MISMATCH,
            format!("seller.ruc {ruc} is not the company's RUC {}", ctx.company_ruc),
        );
    }
    let production =
        ctx.channel == ChannelKind::Sifen && ctx.environment == Some(SifenEnvironment::Production);
    if production
        && seller
            .legal_name
            .as_deref()
            .is_some_and(|name| name.trim() == TEST_ISSUER_NAME)
    {
        push(
            out,
            "seller.legal_name",
            codes::TEST_NAME_IN_PRODUCTION,
            "seller.legal_name is SIFEN's test-environment literal, which production refuses (rule 1263)",
        );
    }
}

/// The seller of an autofactura: a non-taxpayer or foreigner (gCamAE).
pub(super) fn vendor_rules(seller: &Party, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    const WHY: &str = "an autofactura describes the person the company buys from (gCamAE)";
    not_allowed(
        out,
        "seller.ruc",
        seller.ruc.is_some(),
        "the seller of an autofactura is a non-taxpayer (the company is the buyer)",
    );
    if required(out, "seller.document_type", seller.document_type.is_some(), WHY) {
        let accepted = matches!(
            seller.document_type,
            Some(IdDocumentType::Ci | IdDocumentType::Passport | IdDocumentType::ForeignId)
        );
        not_allowed(
            out,
            "seller.document_type",
            !accepted,
            "the seller of an autofactura is identified by ci, passport or foreign_id",
        );
    }
    if required(
        out,
        "seller.document_number",
        seller.document_number.is_some(),
        WHY,
    ) {
        document_number_rules(out, "seller.document_number", seller.document_number.as_deref());
    }
    if required(out, "seller.legal_name", seller.legal_name.is_some(), WHY)
        && let Some(name) = &seller.legal_name
    {
        text_of(out, "seller.legal_name", name, facts::SELLER_NAME);
    }
    address_rules(out, "seller", seller, Some(WHY), true);
    if ctx.channel == ChannelKind::Sifen {
        place_rules(out, "seller", seller);
    }
}

pub(super) fn document_number_rules(out: &mut Vec<Issue>, field: &str, number: Option<&str>) {
    if let Some(number) = number {
        let Length { min, max } = facts::ID_NUMBER;
        pattern_issue(
            out,
            field,
            pattern(number, min, max, alphanumeric_or_dash),
            &format!("{min} to {max} letters, digits or dashes"),
        );
    }
}

/// Address, house number and (in Paraguay) department and city codes of `prefix`.
/// `needed`: why the address is required, if it is; `domestic`: whether codes go with it.
pub(super) fn address_rules(
    out: &mut Vec<Issue>,
    prefix: &str,
    party: &Party,
    needed: Option<&str>,
    domestic: bool,
) {
    let field = |name: &str| format!("{prefix}.{name}");
    if let Some(why) = needed {
        required(out, &field("address"), party.address.is_some(), why);
    }
    if let Some(address) = &party.address {
        text_of(out, &field("address"), address, facts::ADDRESS);
    }
    if needed.is_some() || party.address.is_some() {
        let why = "an address comes with its house number (rule 1330)";
        required(out, &field("house_number"), party.house_number.is_some(), why);
        if domestic {
            let why = "an address in Paraguay comes with its department and city (rules 1324, 1327)";
            required(
                out,
                &field("department_code"),
                party.department_code.is_some(),
                why,
            );
            required(out, &field("city_code"), party.city_code.is_some(), why);
        }
    }
    if let Some(number) = &party.house_number {
        let Length { min, max } = facts::HOUSE_NUMBER;
        pattern_issue(
            out,
            &field("house_number"),
            pattern(number, min, max, u8::is_ascii_digit),
            &format!("{min} to {max} digits (0 when the house has no number)"),
        );
    }
    if let Some(code) = party.department_code
        && !DEPARTMENT_CODES.contains(&code)
    {
        push(
            out,
            field("department_code"),
            codes::INVALID_CODE,
            format!("department_code {code} is not a SIFEN department (1 to 20)"),
        );
    }
    if let Some(code) = party.city_code
        && !CITY_CODES.contains(&code)
    {
        push(
            out,
            field("city_code"),
            codes::INVALID_CODE,
            format!("city_code {code} is not a SIFEN city code (1 to 99999)"),
        );
    }
    if let Some(name) = &party.city_name {
        text_length(out, &field("city_name"), name, 1, CITY_NAME_MAX);
        if name.chars().any(char::is_control) {
            push(
                out,
                field("city_name"),
                codes::INVALID_PATTERN,
                format!("{prefix}.city_name must be one line of text, without control characters"),
            );
        }
    }
}

/// The place of `prefix`'s address in SET's geographic table, as the DE writes it (`sifen`
/// only; see the module doc): a city that exists, in the department given, under the name given.
/// Codes out of range and malformed names are [`address_rules`]' issues and are not repeated.
pub(super) fn place_rules(out: &mut Vec<Issue>, prefix: &str, party: &Party) {
    let field = |name: &str| format!("{prefix}.{name}");
    let (Some(department), Some(city)) = (party.department_code, party.city_code) else {
        return;
    };
    if party.address.is_none() || !DEPARTMENT_CODES.contains(&department) || !CITY_CODES.contains(&city) {
        return;
    }
    match geography::resolve(department, None, city) {
        Ok(place) => {
            let well_formed = |name: &&String| {
                let length = name.trim().chars().count();
                (1..=CITY_NAME_MAX).contains(&length)
                    && name.chars().count() <= CITY_NAME_MAX
                    && !name.chars().any(char::is_control)
            };
            if let Some(given) = party.city_name.as_ref().filter(well_formed)
                && !geography::same_name(given, &place.city.name)
            {
                push(
                    out,
                    field("city_name"),
                    codes::CITY_NAME_MISMATCH,
                    format!(
                        "{prefix}.city_name {:?} is not the name of city {city}: SET's geographic table \
                         calls it {:?} (omit city_name or send that name)",
                        given.trim(),
                        place.city.name
                    ),
                );
            }
        }
        Err(PlaceError::CityNotInDepartment {
            city,
            department: right,
            ..
        }) => push(
            out,
            field("department_code"),
            codes::CITY_DEPARTMENT_MISMATCH,
            format!(
                "{prefix}.department_code {department} is not the department of city {} ({}): SET's \
                 geographic table puts it in department {} {}",
                city.code, city.name, right.code, right.name
            ),
        ),
        Err(_) => push(
            out,
            field("city_code"),
            codes::UNKNOWN_CITY_CODE,
            format!("{prefix}.city_code {city} is not a city of SET's geographic table"),
        ),
    }
}

pub(super) fn buyer_rules(
    doc: &CanonicalDocument,
    ctx: &ValidationContext<'_>,
    grand_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) {
    let Some(buyer) = &doc.buyer else {
        if profile(doc.doc_type).buyer == Need::Required {
            required(
                out,
                "buyer",
                false,
                &format!("a {} names its buyer", doc.doc_type.as_str()),
            );
        } else if doc.doc_type != DocumentType::Autofactura {
            anonymous_limit(doc, grand_total, out);
        }
        return;
    };
    if doc.doc_type == DocumentType::Autofactura {
        autofactura_buyer_rules(buyer, ctx, out);
        return;
    }
    let op = operation_type(buyer);
    let anonymous = op == OperationType::Anonymous || buyer.document_type == Some(IdDocumentType::Innominado);
    if let Some(text) = &buyer.ruc {
        parse_ruc(out, "buyer.ruc", text);
    }
    identity_rules(buyer, op, out);
    if !anonymous {
        required(
            out,
            "buyer.legal_name",
            buyer.legal_name.is_some(),
            "a named buyer has a name (dNomRec)",
        );
    }
    if let Some(name) = &buyer.legal_name {
        text_of(out, "buyer.legal_name", name, facts::NAME);
    }
    if ctx.channel == ChannelKind::Sifen {
        sifen_contact_rules(buyer, out);
    }
    country_rules(buyer, op, out);
    let foreign = op == OperationType::Foreign;
    let needed = if doc.doc_type == DocumentType::Remision {
        Some("a remisión names where the goods go (rule 1318)")
    } else if foreign {
        Some("a foreign buyer has an address (rule 1318)")
    } else {
        None
    };
    address_rules(out, "buyer", buyer, needed, !foreign);
    if ctx.channel == ChannelKind::Sifen && !foreign {
        place_rules(out, "buyer", buyer);
    }
    if anonymous {
        anonymous_limit(doc, grand_total, out);
    }
}

/// What SIFEN's `gDatRec` takes of the buyer's contact fields (`dNomFanRec`, `dEmailRec`), checked
/// at intake so that a document accepted on the `sifen` channel is one `build_rde` can write (the
/// fuzzer found an email with a blank inside accepted here and refused there). Other channels
/// print these fields as given.
pub(super) fn sifen_contact_rules(buyer: &Party, out: &mut Vec<Issue>) {
    if let Some(name) = &buyer.trade_name {
        text_of(out, "buyer.trade_name", name, facts::TRADE_NAME);
    }
    if let Some(email) = &buyer.email {
        pattern_issue(
            out,
            "buyer.email",
            is_sifen_email(email),
            "an email address SIFEN accepts (tEmail: letters, digits, '.', '-' and '_', then \
             @domain.tld, no blanks)",
        );
    }
}

/// Top-level fields SIFEN's document does not carry: free-form, or kuatia's own.
pub(super) const NOT_IN_THE_DE: &[&str] = &["external_id", "metadata", "delivery"];

/// No text of a `sifen` document holds a control character (line breaks and tabs included) or
/// U+FFFE / U+FFFF: `build_rde` refuses them in every element it writes, so intake refuses them
/// first (the fuzzer found a `\r` in an address and a `\t` in a name let in here). Every string
/// of the document is checked, by its JSON path, but for [`NOT_IN_THE_DE`] and fields that
/// already have an issue.
pub(super) fn control_character_rules(doc: &CanonicalDocument, out: &mut Vec<Issue>) {
    let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(doc) else {
        return;
    };
    let mut stack: Vec<(String, &serde_json::Value)> = fields
        .iter()
        .filter(|(key, _)| !NOT_IN_THE_DE.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value))
        .collect();
    let mut found = Vec::new();
    while let Some((path, value)) = stack.pop() {
        match value {
            serde_json::Value::String(text)
                if text
                    .chars()
                    .any(|c| c.is_control() || matches!(c, '\u{FFFE}' | '\u{FFFF}')) =>
            {
                found.push(path);
            }
            serde_json::Value::Array(values) => {
                stack.extend(
                    values
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("{path}[{i}]"), v)),
                );
            }
            serde_json::Value::Object(fields) => {
                stack.extend(fields.iter().map(|(key, v)| (format!("{path}.{key}"), v)));
            }
            _ => {}
        }
    }
    found.sort();
    for path in found {
        if !out.iter().any(|issue| issue.field == path) {
            push(
                out,
                path.clone(),
                codes::INVALID_PATTERN,
                format!(
                    "{path} must be one line of text, without control characters (line breaks and tabs \
                     included): SIFEN refuses them"
                ),
            );
        }
    }
}

/// RUC and identity document against the operation type.
pub(super) fn identity_rules(buyer: &Party, op: OperationType, out: &mut Vec<Issue>) {
    use IdDocumentType::{Innominado, Ruc as RucDocument};
    use OperationType::{Anonymous, B2b, B2c, Foreign};
    let has_ruc = buyer.ruc.is_some();
    match op {
        B2b => {
            required(out, "buyer.ruc", has_ruc, "a b2b buyer is a taxpayer (rule 1300)");
        }
        Foreign => not_allowed(
            out,
            "buyer.ruc",
            has_ruc,
            "a foreign buyer is not a taxpayer (rule 1300)",
        ),
        Anonymous => not_allowed(out, "buyer.ruc", has_ruc, "an anonymous buyer has no RUC"),
        B2c => {}
    }
    let document_type = buyer.document_type;
    if has_ruc && matches!(op, B2b | B2c) {
        not_allowed(
            out,
            "buyer.document_type",
            document_type.is_some_and(|t| t != RucDocument),
            "a buyer with a RUC is identified by it: ruc or nothing (rule 1310)",
        );
    }
    if op != B2b && document_type == Some(RucDocument) {
        required(
            out,
            "buyer.ruc",
            has_ruc,
            "document_type ruc names the buyer's RUC",
        );
    }
    match op {
        B2b | Foreign => not_allowed(
            out,
            "buyer.document_type",
            document_type == Some(Innominado),
            "innominado is for consumers only, b2c or anonymous (rule 1319)",
        ),
        Anonymous => not_allowed(
            out,
            "buyer.document_type",
            document_type.is_some_and(|t| t != Innominado),
            "an anonymous buyer is innominado",
        ),
        B2c if !has_ruc && document_type != Some(Innominado) => {
            let why = "a consumer without RUC is identified by a document (rules 1310, 1311)";
            required(out, "buyer.document_type", document_type.is_some(), why);
            required(out, "buyer.document_number", buyer.document_number.is_some(), why);
        }
        B2c => {}
    }
    document_number_rules(out, "buyer.document_number", buyer.document_number.as_deref());
}

pub(super) fn country_rules(buyer: &Party, op: OperationType, out: &mut Vec<Issue>) {
    let country = buyer.country.as_deref();
    if let Some(code) = country
        && !pattern(code, 3, 3, u8::is_ascii_uppercase)
    {
        push(
            out,
            "buyer.country",
            codes::INVALID_CODE,
            format!("country {code:?} is not an ISO 3166 alpha-3 code (three capital letters)"),
        );
        return;
    }
    if let Some(code) = country
        && facts::country(code).is_none()
    {
        // Found by the fuzzer: "ARO" passed here and the DE builder refused it.
        push(
            out,
            "buyer.country",
            codes::INVALID_CODE,
            format!("country {code} is not in SIFEN's list of countries (ISO 3166 alpha-3)"),
        );
        return;
    }
    if op == OperationType::Foreign {
        if required(
            out,
            "buyer.country",
            country.is_some(),
            "a foreign buyer's country, other than PRY (rule 1320)",
        ) && country == Some(PARAGUAY)
        {
            push(
                out,
                "buyer.country",
                codes::BUYER_COUNTRY_MISMATCH,
                "a foreign buyer's country is not PRY (rule 1320)",
            );
        }
    } else if let Some(code) = country
        && code != PARAGUAY
    {
        push(
            out,
            "buyer.country",
            codes::BUYER_COUNTRY_MISMATCH,
            format!("country {code} is abroad: such a buyer's operation_type is foreign (rule 1320)"),
        );
    }
}

/// Rule 1321: an unnamed buyer only below 60 000 000 PYG, unless the goods are medical samples.
pub(super) fn anonymous_limit(doc: &CanonicalDocument, grand_total: Option<Decimal>, out: &mut Vec<Issue>) {
    if doc.transaction_type == Some(facts::MEDICAL_SAMPLES) {
        return;
    }
    if let Some(total) = grand_total
        && total >= Decimal::from(ANONYMOUS_LIMIT)
    {
        push(
            out,
            "buyer",
            codes::ANONYMOUS_TOTAL_LIMIT,
            format!(
                "an unnamed buyer (innominado) is allowed only below {ANONYMOUS_LIMIT} PYG (rule 1321); this document totals {}: name the buyer",
                total.normalize()
            ),
        );
    }
}

/// The buyer of an autofactura is the company itself (rules 1315–1317).
pub(super) fn autofactura_buyer_rules(buyer: &Party, ctx: &ValidationContext<'_>, out: &mut Vec<Issue>) {
    match &buyer.ruc {
        None => push(
            out,
            "buyer.ruc",
            codes::AUTOFACTURA_BUYER_NOT_ISSUER,
            format!(
                "the buyer of an autofactura is the issuing company: omit buyer or give its RUC {} (rules 1315–1317)",
                ctx.company_ruc
            ),
        ),
        Some(text) => {
            if let Some(ruc) = parse_ruc(out, "buyer.ruc", text)
                && &ruc != ctx.company_ruc
            {
                push(
                    out,
                    "buyer.ruc",
                    codes::AUTOFACTURA_BUYER_NOT_ISSUER,
                    format!(
                        "buyer.ruc {ruc} is not the company's RUC {}: the buyer of an autofactura is the issuing company (rules 1315–1317)",
                        ctx.company_ruc
                    ),
                );
            }
        }
    }
    not_allowed(
        out,
        "buyer.operation_type",
        buyer.operation_type.is_some_and(|op| op != OperationType::B2c),
        "the company buys in an autofactura as b2c (rule 1316)",
    );
}
