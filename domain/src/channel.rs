//! Emission channels: how a company's documents leave kuatia,
//! either to SIFEN (`sifen`) or as pre-authorised printed invoices (`autoimpresor`), and the
//! readiness checks that tell an integrator, before the first document, what is still missing.
//!
//! A channel record holds no secret: the client secret, the autoimpresor API key and the CSC are
//! sealed elsewhere and referenced by id, so a new id in an event is how the audit trail shows
//! that a secret changed, without showing the secret.

use chrono::{DateTime, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::certificate::{CertificateRecord, Check};
use crate::company::FieldIssue;
use crate::defaults::{self, Unresolved};
use crate::document::canonical::DocumentType;
use crate::ruc::Ruc;

/// Largest document number (seven digits, `dNumDoc`).
pub const MAX_NUMBER: u64 = 9_999_999;

/// The two ways out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ChannelKind {
    /// Electronic documents to SIFEN.
    Sifen,
    /// Pre-authorised printed invoices.
    Autoimpresor,
}

impl ChannelKind {
    /// The name in the contract.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sifen => "sifen",
            Self::Autoimpresor => "autoimpresor",
        }
    }
}

/// SIFEN's two environments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SifenEnvironment {
    /// Tests (the issuer name becomes the test literal).
    Test,
    /// Fiscal documents.
    Production,
}

/// The `sifen` object of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SifenSettings {
    /// Test or production.
    pub environment: SifenEnvironment,
    /// Timbrado number (8 digits).
    pub timbrado: String,
    /// Start of the timbrado's validity (dFeIniT).
    pub timbrado_valid_from: NaiveDate,
    /// Id of the CSC (IdCSC, up to 4 digits, sent as 4).
    pub csc_id: String,
    /// The signing certificate (one of the company's).
    pub certificate_id: Uuid,
    /// Where the sealed CSC is.
    pub csc_secret_id: Uuid,
    /// The legal notice every remisión (NRE) carries in `dInfoFisc` (B006; Art. 3 inc. 7
    /// RG 41/2014). The sources read do not give its wording, so there is no default: without
    /// it the channel issues every other type, and intake refuses a remisión (`configuration_error`,
    /// field `configuration.sifen.remision_notice`). Absent from events written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remision_notice: Option<String>,
}

/// `dInfoFisc` (`tdInfoFisc`): 1 to 3000 characters.
pub const REMISION_NOTICE_MAX: usize = 3000;

/// The `autoimpresor` object of a channel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoimpresorSettings {
    /// Authorization number of the printing system.
    pub authorization: String,
    /// Declared software name.
    pub declared_software: Option<String>,
    /// Timbrado number (8 digits).
    pub timbrado: String,
    /// First valid day.
    pub valid_from: NaiveDate,
    /// Last valid day.
    pub valid_to: NaiveDate,
    /// Branch that prints.
    pub branch_id: Uuid,
    /// Issuance point that prints.
    pub issuance_point_id: Uuid,
    /// First authorised number.
    pub range_start: u64,
    /// Last authorised number.
    pub range_end: u64,
    /// The next number to print, as configured (numbering takes over from here).
    pub next_number: u64,
}

/// A channel as the company's records hold it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmissionChannel {
    /// Id.
    pub channel_id: Uuid,
    /// Which channel.
    pub kind: ChannelKind,
    /// Chosen when a document names no channel and the company has several.
    pub is_default: bool,
    /// Base URL: SIFEN's (or the simulator's) for `sifen`, the reporting endpoint for
    /// `autoimpresor`.
    pub endpoint: String,
    /// `client_id` of the credentials (`sifen`).
    pub client_id: Option<String>,
    /// Where the sealed `client_secret` (`sifen`) or `api_key` (`autoimpresor`) is, if one was
    /// given.
    pub credentials_secret_id: Option<Uuid>,
    /// The `sifen` object.
    pub sifen: Option<SifenSettings>,
    /// The `autoimpresor` object.
    pub autoimpresor: Option<AutoimpresorSettings>,
}

fn issue(field: &str, code: &'static str, message: impl Into<String>) -> FieldIssue {
    FieldIssue {
        field: field.to_owned(),
        code,
        message: message.into(),
    }
}

fn digits(text: &str, min: usize, max: usize) -> bool {
    (min..=max).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `csc` is a CSC as SIFEN issues them: 32 letters and digits.
pub fn csc_issue(csc: &str) -> Option<FieldIssue> {
    (csc.len() != 32 || !csc.bytes().all(|b| b.is_ascii_alphanumeric())).then(|| {
        issue(
            "sifen.csc",
            "invalid_csc",
            "a CSC is 32 letters and digits, as SIFEN issues it",
        )
    })
}

/// Whether `notice` can be written as `dInfoFisc`: 1 to 3000 characters once trimmed, on one
/// line (the XSD's `noEmptyString` refuses line breaks, and the DE writer refuses control
/// characters rather than rewrite them).
fn remision_notice_issue(notice: &str) -> Option<FieldIssue> {
    const FIELD: &str = "sifen.remision_notice";
    let length = notice.trim().chars().count();
    if !(1..=REMISION_NOTICE_MAX).contains(&length) {
        Some(issue(
            FIELD,
            "invalid_length",
            format!("remision_notice must have 1 to {REMISION_NOTICE_MAX} characters, not {length}"),
        ))
    } else if notice.chars().any(char::is_control) {
        Some(issue(
            FIELD,
            "invalid_format",
            "remision_notice is one line of text: no line breaks, tabs or other control characters",
        ))
    } else {
        None
    }
}

impl EmissionChannel {
    /// Every problem of the record on its own (references are checked by the company).
    pub fn issues(&self) -> Vec<FieldIssue> {
        let mut issues = Vec::new();
        let endpoint = self.endpoint.trim();
        let scheme_ok = endpoint.starts_with("https://") || endpoint.starts_with("http://");
        if !scheme_ok || endpoint.len() > 2048 || endpoint.contains(char::is_whitespace) {
            issues.push(issue(
                "credentials.endpoint",
                "invalid_url",
                "endpoint must be an http:// or https:// URL",
            ));
        }
        match self.kind {
            ChannelKind::Sifen => {
                if self.autoimpresor.is_some() {
                    issues.push(issue(
                        "autoimpresor",
                        "not_allowed",
                        "a sifen channel takes no autoimpresor object",
                    ));
                }
                match &self.sifen {
                    None => issues.push(issue(
                        "sifen",
                        "required",
                        "a sifen channel needs the sifen object (environment, timbrado, \
                         timbrado_valid_from, csc_id, csc, certificate_id)",
                    )),
                    Some(s) => {
                        if !digits(&s.timbrado, 8, 8) {
                            issues.push(issue(
                                "sifen.timbrado",
                                "invalid_timbrado",
                                "a timbrado has 8 digits",
                            ));
                        }
                        if !digits(&s.csc_id, 1, 4) || s.csc_id.bytes().all(|b| b == b'0') {
                            issues.push(issue(
                                "sifen.csc_id",
                                "invalid_csc_id",
                                "csc_id has 1 to 4 digits and is not zero",
                            ));
                        }
                        if let Some(notice) = &s.remision_notice {
                            issues.extend(remision_notice_issue(notice));
                        }
                    }
                }
            }
            ChannelKind::Autoimpresor => {
                if self.sifen.is_some() {
                    issues.push(issue(
                        "sifen",
                        "not_allowed",
                        "an autoimpresor channel takes no sifen object",
                    ));
                }
                if self.client_id.is_some() {
                    issues.push(issue(
                        "credentials.client_id",
                        "not_allowed",
                        "autoimpresor credentials are endpoint and api_key",
                    ));
                }
                match &self.autoimpresor {
                    None => issues.push(issue(
                        "autoimpresor",
                        "required",
                        "an autoimpresor channel needs the autoimpresor object",
                    )),
                    Some(a) => {
                        let len = a.authorization.trim().chars().count();
                        if !(1..=50).contains(&len) {
                            issues.push(issue(
                                "autoimpresor.authorization",
                                "invalid_length",
                                "authorization must have 1 to 50 characters",
                            ));
                        }
                        if !digits(&a.timbrado, 8, 8) {
                            issues.push(issue(
                                "autoimpresor.timbrado",
                                "invalid_timbrado",
                                "a timbrado has 8 digits",
                            ));
                        }
                        if a.valid_to < a.valid_from {
                            issues.push(issue(
                                "autoimpresor.valid_to",
                                "invalid_range",
                                "valid_to is before valid_from",
                            ));
                        }
                        if a.range_start == 0 || a.range_end > MAX_NUMBER || a.range_end < a.range_start {
                            issues.push(issue(
                                "autoimpresor.range_end",
                                "invalid_range",
                                format!("the range is 1 ≤ range_start ≤ range_end ≤ {MAX_NUMBER}"),
                            ));
                        } else if !(a.range_start..=a.range_end).contains(&a.next_number) {
                            issues.push(issue(
                                "autoimpresor.next_number",
                                "invalid_range",
                                "next_number must lie inside the range",
                            ));
                        }
                    }
                }
            }
        }
        issues
    }
}

/// A branch as default resolution sees it: its id, whether it is the default, and its issuance
/// points (id, default).
pub type BranchWithPoints = (Uuid, bool, Vec<(Uuid, bool)>);

/// What readiness needs to know of the company besides the channel.
#[derive(Debug, Clone)]
pub struct ReadinessContext<'a> {
    /// The company's RUC.
    pub ruc: &'a Ruc,
    /// Branches: id, default flag, and their issuance points (id, default flag).
    pub branches: &'a [BranchWithPoints],
    /// The company's certificates.
    pub certificates: &'a [CertificateRecord],
    /// Whether print settings were saved (else the defaults print).
    pub print_settings_saved: bool,
    /// Now.
    pub now: DateTime<Utc>,
    /// Today in Paraguay.
    pub today: NaiveDate,
}

/// Why no branch or point could be chosen, as a failing check `name` of `what`.
fn unresolved<T>(name: &str, what: &str, err: &Unresolved<T>) -> Check {
    match err {
        Unresolved::Unknown(_) => {
            Check::new(name, false, format!("the configured {what} is not the company's")).found(
                if name == "branch" {
                    "branch_foreign"
                } else {
                    "point_foreign"
                },
                &[],
            )
        }
        Unresolved::Missing => Check::new(name, false, format!("the company has no {what}")).found(
            if name == "branch" {
                "branch_missing"
            } else {
                "point_missing"
            },
            &[],
        ),
        Unresolved::Ambiguous(c) => Check::new(
            name,
            false,
            format!(
                "{} candidates for the {what} and not exactly one marked is_default",
                c.len()
            ),
        )
        .found(
            if name == "branch" {
                "branch_ambiguous"
            } else {
                "point_ambiguous"
            },
            &[("count", &c.len())],
        ),
    }
}

/// The branch and point a document on this channel would use, as checks.
fn location_checks(explicit: Option<(Uuid, Uuid)>, ctx: &ReadinessContext<'_>, checks: &mut Vec<Check>) {
    let candidates: Vec<(Uuid, bool)> = ctx.branches.iter().map(|(id, d, _)| (*id, *d)).collect();
    match defaults::resolve(explicit.map(|(b, _)| b), &candidates) {
        Err(e) => {
            checks.push(unresolved("branch", "branch", &e));
            checks.push(
                Check::new("issuance_point", false, "no branch to take a point from")
                    .found("point_no_branch", &[]),
            );
        }
        Ok(branch) => {
            checks.push(
                Check::new("branch", true, format!("branch {branch}"))
                    .found("branch_ok", &[("branch", &branch)]),
            );
            let points = ctx
                .branches
                .iter()
                .find(|(id, _, _)| *id == branch)
                .map(|(_, _, p)| p.as_slice())
                .unwrap_or_default();
            match defaults::resolve(explicit.map(|(_, p)| p), points) {
                Ok(point) => checks.push(
                    Check::new("issuance_point", true, format!("issuance point {point}"))
                        .found("point_ok", &[("point", &point)]),
                ),
                Err(e) => checks.push(unresolved("issuance_point", "issuance point", &e)),
            }
        }
    }
}

impl EmissionChannel {
    /// Every check a document on this channel depends on, in a fixed order.
    pub fn readiness(&self, ctx: &ReadinessContext<'_>) -> Vec<Check> {
        let mut checks = vec![
            Check::new("company", true, format!("company RUC {}", ctx.ruc))
                .found("company", &[("ruc", ctx.ruc)]),
        ];
        match (&self.sifen, &self.autoimpresor) {
            (Some(s), _) => {
                location_checks(None, ctx, &mut checks);
                checks.push(if s.timbrado_valid_from <= ctx.today {
                    Check::new(
                        "timbrado",
                        true,
                        format!("timbrado {} valid from {}", s.timbrado, s.timbrado_valid_from),
                    )
                    .found(
                        "timbrado_from",
                        &[("timbrado", &s.timbrado), ("from", &s.timbrado_valid_from)],
                    )
                } else {
                    Check::new(
                        "timbrado",
                        false,
                        format!(
                            "timbrado {} is valid only from {}",
                            s.timbrado, s.timbrado_valid_from
                        ),
                    )
                    .found(
                        "timbrado_not_yet",
                        &[("timbrado", &s.timbrado), ("from", &s.timbrado_valid_from)],
                    )
                });
                checks.push(
                    match ctx
                        .certificates
                        .iter()
                        .find(|c| c.certificate_id == s.certificate_id)
                    {
                        None => Check::new(
                            "certificate",
                            false,
                            "the channel's certificate is not the company's",
                        )
                        .found("certificate_foreign", &[]),
                        Some(cert) => {
                            let v = cert.facts.validate(ctx.ruc, ctx.now);
                            if v.valid {
                                Check::new(
                                    "certificate",
                                    true,
                                    format!(
                                        "certificate {} valid for {} more days",
                                        cert.certificate_id, v.expires_in_days
                                    ),
                                )
                                .found(
                                    "certificate_ok",
                                    &[
                                        ("certificate", &cert.certificate_id),
                                        ("days", &v.expires_in_days),
                                    ],
                                )
                            } else {
                                let failed: Vec<Check> = v.checks.into_iter().filter(|c| !c.ok).collect();
                                let names: Vec<&str> = failed.iter().map(|c| c.name.as_str()).collect();
                                let messages: Vec<&str> = failed.iter().map(|c| c.message.as_str()).collect();
                                Check::new("certificate", false, messages.join("; ")).found(
                                    "certificate_failing",
                                    &[
                                        ("certificate", &cert.certificate_id),
                                        ("failed", &names.join(",")),
                                    ],
                                )
                            }
                        }
                    },
                );
                checks.push(
                    Check::new("csc", true, format!("CSC {} on file", s.csc_id))
                        .found("csc", &[("csc_id", &s.csc_id)]),
                );
            }
            (None, Some(a)) => {
                location_checks(Some((a.branch_id, a.issuance_point_id)), ctx, &mut checks);
                let in_validity = a.valid_from <= ctx.today && ctx.today <= a.valid_to;
                checks.push(
                    Check::new(
                        "timbrado",
                        in_validity,
                        format!(
                            "timbrado {} valid from {} to {}{}",
                            a.timbrado,
                            a.valid_from,
                            a.valid_to,
                            if in_validity { "" } else { ", which excludes today" }
                        ),
                    )
                    .found(
                        if in_validity {
                            "authorization_ok"
                        } else {
                            "authorization_out"
                        },
                        &[
                            ("timbrado", &a.timbrado),
                            ("from", &a.valid_from),
                            ("to", &a.valid_to),
                        ],
                    ),
                );
                let left = (a.range_end + 1).saturating_sub(a.next_number);
                checks.push(
                    Check::new(
                        "numbering_range",
                        left > 0,
                        format!("{left} numbers left ({} to {})", a.next_number, a.range_end),
                    )
                    .found(
                        "range_left",
                        &[("left", &left), ("next", &a.next_number), ("end", &a.range_end)],
                    ),
                );
                checks.push(
                    Check::new(
                        "print_settings",
                        true,
                        if ctx.print_settings_saved {
                            "saved print settings"
                        } else {
                            "never saved: the defaults print"
                        },
                    )
                    .found(
                        if ctx.print_settings_saved {
                            "print_saved"
                        } else {
                            "print_defaults"
                        },
                        &[],
                    ),
                );
            }
            (None, None) => checks.push(
                Check::new("settings", false, "the channel has no settings").found("settings_none", &[]),
            ),
        }
        checks
    }

    /// What a document of `doc_type` needs of this channel beyond [`Self::readiness`], as
    /// failing checks (none: nothing more). A remisión on `sifen` needs the channel's
    /// `remision_notice` for `dInfoFisc`; intake refuses it without one, rather than accept a
    /// document the pipeline could never build.
    ///
    /// Kept out of `readiness`, whose checks decide whether the channel is ready at all: a channel
    /// without the notice issues every other type.
    pub fn document_checks(&self, doc_type: DocumentType) -> Vec<Check> {
        match &self.sifen {
            Some(s) if doc_type == DocumentType::Remision && s.remision_notice.is_none() => {
                vec![Check::new(
                    REMISION_NOTICE_CHECK,
                    false,
                    "a remisión carries the legal notice of Art. 3 inc. 7 RG 41/2014 in dInfoFisc, and the \
                     sifen channel has none: set sifen.remision_notice on the channel \
                     (PATCH /v1/emission-channels/{id})",
                )
                .found("remision_notice", &[])]
            }
            _ => Vec::new(),
        }
    }
}

/// The name of [`EmissionChannel::document_checks`]'s check of the remisión notice (intake
/// reports it at `configuration.sifen.remision_notice`).
pub const REMISION_NOTICE_CHECK: &str = "sifen.remision_notice";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::certificate::tests::facts;
    use chrono::TimeZone;

    fn sifen() -> EmissionChannel {
        EmissionChannel {
            channel_id: Uuid::from_u128(1),
            kind: ChannelKind::Sifen,
            is_default: false,
            endpoint: "http://127.0.0.1:8082".into(),
            client_id: None,
            credentials_secret_id: None,
            sifen: Some(SifenSettings {
                environment: SifenEnvironment::Test,
                timbrado: "12345678".into(),
                timbrado_valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
                csc_id: "1".into(),
                certificate_id: Uuid::from_u128(5),
                csc_secret_id: Uuid::from_u128(6),
                remision_notice: None,
            }),
            autoimpresor: None,
        }
    }

    fn autoimpresor() -> EmissionChannel {
        EmissionChannel {
            channel_id: Uuid::from_u128(2),
            kind: ChannelKind::Autoimpresor,
            is_default: false,
            endpoint: "https://reportes.example.com.py".into(),
            client_id: None,
            credentials_secret_id: None,
            sifen: None,
            autoimpresor: Some(AutoimpresorSettings {
                authorization: "AUT-1".into(),
                declared_software: None,
                timbrado: "87654321".into(),
                valid_from: NaiveDate::from_ymd_opt(2026, 1, 1).unwrap(),
                valid_to: NaiveDate::from_ymd_opt(2026, 12, 31).unwrap(),
                branch_id: Uuid::from_u128(10),
                issuance_point_id: Uuid::from_u128(20),
                range_start: 1,
                range_end: 500,
                next_number: 1,
            }),
        }
    }

    fn fields(c: &EmissionChannel) -> Vec<String> {
        c.issues().into_iter().map(|i| i.field).collect()
    }

    #[test]
    fn a_channel_takes_the_object_of_its_kind_only() {
        assert!(sifen().issues().is_empty());
        assert!(autoimpresor().issues().is_empty());
        let mut c = sifen();
        c.sifen = None;
        c.autoimpresor = autoimpresor().autoimpresor;
        assert_eq!(fields(&c), vec!["autoimpresor", "sifen"]);
        let mut c = autoimpresor();
        c.client_id = Some("x".into());
        assert_eq!(fields(&c), vec!["credentials.client_id"]);
    }

    #[test]
    fn numbers_codes_and_urls_are_checked() {
        let mut c = sifen();
        c.endpoint = "ftp://x".into();
        let s = c.sifen.as_mut().unwrap();
        s.timbrado = "1234".into();
        s.csc_id = "0000".into();
        assert_eq!(
            fields(&c),
            vec!["credentials.endpoint", "sifen.timbrado", "sifen.csc_id"]
        );
        let mut c = autoimpresor();
        let a = c.autoimpresor.as_mut().unwrap();
        a.next_number = 501;
        assert_eq!(fields(&c), vec!["autoimpresor.next_number"]);
        let a = c.autoimpresor.as_mut().unwrap();
        a.range_end = 10_000_000;
        a.valid_to = NaiveDate::from_ymd_opt(2025, 1, 1).unwrap();
        assert_eq!(
            fields(&c),
            vec!["autoimpresor.valid_to", "autoimpresor.range_end"]
        );
        assert!(csc_issue("ABCD0000000000000000000000000000").is_none());
        assert!(csc_issue("ABCD").is_some());
        assert!(csc_issue("ABCD000000000000000000000000000-").is_some());
    }

    fn record() -> CertificateRecord {
        CertificateRecord {
            certificate_id: Uuid::from_u128(5),
            label: None,
            facts: facts(),
            secret_id: Uuid::from_u128(7),
        }
    }

    fn ctx<'a>(
        ruc: &'a Ruc,
        branches: &'a [BranchWithPoints],
        certs: &'a [CertificateRecord],
    ) -> ReadinessContext<'a> {
        ReadinessContext {
            ruc,
            branches,
            certificates: certs,
            print_settings_saved: false,
            now: Utc.with_ymd_and_hms(2026, 6, 1, 12, 0, 0).unwrap(),
            today: NaiveDate::from_ymd_opt(2026, 6, 1).unwrap(),
        }
    }

    fn failing(checks: &[Check]) -> Vec<&str> {
        checks.iter().filter(|c| !c.ok).map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn a_complete_sifen_channel_is_ready() {
        let ruc = Ruc::parse("80069563-1").unwrap();
        let branches = vec![(Uuid::from_u128(10), false, vec![(Uuid::from_u128(20), false)])];
        let certs = vec![record()];
        let checks = sifen().readiness(&ctx(&ruc, &branches, &certs));
        let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "company",
                "branch",
                "issuance_point",
                "timbrado",
                "certificate",
                "csc"
            ]
        );
        assert!(failing(&checks).is_empty(), "{checks:?}");
    }

    #[test]
    fn readiness_names_what_is_missing() {
        let ruc = Ruc::parse("80069563-1").unwrap();
        let two = vec![
            (Uuid::from_u128(10), false, vec![]),
            (Uuid::from_u128(11), false, vec![]),
        ];
        let checks = sifen().readiness(&ctx(&ruc, &two, &[]));
        assert_eq!(failing(&checks), vec!["branch", "issuance_point", "certificate"]);
        assert!(checks[1].message.contains("2 candidates"), "{checks:?}");
        let mut expired = record();
        expired.facts.not_after = Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap();
        let certs = vec![expired];
        let one = vec![(Uuid::from_u128(10), true, vec![(Uuid::from_u128(20), false)])];
        let checks = sifen().readiness(&ctx(&ruc, &one, &certs));
        assert_eq!(failing(&checks), vec!["certificate"]);
        assert!(checks[4].message.contains("expired"), "{checks:?}");
        // Each check says what it found for the console's words, with the values it names.
        let keys: Vec<&str> = checks.iter().map(|c| c.finding.key).collect();
        assert_eq!(
            keys,
            vec![
                "company",
                "branch_ok",
                "point_ok",
                "timbrado_from",
                "certificate_failing",
                "csc"
            ]
        );
        assert_eq!(
            checks[4].finding.values,
            vec![
                ("certificate", certs[0].certificate_id.to_string()),
                ("failed", "validity_period".to_owned())
            ]
        );
    }

    #[test]
    fn an_autoimpresor_channel_needs_its_branch_validity_and_numbers() {
        let ruc = Ruc::parse("80069563-1").unwrap();
        let branches = vec![(Uuid::from_u128(10), false, vec![(Uuid::from_u128(20), false)])];
        let checks = autoimpresor().readiness(&ctx(&ruc, &branches, &[]));
        assert!(failing(&checks).is_empty(), "{checks:?}");
        let mut c = autoimpresor();
        let a = c.autoimpresor.as_mut().unwrap();
        a.issuance_point_id = Uuid::from_u128(99);
        a.valid_to = NaiveDate::from_ymd_opt(2026, 5, 31).unwrap();
        a.next_number = 501;
        let checks = c.readiness(&ctx(&ruc, &branches, &[]));
        assert_eq!(
            failing(&checks),
            vec!["issuance_point", "timbrado", "numbering_range"]
        );
        let keys: Vec<&str> = checks.iter().map(|c| c.finding.key).collect();
        assert_eq!(
            keys,
            vec![
                "company",
                "branch_ok",
                "point_foreign",
                "authorization_out",
                "range_left",
                "print_defaults"
            ]
        );
    }
    #[test]
    fn a_remision_notice_is_optional_but_one_line_of_at_most_3000_characters() {
        let mut c = sifen();
        c.sifen.as_mut().unwrap().remision_notice = Some("Traslado conforme a la RG 41/2014".into());
        assert!(c.issues().is_empty());
        for (notice, code) in [
            ("   ", "invalid_length"),
            (&"x".repeat(3001)[..], "invalid_length"),
            ("Traslado\nconforme", "invalid_format"),
        ] {
            c.sifen.as_mut().unwrap().remision_notice = Some(notice.into());
            let issues = c.issues();
            assert_eq!(issues.len(), 1, "{notice:?}: {issues:?}");
            assert_eq!(
                (issues[0].field.as_str(), issues[0].code),
                ("sifen.remision_notice", code)
            );
        }
    }

    #[test]
    fn a_remision_needs_the_notice_and_other_types_do_not() {
        let without = sifen();
        let checks = without.document_checks(DocumentType::Remision);
        assert_eq!(failing(&checks), vec![REMISION_NOTICE_CHECK]);
        assert!(checks[0].message.contains("RG 41/2014"), "{checks:?}");
        for other in [
            DocumentType::Invoice,
            DocumentType::CreditNote,
            DocumentType::DebitNote,
            DocumentType::Autofactura,
        ] {
            assert!(without.document_checks(other).is_empty(), "{other:?}");
        }
        let mut with = sifen();
        with.sifen.as_mut().unwrap().remision_notice = Some("Traslado conforme a la RG 41/2014".into());
        assert!(with.document_checks(DocumentType::Remision).is_empty());
        // An autoimpresor remisión is printed, not sent to SIFEN: no notice needed.
        assert!(autoimpresor().document_checks(DocumentType::Remision).is_empty());
    }

    #[test]
    fn settings_stored_before_the_notice_existed_still_read() {
        let mut stored = serde_json::to_value(sifen().sifen.unwrap()).unwrap();
        assert!(
            stored.get("remision_notice").is_none(),
            "absent, not null: {stored}"
        );
        stored.as_object_mut().unwrap().remove("remision_notice");
        let read: SifenSettings = serde_json::from_value(stored).unwrap();
        assert_eq!(read.remision_notice, None);
    }
}
