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
    /// How the file's certificates chain up from the holder's, examined at upload (`None`: a
    /// record uploaded before chains were examined).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<ChainFacts>,
}

/// The chain a PKCS#12 file carries above the holder's certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChainFacts {
    /// The holder's certificate is its own issuer (and its signature verifies with its own key).
    pub self_signed: bool,
    /// The subjects of the file's certificates that sign the holder's and then each other, from
    /// the holder's issuer up, each signature verified.
    pub issuers: Vec<String>,
    /// The last certificate of the chain (the holder's when self-signed) is a root: its own
    /// issuer.
    pub reaches_root: bool,
    /// A certificate in the file named as an issuer did not verify the signature it should have
    /// made (the subject of the certificate whose signature failed): a wrong chain in the file.
    pub broken_at: Option<String>,
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

/// What a check found, for saying it in another language: a stable key (the console says
/// `check-<key>` from its catalogues) and the values its sentence names (dates as `YYYY-MM-DD` or
/// RFC 3339, ids as UUIDs). Empty: only the English `message` says it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finding {
    /// Stable key.
    pub key: &'static str,
    /// The values, by name.
    pub values: Vec<(&'static str, String)>,
}

/// Every key a [`Finding`] may have (certificate validation, channel readiness, a document's
/// channel checks): the console's catalogues say each (`check-<key>`, a test holds them to it).
pub const FINDINGS: &[&str] = &[
    "key_ok",
    "key_other",
    "validity_not_yet",
    "validity_expired",
    "validity_ok",
    "ruc_none",
    "ruc_invalid",
    "ruc_ok",
    "ruc_other",
    "rsa_bits",
    "rsa_not",
    "client_auth_ok",
    "client_auth_missing",
    "company",
    "branch_foreign",
    "branch_missing",
    "branch_ambiguous",
    "branch_ok",
    "point_foreign",
    "point_missing",
    "point_ambiguous",
    "point_no_branch",
    "point_ok",
    "timbrado_from",
    "timbrado_not_yet",
    "certificate_foreign",
    "certificate_ok",
    "certificate_failing",
    "csc",
    "authorization_ok",
    "authorization_out",
    "range_left",
    "print_saved",
    "print_defaults",
    "settings_none",
    "remision_notice",
    "channel_none",
    "chain_unknown",
    "chain_broken",
    "chain_self_signed",
    "chain_to_root",
    "chain_partial",
];

/// One named check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable name.
    pub name: String,
    /// Passed.
    pub ok: bool,
    /// What was found.
    pub message: String,
    /// The same, for words in another language (not part of the serialised check).
    #[serde(skip)]
    pub finding: Finding,
}

impl Check {
    /// A check with its outcome.
    pub fn new(name: &str, ok: bool, message: impl Into<String>) -> Self {
        Self {
            name: name.to_owned(),
            ok,
            message: message.into(),
            finding: Finding::default(),
        }
    }

    /// The check with what it found as `key` and `values`.
    pub fn found(mut self, key: &'static str, values: &[(&'static str, &dyn std::fmt::Display)]) -> Self {
        debug_assert!(FINDINGS.contains(&key), "{key} is not listed in FINDINGS");
        self.finding = Finding {
            key,
            values: values.iter().map(|(n, v)| (*n, v.to_string())).collect(),
        };
        self
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
        let (not_before, not_after) = (self.not_before.to_rfc3339(), self.not_after.to_rfc3339());
        let period = if now < self.not_before {
            Check::new("validity_period", false, format!("not valid before {not_before}"))
                .found("validity_not_yet", &[("from", &not_before)])
        } else if now > self.not_after {
            Check::new("validity_period", false, format!("expired on {not_after}"))
                .found("validity_expired", &[("to", &not_after)])
        } else {
            Check::new(
                "validity_period",
                true,
                format!("valid until {not_after} ({expires_in_days} days)"),
            )
            .found("validity_ok", &[("to", &not_after), ("days", &expires_in_days)])
        };
        let ruc_check = match self.ruc.as_deref().map(Ruc::parse) {
            None => Check::new(
                "ruc_matches_company",
                false,
                "the certificate names no RUC (expected serialNumber RUC<number>-<dv>)",
            )
            .found("ruc_none", &[]),
            Some(Err(_)) => Check::new(
                "ruc_matches_company",
                false,
                "the RUC the certificate names is not a valid RUC",
            )
            .found("ruc_invalid", &[]),
            Some(Ok(ruc)) if ruc == *company_ruc => Check::new(
                "ruc_matches_company",
                true,
                format!("the certificate names RUC {ruc}"),
            )
            .found("ruc_ok", &[("ruc", &ruc)]),
            Some(Ok(ruc)) => Check::new(
                "ruc_matches_company",
                false,
                format!("the certificate names RUC {ruc}, the company is {company_ruc}"),
            )
            .found("ruc_other", &[("ruc", &ruc), ("company", company_ruc)]),
        };
        let rsa = self.key_algorithm == "RSA";
        let checks = vec![
            if self.key_matches {
                Check::new(
                    "key_matches_certificate",
                    true,
                    "the private key belongs to the certificate",
                )
                .found("key_ok", &[])
            } else {
                Check::new(
                    "key_matches_certificate",
                    false,
                    "the private key does not belong to the certificate",
                )
                .found("key_other", &[])
            },
            period,
            if rsa {
                Check::new(
                    "rsa_key_size",
                    self.key_bits >= MIN_RSA_BITS,
                    format!("RSA {} bits (at least {MIN_RSA_BITS} required)", self.key_bits),
                )
                .found("rsa_bits", &[("bits", &self.key_bits), ("min", &MIN_RSA_BITS)])
            } else {
                Check::new(
                    "rsa_key_size",
                    false,
                    format!("{} key; SIFEN requires RSA", self.key_algorithm),
                )
                .found("rsa_not", &[("algorithm", &self.key_algorithm)])
            },
            ruc_check,
            if self.client_auth {
                Check::new(
                    "client_auth_usage",
                    true,
                    "extended key usage includes clientAuth",
                )
                .found("client_auth_ok", &[])
            } else {
                Check::new(
                    "client_auth_usage",
                    false,
                    "extended key usage lacks clientAuth, needed for SIFEN's mutual TLS",
                )
                .found("client_auth_missing", &[])
            },
        ];
        Validation {
            valid: checks.iter().all(|c| c.ok),
            checks,
            expires_in_days,
        }
    }

    /// The chain the file carries, as a check of its own (not one of [`Self::validate`]'s, whose
    /// list is decided): failing only when the file's own certificates contradict each other
    /// (an issuer that did not sign); a self-signed certificate or one whose issuer the file does
    /// not carry passes, said as such (SIFEN's servers know the accredited providers' chains; a
    /// self-signed certificate is for the simulator and tests).
    pub fn chain_check(&self) -> Check {
        const NAME: &str = "chain";
        let Some(chain) = &self.chain else {
            return Check::new(
                NAME,
                true,
                "not examined: the certificate was uploaded before chains were examined; upload the file \
                 again to see its chain",
            )
            .found("chain_unknown", &[]);
        };
        if let Some(at) = &chain.broken_at {
            return Check::new(
                NAME,
                false,
                format!("the file's chain is wrong: the certificate it carries as the issuer of {at} did not sign it"),
            )
            .found("chain_broken", &[("subject", at)]);
        }
        if chain.self_signed {
            return Check::new(
                NAME,
                true,
                "self-signed: it is its own root (fine for the simulator and tests; SIFEN accepts only \
                 certificates of an accredited provider, PSC)",
            )
            .found("chain_self_signed", &[]);
        }
        match chain.issuers.last() {
            Some(root) if chain.reaches_root => Check::new(
                NAME,
                true,
                format!(
                    "issued by {}; the file carries its chain up to the root {root}",
                    self.issuer
                ),
            )
            .found("chain_to_root", &[("issuer", &self.issuer), ("root", root)]),
            _ => Check::new(
                NAME,
                true,
                format!(
                    "issued by {}; the file does not carry the chain up to a root (SIFEN's servers must \
                     know it)",
                    self.issuer
                ),
            )
            .found("chain_partial", &[("issuer", &self.issuer)]),
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
            chain: Some(ChainFacts {
                self_signed: true,
                issuers: Vec::new(),
                reaches_root: true,
                broken_at: None,
            }),
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
    fn the_chain_fails_only_when_the_file_contradicts_itself() {
        let now = at(2026, 6, 1);
        let chain_of = |f: &CertificateFacts| {
            let c = f.chain_check();
            assert_eq!(c.name, "chain");
            (c.ok, c.finding.key)
        };
        assert_eq!(chain_of(&facts()), (true, "chain_self_signed"));
        let mut issued = facts();
        issued.issuer = "CN=CA-DEMO".into();
        issued.chain = Some(ChainFacts {
            self_signed: false,
            issuers: vec!["CN=CA-DEMO".into(), "CN=RAIZ-DEMO".into()],
            reaches_root: true,
            broken_at: None,
        });
        assert_eq!(chain_of(&issued), (true, "chain_to_root"));
        issued.chain = Some(ChainFacts {
            self_signed: false,
            issuers: Vec::new(),
            reaches_root: false,
            broken_at: None,
        });
        assert_eq!(chain_of(&issued), (true, "chain_partial"));
        issued.chain = Some(ChainFacts {
            self_signed: false,
            issuers: Vec::new(),
            reaches_root: false,
            broken_at: Some(issued.subject.clone()),
        });
        assert_eq!(chain_of(&issued), (false, "chain_broken"));
        // Not one of validation's decided checks: a broken chain is said, the rest stands.
        assert!(issued.validate(&ruc(), now).valid);
        issued.chain = None;
        assert_eq!(chain_of(&issued), (true, "chain_unknown"));
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
