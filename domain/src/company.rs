//! The company aggregate: a taxpayer that issues documents, with its branches (establecimientos)
//! and their issuance points (puntos de expedición).
//!
//! One stream per company, `company:<tenant>:<RUC number>`, so a RUC is registered once per
//! tenant (atomically, by the stream's expected version). Branch codes are unique per company and
//! point codes per branch, which the aggregate enforces because both live in its state.
//!
//! Addresses are placed in SET's geographic table ([`crate::geography`]), which SIFEN checks the
//! issuer's `gEmis` against (rules 1255–1259): the codes must exist and agree (city ∈ district ∈
//! department), a name given must be the table's name for its code (case and accents aside), and
//! names left out are filled from the table, so what is recorded is always the table's exact name.

use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

use crate::certificate::CertificateRecord;
use crate::channel::EmissionChannel;
use crate::geography::{self, Place, PlaceError};
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
    /// Department code: the city's department in SET's geographic table.
    pub department_code: u16,
    /// Department name, as SET's table writes it: may be omitted (or blank) on input, and is then
    /// filled from the table; a name given must be the table's (case and accents aside).
    #[serde(default)]
    pub department_name: String,
    /// District code: when given, the city's district.
    pub district_code: Option<u16>,
    /// District name: checked and filled like the department's when `district_code` is given.
    pub district_name: Option<String>,
    /// City code, in SET's geographic table.
    pub city_code: u32,
    /// City name, as SET's table writes it: may be omitted (or blank) on input, and is then
    /// filled from the table; a name given must be the table's (case and accents aside).
    #[serde(default)]
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
        place_issues(
            &mut issues,
            self.department_code,
            self.district_code,
            self.city_code,
            [
                Some(self.department_name.as_str()),
                self.district_name.as_deref(),
                Some(self.city_name.as_str()),
            ],
        );
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

    /// The profile with its department, city and (with a district code) district named as SET's
    /// geographic table names them; unchanged when its codes do not make a place (then
    /// [`Self::issues`] says why).
    pub fn with_table_names(mut self) -> Self {
        if let Ok(place) = geography::resolve(self.department_code, self.district_code, self.city_code) {
            self.department_name = place.department.name.clone();
            self.city_name = place.city.name.clone();
            if self.district_code.is_some() {
                self.district_name = Some(place.district.name.clone());
            }
        }
        self
    }
}

/// The issues of an address's place (`department`, `district`, `city`) in SET's geographic
/// table, at the fields of a company profile or branch: an unknown city, a district or department
/// that is not the city's (the message names the right one), and names (`department_name`,
/// `district_name`, `city_name`, in that order; blank or `None`: not given) that are not the
/// table's. The place, when the codes make one.
fn place_issues(
    issues: &mut Vec<FieldIssue>,
    department: u16,
    district: Option<u16>,
    city: u32,
    names: [Option<&str>; 3],
) -> Option<Place> {
    const TABLE: &str = "SET's geographic table";
    let mut push = |field: &str, code: &'static str, message: String| {
        issues.push(FieldIssue {
            field: field.to_owned(),
            code,
            message,
        });
    };
    let place = match geography::resolve(department, district, city) {
        Ok(place) => place,
        Err(PlaceError::UnknownCity(_)) => {
            push(
                "city_code",
                "unknown_city_code",
                format!("city_code {city} is not a city of {TABLE}"),
            );
            return None;
        }
        Err(PlaceError::UnknownDistrict(code)) => {
            push(
                "district_code",
                "unknown_district_code",
                format!("district_code {code} is not a district of {TABLE}"),
            );
            return None;
        }
        Err(PlaceError::UnknownDepartment(code)) => {
            push(
                "department_code",
                "invalid_code",
                format!("department_code {code} is not a department of {TABLE}"),
            );
            return None;
        }
        Err(e @ PlaceError::CityNotInDistrict { .. }) => {
            push(
                "district_code",
                "city_district_mismatch",
                format!("{e} ({TABLE})"),
            );
            return None;
        }
        Err(e @ PlaceError::CityNotInDepartment { .. }) => {
            push(
                "department_code",
                "city_department_mismatch",
                format!("{e} ({TABLE})"),
            );
            return None;
        }
    };
    let [department_name, district_name, city_name] = names;
    let checks = [
        (
            "department_name",
            "department_name_mismatch",
            department_name,
            format!("department {}", place.department.code),
            &place.department.name,
        ),
        (
            "district_name",
            "district_name_mismatch",
            district_name,
            format!("district {}", place.district.code),
            &place.district.name,
        ),
        (
            "city_name",
            "city_name_mismatch",
            city_name,
            format!("city {}", place.city.code),
            &place.city.name,
        ),
    ];
    for (field, code, given, what, table) in checks {
        if let Some(given) = given.filter(|g| !g.trim().is_empty())
            && !geography::same_name(given, table)
        {
            push(
                field,
                code,
                format!(
                    "{field} {:?} is not the name of {what}: {TABLE} calls it {table:?} (omit {field} or send that name)",
                    given.trim()
                ),
            );
        }
    }
    Some(place)
}

impl Branch {
    /// The issues of the branch's own place, when it names a city, a department or a city name:
    /// the branch's codes, the company's where the branch gives none (as the issuer's address is
    /// built). None when the branch uses the company's place.
    fn place_issues(&self, company: &CompanyProfile) -> Vec<FieldIssue> {
        let mut issues = Vec::new();
        if self.city_code.is_some() || self.department_code.is_some() || self.city_name.is_some() {
            place_issues(
                &mut issues,
                self.department_code.unwrap_or(company.department_code),
                None,
                self.city_code.unwrap_or(company.city_code),
                [self.department_name.as_deref(), None, self.city_name.as_deref()],
            );
        }
        issues
    }

    /// The branch with the names of its own city and department as SET's table writes them.
    fn with_table_names(mut self, company: &CompanyProfile) -> Self {
        let department = self.department_code.unwrap_or(company.department_code);
        let city = self.city_code.unwrap_or(company.city_code);
        if let Ok(place) = geography::resolve(department, None, city) {
            if self.city_code.is_some() {
                self.city_name = Some(place.city.name.clone());
            }
            if self.department_code.is_some() {
                self.department_name = Some(place.department.name.clone());
            }
        }
        self
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
    /// City code, when the branch is in another city than the company (SET's geographic table).
    pub city_code: Option<u32>,
    /// City name: filled from SET's table when `city_code` is given; a name given must be the
    /// table's (case and accents aside).
    pub city_name: Option<String>,
    /// Department code, when the branch is in another department than the company: the city's.
    pub department_code: Option<u16>,
    /// Department name: filled and checked like the city's.
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
    /// Adds an uploaded certificate.
    AddCertificate(CertificateRecord),
    /// Creates a channel, or replaces one of the same kind (an unchanged record is no event).
    ConfigureChannel(EmissionChannel),
    /// Adds a branch.
    AddBranch(Branch),
    /// Adds an issuance point to a branch.
    AddIssuancePoint(IssuancePoint),
    /// Replaces a branch's record (its code never changes: it is in every CDC and number made
    /// there).
    UpdateBranch(Branch),
    /// Replaces an issuance point's record (its branch and code never change).
    UpdateIssuancePoint(IssuancePoint),
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
    /// A certificate was uploaded (its key and chain are sealed; this is what it says).
    CertificateAdded {
        /// Company.
        company_id: Uuid,
        /// The certificate.
        certificate: CertificateRecord,
    },
    /// A channel was created or changed (the whole record).
    EmissionChannelConfigured {
        /// Company.
        company_id: Uuid,
        /// The channel.
        channel: EmissionChannel,
    },
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
    /// A branch's record changed (the whole record, its code as before).
    BranchUpdated {
        /// Company.
        company_id: Uuid,
        /// The branch.
        branch: Branch,
    },
    /// An issuance point's record changed (the whole record, its branch and code as before).
    IssuancePointUpdated {
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

impl CompanyEvent {
    /// The company it changes.
    pub fn company_id(&self) -> Uuid {
        match self {
            Self::CertificateAdded { company_id, .. }
            | Self::EmissionChannelConfigured { company_id, .. }
            | Self::BranchAdded { company_id, .. }
            | Self::PrintSettingsChanged { company_id, .. }
            | Self::IssuancePointAdded { company_id, .. }
            | Self::BranchUpdated { company_id, .. }
            | Self::IssuancePointUpdated { company_id, .. }
            | Self::CompanyRegistered { company_id, .. }
            | Self::CompanyProfileUpdated { company_id, .. } => *company_id,
        }
    }
}

impl DomainEvent for CompanyEvent {
    fn event_type(&self) -> String {
        match self {
            Self::CompanyRegistered { .. } => "CompanyRegistered",
            Self::CompanyProfileUpdated { .. } => "CompanyProfileUpdated",
            Self::BranchAdded { .. } => "BranchAdded",
            Self::IssuancePointAdded { .. } => "IssuancePointAdded",
            Self::BranchUpdated { .. } => "BranchUpdated",
            Self::IssuancePointUpdated { .. } => "IssuancePointUpdated",
            Self::PrintSettingsChanged { .. } => "PrintSettingsChanged",
            Self::CertificateAdded { .. } => "CertificateAdded",
            Self::EmissionChannelConfigured { .. } => "EmissionChannelConfigured",
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
    /// The issuance point is not one of this branch's.
    #[error("no such issuance point in this branch")]
    UnknownIssuancePoint,
    /// This certificate (same fingerprint) was uploaded already.
    #[error("this certificate is already uploaded as {0}")]
    DuplicateCertificate(Uuid),
    /// A channel changes settings, never its kind.
    #[error("channel {0} is a {1} channel; its kind cannot change")]
    ChannelKindChanged(Uuid, &'static str),
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
    /// Certificate fingerprints by id.
    pub certificates: BTreeMap<Uuid, String>,
    /// Channels by id.
    pub channels: BTreeMap<Uuid, EmissionChannel>,
}

fn reference_issue(field: &str, what: &str) -> (String, String, String) {
    (
        field.to_owned(),
        "unknown_reference".to_owned(),
        format!("no such {what} in this company"),
    )
}

/// A change of a branch's or point's code: refused (the code is in every CDC and number made
/// there; a new code is a new record).
fn immutable_code(what: &str) -> CompanyError {
    CompanyError::Invalid(vec![(
        "code".into(),
        "immutable".into(),
        format!("the code of {what} cannot change; add a new one instead"),
    )])
}

impl Company {
    /// A branch's own problems: its code's form, its name, its place.
    fn check_branch(&self, branch: &Branch) -> Result<(), CompanyError> {
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
        if let Some(company) = &self.profile {
            issues.extend(
                branch
                    .place_issues(company)
                    .into_iter()
                    .map(|i| (i.field, i.code.to_owned(), i.message)),
            );
        }
        if issues.is_empty() {
            Ok(())
        } else {
            Err(CompanyError::Invalid(issues))
        }
    }

    /// The branch with its place named as SET's table names it.
    fn named(&self, branch: Branch) -> Branch {
        match &self.profile {
            Some(company) => branch.with_table_names(company),
            None => branch,
        }
    }
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
                let profile = profile.with_table_names();
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
                self.check_branch(&branch)?;
                if self.branches.values().any(|(code, _)| *code == branch.code) {
                    return Err(CompanyError::DuplicateCode(branch.code));
                }
                let branch = self.named(branch);
                sink.write(CompanyEvent::BranchAdded { company_id, branch }, self)
                    .await;
            }
            CompanyCommand::UpdateBranch(branch) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let Some((code, _)) = self.branches.get(&branch.branch_id) else {
                    return Err(CompanyError::UnknownBranch);
                };
                if *code != branch.code {
                    return Err(immutable_code("a branch"));
                }
                self.check_branch(&branch)?;
                let branch = self.named(branch);
                sink.write(CompanyEvent::BranchUpdated { company_id, branch }, self)
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
            CompanyCommand::UpdateIssuancePoint(point) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let Some((_, points)) = self.branches.get(&point.branch_id) else {
                    return Err(CompanyError::UnknownBranch);
                };
                let Some(code) = points.get(&point.point_id) else {
                    return Err(CompanyError::UnknownIssuancePoint);
                };
                if *code != point.code {
                    return Err(immutable_code("an issuance point"));
                }
                sink.write(CompanyEvent::IssuancePointUpdated { company_id, point }, self)
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
            CompanyCommand::AddCertificate(certificate) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                if let Some((id, _)) = self
                    .certificates
                    .iter()
                    .find(|(_, f)| **f == certificate.facts.fingerprint_sha256)
                {
                    return Err(CompanyError::DuplicateCertificate(*id));
                }
                sink.write(
                    CompanyEvent::CertificateAdded {
                        company_id,
                        certificate,
                    },
                    self,
                )
                .await;
            }
            CompanyCommand::ConfigureChannel(channel) => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                let mut issues: Vec<(String, String, String)> = channel
                    .issues()
                    .into_iter()
                    .map(|i| (i.field, i.code.to_owned(), i.message))
                    .collect();
                if let Some(s) = &channel.sifen
                    && !self.certificates.contains_key(&s.certificate_id)
                {
                    issues.push(reference_issue("sifen.certificate_id", "certificate"));
                }
                if let Some(a) = &channel.autoimpresor {
                    match self.branches.get(&a.branch_id) {
                        None => issues.push(reference_issue("autoimpresor.branch_id", "branch")),
                        Some((_, points)) if !points.contains_key(&a.issuance_point_id) => {
                            issues.push(reference_issue(
                                "autoimpresor.issuance_point_id",
                                "issuance point in this branch",
                            ))
                        }
                        Some(_) => {}
                    }
                }
                if !issues.is_empty() {
                    return Err(CompanyError::Invalid(issues));
                }
                match self.channels.get(&channel.channel_id) {
                    Some(existing) if existing.kind != channel.kind => {
                        return Err(CompanyError::ChannelKindChanged(
                            channel.channel_id,
                            existing.kind.as_str(),
                        ));
                    }
                    Some(existing) if *existing == channel => {}
                    _ => {
                        sink.write(
                            CompanyEvent::EmissionChannelConfigured { company_id, channel },
                            self,
                        )
                        .await;
                    }
                }
            }
            CompanyCommand::UpdateProfile { profile } => {
                let Some(company_id) = self.id else {
                    return Err(CompanyError::NotRegistered);
                };
                check(&profile)?;
                let profile = profile.with_table_names();
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
            // A record's code never changes, and codes are all the state keeps of it.
            CompanyEvent::BranchUpdated { .. } | CompanyEvent::IssuancePointUpdated { .. } => {}
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
            CompanyEvent::CertificateAdded { certificate, .. } => {
                self.certificates
                    .insert(certificate.certificate_id, certificate.facts.fingerprint_sha256);
            }
            CompanyEvent::EmissionChannelConfigured { channel, .. } => {
                self.channels.insert(channel.channel_id, channel);
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

    #[test]
    fn a_profile_is_placed_in_sets_table_and_named_by_it() {
        let issues_of = |change: fn(&mut CompanyProfile)| {
            let mut p = profile();
            change(&mut p);
            p.issues()
                .into_iter()
                .map(|i| (i.field, i.code, i.message))
                .collect::<Vec<_>>()
        };
        // Department 11 with city 6: Aguará is in Concepción.
        let wrong_department = issues_of(|p| {
            p.department_code = 11;
            p.department_name = String::new();
            p.city_code = 6;
            p.city_name = String::new();
        });
        assert_eq!(wrong_department.len(), 1, "{wrong_department:?}");
        let (field, code, message) = &wrong_department[0];
        assert_eq!(
            (field.as_str(), *code),
            ("department_code", "city_department_mismatch")
        );
        assert!(message.contains("department 2 CONCEPCION"), "{message}");
        // Luque's name for Aguará's code.
        let wrong_name = issues_of(|p| {
            p.department_code = 2;
            p.department_name = "Concepción".into();
            p.city_code = 6;
            p.city_name = "LUQUE".into();
        });
        assert_eq!(wrong_name.len(), 1, "{wrong_name:?}");
        let (field, code, message) = &wrong_name[0];
        assert_eq!((field.as_str(), *code), ("city_name", "city_name_mismatch"));
        assert!(message.contains("\"AGUARA\""), "{message}");
        let unknown = issues_of(|p| p.city_code = 99_999);
        assert_eq!(unknown[0].1, "unknown_city_code");
        let district = issues_of(|p| p.district_code = Some(159));
        assert_eq!(district[0].1, "city_district_mismatch");
        assert!(
            district[0].2.contains("district 1 ASUNCION (DISTRITO)"),
            "{}",
            district[0].2
        );
        let department_name = issues_of(|p| p.department_name = "CENTRAL".into());
        assert_eq!(department_name[0].1, "department_name_mismatch");
    }

    #[test]
    fn names_left_out_or_spelled_otherwise_are_recorded_as_the_table_writes_them() {
        let mut luque = profile();
        luque.department_code = 12;
        luque.department_name = String::new();
        luque.district_code = Some(159);
        luque.city_code = 5946;
        luque.city_name = "Luque".into();
        assert!(luque.issues().is_empty(), "{:?}", luque.issues());
        let mut named = luque.clone();
        named.department_name = "CENTRAL".into();
        named.district_name = Some("LUQUE".into());
        named.city_name = "LUQUE".into();
        TestFramework::<Company>::with(())
            .given_no_previous_events()
            .when(CompanyCommand::Register {
                company_id: Uuid::from_u128(1),
                ruc: Ruc::parse("80069563-1").expect("ruc"),
                profile: luque.clone(),
            })
            .then_expect_events(vec![CompanyEvent::CompanyRegistered {
                company_id: Uuid::from_u128(1),
                ruc: Ruc::parse("80069563-1").expect("ruc"),
                profile: named,
            }]);
        // Omitted names deserialize as blank, to be filled.
        let mut json = serde_json::to_value(profile()).expect("json");
        let object = json.as_object_mut().expect("object");
        object.remove("department_name");
        object.remove("city_name");
        let parsed: CompanyProfile = serde_json::from_value(json).expect("names are optional");
        assert_eq!(parsed.clone().with_table_names(), profile());
    }

    #[test]
    fn a_branch_elsewhere_is_placed_and_named_too() {
        let mut luque = branch(10, "002");
        luque.city_code = Some(5946);
        // The company is in the capital: without its own department the branch would be there.
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddBranch(luque.clone()))
            .then_expect_error(CompanyError::Invalid(vec![(
                "department_code".into(),
                "city_department_mismatch".into(),
                "city 5946 (LUQUE) is in department 12 CENTRAL, not in department 1 (SET's geographic table)"
                    .into(),
            )]));
        luque.department_code = Some(12);
        let mut named = luque.clone();
        named.city_name = Some("LUQUE".into());
        named.department_name = Some("CENTRAL".into());
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddBranch(luque))
            .then_expect_events(vec![CompanyEvent::BranchAdded {
                company_id: Uuid::from_u128(1),
                branch: named,
            }]);
        let mut misnamed = branch(11, "003");
        misnamed.city_name = Some("LUQUE".into());
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddBranch(misnamed))
            .then_expect_error(CompanyError::Invalid(vec![(
                "city_name".into(),
                "city_name_mismatch".into(),
                "city_name \"LUQUE\" is not the name of city 1: SET's geographic table calls it \"ASUNCION (DISTRITO)\" (omit city_name or send that name)".into(),
            )]));
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
    fn a_branch_or_point_changes_everything_but_its_code() {
        let added = CompanyEvent::BranchAdded {
            company_id: Uuid::from_u128(1),
            branch: branch(10, "001"),
        };
        let point_added = CompanyEvent::IssuancePointAdded {
            company_id: Uuid::from_u128(1),
            point: point(20, 10, "001"),
        };
        let given = || vec![registered(), added.clone(), point_added.clone()];
        let renamed = Branch {
            name: "Sucursal centro".into(),
            is_default: true,
            ..branch(10, "001")
        };
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateBranch(renamed.clone()))
            .then_expect_events(vec![CompanyEvent::BranchUpdated {
                company_id: Uuid::from_u128(1),
                branch: renamed,
            }]);
        // The place is checked and named from SET's table, as when it was added.
        let moved = Branch {
            city_code: Some(1),
            ..branch(10, "001")
        };
        let expected = Branch {
            city_name: Some("ASUNCION (DISTRITO)".into()),
            ..moved.clone()
        };
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateBranch(moved))
            .then_expect_events(vec![CompanyEvent::BranchUpdated {
                company_id: Uuid::from_u128(1),
                branch: expected,
            }]);
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateBranch(Branch {
                name: " ".into(),
                ..branch(10, "001")
            }))
            .then_expect_error(CompanyError::Invalid(vec![(
                "name".into(),
                "invalid_length".into(),
                "name must have 1 to 255 characters".into(),
            )]));
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateBranch(branch(10, "002")))
            .then_expect_error(immutable_code("a branch"));
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateBranch(branch(11, "001")))
            .then_expect_error(CompanyError::UnknownBranch);
        let named = IssuancePoint {
            name: Some("Caja 1".into()),
            ..point(20, 10, "001")
        };
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateIssuancePoint(named.clone()))
            .then_expect_events(vec![CompanyEvent::IssuancePointUpdated {
                company_id: Uuid::from_u128(1),
                point: named,
            }]);
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateIssuancePoint(point(20, 10, "002")))
            .then_expect_error(immutable_code("an issuance point"));
        TestFramework::<Company>::with(())
            .given(given())
            .when(CompanyCommand::UpdateIssuancePoint(point(21, 10, "001")))
            .then_expect_error(CompanyError::UnknownIssuancePoint);
        // A branch's code stays in the state after an update: a new branch cannot take it.
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                added.clone(),
                CompanyEvent::BranchUpdated {
                    company_id: Uuid::from_u128(1),
                    branch: branch(10, "001"),
                },
            ])
            .when(CompanyCommand::AddBranch(branch(12, "001")))
            .then_expect_error(CompanyError::DuplicateCode("001".into()));
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

    fn certificate(id: u128, fingerprint: &str) -> CertificateRecord {
        let mut facts = crate::certificate::tests::facts();
        facts.fingerprint_sha256 = fingerprint.into();
        CertificateRecord {
            certificate_id: Uuid::from_u128(id),
            label: None,
            facts,
            secret_id: Uuid::from_u128(id + 1000),
        }
    }

    fn certificate_added(id: u128, fingerprint: &str) -> CompanyEvent {
        CompanyEvent::CertificateAdded {
            company_id: Uuid::from_u128(1),
            certificate: certificate(id, fingerprint),
        }
    }

    #[test]
    fn a_certificate_is_uploaded_once() {
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::AddCertificate(certificate(5, "aa")))
            .then_expect_events(vec![certificate_added(5, "aa")]);
        TestFramework::<Company>::with(())
            .given(vec![registered(), certificate_added(5, "aa")])
            .when(CompanyCommand::AddCertificate(certificate(6, "aa")))
            .then_expect_error(CompanyError::DuplicateCertificate(Uuid::from_u128(5)));
    }

    fn sifen_channel(certificate_id: u128) -> EmissionChannel {
        use crate::channel::{ChannelKind, SifenEnvironment, SifenSettings};
        EmissionChannel {
            channel_id: Uuid::from_u128(30),
            kind: ChannelKind::Sifen,
            is_default: true,
            endpoint: "http://127.0.0.1:8082".into(),
            client_id: None,
            credentials_secret_id: None,
            sifen: Some(SifenSettings {
                environment: SifenEnvironment::Test,
                timbrado: "12345678".into(),
                timbrado_valid_from: chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
                csc_id: "0001".into(),
                certificate_id: Uuid::from_u128(certificate_id),
                csc_secret_id: Uuid::from_u128(40),
                remision_notice: None,
            }),
            autoimpresor: None,
        }
    }

    /// One event of every type, as the catalogue (docs/events.md) shows them.
    pub(crate) fn samples() -> Vec<CompanyEvent> {
        let mut branch = branch(2, "001");
        branch.is_default = true;
        let branch_added = branch.clone();
        let mut point = point(3, 2, "001");
        point.is_default = true;
        let mut updated = profile();
        updated.trade_name = Some("DEGESA".into());
        vec![
            registered(),
            CompanyEvent::CompanyProfileUpdated {
                company_id: Uuid::from_u128(1),
                profile: updated,
            },
            CompanyEvent::BranchAdded {
                company_id: Uuid::from_u128(1),
                branch: branch_added,
            },
            CompanyEvent::IssuancePointAdded {
                company_id: Uuid::from_u128(1),
                point: point.clone(),
            },
            CompanyEvent::BranchUpdated {
                company_id: Uuid::from_u128(1),
                branch: Branch {
                    name: "Casa matriz (centro)".into(),
                    ..branch
                },
            },
            CompanyEvent::IssuancePointUpdated {
                company_id: Uuid::from_u128(1),
                point: IssuancePoint {
                    name: Some("Caja 1".into()),
                    ..point
                },
            },
            CompanyEvent::PrintSettingsChanged {
                company_id: Uuid::from_u128(1),
                settings_id: Uuid::from_u128(20),
                settings: PrintSettings::defaults("DE GENERACION ELECTRONICA S.A."),
            },
            certificate_added(5, &"ab".repeat(32)),
            CompanyEvent::EmissionChannelConfigured {
                company_id: Uuid::from_u128(1),
                channel: sifen_channel(5),
            },
        ]
    }

    #[test]
    fn a_channel_refers_to_the_companys_own_records_and_keeps_its_kind() {
        let configured = |c: EmissionChannel| CompanyEvent::EmissionChannelConfigured {
            company_id: Uuid::from_u128(1),
            channel: c,
        };
        TestFramework::<Company>::with(())
            .given(vec![registered(), certificate_added(5, "aa")])
            .when(CompanyCommand::ConfigureChannel(sifen_channel(5)))
            .then_expect_events(vec![configured(sifen_channel(5))]);
        TestFramework::<Company>::with(())
            .given(vec![registered()])
            .when(CompanyCommand::ConfigureChannel(sifen_channel(5)))
            .then_expect_error(CompanyError::Invalid(vec![(
                "sifen.certificate_id".into(),
                "unknown_reference".into(),
                "no such certificate in this company".into(),
            )]));
        // Saving the same record again is no event; a changed CSC (new secret id) is one.
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                certificate_added(5, "aa"),
                configured(sifen_channel(5)),
            ])
            .when(CompanyCommand::ConfigureChannel(sifen_channel(5)))
            .then_expect_events(vec![]);
        let mut new_csc = sifen_channel(5);
        if let Some(s) = new_csc.sifen.as_mut() {
            s.csc_secret_id = Uuid::from_u128(41);
        }
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                certificate_added(5, "aa"),
                configured(sifen_channel(5)),
            ])
            .when(CompanyCommand::ConfigureChannel(new_csc.clone()))
            .then_expect_events(vec![configured(new_csc)]);
        let mut as_printer = sifen_channel(5);
        as_printer.kind = crate::channel::ChannelKind::Autoimpresor;
        as_printer.sifen = None;
        as_printer.autoimpresor = Some(crate::channel::AutoimpresorSettings {
            authorization: "A".into(),
            declared_software: None,
            timbrado: "12345678".into(),
            valid_from: chrono::NaiveDate::from_ymd_opt(2026, 1, 1).expect("date"),
            valid_to: chrono::NaiveDate::from_ymd_opt(2026, 12, 31).expect("date"),
            branch_id: Uuid::from_u128(10),
            issuance_point_id: Uuid::from_u128(20),
            range_start: 1,
            range_end: 10,
            next_number: 1,
        });
        let added = CompanyEvent::BranchAdded {
            company_id: Uuid::from_u128(1),
            branch: branch(10, "001"),
        };
        TestFramework::<Company>::with(())
            .given(vec![registered(), added.clone()])
            .when(CompanyCommand::ConfigureChannel(as_printer.clone()))
            .then_expect_error(CompanyError::Invalid(vec![(
                "autoimpresor.issuance_point_id".into(),
                "unknown_reference".into(),
                "no such issuance point in this branch in this company".into(),
            )]));
        let point_added = CompanyEvent::IssuancePointAdded {
            company_id: Uuid::from_u128(1),
            point: point(20, 10, "001"),
        };
        TestFramework::<Company>::with(())
            .given(vec![
                registered(),
                added,
                point_added,
                certificate_added(5, "aa"),
                configured(sifen_channel(5)),
            ])
            .when(CompanyCommand::ConfigureChannel(as_printer))
            .then_expect_error(CompanyError::ChannelKindChanged(Uuid::from_u128(30), "sifen"));
    }
}
