//! Building and signing one DE: the DE from the canonical document and its issuer (the CDC and
//! its check digit, the security code), the XMLDSig through the [`SigningKey`] port, the QR
//! appended. The SIFEN process manager runs it for real documents; the sandbox for previews.
//! CPU work: call it off the async runtime.

use chrono::{DateTime, Utc};
use kuatia_domain::channel::SifenEnvironment;
use kuatia_domain::document::aggregate::DocumentNumber;
use kuatia_domain::document::canonical::CanonicalDocument;
use kuatia_domain::sifen::de::{self, DeInput, Issuer};
use kuatia_domain::sifen::qr::{self, Csc, QrData};
use rand::Rng;

use kuatia_domain::certificate::CertificateRecord;
use kuatia_domain::channel::SifenSettings;
use kuatia_domain::ruc::Ruc;
use kuatia_domain::tenancy::TenantId;
use uuid::Uuid;
use zeroize::Zeroizing;

use super::ports::{CompanyConfig, ConfigurationReads, SigningKey};
use crate::artifacts::sha256_hex;
use crate::event_store::StoreError;
use crate::vault::{Vault, VaultError};

/// What signing needs besides the document.
pub struct SigningSetup<'a> {
    /// The issuer as the DE names it.
    pub issuer: &'a Issuer,
    /// The certificate's private key (made once per configuration: parsing a PEM costs more
    /// than the signature).
    pub key: &'a dyn SigningKey,
    /// `IdCSC` (`0001`).
    pub csc_id: &'a str,
    /// The CSC's secret.
    pub csc: &'a str,
    /// Test or production (the QR's base URL).
    pub environment: SifenEnvironment,
}

/// A built and signed document.
#[derive(Debug, Clone)]
pub struct Signed {
    /// The number series it was drawn from.
    pub series: String,
    /// Its number.
    pub number: DocumentNumber,
    /// Its CDC.
    pub cdc: String,
    /// `dCodSeg`.
    pub security_code: String,
    /// SHA-256 of the DE before signing.
    pub unsigned_sha256: String,
    /// The signed `rDE` with its QR.
    pub xml: String,
    /// When it was signed.
    pub signed_at: DateTime<Utc>,
}

/// Nine digits from the CSPRNG, never all zero (`dCodSeg`).
pub fn security_code() -> String {
    let mut rng = rand::rng();
    loop {
        let code: u32 = rng.random_range(1..1_000_000_000);
        let text = format!("{code:09}");
        if text != "000000000" {
            return text;
        }
    }
}

/// Builds the DE numbered `number` of `series`, signs it and appends its QR. The error says
/// what could not be built; it does not go away by trying again.
pub fn build_and_sign(
    document: &CanonicalDocument,
    setup: &SigningSetup<'_>,
    series: String,
    number: u64,
    now: DateTime<Utc>,
) -> Result<Signed, String> {
    let mut code = security_code();
    while code.parse::<u64>().ok() == Some(number) {
        code = security_code();
    }
    let built = de::build_rde(&DeInput {
        document,
        issuer: setup.issuer,
        number,
        security_code: &code,
        signed_at: kuatia_domain::local_time::paraguay(now),
    })
    .map_err(|e| format!("the DE cannot be built: {e}"))?;
    let unsigned_sha256 = sha256_hex(built.xml.as_bytes());
    let signed = setup
        .key
        .sign_de(&built.xml)
        .map_err(|e| format!("signing: {e}"))?;
    let url = qr::qr_url(
        &QrData {
            environment: setup.environment,
            cdc: built.cdc.as_str(),
            emitted_at: &built.issued_at,
            receiver: built.qr_receiver(),
            total: &built.total,
            total_iva: &built.total_iva,
            items: built.item_count,
            digest_value: &signed.digest_value,
        },
        &Csc {
            id: setup.csc_id,
            secret: setup.csc,
        },
    )
    .map_err(|e| format!("the QR: {e}"))?;
    let mut xml = signed.xml;
    setup
        .key
        .append_qr(&mut xml, &url)
        .map_err(|e| format!("the QR: {e}"))?;
    Ok(Signed {
        series,
        number: DocumentNumber {
            timbrado: setup.issuer.timbrado.clone(),
            establishment: setup.issuer.establishment.clone(),
            point: setup.issuer.point.clone(),
            number: format!("{number:07}"),
        },
        cdc: built.cdc.as_str().to_owned(),
        security_code: code,
        unsigned_sha256,
        xml,
        signed_at: now,
    })
}

/// What signing a company's DEs needs of its `sifen` channel: the issuer as the DE names it,
/// the certificate's record, its private key and chain (PEM), and the CSC.
pub struct SigningMaterial {
    /// The issuer.
    pub issuer: Issuer,
    /// The certificate's record (its validity).
    pub certificate: CertificateRecord,
    /// The certificate's private key and chain, PEM.
    pub pem: Zeroizing<Vec<u8>>,
    /// The CSC's secret.
    pub csc: String,
}

/// Why [`signing_material`] could not be read.
#[derive(Debug)]
pub enum MaterialError {
    /// A record is missing or unreadable: `no branch`, `no issuance point`, `no certificate`,
    /// `an unreadable company RUC`, `an unreadable CSC`.
    Missing(&'static str),
    /// The store failed.
    Store(StoreError),
    /// A sealed secret could not be opened: which one, and why.
    Vault(&'static str, VaultError),
}

impl From<StoreError> for MaterialError {
    fn from(e: StoreError) -> Self {
        Self::Store(e)
    }
}

/// Reads the [`SigningMaterial`] of `company`'s `sifen` channel at the branch and point given:
/// the one reading the SIFEN process manager and the sandbox's company previews share.
pub async fn signing_material(
    config: &dyn ConfigurationReads,
    vault: &Vault,
    tenant: TenantId,
    company: &CompanyConfig,
    sifen: &SifenSettings,
    branch_id: Uuid,
    issuance_point_id: Uuid,
) -> Result<SigningMaterial, MaterialError> {
    let branch = config
        .branch(tenant, branch_id)
        .await?
        .ok_or(MaterialError::Missing("no branch"))?;
    let point = config
        .issuance_point(tenant, issuance_point_id)
        .await?
        .ok_or(MaterialError::Missing("no issuance point"))?;
    let ruc = Ruc::parse(&company.ruc).map_err(|_| MaterialError::Missing("an unreadable company RUC"))?;
    let issuer = Issuer::from_config(&ruc, &company.profile, &branch, &point, sifen);
    let certificate = config
        .certificate(tenant, sifen.certificate_id)
        .await?
        .ok_or(MaterialError::Missing("no certificate"))?;
    let pem = vault
        .get(tenant, certificate.secret_id)
        .await
        .map_err(|e| MaterialError::Vault("the certificate's private key", e))?;
    let csc = vault
        .get(tenant, sifen.csc_secret_id)
        .await
        .map_err(|e| MaterialError::Vault("the CSC", e))?;
    let csc = String::from_utf8(csc.to_vec()).map_err(|_| MaterialError::Missing("an unreadable CSC"))?;
    Ok(SigningMaterial {
        issuer,
        certificate,
        pem,
        csc,
    })
}

/// Builds, unsigned, the DE a `sifen` document would become, so that intake refuses what the
/// pipeline could not build (what validation accepts, the builder builds; a document is never
/// stuck `queued` by a build that fails for ever). The issuer is the company's
/// configuration as the DE names it, at a placeholder establishment and point 001 with number 1
/// (the document's own fields decide whether it can be built; the issuer's are checked when
/// they are saved); the error is the builder's, as an intake issue with its JSON path.
pub fn check_buildable(
    document: &CanonicalDocument,
    ruc: &kuatia_domain::ruc::Ruc,
    profile: &kuatia_domain::company::CompanyProfile,
    sifen: &kuatia_domain::channel::SifenSettings,
    now: DateTime<Utc>,
) -> Result<(), kuatia_domain::document::issues::Issue> {
    use kuatia_domain::company::{Branch, IssuancePoint};
    let branch = Branch {
        branch_id: uuid::Uuid::nil(),
        code: "001".into(),
        name: "Casa central".into(),
        address: None,
        house_number: None,
        city_code: None,
        city_name: None,
        department_code: None,
        department_name: None,
        is_default: true,
    };
    let point = IssuancePoint {
        point_id: uuid::Uuid::nil(),
        branch_id: uuid::Uuid::nil(),
        code: "001".into(),
        name: None,
        is_default: true,
    };
    let issuer = Issuer::from_config(ruc, profile, &branch, &point, sifen);
    de::build_rde(&DeInput {
        document,
        issuer: &issuer,
        number: 1,
        security_code: "123456789",
        signed_at: kuatia_domain::local_time::paraguay(now),
    })
    .map(|_| ())
    .map_err(|e| e.issue())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn security_codes_are_nine_digits_and_never_zero() {
        for _ in 0..1000 {
            let code = security_code();
            assert_eq!(code.len(), 9);
            assert!(code.bytes().all(|b| b.is_ascii_digit()));
            assert_ne!(code, "000000000");
        }
    }
}
