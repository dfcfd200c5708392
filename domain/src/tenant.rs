//! The tenant aggregate: a tenant's creation, its API keys and its members, as events, so that
//! who was given which access, and when, is part of the audit trail.
//!
//! The stream id is `tenant:<slug>`, so a slug can be taken once: a second creation with the same
//! slug meets an existing stream (or loses the race on its expected version). API keys are
//! generated outside (they need randomness); the aggregate records their id and prefix, and the
//! SHA-256 that authenticates a key is kept outside the log (`api_key_hashes`).

use chrono::{DateTime, Utc};
use cqrs_es::event_sink::EventSink;
use cqrs_es::{Aggregate, DomainEvent};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use uuid::Uuid;

use crate::access::{Permission, Role};
use crate::tenancy::{Environment, TenantSlug};

/// The stream id of a tenant.
pub fn stream_id(slug: &TenantSlug) -> String {
    format!("tenant:{}", slug.as_str())
}

/// An API key to record (the secret itself never reaches the aggregate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyGrant {
    /// Key id.
    pub key_id: Uuid,
    /// Human label.
    pub name: String,
    /// Role the key acts with.
    pub role: Role,
    /// Restricts the key to one company's data.
    pub company_id: Option<Uuid>,
    /// The first characters of the key (`kt_test_AbC1`), to recognise it in listings.
    pub prefix: String,
    /// Lower-case hex SHA-256 of the whole key: only in events written before the hashes moved to
    /// the `api_key_hashes` credentials table (empty, and absent from the event, since).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub key_sha256: String,
    /// When the key stops working.
    pub expires_at: Option<DateTime<Utc>>,
}

/// Who revokes a key: recorded in the event, and checked against the key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoker {
    /// `api_key:<id>` or `user:<id>`.
    pub actor: String,
    /// The caller's role.
    pub role: Role,
    /// The caller's company scope, when its key has one.
    pub company_id: Option<Uuid>,
}

/// Commands.
#[derive(Debug, Clone, PartialEq)]
pub enum TenantCommand {
    /// Creates the tenant with its first owner key.
    Create {
        /// Tenant id.
        tenant_id: Uuid,
        /// Slug.
        slug: TenantSlug,
        /// Display name.
        name: String,
        /// Demo or production.
        environment: Environment,
        /// The bootstrap key (role owner).
        bootstrap_key: KeyGrant,
    },
    /// Issues an API key, on behalf of a caller with `granted_by`.
    IssueApiKey {
        /// The key.
        key: KeyGrant,
        /// Role of whoever asks.
        granted_by: Role,
    },
    /// Changes a member's role, on behalf of a caller with `by`: only an owner gives or takes
    /// ownership, and the last owner is never lowered.
    ChangeMemberRole {
        /// The member.
        user_id: Uuid,
        /// The new role.
        role: Role,
        /// Role of whoever asks.
        by: Role,
    },
    /// Removes a member, on behalf of a caller with `by`: only an owner removes an owner, and
    /// never the last one.
    RemoveMember {
        /// The member.
        user_id: Uuid,
        /// Role of whoever asks.
        by: Role,
    },
    /// Revokes a key (revoking twice is harmless), on behalf of `by`: only an owner revokes an
    /// owner key, and a company-scoped caller only keys of its own company.
    RevokeApiKey {
        /// Key id.
        key_id: Uuid,
        /// Who asks.
        by: Revoker,
    },
    /// Invites an email address to a role, on behalf of a caller with `by`: only an owner
    /// invites an owner. Nothing is granted until the invitee accepts.
    Invite {
        /// Invitation id.
        invitation_id: Uuid,
        /// The invited address, lower case.
        email: String,
        /// The role it will have.
        role: Role,
        /// After this moment it can no longer be accepted.
        expires_at: DateTime<Utc>,
        /// Role of whoever asks.
        by: Role,
        /// Who asks (`api_key:<id>`, `user:<id>`).
        actor: String,
    },
    /// The invitee accepts: a user whose email is the invited one becomes a member.
    AcceptInvitation {
        /// Invitation id.
        invitation_id: Uuid,
        /// The new membership's id.
        membership_id: Uuid,
        /// The accepting user.
        user_id: Uuid,
        /// Their email, lower case (it must be the invited one).
        email: String,
        /// The moment of acceptance (checked against the expiry).
        now: DateTime<Utc>,
    },
    /// Withdraws a pending invitation, on behalf of a caller with `by` (an owner's invitation
    /// only by an owner).
    RevokeInvitation {
        /// Invitation id.
        invitation_id: Uuid,
        /// Role of whoever asks.
        by: Role,
        /// Who asks.
        actor: String,
    },
}

/// Events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TenantEvent {
    /// A tenant exists.
    TenantCreated {
        /// Id.
        tenant_id: Uuid,
        /// Slug.
        slug: TenantSlug,
        /// Name.
        name: String,
        /// Environment.
        environment: Environment,
    },
    /// A key was issued.
    ApiKeyIssued(KeyGrant),
    /// A key was revoked.
    ApiKeyRevoked {
        /// Key id.
        key_id: Uuid,
        /// Who revoked it (`api_key:<id>`, `user:<id>`); absent from events written before it
        /// was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        revoked_by: Option<String>,
    },
    /// A user became a member.
    MemberAdded {
        /// Membership id.
        membership_id: Uuid,
        /// The user.
        user_id: Uuid,
        /// The role.
        role: Role,
        /// The invitation it accepted (absent from members added before invitations).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        invitation_id: Option<Uuid>,
    },
    /// An email address was invited (the token that accepts it is not in the event).
    MemberInvited {
        /// Invitation id.
        invitation_id: Uuid,
        /// The invited address, lower case.
        email: String,
        /// The role it will have.
        role: Role,
        /// Until when it can be accepted.
        expires_at: DateTime<Utc>,
        /// Who invited (`api_key:<id>`, `user:<id>`).
        invited_by: String,
    },
    /// A pending invitation was withdrawn.
    InvitationRevoked {
        /// Invitation id.
        invitation_id: Uuid,
        /// Who withdrew it.
        revoked_by: String,
    },
    /// A member's role changed.
    MemberRoleChanged {
        /// The user.
        user_id: Uuid,
        /// The new role.
        role: Role,
    },
    /// A member was removed.
    MemberRemoved {
        /// The user.
        user_id: Uuid,
    },
}

impl DomainEvent for TenantEvent {
    fn event_type(&self) -> String {
        match self {
            Self::TenantCreated { .. } => "TenantCreated",
            Self::ApiKeyIssued(_) => "ApiKeyIssued",
            Self::ApiKeyRevoked { .. } => "ApiKeyRevoked",
            Self::MemberAdded { .. } => "MemberAdded",
            Self::MemberRoleChanged { .. } => "MemberRoleChanged",
            Self::MemberRemoved { .. } => "MemberRemoved",
            Self::MemberInvited { .. } => "MemberInvited",
            Self::InvitationRevoked { .. } => "InvitationRevoked",
        }
        .to_owned()
    }

    fn event_version(&self) -> String {
        "1".to_owned()
    }
}

/// Refusals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TenantError {
    /// The slug is taken.
    #[error("the slug is already taken")]
    AlreadyExists,
    /// No such tenant.
    #[error("no such tenant")]
    NotCreated,
    /// A key with this id exists.
    #[error("an API key with this id already exists")]
    DuplicateKey,
    /// Unknown key.
    #[error("no such API key")]
    UnknownKey,
    /// Only owners create owner keys.
    #[error("only an owner can issue an owner key")]
    OwnerOnly,
    /// Only owners revoke owner keys.
    #[error("only an owner can revoke an owner key")]
    OwnerKeyOwnerOnly,
    /// No such member.
    #[error("no such member")]
    NotMember,
    /// The tenant's last owner cannot be lowered or removed.
    #[error("the tenant's last owner cannot be lowered or removed")]
    LastOwner,
    /// Only owners act on owners.
    #[error("only an owner can change or remove an owner, or make one")]
    OwnersOwnerOnly,
    /// A company-scoped caller acts only on its own company's keys.
    #[error("a company-scoped key can revoke only keys of its own company")]
    OutsideScope,
    /// The user is a member already.
    #[error("the user is already a member of this tenant")]
    AlreadyMember,
    /// No pending invitation has this id.
    #[error("no such invitation")]
    UnknownInvitation,
    /// The invitation was accepted, revoked or has expired.
    #[error("the invitation was already accepted, was revoked or has expired")]
    InvitationClosed,
    /// The accepting user is not the invited address.
    #[error("the invitation is for another email address")]
    NotInvitee,
    /// The key name is empty or too long.
    #[error("a key name has 1 to 100 characters")]
    BadName,
}

/// State.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tenant {
    /// Created.
    pub created: bool,
    /// Keys and whether they are revoked.
    pub keys: BTreeMap<Uuid, bool>,
    /// Keys' roles and company scopes (what a revocation is checked against).
    #[serde(default)]
    pub grants: BTreeMap<Uuid, (Role, Option<Uuid>)>,
    /// Members and their roles.
    pub members: BTreeMap<Uuid, Role>,
    /// Every invitation, and whether it is still pending.
    #[serde(default)]
    pub invitations: BTreeMap<Uuid, Invitation>,
}

/// An invitation as the aggregate keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invitation {
    /// The invited address, lower case.
    pub email: String,
    /// The role it grants.
    pub role: Role,
    /// Until when it can be accepted.
    pub expires_at: DateTime<Utc>,
    /// Neither accepted nor revoked.
    pub pending: bool,
}

impl Aggregate for Tenant {
    const TYPE: &'static str = "tenant";
    type Command = TenantCommand;
    type Event = TenantEvent;
    type Error = TenantError;
    type Services = ();

    async fn handle(
        &mut self,
        command: TenantCommand,
        _: &(),
        sink: &EventSink<Self>,
    ) -> Result<(), TenantError> {
        match command {
            TenantCommand::Create {
                tenant_id,
                slug,
                name,
                environment,
                bootstrap_key,
            } => {
                if self.created {
                    return Err(TenantError::AlreadyExists);
                }
                let key = KeyGrant {
                    role: Role::Owner,
                    ..bootstrap_key
                };
                check_name(&key.name)?;
                sink.write(
                    TenantEvent::TenantCreated {
                        tenant_id,
                        slug,
                        name,
                        environment,
                    },
                    self,
                )
                .await;
                sink.write(TenantEvent::ApiKeyIssued(key), self).await;
            }
            TenantCommand::IssueApiKey { key, granted_by } => {
                if !self.created {
                    return Err(TenantError::NotCreated);
                }
                if key.role == Role::Owner && !granted_by.allows(Permission::ManageOwnership) {
                    return Err(TenantError::OwnerOnly);
                }
                check_name(&key.name)?;
                if self.keys.contains_key(&key.key_id) {
                    return Err(TenantError::DuplicateKey);
                }
                sink.write(TenantEvent::ApiKeyIssued(key), self).await;
            }
            TenantCommand::Invite {
                invitation_id,
                email,
                role,
                expires_at,
                by,
                actor,
            } => {
                if !self.created {
                    return Err(TenantError::NotCreated);
                }
                if role == Role::Owner && !by.allows(Permission::ManageOwnership) {
                    return Err(TenantError::OwnerOnly);
                }
                if !self.invitations.contains_key(&invitation_id) {
                    sink.write(
                        TenantEvent::MemberInvited {
                            invitation_id,
                            email,
                            role,
                            expires_at,
                            invited_by: actor,
                        },
                        self,
                    )
                    .await;
                }
            }
            TenantCommand::AcceptInvitation {
                invitation_id,
                membership_id,
                user_id,
                email,
                now,
            } => {
                let invitation = self
                    .invitations
                    .get(&invitation_id)
                    .ok_or(TenantError::UnknownInvitation)?;
                if invitation.email != email {
                    return Err(TenantError::NotInvitee);
                }
                if !invitation.pending || now >= invitation.expires_at {
                    return Err(TenantError::InvitationClosed);
                }
                if self.members.contains_key(&user_id) {
                    return Err(TenantError::AlreadyMember);
                }
                let role = invitation.role;
                sink.write(
                    TenantEvent::MemberAdded {
                        membership_id,
                        user_id,
                        role,
                        invitation_id: Some(invitation_id),
                    },
                    self,
                )
                .await;
            }
            TenantCommand::RevokeInvitation {
                invitation_id,
                by,
                actor,
            } => {
                let invitation = self
                    .invitations
                    .get(&invitation_id)
                    .ok_or(TenantError::UnknownInvitation)?;
                if invitation.role == Role::Owner && !by.allows(Permission::ManageOwnership) {
                    return Err(TenantError::OwnersOwnerOnly);
                }
                if invitation.pending {
                    sink.write(
                        TenantEvent::InvitationRevoked {
                            invitation_id,
                            revoked_by: actor,
                        },
                        self,
                    )
                    .await;
                }
            }
            TenantCommand::ChangeMemberRole { user_id, role, by } => {
                let current = *self.members.get(&user_id).ok_or(TenantError::NotMember)?;
                self.check_owner_change(current, Some(role), by)?;
                if current != role {
                    sink.write(TenantEvent::MemberRoleChanged { user_id, role }, self)
                        .await;
                }
            }
            TenantCommand::RemoveMember { user_id, by } => {
                let current = *self.members.get(&user_id).ok_or(TenantError::NotMember)?;
                self.check_owner_change(current, None, by)?;
                sink.write(TenantEvent::MemberRemoved { user_id }, self).await;
            }
            TenantCommand::RevokeApiKey { key_id, by } => {
                let revoked = *self.keys.get(&key_id).ok_or(TenantError::UnknownKey)?;
                let (role, company) = self.grants.get(&key_id).copied().unwrap_or((Role::Owner, None));
                if role == Role::Owner && !by.role.allows(Permission::ManageOwnership) {
                    return Err(TenantError::OwnerKeyOwnerOnly);
                }
                if by.company_id.is_some() && company != by.company_id {
                    return Err(TenantError::OutsideScope);
                }
                if !revoked {
                    sink.write(
                        TenantEvent::ApiKeyRevoked {
                            key_id,
                            revoked_by: Some(by.actor),
                        },
                        self,
                    )
                    .await;
                }
            }
        }
        Ok(())
    }

    fn apply(&mut self, event: TenantEvent) {
        match event {
            TenantEvent::TenantCreated { .. } => self.created = true,
            TenantEvent::ApiKeyIssued(key) => {
                self.keys.insert(key.key_id, false);
                self.grants.insert(key.key_id, (key.role, key.company_id));
            }
            TenantEvent::ApiKeyRevoked { key_id, .. } => {
                self.keys.insert(key_id, true);
            }
            TenantEvent::MemberAdded {
                user_id,
                role,
                invitation_id,
                ..
            } => {
                self.members.insert(user_id, role);
                if let Some(invitation) = invitation_id.and_then(|id| self.invitations.get_mut(&id)) {
                    invitation.pending = false;
                }
            }
            TenantEvent::MemberRoleChanged { user_id, role } => {
                self.members.insert(user_id, role);
            }
            TenantEvent::MemberInvited {
                invitation_id,
                email,
                role,
                expires_at,
                ..
            } => {
                self.invitations.insert(
                    invitation_id,
                    Invitation {
                        email,
                        role,
                        expires_at,
                        pending: true,
                    },
                );
            }
            TenantEvent::InvitationRevoked { invitation_id, .. } => {
                if let Some(invitation) = self.invitations.get_mut(&invitation_id) {
                    invitation.pending = false;
                }
            }
            TenantEvent::MemberRemoved { user_id } => {
                self.members.remove(&user_id);
            }
        }
    }
}

impl Tenant {
    /// A member going from `current` to `next` (`None`: removed), asked by `by`: ownership is
    /// an owner's to give or take, and the last owner stays one.
    fn check_owner_change(&self, current: Role, next: Option<Role>, by: Role) -> Result<(), TenantError> {
        let touches_ownership = current == Role::Owner || next == Some(Role::Owner);
        if touches_ownership && !by.allows(Permission::ManageOwnership) {
            return Err(TenantError::OwnersOwnerOnly);
        }
        let owners = self.members.values().filter(|r| **r == Role::Owner).count();
        if current == Role::Owner && next != Some(Role::Owner) && owners <= 1 {
            return Err(TenantError::LastOwner);
        }
        Ok(())
    }
}

fn check_name(name: &str) -> Result<(), TenantError> {
    let len = name.trim().chars().count();
    if (1..=100).contains(&len) {
        Ok(())
    } else {
        Err(TenantError::BadName)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cqrs_es::test::TestFramework;

    /// One event of every type, as the catalogue (docs/events.md) shows them.
    pub(crate) fn samples() -> Vec<TenantEvent> {
        vec![
            created(),
            TenantEvent::ApiKeyIssued(KeyGrant {
                // Written since the hashes moved to the credentials table.
                key_sha256: String::new(),
                ..key(Role::Issuer)
            }),
            TenantEvent::ApiKeyRevoked {
                key_id: Uuid::from_u128(7),
                revoked_by: Some(format!("api_key:{}", Uuid::from_u128(6))),
            },
            TenantEvent::MemberInvited {
                invitation_id: Uuid::from_u128(11),
                email: "ana@acme.com.py".into(),
                role: Role::Admin,
                expires_at: DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time"),
                invited_by: format!("api_key:{}", Uuid::from_u128(6)),
            },
            TenantEvent::InvitationRevoked {
                invitation_id: Uuid::from_u128(11),
                revoked_by: format!("user:{}", Uuid::from_u128(12)),
            },
            TenantEvent::MemberAdded {
                membership_id: Uuid::from_u128(13),
                user_id: Uuid::from_u128(12),
                role: Role::Admin,
                invitation_id: Some(Uuid::from_u128(11)),
            },
            TenantEvent::MemberRoleChanged {
                user_id: Uuid::from_u128(12),
                role: Role::Auditor,
            },
            TenantEvent::MemberRemoved {
                user_id: Uuid::from_u128(12),
            },
        ]
    }

    fn key(role: Role) -> KeyGrant {
        KeyGrant {
            key_id: Uuid::from_u128(7),
            name: "erp".into(),
            role,
            company_id: None,
            prefix: "kt_test_abcd".into(),
            key_sha256: "00".repeat(32),
            expires_at: None,
        }
    }

    fn created() -> TenantEvent {
        TenantEvent::TenantCreated {
            tenant_id: Uuid::from_u128(1),
            slug: TenantSlug::parse("acme").expect("slug"),
            name: "Acme".into(),
            environment: Environment::Demo,
        }
    }

    #[test]
    fn creating_a_tenant_issues_its_bootstrap_owner_key() {
        TestFramework::<Tenant>::with(())
            .given_no_previous_events()
            .when(TenantCommand::Create {
                tenant_id: Uuid::from_u128(1),
                slug: TenantSlug::parse("acme").expect("slug"),
                name: "Acme".into(),
                environment: Environment::Demo,
                bootstrap_key: key(Role::Viewer),
            })
            .then_expect_events(vec![created(), TenantEvent::ApiKeyIssued(key(Role::Owner))]);
    }

    #[test]
    fn a_taken_slug_cannot_be_created_again() {
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(TenantCommand::Create {
                tenant_id: Uuid::from_u128(2),
                slug: TenantSlug::parse("acme").expect("slug"),
                name: "Other".into(),
                environment: Environment::Production,
                bootstrap_key: key(Role::Owner),
            })
            .then_expect_error(TenantError::AlreadyExists);
    }

    #[test]
    fn only_an_owner_issues_owner_keys() {
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(TenantCommand::IssueApiKey {
                key: key(Role::Owner),
                granted_by: Role::Admin,
            })
            .then_expect_error(TenantError::OwnerOnly);
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(TenantCommand::IssueApiKey {
                key: key(Role::Issuer),
                granted_by: Role::Admin,
            })
            .then_expect_events(vec![TenantEvent::ApiKeyIssued(key(Role::Issuer))]);
    }

    fn by(role: Role, company_id: Option<Uuid>) -> Revoker {
        Revoker {
            actor: "api_key:00000000-0000-0000-0000-000000000063".into(),
            role,
            company_id,
        }
    }

    #[test]
    fn revoking_twice_is_harmless_and_unknown_keys_are_refused() {
        TestFramework::<Tenant>::with(())
            .given(vec![
                created(),
                TenantEvent::ApiKeyIssued(key(Role::Owner)),
                TenantEvent::ApiKeyRevoked {
                    key_id: Uuid::from_u128(7),
                    revoked_by: None,
                },
            ])
            .when(TenantCommand::RevokeApiKey {
                key_id: Uuid::from_u128(7),
                by: by(Role::Owner, None),
            })
            .then_expect_events(vec![]);
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(TenantCommand::RevokeApiKey {
                key_id: Uuid::from_u128(9),
                by: by(Role::Owner, None),
            })
            .then_expect_error(TenantError::UnknownKey);
    }

    #[test]
    fn only_owners_revoke_owner_keys_and_a_scoped_caller_only_its_company_s_keys() {
        let revoke = |caller| TenantCommand::RevokeApiKey {
            key_id: Uuid::from_u128(7),
            by: caller,
        };
        TestFramework::<Tenant>::with(())
            .given(vec![created(), TenantEvent::ApiKeyIssued(key(Role::Owner))])
            .when(revoke(by(Role::Admin, None)))
            .then_expect_error(TenantError::OwnerKeyOwnerOnly);
        let scoped = |company| KeyGrant {
            company_id: company,
            ..key(Role::Issuer)
        };
        let (a, b) = (Some(Uuid::from_u128(30)), Some(Uuid::from_u128(31)));
        TestFramework::<Tenant>::with(())
            .given(vec![created(), TenantEvent::ApiKeyIssued(scoped(a))])
            .when(revoke(by(Role::Admin, b)))
            .then_expect_error(TenantError::OutsideScope);
        TestFramework::<Tenant>::with(())
            .given(vec![created(), TenantEvent::ApiKeyIssued(scoped(None))])
            .when(revoke(by(Role::Admin, a)))
            .then_expect_error(TenantError::OutsideScope);
        TestFramework::<Tenant>::with(())
            .given(vec![created(), TenantEvent::ApiKeyIssued(scoped(a))])
            .when(revoke(by(Role::Admin, a)))
            .then_expect_events(vec![TenantEvent::ApiKeyRevoked {
                key_id: Uuid::from_u128(7),
                revoked_by: Some(by(Role::Admin, a).actor),
            }]);
    }

    #[test]
    fn members_change_roles_and_leave_but_the_last_owner_stays_and_only_owners_touch_owners() {
        let member = |id: u128, role| TenantEvent::MemberAdded {
            membership_id: Uuid::from_u128(id + 100),
            user_id: Uuid::from_u128(id),
            role,
            invitation_id: None,
        };
        let (owner, admin) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let given = || vec![created(), member(1, Role::Owner), member(2, Role::Admin)];
        TestFramework::<Tenant>::with(())
            .given(given())
            .when(TenantCommand::ChangeMemberRole {
                user_id: admin,
                role: Role::Viewer,
                by: Role::Admin,
            })
            .then_expect_events(vec![TenantEvent::MemberRoleChanged {
                user_id: admin,
                role: Role::Viewer,
            }]);
        for (user_id, role, by, error) in [
            (owner, Role::Admin, Role::Owner, TenantError::LastOwner),
            (owner, Role::Admin, Role::Admin, TenantError::OwnersOwnerOnly),
            (admin, Role::Owner, Role::Admin, TenantError::OwnersOwnerOnly),
            (
                Uuid::from_u128(9),
                Role::Viewer,
                Role::Owner,
                TenantError::NotMember,
            ),
        ] {
            TestFramework::<Tenant>::with(())
                .given(given())
                .when(TenantCommand::ChangeMemberRole { user_id, role, by })
                .then_expect_error(error);
        }
        TestFramework::<Tenant>::with(())
            .given(given())
            .when(TenantCommand::RemoveMember {
                user_id: owner,
                by: Role::Owner,
            })
            .then_expect_error(TenantError::LastOwner);
        // With a second owner, the first may go.
        TestFramework::<Tenant>::with(())
            .given(vec![created(), member(1, Role::Owner), member(3, Role::Owner)])
            .when(TenantCommand::RemoveMember {
                user_id: owner,
                by: Role::Owner,
            })
            .then_expect_events(vec![TenantEvent::MemberRemoved { user_id: owner }]);
    }

    #[test]
    fn an_invitation_grants_its_role_once_to_its_own_email_until_it_expires_or_is_revoked() {
        let invitation_id = Uuid::from_u128(20);
        let user_id = Uuid::from_u128(21);
        let expires_at = DateTime::from_timestamp(2_000_000_000, 0).expect("time");
        let invite = |role, by| TenantCommand::Invite {
            invitation_id,
            email: "ana@example.com".into(),
            role,
            expires_at,
            by,
            actor: "user:1".into(),
        };
        let invited = |role| TenantEvent::MemberInvited {
            invitation_id,
            email: "ana@example.com".into(),
            role,
            expires_at,
            invited_by: "user:1".into(),
        };
        let accept = |email: &str, now: DateTime<Utc>| TenantCommand::AcceptInvitation {
            invitation_id,
            membership_id: Uuid::from_u128(22),
            user_id,
            email: email.into(),
            now,
        };
        let joined = TenantEvent::MemberAdded {
            membership_id: Uuid::from_u128(22),
            user_id,
            role: Role::Issuer,
            invitation_id: Some(invitation_id),
        };
        let before = expires_at - chrono::Duration::seconds(1);
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(invite(Role::Issuer, Role::Admin))
            .then_expect_events(vec![invited(Role::Issuer)]);
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(invite(Role::Owner, Role::Admin))
            .then_expect_error(TenantError::OwnerOnly);
        TestFramework::<Tenant>::with(())
            .given(vec![created(), invited(Role::Issuer)])
            .when(accept("ana@example.com", before))
            .then_expect_events(vec![joined.clone()]);
        for (given, command, error) in [
            (
                vec![created()],
                accept("ana@example.com", before),
                TenantError::UnknownInvitation,
            ),
            (
                vec![created(), invited(Role::Issuer)],
                accept("beto@example.com", before),
                TenantError::NotInvitee,
            ),
            (
                vec![created(), invited(Role::Issuer)],
                accept("ana@example.com", expires_at),
                TenantError::InvitationClosed,
            ),
            (
                vec![created(), invited(Role::Issuer), joined.clone()],
                accept("ana@example.com", before),
                TenantError::InvitationClosed,
            ),
            (
                vec![
                    created(),
                    invited(Role::Issuer),
                    TenantEvent::InvitationRevoked {
                        invitation_id,
                        revoked_by: "user:1".into(),
                    },
                ],
                accept("ana@example.com", before),
                TenantError::InvitationClosed,
            ),
            (
                vec![created(), invited(Role::Owner)],
                TenantCommand::RevokeInvitation {
                    invitation_id,
                    by: Role::Admin,
                    actor: "user:2".into(),
                },
                TenantError::OwnersOwnerOnly,
            ),
        ] {
            TestFramework::<Tenant>::with(())
                .given(given)
                .when(command)
                .then_expect_error(error);
        }
        // A member already (by an earlier invitation) cannot join twice.
        let second = TenantEvent::MemberInvited {
            invitation_id: Uuid::from_u128(30),
            email: "ana@example.com".into(),
            role: Role::Admin,
            expires_at,
            invited_by: "user:1".into(),
        };
        TestFramework::<Tenant>::with(())
            .given(vec![created(), invited(Role::Issuer), joined, second])
            .when(TenantCommand::AcceptInvitation {
                invitation_id: Uuid::from_u128(30),
                membership_id: Uuid::from_u128(31),
                user_id,
                email: "ana@example.com".into(),
                now: before,
            })
            .then_expect_error(TenantError::AlreadyMember);
    }

    #[test]
    fn key_names_must_be_present() {
        let mut nameless = key(Role::Viewer);
        nameless.name = "  ".into();
        TestFramework::<Tenant>::with(())
            .given(vec![created()])
            .when(TenantCommand::IssueApiKey {
                key: nameless,
                granted_by: Role::Owner,
            })
            .then_expect_error(TenantError::BadName);
    }
}
