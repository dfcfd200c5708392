//! What an autoimpresor printable shows: the canonical document, the issuer, the timbrado and
//! the autoimpresor authorization, laid out per the company's print settings.
//! Every value is formatted here; `templates/autoimpresor.typ` lays the strings out.

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;

use super::format::{amount_of, currency_decimals, quantity_of};
use super::kude::Pair;
use kuatia_application::printables::AutoimpresorPrintable;
use kuatia_domain::document::canonical::{DocumentType, IdDocumentType, PaymentCondition, PaymentMethod};
use kuatia_domain::print_settings::{CopyLabel, PrintSettings};

/// The data `autoimpresor.typ` reads (`/data.json`).
#[derive(Debug, Clone, Serialize)]
pub struct AutoimpresorData {
    /// The document type in capitals ("FACTURA").
    pub type_caps: String,
    /// `logo_text` (printed in the header, beside the logo image when there is one).
    pub logo_text: String,
    /// Whether `/logo.jpg` is given and is to be printed.
    pub logo_image: bool,
    /// Issuer.
    pub issuer: Issuer,
    /// `business_activity`.
    pub business_activity: String,
    /// Timbrado number.
    pub timbrado: String,
    /// Validity, `dd/mm/yyyy`.
    pub valid_from: String,
    /// Validity, `dd/mm/yyyy`.
    pub valid_to: String,
    /// Autoimpresor authorization.
    pub authorization: String,
    /// `001-001-0000001`.
    pub number: String,
    /// `dd/mm/yyyy hh:mm:ss`.
    pub issued_at: String,
    /// Contado / Crédito.
    pub condition: String,
    /// Payment details (method, due date, instalments), when `show_payment_terms`.
    pub payment: Vec<Pair>,
    /// Buyer pairs.
    pub buyer: Vec<Pair>,
    /// Whether the item table shows each line's rate and tax (`show_item_tax`).
    pub show_item_tax: bool,
    /// Lines.
    pub items: Vec<Line>,
    /// Subtotals by class: exentas, 5 %, 10 %.
    pub by_class: [String; 3],
    /// IVA 5 %, IVA 10 %, total IVA.
    pub iva: [String; 3],
    /// Grand total.
    pub total: String,
    /// Currency code.
    pub currency: String,
    /// `ORIGINAL` / `COPIA`, when `show_copy_label`.
    pub copy_label: Option<String>,
    /// `footer_note`.
    pub footer_note: String,
    /// Text elements of `template_elements` placed in the header.
    pub header_texts: Vec<String>,
    /// Text elements of `template_elements` placed in the footer.
    pub footer_texts: Vec<String>,
}

/// The issuer block.
#[derive(Debug, Clone, Serialize)]
pub struct Issuer {
    /// Legal name.
    pub legal_name: String,
    /// Trade name.
    pub trade_name: Option<String>,
    /// RUC.
    pub ruc: String,
    /// Address.
    pub address: String,
    /// Phone.
    pub phone: Option<String>,
    /// Email.
    pub email: Option<String>,
}

/// One line.
#[derive(Debug, Clone, Serialize)]
pub struct Line {
    /// Code.
    pub code: String,
    /// Description.
    pub description: String,
    /// Quantity.
    pub quantity: String,
    /// Unit price.
    pub price: String,
    /// Rate, `10 %`.
    pub rate: String,
    /// Tax amount.
    pub tax: String,
    /// Value in the exempt column.
    pub exempt: String,
    /// Value in the 5 % column.
    pub iva5: String,
    /// Value in the 10 % column.
    pub iva10: String,
}

fn pair(label: &str, value: impl Into<String>) -> Pair {
    Pair {
        label: label.to_owned(),
        value: value.into(),
    }
}

fn type_caps(t: DocumentType) -> &'static str {
    match t {
        DocumentType::Invoice => "FACTURA",
        DocumentType::CreditNote => "NOTA DE CRÉDITO",
        DocumentType::DebitNote => "NOTA DE DÉBITO",
        DocumentType::Remision => "NOTA DE REMISIÓN",
        DocumentType::Receipt => "RECIBO",
        DocumentType::Autofactura => "AUTOFACTURA",
    }
}

fn id_kind(t: IdDocumentType) -> &'static str {
    match t {
        IdDocumentType::Ruc => "RUC",
        IdDocumentType::Ci => "C.I.",
        IdDocumentType::Passport => "Pasaporte",
        IdDocumentType::ForeignId => "Cédula extranjera",
        IdDocumentType::DiplomaticCard => "Carnet diplomático",
        IdDocumentType::Innominado => "Innominado",
        IdDocumentType::Other => "Documento",
    }
}

/// The text elements of `template_elements` at `position`: objects with a string `text` (or
/// `value`) and an optional `position` (`header`, or `footer` by default); other elements are
/// not drawn.
fn texts(settings: &PrintSettings, position: &str) -> Vec<String> {
    settings
        .template_elements
        .iter()
        .flatten()
        .filter_map(|e| {
            let text = e.get("text").or_else(|| e.get("value")).and_then(Value::as_str)?;
            let at = e.get("position").and_then(Value::as_str).unwrap_or("footer");
            (at == position && !text.trim().is_empty()).then(|| text.trim().to_owned())
        })
        .collect()
}

/// Builds the data of an autoimpresor printable.
pub fn data(p: &AutoimpresorPrintable, settings: &PrintSettings, logo_image: bool) -> AutoimpresorData {
    let doc = &p.document;
    let decimals = currency_decimals(&doc.currency);
    let money = |d: Decimal| amount_of(d, decimals);
    let zero = Decimal::ZERO;
    let (mut exempt, mut sub5, mut sub10) = (zero, zero, zero);
    let (mut iva5, mut iva10) = (zero, zero);
    let items = doc
        .items
        .iter()
        .map(|item| {
            let rate = item.tax_rate.get();
            let total = item.total_amount.get();
            let (mut e, mut f, mut t) = (String::new(), String::new(), String::new());
            if rate == Decimal::from(10) {
                sub10 += total;
                iva10 += item.tax_amount.get();
                t = money(total);
            } else if rate == Decimal::from(5) {
                sub5 += total;
                iva5 += item.tax_amount.get();
                f = money(total);
            } else {
                exempt += total;
                e = money(total);
            }
            Line {
                code: item.code.clone().unwrap_or_default(),
                description: item.description.clone(),
                quantity: quantity_of(item.quantity.get()),
                price: if item.unit_price.get().fract().is_zero() {
                    money(item.unit_price.get())
                } else {
                    quantity_of(item.unit_price.get())
                },
                rate: format!("{} %", item.tax_rate.get().normalize()),
                tax: money(item.tax_amount.get()),
                exempt: e,
                iva5: f,
                iva10: t,
            }
        })
        .collect();

    let terms = &doc.payment_terms;
    let mut payment = Vec::new();
    if settings.show_payment_terms {
        if let Some(method) = terms.method {
            payment.push(pair(
                "Forma de pago",
                match method {
                    PaymentMethod::Cash => "Efectivo",
                    PaymentMethod::Card => "Tarjeta",
                    PaymentMethod::BankTransfer => "Transferencia",
                    PaymentMethod::Check => "Cheque",
                    PaymentMethod::Other => "Otro",
                },
            ));
        }
        if let Some(due) = terms.due_date {
            payment.push(pair("Vencimiento", due.format("%d/%m/%Y").to_string()));
        }
        for (n, inst) in terms.installments.iter().flatten().enumerate() {
            payment.push(pair(
                &format!("Cuota {}", n + 1),
                format!(
                    "{} — vence {}",
                    money(inst.amount.get()),
                    inst.due_date.format("%d/%m/%Y")
                ),
            ));
        }
    }

    let mut buyer = Vec::new();
    if let Some(b) = &doc.buyer {
        buyer.push(pair(
            "Nombre o razón social",
            b.legal_name
                .clone()
                .or_else(|| b.trade_name.clone())
                .unwrap_or_default(),
        ));
        if let Some(ruc) = &b.ruc {
            buyer.push(pair("RUC", ruc.clone()));
        } else if let Some(n) = &b.document_number {
            buyer.push(pair(b.document_type.map_or("Documento", id_kind), n.clone()));
        }
        if let Some(a) = &b.address {
            let a = match &b.house_number {
                Some(n) if n != "0" => format!("{a} {n}"),
                _ => a.clone(),
            };
            buyer.push(pair("Dirección", a));
        }
        if let Some(e) = &b.email {
            buyer.push(pair("Correo electrónico", e.clone()));
        }
    }

    let n = &p.number;
    AutoimpresorData {
        type_caps: type_caps(doc.doc_type).to_owned(),
        logo_text: settings.logo_text.clone(),
        logo_image: logo_image && settings.show_logo,
        issuer: Issuer {
            legal_name: p.issuer.legal_name.clone(),
            trade_name: p.issuer.trade_name.clone(),
            ruc: p.issuer.ruc.clone(),
            address: p.issuer.address.clone(),
            phone: p.issuer.phone.clone(),
            email: p.issuer.email.clone(),
        },
        business_activity: settings.business_activity.clone(),
        timbrado: n.timbrado.clone(),
        valid_from: p.valid_from.format("%d/%m/%Y").to_string(),
        valid_to: p.valid_to.format("%d/%m/%Y").to_string(),
        authorization: p.authorization.clone(),
        number: format!("{}-{}-{}", n.establishment, n.point, n.number),
        issued_at: p.issued_at.format("%d/%m/%Y %H:%M:%S").to_string(),
        condition: match terms.condition {
            PaymentCondition::Cash => "Contado",
            PaymentCondition::Credit => "Crédito",
        }
        .to_owned(),
        payment,
        buyer,
        show_item_tax: settings.show_item_tax,
        items,
        by_class: [money(exempt), money(sub5), money(sub10)],
        iva: [money(iva5), money(iva10), money(iva5 + iva10)],
        total: money(doc.totals.grand_total.get()),
        currency: doc.currency.clone(),
        copy_label: settings.show_copy_label.then(|| {
            match settings.copy_label {
                CopyLabel::Original => "ORIGINAL",
                CopyLabel::Copia => "COPIA",
            }
            .to_owned()
        }),
        footer_note: settings.footer_note.clone(),
        header_texts: texts(settings, "header"),
        footer_texts: texts(settings, "footer"),
    }
}
