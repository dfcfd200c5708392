//! Transform + sign throughput on one core, beside OpenSSL's own RSA-2048 signing rate.
//!
//! ```sh
//! cargo bench -p kuatia-infrastructure --bench sifen_sign
//! openssl speed -seconds 3 rsa2048      # the RSA limit to compare with
//! ```
//!
//! One thread builds the DE of the sample invoice (number, CDC, XML), signs it (exclusive C14N by
//! construction, SHA-256, RSA-2048 through OpenSSL) and appends the QR, for `KUATIA_BENCH_SECS`
//! (default 5) seconds. It then times bare RSA-2048 signatures of a SHA-256 digest with the same
//! key for the same time, so the ratio (target ≥ 60 %) does not depend on the machine.

use chrono::NaiveDate;
use kuatia_domain::channel::SifenEnvironment;
use kuatia_domain::company::{EconomicActivity, TaxpayerType};
use kuatia_domain::document::canonical::{self, sample_invoice};
use kuatia_domain::ruc::Ruc;
use kuatia_domain::sifen::de::{self, DeInput, Issuer};
use kuatia_domain::sifen::qr::{self, Csc, QrData};
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_infrastructure::sifen::sign::{self, SigningKey};
use std::time::{Duration, Instant};

fn issuer() -> Issuer {
    Issuer {
        ruc: Ruc::parse("80069563-1").expect("ruc"),
        taxpayer_type: TaxpayerType::LegalEntity,
        tax_regime: Some(8),
        legal_name: "DEMO S.A.".into(),
        trade_name: Some("Demo".into()),
        address: "Avda. España".into(),
        house_number: "1234".into(),
        department_code: 1,
        district_code: Some(1),
        district_name: Some("ASUNCION (DISTRITO)".into()),
        city_code: 1,
        city_name: "ASUNCION (DISTRITO)".into(),
        phone: "021123456".into(),
        email: "facturacion@demo.com.py".into(),
        branch_name: Some("Casa central".into()),
        economic_activities: vec![EconomicActivity {
            code: "62010".into(),
            description: "Actividades de programación informática".into(),
        }],
        timbrado: "12345678".into(),
        timbrado_valid_from: NaiveDate::from_ymd_opt(2024, 1, 1).expect("date"),
        establishment: "001".into(),
        point: "001".into(),
        environment: SifenEnvironment::Test,
        remision_notice: None,
    }
}

fn main() -> anyhow::Result<()> {
    let secs: u64 = std::env::var("KUATIA_BENCH_SECS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let window = Duration::from_secs(secs.max(1));
    let (pkey, cert) = SelfSigned::for_ruc("DEMO S.A.", "80069563-1", 365).generate()?;
    let key = SigningKey::new(pkey.clone(), &cert)?;
    let mut value = sample_invoice();
    value["issue_datetime"] = serde_json::json!(chrono::Utc::now().to_rfc3339());
    let document = canonical::from_value(value).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let issuer = issuer();
    let signed_at = kuatia_domain::local_time::paraguay(chrono::Utc::now());

    let started = Instant::now();
    let mut documents = 0u64;
    let mut bytes = 0usize;
    while started.elapsed() < window {
        documents += 1;
        let built = de::build_rde(&DeInput {
            document: &document,
            issuer: &issuer,
            number: documents % 9_999_999 + 1,
            security_code: "123456789",
            signed_at,
        })?;
        let signed = sign::sign_de(&built.xml, &key)?;
        let url = qr::qr_url(
            &QrData {
                environment: SifenEnvironment::Test,
                cdc: built.cdc.as_str(),
                emitted_at: &built.issued_at,
                receiver: built.qr_receiver(),
                total: &built.total,
                total_iva: &built.total_iva,
                items: built.item_count,
                digest_value: &signed.digest_value,
            },
            &Csc {
                id: "0001",
                secret: "ABCD0000000000000000000000000000",
            },
        )?;
        let mut xml = signed.xml;
        sign::append_qr(&mut xml, &url)?;
        bytes += xml.len();
    }
    let pipeline_rate = documents as f64 / started.elapsed().as_secs_f64();

    let digest = openssl::sha::sha256(b"kuatia");
    let started = Instant::now();
    let mut signatures = 0u64;
    while started.elapsed() < window {
        let mut signer = openssl::sign::Signer::new(openssl::hash::MessageDigest::sha256(), &pkey)?;
        signer.update(&digest)?;
        std::hint::black_box(signer.sign_to_vec()?);
        signatures += 1;
    }
    let rsa_rate = signatures as f64 / started.elapsed().as_secs_f64();

    println!(
        "transform+sign (one core): {pipeline_rate:.0} documents/s, {} bytes each",
        bytes / documents.max(1) as usize
    );
    println!("RSA-2048 sign (same key, same core): {rsa_rate:.0} signatures/s");
    println!(
        "ratio: {:.0} % of the RSA limit (target ≥ 60 %)",
        100.0 * pipeline_rate / rsa_rate
    );
    Ok(())
}
