//! A company's signing certificate: what kuatia knows of it without its secrets,
//! and the checks `POST /v1/certificates/{id}/validate` and channel readiness run.
//!
//! Reading a PFX is a protocol concern (infrastructure); what a certificate must satisfy to sign
//! SIFEN documents and open the mutual-TLS connection is a rule, and lives here: the key matches
//! the certificate, today is inside the validity period, the key is RSA of at least 2048 bits,
//! the RUC in the subject (or, for a person, in the subjectAltName) is the company's, and the
//! extended key usage names clientAuth (SIFEN's TLS needs it).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::ruc::Ruc;

/// Smallest RSA modulus SIFEN accepts.
pub const MIN_RSA_BITS: u32 = 2048;

/// Certificates expiring within this many days are warned about.
pub const EXPIRY_WARNING_DAYS: i64 = 30;

/// What was read off an uploaded certificate: public facts only, never the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateFacts {
    /// Subject, RFC 4514.
    pub subject: String,
    /// Issuer, RFC 4514.
    pub issuer: String,
    /// Serial number, lowercase hex.
    pub serial_number: String,
    /// The RUC the certificate names, without its `RUC` prefix (`80069563-1` from a
    /// serialNumber `RUC80069563-1` in the subject or the subjectAltName), if any.
    pub ruc: Option<String>,
    /// Start of validity.
    pub not_before: DateTime<Utc>,
    /// End of validity.
    pub not_after: DateTime<Utc>,
    /// SHA-256 of the certificate's DER, lowercase hex.
    pub fingerprint_sha256: String,
    /// `RSA`, `EC`, … .
    pub key_algorithm: String,
    /// Size of the key in bits.
    pub key_bits: u32,
    /// Whether the private key in the file belongs to the certificate.
    pub key_matches: bool,
    /// Whether the extended key usage lists clientAuth.
    pub client_auth: bool,
    /// Number of certificates in the chain, leaf included.
    pub chain_length: u32,
}

/// A certificate as the company's records hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertificateRecord {
    /// Id.
    pub certificate_id: Uuid,
    /// Free label.
    pub label: Option<String>,
    /// What the certificate says.
    pub facts: CertificateFacts,
    /// Where the sealed key and chain are.
    pub secret_id: Uuid,
}

/// One named check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable name.
    pub name: String,
    /// Passed.
    pub ok: bool,
    /// What was found.
    pub message: String,
}

impl Check {
    /// A check with its outcome.
    pub fn new(name: &str, ok: bool, message: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            ok,
            message: message.into(),
        }
    }
}

/// The outcome of validating a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    /// Every check passed.
    pub valid: bool,
    /// The checks, in a fixed order.
    pub checks: Vec<Check>,
    /// Whole days until `not_after` (negative once expired).
    pub expires_in_days: i64,
}

/// Where a certificate stands, as listings show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertificateStatus {
    /// Every check passes.
    Valid,
    /// Valid, but expires within [`EXPIRY_WARNING_DAYS`].
    ExpiringSoon,
    /// Not valid yet.
    NotYetValid,
    /// Past its end of validity.
    Expired,
    /// Fails a check other than the dates (key, size, RUC, usage).
    Invalid,
}

impl CertificateFacts {
    /// Runs every check of the module's list for the company whose RUC is `company_ruc`, at `now`.
    pub fn validate(&self, company_ruc: &Ruc, now: DateTime<Utc>) -> Validation {
        let expires_in_days = (self.not_after - now).num_days();
        let period_ok = self.not_before <= now && now <= self.not_after;
        let period_message = if now < self.not_before {
            format!("not valid before {}", self.not_before.to_rfc3339())
        } else if now > self.not_after {
            format!("expired on {}", self.not_after.to_rfc3339())
        } else {
            format!(
                "valid until {} ({expires_in_days} days)",
                self.not_after.to_rfc3339()
            )
        };
        let ruc_check = match self.ruc.as_deref().map(Ruc::parse) {
            None => Check::new(
                "ruc_matches_company",
                false,
                "the certificate names no RUC (expected serialNumber RUC<number>-<dv>)",
            ),
            Some(Err(_)) => Check::new(
                "ruc_matches_company",
                false,
                "the RUC the certificate names is not a valid RUC",
            ),
            Some(Ok(ruc)) if ruc == *company_ruc => Check::new(
                "ruc_matches_company",
                true,
                format!("the certificate names RUC {ruc}"),
            ),
            Some(Ok(ruc)) => Check::new(
                "ruc_matches_company",
                false,
                format!("the certificate names RUC {ruc}, the company is {company_ruc}"),
            ),
        };
        let rsa = self.key_algorithm == "RSA";
        let checks = vec![
            Check::new(
                "key_matches_certificate",
                self.key_matches,
                if self.key_matches {
                    "the private key belongs to the certificate"
                } else {
                    "the private key does not belong to the certificate"
                },
            ),
            Check::new("validity_period", period_ok, period_message),
            Check::new(
                "rsa_key_size",
                rsa && self.key_bits >= MIN_RSA_BITS,
                if rsa {
                    format!("RSA {} bits (at least {MIN_RSA_BITS} required)", self.key_bits)
                } else {
                    format!("{} key; SIFEN requires RSA", self.key_algorithm)
                },
            ),
            ruc_check,
            Check::new(
                "client_auth_usage",
                self.client_auth,
                if self.client_auth {
                    "extended key usage includes clientAuth"
                } else {
                    "extended key usage lacks clientAuth, needed for SIFEN's mutual TLS"
                },
            ),
        ];
        Validation {
            valid: checks.iter().all(|c| c.ok),
            checks,
            expires_in_days,
        }
    }

    /// The status listings show.
    pub fn status(&self, company_ruc: &Ruc, now: DateTime<Utc>) -> CertificateStatus {
        if now < self.not_before {
            return CertificateStatus::NotYetValid;
        }
        if now > self.not_after {
            return CertificateStatus::Expired;
        }
        let validation = self.validate(company_ruc, now);
        if !validation.valid {
            CertificateStatus::Invalid
        } else if validation.expires_in_days < EXPIRY_WARNING_DAYS {
            CertificateStatus::ExpiringSoon
        } else {
            CertificateStatus::Valid
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::TimeZone;

    pub(crate) fn facts() -> CertificateFacts {
        CertificateFacts {
            subject: "CN=DEMO S.A.,serialNumber=RUC80069563-1,C=PY".into(),
            issuer: "CN=DEMO S.A.,serialNumber=RUC80069563-1,C=PY".into(),
            serial_number: "01".into(),
            ruc: Some("80069563-1".into()),
            not_before: Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap(),
            not_after: Utc.with_ymd_and_hms(2027, 1, 1, 0, 0, 0).unwrap(),
            fingerprint_sha256: "ab".repeat(32),
            key_algorithm: "RSA".into(),
            key_bits: 2048,
            key_matches: true,
            client_auth: true,
            chain_length: 1,
        }
    }

    fn ruc() -> Ruc {
        Ruc::parse("80069563-1").unwrap()
    }

    fn at(y: i32, m: u32, d: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap()
    }

    fn failed(v: &Validation) -> Vec<&str> {
        v.checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| c.name.as_str())
            .collect()
    }

    #[test]
    fn a_good_certificate_passes_every_check() {
        let v = facts().validate(&ruc(), at(2026, 6, 1));
        assert!(v.valid, "{v:?}");
        assert_eq!(v.checks.len(), 5);
        assert_eq!(v.expires_in_days, 213);
        assert_eq!(facts().status(&ruc(), at(2026, 6, 1)), CertificateStatus::Valid);
        assert_eq!(
            facts().status(&ruc(), at(2026, 12, 15)),
            CertificateStatus::ExpiringSoon
        );
    }

    #[test]
    fn each_rule_fails_on_its_own() {
        let now = at(2026, 6, 1);
        let mut f = facts();
        f.key_matches = false;
        assert_eq!(failed(&f.validate(&ruc(), now)), vec!["key_matches_certificate"]);
        let mut f = facts();
        f.key_bits = 1024;
        assert_eq!(failed(&f.validate(&ruc(), now)), vec!["rsa_key_size"]);
        let mut f = facts();
        f.key_algorithm = "EC".into();
        f.key_bits = 256;
        assert_eq!(failed(&f.validate(&ruc(), now)), vec!["rsa_key_size"]);
        let mut f = facts();
        f.client_auth = false;
        assert_eq!(failed(&f.validate(&ruc(), now)), vec!["client_auth_usage"]);
        assert_eq!(f.status(&ruc(), now), CertificateStatus::Invalid);
        let other = Ruc::from_number("80000001").unwrap();
        let v = facts().validate(&other, now);
        assert_eq!(failed(&v), vec!["ruc_matches_company"]);
        assert!(v.checks[3].message.contains("80069563-1"), "{v:?}");
        let mut f = facts();
        f.ruc = None;
        assert_eq!(failed(&f.validate(&ruc(), now)), vec!["ruc_matches_company"]);
    }

    #[test]
    fn the_validity_period_is_checked_on_both_ends() {
        let v = facts().validate(&ruc(), at(2027, 2, 1));
        assert_eq!(failed(&v), vec!["validity_period"]);
        assert!(v.expires_in_days < 0);
        assert_eq!(facts().status(&ruc(), at(2027, 2, 1)), CertificateStatus::Expired);
        assert_eq!(
            failed(&facts().validate(&ruc(), at(2025, 12, 1))),
            vec!["validity_period"]
        );
        assert_eq!(
            facts().status(&ruc(), at(2025, 12, 1)),
            CertificateStatus::NotYetValid
        );
    }
}
