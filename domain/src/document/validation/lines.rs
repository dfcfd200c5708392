//! The rules of the lines and totals (each figure within SIFEN's limits and equal to what its
//! formula gives) and of the payment terms.

use super::*;

pub(super) fn below(value: Decimal, limit: i64) -> bool {
    value.abs() < Decimal::from(limit)
}

pub(super) fn out_of_range(out: &mut Vec<Issue>, field: &str, value: impl std::fmt::Display) {
    push(
        out,
        field,
        codes::AMOUNT_OUT_OF_RANGE,
        format!("{field} {value} is beyond what SIFEN can carry"),
    );
}

/// Checks a declared amount of whole guaraníes against its expected value (when it could be
/// computed) and returns the value the sums go on with: the declared one within 1 Gs, else the
/// expected one (see the module's decisions).
pub(super) fn settle(
    out: &mut Vec<Issue>,
    field: &str,
    declared: Amount,
    expected: Option<Decimal>,
) -> Option<Decimal> {
    let value = declared.get();
    if !below(value, AMOUNT_LIMIT) {
        out_of_range(out, field, declared);
        return expected;
    }
    if let Some(expected) = expected {
        let within = value
            .checked_sub(expected)
            .is_some_and(|d| d.abs() <= Decimal::ONE);
        if !within {
            push(
                out,
                field,
                codes::AMOUNT_MISMATCH,
                format!("{field}: expected {}, got {declared}", expected.normalize()),
            );
            return Some(expected);
        }
    }
    if !value.fract().is_zero() {
        push(
            out,
            field,
            codes::FRACTIONAL_GUARANIES,
            format!("{field} {declared} has decimals; guaraníes have none"),
        );
        return expected.or(Some(half_up(value)));
    }
    Some(value)
}

/// A quantity or unit price: in range, at most 8 decimals. `None` when out of range.
pub(super) fn factor(out: &mut Vec<Issue>, field: &str, value: Amount, limit: i64) -> Option<Decimal> {
    let d = value.get();
    if !below(d, limit) {
        out_of_range(out, field, value);
        return None;
    }
    if d.normalize().scale() > MAX_DECIMALS {
        push(
            out,
            field,
            codes::TOO_MANY_DECIMALS,
            format!("{field} {value} has more than {MAX_DECIMALS} decimal places"),
        );
    }
    Some(d)
}

/// Lines, then totals; returns the settled grand total (`None` for an unpriced type or when it
/// cannot be computed).
pub(super) fn item_rules(doc: &CanonicalDocument, out: &mut Vec<Issue>) -> Option<Decimal> {
    let profile = profile(doc.doc_type);
    if doc.items.is_empty() {
        push(out, "items", codes::NO_ITEMS, "a document has at least one line");
    } else if doc.items.len() > MAX_ITEMS {
        push(
            out,
            "items",
            codes::TOO_MANY_ITEMS,
            format!(
                "{} lines; SIFEN takes at most {MAX_ITEMS} (gCamItem)",
                doc.items.len()
            ),
        );
    }
    let mut totals = Vec::with_capacity(doc.items.len());
    let mut taxes = Vec::with_capacity(doc.items.len());
    for (i, item) in doc.items.iter().enumerate() {
        line_fields(i, item, &profile, out);
        let quantity = quantity_rules(i, item, out);
        if profile.priced {
            let (total, tax) = line_amounts(i, item, quantity, profile.taxed, out);
            totals.push(total);
            taxes.push(tax);
        }
    }
    if !profile.priced || doc.items.is_empty() {
        return None;
    }
    totals_rules(doc, sum(&totals), sum(&taxes), out)
}

pub(super) fn sum(values: &[Option<Decimal>]) -> Option<Decimal> {
    values
        .iter()
        .try_fold(Decimal::ZERO, |acc, v| acc.checked_add((*v)?))
}

/// Texts and codes of a line.
pub(super) fn line_fields(i: usize, item: &Item, profile: &Profile, out: &mut Vec<Issue>) {
    text_length(out, &format!("items[{i}].description"), &item.description, 1, 120);
    if let Some(code) = &item.code {
        text_of(out, &format!("items[{i}].code"), code, facts::ITEM_CODE);
    }
    if let Some(unit) = item.unit
        && facts::unit(unit).is_none()
    {
        push(
            out,
            format!("items[{i}].unit"),
            codes::INVALID_CODE,
            format!("unit {unit} is not a SIFEN unit of measure (cUniMed; 77 is UNI)"),
        );
    }
    let zero_rate = item.tax_rate.get().is_zero();
    not_allowed(
        out,
        &format!("items[{i}].exemption"),
        item.exemption.is_some() && !zero_rate,
        "exemption qualifies tax_rate 0 only",
    );
    not_allowed(
        out,
        &format!("items[{i}].tax_rate"),
        !profile.taxed && !zero_rate,
        "an autofactura carries no IVA (rule 1901): tax_rate is 0",
    );
}

/// The quantity, when it can take part in the arithmetic.
pub(super) fn quantity_rules(i: usize, item: &Item, out: &mut Vec<Issue>) -> Option<Decimal> {
    let field = format!("items[{i}].quantity");
    let quantity = factor(out, &field, item.quantity, QUANTITY_LIMIT)?;
    if quantity <= Decimal::ZERO {
        push(
            out,
            field,
            codes::MUST_BE_POSITIVE,
            format!("quantity {} is not above 0", item.quantity),
        );
        return None;
    }
    Some(quantity)
}

/// The settled line total and tax.
pub(super) fn line_amounts(
    i: usize,
    item: &Item,
    quantity: Option<Decimal>,
    taxed: bool,
    out: &mut Vec<Issue>,
) -> (Option<Decimal>, Option<Decimal>) {
    let price_field = format!("items[{i}].unit_price");
    let price = factor(out, &price_field, item.unit_price, AMOUNT_LIMIT).filter(|p| {
        let ok = !p.is_sign_negative();
        if !ok {
            push(
                out,
                &price_field,
                codes::MUST_NOT_BE_NEGATIVE,
                format!("unit_price {} is negative", item.unit_price),
            );
        }
        ok
    });
    let total_field = format!("items[{i}].total_amount");
    // None: a factor is unusable (already an issue); Some(None): the product is too large.
    let product = quantity
        .zip(price)
        .map(|(q, p)| line_total(q, p).filter(|t| below(*t, AMOUNT_LIMIT)));
    if let Some(None) = product {
        push(
            out,
            &total_field,
            codes::AMOUNT_OUT_OF_RANGE,
            format!("quantity × unit_price of items[{i}] is beyond what SIFEN can carry"),
        );
    }
    let total = settle(out, &total_field, item.total_amount, product.flatten());
    let rate = item.tax_rate.get();
    let expected_tax = if taxed {
        total.and_then(|t| included_tax(t, rate))
    } else {
        Some(Decimal::ZERO)
    };
    let tax = settle(
        out,
        &format!("items[{i}].tax_amount"),
        item.tax_amount,
        expected_tax,
    );
    (total, tax)
}

pub(super) fn totals_rules(
    doc: &CanonicalDocument,
    grand_total: Option<Decimal>,
    tax_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) -> Option<Decimal> {
    let totals = &doc.totals;
    let grand = settle(out, "totals.grand_total", totals.grand_total, grand_total);
    let tax = settle(out, "totals.tax_total", totals.tax_total, tax_total);
    let subtotal = grand.zip(tax).and_then(|(g, t)| g.checked_sub(t));
    settle(out, "totals.subtotal", totals.subtotal, subtotal);
    grand
}

// ---------------------------------------------------------------------------------------------
// Payment terms.

pub(super) fn payment_rules(doc: &CanonicalDocument, grand_total: Option<Decimal>, out: &mut Vec<Issue>) {
    if !profile(doc.doc_type).payment_terms {
        return;
    }
    let terms = &doc.payment_terms;
    match terms.condition {
        PaymentCondition::Cash => {
            let why = "a cash sale is paid at once";
            not_allowed(out, "payment_terms.due_date", terms.due_date.is_some(), why);
            not_allowed(
                out,
                "payment_terms.installments",
                terms.installments.is_some(),
                why,
            );
        }
        PaymentCondition::Credit => {
            not_allowed(
                out,
                "payment_terms.condition",
                doc.doc_type == DocumentType::Autofactura,
                "an autofactura is paid cash (rule 1503)",
            );
            credit_rules(doc, terms, grand_total, out);
        }
    }
    method_rules(terms, out);
}

pub(super) fn credit_rules(
    doc: &CanonicalDocument,
    terms: &PaymentTerms,
    grand_total: Option<Decimal>,
    out: &mut Vec<Issue>,
) {
    let installments = terms.installments.as_deref().unwrap_or_default();
    required(
        out,
        "payment_terms.due_date",
        terms.due_date.is_some() || !installments.is_empty(),
        "a credit sale has a due_date or installments (rule 1700)",
    );
    let issued = issue_date(doc);
    let mut due_dates = Vec::new();
    if let Some(date) = terms.due_date {
        due_dates.push(("payment_terms.due_date".to_owned(), date));
    }
    let mut amounts = Vec::with_capacity(installments.len());
    for (i, installment) in installments.iter().enumerate() {
        let field = format!("payment_terms.installments[{i}].amount");
        let amount = settle(out, &field, installment.amount, None);
        if amount.is_some_and(|a| a <= Decimal::ZERO) {
            push(
                out,
                field,
                codes::MUST_BE_POSITIVE,
                format!("installment amount {} is not above 0", installment.amount),
            );
        }
        amounts.push(amount);
        due_dates.push((
            format!("payment_terms.installments[{i}].due_date"),
            installment.due_date,
        ));
    }
    for (field, date) in due_dates {
        if date < issued {
            push(
                out,
                field,
                codes::DUE_DATE_BEFORE_ISSUE_DATE,
                format!("due date {date} is before the issue date {issued}"),
            );
        }
    }
    if let (false, Some(sum), Some(total)) = (installments.is_empty(), sum(&amounts), grand_total)
        && sum != total
    {
        push(
            out,
            "payment_terms.installments",
            codes::AMOUNT_MISMATCH,
            format!(
                "payment_terms.installments add up to the grand total: expected {}, got {}",
                total.normalize(),
                sum.normalize()
            ),
        );
    }
}

/// Card and cheque details go with their methods (rules 1600, 1650).
pub(super) fn method_rules(terms: &PaymentTerms, out: &mut Vec<Issue>) {
    let card = terms.method == Some(PaymentMethod::Card);
    if card {
        required(
            out,
            "payment_terms.card",
            terms.card.is_some(),
            "method card needs the brand and whether it is a credit or debit card (rule 1600)",
        );
    } else {
        not_allowed(
            out,
            "payment_terms.card",
            terms.card.is_some(),
            "card details go with method card",
        );
    }
    if let Some(details) = &terms.card
        && facts::card_brand(&details.brand).is_none()
    {
        push(
            out,
            "payment_terms.card.brand",
            codes::INVALID_CODE,
            format!(
                "card brand {:?} is not one of {}",
                details.brand,
                facts::card_brand_names().collect::<Vec<_>>().join(", ")
            ),
        );
    }
    let check = terms.method == Some(PaymentMethod::Check);
    if check {
        required(
            out,
            "payment_terms.check",
            terms.check.is_some(),
            "method check needs the cheque's number and bank (rule 1650)",
        );
    } else {
        not_allowed(
            out,
            "payment_terms.check",
            terms.check.is_some(),
            "cheque details go with method check",
        );
    }
    if let Some(details) = &terms.check {
        let Length { min, max } = facts::CHECK_NUMBER;
        pattern_issue(
            out,
            "payment_terms.check.number",
            pattern(&details.number, min, max, u8::is_ascii_digit),
            &format!("{min} to {max} digits"),
        );
        text_of(out, "payment_terms.check.bank", &details.bank, facts::CHECK_BANK);
    }
}
