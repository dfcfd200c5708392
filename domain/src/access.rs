//! Roles and what each may do.
//!
//! Endpoints ask for a [`Permission`], never for a role, so the table below is the one place
//! that says who may do what:
//!
//! | permission | owner | admin | issuer | viewer | auditor |
//! |---|---|---|---|---|---|
//! | read configuration, documents | ✓ | ✓ | ✓ | ✓ | ✓ |
//! | issue documents, use the sandbox | ✓ | ✓ | ✓ | | |
//! | read timelines, export events | ✓ | ✓ | | | ✓ |
//! | change configuration, webhooks | ✓ | ✓ | | | |
//! | manage API keys and members | ✓ | ✓ | | | |
//! | manage owners, delete the tenant | ✓ | | | | |

use serde::{Deserialize, Serialize};

/// A member's or API key's role within a tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Everything.
    Owner,
    /// Everything but deleting the tenant or managing owners.
    Admin,
    /// Documents and sandbox; reads configuration.
    Issuer,
    /// Reads.
    Viewer,
    /// Reads, plus timelines and event export.
    Auditor,
}

/// Something an endpoint needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Permission {
    /// Read companies, branches, points, channels, certificates (metadata), print settings.
    ReadConfiguration,
    /// Read documents, their status and artifacts.
    ReadDocuments,
    /// Create, retry, cancel, inutilize documents; regenerate printables.
    IssueDocuments,
    /// Run sandbox previews with the tenant's configuration.
    UseSandbox,
    /// Read document timelines and export the event log.
    ReadAudit,
    /// Create and change configuration records and webhooks.
    ManageConfiguration,
    /// Create and revoke API keys, add members.
    ManageAccess,
    /// Grant or remove the owner role, delete the tenant.
    ManageOwnership,
}

impl Role {
    /// Every role, for documentation and tests.
    pub const ALL: [Role; 5] = [
        Role::Owner,
        Role::Admin,
        Role::Issuer,
        Role::Viewer,
        Role::Auditor,
    ];

    /// Whether this role grants the permission.
    pub fn allows(self, permission: Permission) -> bool {
        use Permission as P;
        match self {
            Role::Owner => true,
            Role::Admin => permission != P::ManageOwnership,
            Role::Issuer => matches!(
                permission,
                P::ReadConfiguration | P::ReadDocuments | P::IssueDocuments | P::UseSandbox
            ),
            Role::Viewer => matches!(permission, P::ReadConfiguration | P::ReadDocuments),
            Role::Auditor => matches!(permission, P::ReadConfiguration | P::ReadDocuments | P::ReadAudit),
        }
    }

    /// The roles that grant a permission (for the OpenAPI document of each endpoint).
    pub fn granting(permission: Permission) -> Vec<Role> {
        Self::ALL.into_iter().filter(|r| r.allows(permission)).collect()
    }

    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Issuer => "issuer",
            Role::Viewer => "viewer",
            Role::Auditor => "auditor",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Permission as P;

    #[test]
    fn the_table_of_decisions_section_2_holds() {
        let all = [
            P::ReadConfiguration,
            P::ReadDocuments,
            P::IssueDocuments,
            P::UseSandbox,
            P::ReadAudit,
            P::ManageConfiguration,
            P::ManageAccess,
            P::ManageOwnership,
        ];
        assert!(all.iter().all(|p| Role::Owner.allows(*p)));
        assert!(
            all.iter()
                .filter(|p| **p != P::ManageOwnership)
                .all(|p| Role::Admin.allows(*p))
        );
        assert!(!Role::Admin.allows(P::ManageOwnership));
        for role in [Role::Issuer, Role::Viewer, Role::Auditor] {
            for p in [P::ManageConfiguration, P::ManageAccess, P::ManageOwnership] {
                assert!(!role.allows(p), "{role:?} must not {p:?}");
            }
            assert!(role.allows(P::ReadConfiguration) && role.allows(P::ReadDocuments));
        }
        assert!(Role::Issuer.allows(P::IssueDocuments) && Role::Issuer.allows(P::UseSandbox));
        assert!(!Role::Issuer.allows(P::ReadAudit));
        assert!(!Role::Viewer.allows(P::IssueDocuments) && !Role::Viewer.allows(P::ReadAudit));
        assert!(Role::Auditor.allows(P::ReadAudit) && !Role::Auditor.allows(P::IssueDocuments));
    }

    #[test]
    fn roles_granting_a_permission_are_listed_for_the_api_document() {
        assert_eq!(
            Role::granting(P::ReadAudit),
            vec![Role::Owner, Role::Admin, Role::Auditor]
        );
        assert_eq!(Role::granting(P::ManageOwnership), vec![Role::Owner]);
    }

    #[test]
    fn role_names_are_the_wire_names() {
        for role in Role::ALL {
            assert_eq!(
                serde_json::to_string(&role).expect("json"),
                format!("\"{}\"", role.as_str())
            );
        }
        assert!(serde_json::from_str::<Role>("\"superuser\"").is_err());
    }
}
