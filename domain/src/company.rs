//! The company aggregate: a taxpayer that issues documents, with its branches (establecimientos)
//! and their issuance points (puntos de expedición) (DECISIONS §3).
//!
//! One stream per company, `company:<tenant>:<RUC number>`, so a RUC is registered once per
//! tenant (atomically, by the stream's expected version). Branch codes are unique per company and
//! point codes per branch, which the aggregate enforces because both live in its state.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

use crate::print_settings::PrintSettings;
use crate::ruc::Ruc;
use crate::tenancy::TenantId;

/// The stream id of a company.
pub fn stream_id(tenant: TenantId, ruc: &Ruc) -> String {
    format!("company:{tenant}:{}", ruc.number())
}

/// Whether the taxpayer is a person or a legal entity (SIFEN iTipCont 1 or 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaxpayerType {
    /// A natural person.
    Individual,
    /// A company or other legal entity.
    LegalEntity,
}

/// An economic activity (SIFEN gActEco).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EconomicActivity {
    /// Code (1 to 8 digits).
    pub code: String,
    /// Description.
    pub description: String,
}

/// Everything a company record holds but its RUC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompanyProfile {
    /// Legal name (dNomEmi).
    pub legal_name: String,
    /// Trade name (dNomFanEmi).
    pub trade_name: Option<String>,
    /// Person or legal entity.
    pub taxpayer_type: TaxpayerType,
    /// Tax regime code (iTipReg).
    pub tax_regime_code: Option<u8>,
    /// Street address.
    pub address: String,
    /// House number.
    pub house_number: String,
    /// Department code.
    pub department_code: u16,
    /// Department name.
    pub department_name: String,
    /// District code.
    pub district_code: Option<u16>,
    /// District name.
    pub district_name: Option<String>,
    /// City code.
    pub city_code: u32,
    /// City name.
    pub city_name: String,
    /// Phone.
    pub phone: String,
    /// Email.
    pub email: String,
    /// At least one economic activity.
    pub economic_activities: Vec<EconomicActivity>,
}

/// A problem with a profile, by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldIssue {
    /// JSON path of the field.
    pub field: String,
    /// Stable code.
    pub code: &'static str,
    /// Message.
    pub message: String,
}

fn text_issue(issues: &mut Vec<FieldIssue>, field: &str, value: &str, max: usize) {
    let len = value.trim().chars().count();
    if len == 0 || len > max {
        issues.push(FieldIssue {
            field: field.to_owned(),
            code: "invalid_length",
            message: format!("{field} must have 1 to {max} characters"),
        });
    }
}

impl CompanyProfile {
    /// Every problem at once (an empty list: valid).
    pub fn issues(&self) -> Vec<FieldIssue> {
        let mut issues = Vec::new();
        text_issue(&mut issues, "legal_name", &self.legal_name, 255);
        if let Some(t) = &self.trade_name {
            text_issue(&mut issues, "trade_name", t, 255);
        }
        text_issue(&mut issues, "address", &self.address, 255);
        text_issue(&mut issues, "house_number", &self.house_number, 6);
        text_issue(&mut issues, "department_name", &self.department_name, 16);
        text_issue(&mut issues, "city_name", &self.city_name, 30);
        text_issue(&mut issues, "phone", &self.phone, 15);
        let email = self.email.trim();
        if !(email.contains('@') && email.len() <= 80 && !email.contains(' ')) {
            issues.push(FieldIssue {
                field: "email".into(),
                code: "invalid_email",
                message: "email must be an address of at most 80 characters".into(),
            });
        }
        if self.economic_activities.is_empty() {
            issues.push(FieldIssue {
                field: "economic_activities".into(),
                code: "required",
                message: "at least one economic activity is required".into(),
            });
        }
        for (i, a) in self.economic_activities.iter().enumerate() {
            if !(1..=8).contains(&a.code.len()) || !a.code.bytes().all(|b| b.is_ascii_digit()) {
                issues.push(FieldIssue {
                    field: format!("economic_activities[{i}].code"),
                    code: "invalid_code",
                    message: "an activity code has 1 to 8 digits".into(),
                });
            }
            text_issue(
                &mut issues,
                &format!("economic_activities[{i}].description"),
                &a.description,
                300,
            );
        }
        issues
    }
}

/// A three-digit code of a branch (establecimiento) or issuance point (punto de expedición),
/// `001` to `999`.
pub fn valid_code(code: &str) -> bool {
    code.len() == 3 && code.bytes().all(|b| b.is_ascii_digit()) && code != "000"
}

/// A branch (establecimiento).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Branch {
    /// Id.
    pub branch_id: Uuid,
    /// `001`…`999`, unique in the company.
    pub code: String,
    /// Name.
    pub name: String,
    /// Address, when it differs from the company's.
    pub address: Option<String>,
    /// House number.
    pub house_number: Option<String>,
    /// City code.
    pub city_code: Option<u32>,
    /// City name.
    pub city_name: Option<String>,
    /// Department code.
    pub department_code: Option<u16>,
    /// Department name.
    pub department_name: Option<String>,
    /// Chosen when a document names no branch and the company has several.
    pub is_default: bool,
}

/// An issuance point (punto de expedición) of a branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IssuancePoint {
    /// Id.
    pub point_id: Uuid,
    /// Its branch.
    pub branch_id: Uuid,
    /// `001`…`999`, unique in the branch.
    pub code: String,
    /// Name.
    pub name: Option<String>,
    /// Chosen when a document names no point and the branch has several.
    pub is_default: bool,
}

/// Commands.
#[derive(Debug, Clone, PartialEq)]
pub enum CompanyCommand {
    /// Adds a branch.
    AddBranch(Branch),
    /// Adds an issuance point to a branch.
    AddIssuancePoint(IssuancePoint),
    /// Saves the print settings (an unchanged save is no event).
    SetPrintSettings {
        /// Id of the settings record (kept from the first save on).
        settings_id: Uuid,
        /// The settings.
        settings: PrintSettings,
    },
    /// Registers the company.
    Register {
        /// Id.
        company_id: Uuid,
        /// RUC.
        ruc: Ruc,
        /// Everything else.
        profile: CompanyProfile,
    },
    /// Replaces the profile (the RUC never changes).
    UpdateProfile {
        /// The new profile.
        profile: CompanyProfile,
    },
}

/// Events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum CompanyEvent {
    /// A branch was added.
    BranchAdded {
        /// Company.
        company_id: Uuid,
        /// The branch.
        branch: Branch,
    },
    /// The print settings changed.
    PrintSettingsChanged {
        /// Company.
        company_id: Uuid,
        /// Settings record id.
        settings_id: Uuid,
        /// The settings.
        settings: PrintSettings,
    },
    /// An issuance point was added.
    IssuancePointAdded {
        /// Company.
        company_id: Uuid,
        /// The point.
        point: IssuancePoint,
    },
    /// Registered.
    CompanyRegistered {
        /// Id.
        company_id: Uuid,
        /// RUC.
        ruc: Ruc,
        /// Profile.
        profile: CompanyProfile,
    },
    /// The profile changed (the whole new profile, so a reader needs no earlier event).
    CompanyProfileUpdated {
        /// Id.
        company_id: Uuid,
        /// Profile.
        profile: CompanyProfile,
    },
}

impl DomainEvent for CompanyEvent {
    fn event_type(&self) -> String {
        match self {
            Self::CompanyRegistered { .. } => "CompanyRegistered",
            Self::CompanyProfileUpdated { .. } => "CompanyProfileUpdated",
            Self::BranchAdded { .. } => "BranchAdded",
            Self::IssuancePointAdded { .. } => "IssuancePointAdded",
            Self::PrintSettingsChanged { .. } => "PrintSettingsChanged",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

/// Refusals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompanyError {
    /// The RUC is registered already in this tenant.
    #[error("a company with this RUC is already registered")]
    AlreadyRegistered,
    /// No such company.
    #[error("no such company")]
    NotRegistered,
    /// The profile has problems.
    #[error("the company record is invalid")]
    Invalid(Vec<(String, String, String)>),
    /// The code is taken in this company (branch) or branch (point).
    #[error("the code {0} is already used")]
    DuplicateCode(String),
    /// The branch is not one of this company's.
    #[error("no such branch in this company")]
    UnknownBranch,
}

/// State.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Company {
    /// Id, once registered.
    pub id: Option<Uuid>,
    /// Current profile.
    pub profile: Option<CompanyProfile>,
    /// Branch codes by id, with their points' codes by id.
    pub branches: BTreeMap<Uuid, (String, BTreeMap<Uuid, String>)>,
    /// Saved print settings and their record id.
    pub print_settings: Option<(Uuid, PrintSettings)>,
}

fn check(profile: &CompanyProfile) -> Result<(), CompanyError> {
    let issues = profile.issues();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(CompanyError::Invalid(
            issues
                .into_iter()
                .map(|i| (i.field, i.code.to_owned(), i.message))
                .collect(),
        ))
    }
}

impl Aggregate for Company {
    const TYPE: &'static str = "company";
    type Command = CompanyCommand;
    type Event = CompanyEvent;
    type Error = CompanyError;
    type Services = ();

    async fn handle(
        &mut self,
        command: CompanyCommand,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), CompanyError> {
        match command {
            CompanyCommand::Register {
                company_id,
                ruc,
                profile,
            } => {
                if self.id.is_some() {
                    return Err(CompanyError::AlreadyRegistered);
                }
                check(&profile)?;
                sink.write(
                    CompanyEvent::CompanyRegistered {
                        company_id,
                        ruc,
                        profile,
                    },
                    self,
                )
                .await;
            }
            CompanyCommand::AddBranch(branch) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let mut issues = Vec::new();
                if !valid_code(&branch.code) {
                    issues.push((
                        "code".into(),
                        "invalid_code".into(),
                        "a branch code is 001 to 999".into(),
                    ));
                }
                let name_len = branch.name.trim().chars().count();
                if !(1..=255).contains(&name_len) {
                    issues.push((
                        "name".into(),
                        "invalid_length".into(),
                        "name must have 1 to 255 characters".into(),
                    ));
                }
                if !issues.is_empty() {
                    return Err(CompanyError::Invalid(issues));
                }
                if self.branches.values().any(|(code, _)| *code == branch.code) {
                    return Err(CompanyError::DuplicateCode(branch.code));
                }
                sink.write(CompanyEvent::BranchAdded { company_id, branch }, self)
                    .await;
            }
            CompanyCommand::AddIssuancePoint(point) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let Some((_, points)) = self.branches.get(&point.branch_id) else {
                    return Err(CompanyError::UnknownBranch);
                };
                if !valid_code(&point.code) {
                    return Err(CompanyError::Invalid(vec![(
                        "code".into(),
                        "invalid_code".into(),
                        "an issuance point code is 001 to 999".into(),
                    )]));
                }
                if points.values().any(|code| *code == point.code) {
                    return Err(CompanyError::DuplicateCode(point.code));
                }
                sink.write(CompanyEvent::IssuancePointAdded { company_id, point }, self)
                    .await;
            }
            CompanyCommand::SetPrintSettings {
                settings_id,
                settings,
            } => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let issues = settings.issues();
                if !issues.is_empty() {
                    return Err(CompanyError::Invalid(issues));
                }
                let settings_id = self.print_settings.as_ref().map_or(settings_id, |(id, _)| *id);
                if self.print_settings.as_ref().map(|(_, s)| s) != Some(&settings) {
                    sink.write(
                        CompanyEvent::PrintSettingsChanged {
                            company_id,
                            settings_id,
                            settings,
                        },
                        self,
                    )
                    .await;
                }
            }
            CompanyCommand::UpdateProfile { profile } => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                check(&profile)?;
                if self.profile.as_ref() != Some(&profile) {
                    sink.write(CompanyEvent::CompanyProfileUpdated { company_id, profile }, self)
                        .await;
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: CompanyEvent) {
        match event {
            CompanyEvent::CompanyRegistered {
                company_id, profile, ..
            } => {
                self.id = Some(company_id);
                self.profile = Some(profile);
            }
            CompanyEvent::CompanyProfileUpdated { profile, .. } => self.profile = Some(profile),
            CompanyEvent::BranchAdded { branch, .. } => {
                self.branches
                    .insert(branch.branch_id, (branch.code, BTreeMap::new()));
            }
            CompanyEvent::PrintSettingsChanged {
                settings_id,
                settings,
                ..
            } => {
                self.print_settings = Some((settings_id, settings));
            }
            CompanyEvent::IssuancePointAdded { point, .. } => {
                if let Some((_, points)) = self.branches.get_mut(&point.branch_id) {
                    points.insert(point.point_id, point.code);
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cqrs_es::test::TestFramework;

    pub(crate) fn profile() -> CompanyProfile {
        CompanyProfile {
            legal_name: "DE GENERACION ELECTRONICA S.A.".into(),
            trade_name: None,
            taxpayer_type: TaxpayerType::LegalEntity,
            tax_regime_code: Some(8),
            address: "Avda. Mcal. López".into(),
            house_number: "1234".into(),
            department_code: 1,
            department_name: "CAPITAL".into(),
            district_code: None,
            district_name: None,
            city_code: 1,
            city_name: "ASUNCION (DISTRITO)".into(),
            phone: "021 000 000".into(),
            email: "facturas@example.com.py".into(),
            economic_activities: vec![EconomicActivity {
                code: "62010".into(),
                description: "Actividades de programación informática".into(),
            }],
        }
    }

    fn registered() -> CompanyEvent {
        CompanyEvent::CompanyRegistered {
            company_id: Uuid::from_u128(1),
            ruc: Ruc::parse("80069563-1").expect("ruc"),
            profile: profile(),
        }
    }

    #[test]
    fn a_company_is_registered_once() {
        TestFramework::<Company>::with(())
            .given_no_previous_events()
            .when(CompanyCommand::Register {
                company_id: Uuid::from_u128(1),
                ruc: Ruc::parse("80069563-1").expect("ruc"),
                profile: profile(),
            })
            .then_expect_events(vec![registered()]);
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::Register {
                company_id: Uuid::from_u128(2),
                ruc: Ruc::parse("80069563-1").expect("ruc"),
                profile: profile(),
            })
            .then_expect_error(CompanyError::AlreadyRegistered);
    }

    #[test]
    fn every_profile_problem_is_reported_at_once() {
        let mut bad = profile();
        bad.legal_name = " ".into();
        bad.email = "nope".into();
        bad.economic_activities[0].code = "12a".into();
        let fields: Vec<String> = bad.issues().into_iter().map(|i| i.field).collect();
        assert_eq!(fields, vec!["legal_name", "email", "economic_activities[0].code"]);
    }

    fn branch(id: u128, code: &str) -> Branch {
        Branch {
            branch_id: Uuid::from_u128(id),
            code: code.into(),
            name: "Casa central".into(),
            address: None,
            house_number: None,
            city_code: None,
            city_name: None,
            department_code: None,
            department_name: None,
            is_default: false,
        }
    }

    fn point(id: u128, branch: u128, code: &str) -> IssuancePoint {
        IssuancePoint {
            point_id: Uuid::from_u128(id),
            branch_id: Uuid::from_u128(branch),
            code: code.into(),
            name: None,
            is_default: false,
        }
    }

    #[test]
    fn branch_codes_are_unique_per_company_and_point_codes_per_branch() {
        let added = |b: Branch| CompanyEvent::BranchAdded {
            company_id: Uuid::from_u128(1),
            branch: b,
        };
        TestFramework::<Company>::with(())
            .given(vec![registered(), added(branch(10, "001"))])
            .when(CompanyCommand::AddBranch(branch(11, "001")))
            .then_expect_error(CompanyError::DuplicateCode("001".into()));
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddBranch(branch(10, "000")))
            .then_expect_error(CompanyError::Invalid(vec![(
                "code".into(),
                "invalid_code".into(),
                "a branch code is 001 to 999".into(),
            )]));
        let point_added = |p: IssuancePoint| CompanyEvent::IssuancePointAdded {
            company_id: Uuid::from_u128(1),
            point: p,
        };
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                added(branch(10, "001")),
                added(branch(11, "002")),
            ])
            .when(CompanyCommand::AddIssuancePoint(point(20, 11, "001")))
            .then_expect_events(vec![point_added(point(20, 11, "001"))]);
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                added(branch(10, "001")),
                point_added(point(20, 10, "001")),
            ])
            .when(CompanyCommand::AddIssuancePoint(point(21, 10, "001")))
            .then_expect_error(CompanyError::DuplicateCode("001".into()));
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddIssuancePoint(point(21, 99, "001")))
            .then_expect_error(CompanyError::UnknownBranch);
    }

    #[test]
    fn an_unchanged_profile_is_not_an_event() {
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::UpdateProfile { profile: profile() })
            .then_expect_events(vec![]);
        let mut renamed = profile();
        renamed.trade_name = Some("DEGE".into());
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::UpdateProfile {
                profile: renamed.clone(),
            })
            .then_expect_events(vec![CompanyEvent::CompanyProfileUpdated {
                company_id: Uuid::from_u128(1),
                profile: renamed,
            }]);
    }
}
