//! Users, passwords, sessions and memberships: the use cases behind `/v1/users`,
//! `/v1/auth/login|logout` and `/v1/memberships`.
//!
//! Users and sessions are credentials and live in plain tables (written with portable SQL
//! through the store port); memberships are events on the tenant stream. Passwords are hashed
//! with Argon2id (its default parameters: 19 MiB, 2 passes); session cookies are 43 random base62
//! characters of which only the SHA-256 is stored. Sessions last 12 hours, sliding.

use argon2::Argon2;
use argon2::password_hash::phc::PasswordHash;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use chrono::{DateTime, Duration, Utc};
use kuatia_domain::access::Role;
use kuatia_domain::tenancy::TenantId;
use kuatia_domain::tenant::{Tenant, TenantCommand};
use rand::Rng;
use uuid::Uuid;

use crate::access::{AccessError, sha256_hex};
use crate::aggregate::CommandExecutor;
use crate::event_store::{EventMetadata, SharedStore, StoreError};
use crate::projection::SqlValue;

/// How long a session lives after its last use.
pub const SESSION_LIFETIME: Duration = Duration::hours(12);

/// Shortest password accepted.
pub const MIN_PASSWORD_CHARS: usize = 12;

/// A user, without the password hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// Id.
    pub id: Uuid,
    /// Email, lower case.
    pub email: String,
    /// Name.
    pub name: Option<String>,
    /// Registered.
    pub created_at: DateTime<Utc>,
}

/// Why a registration or login failed.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// Invalid or already registered email (one error for both: the endpoint must not reveal
    /// who is registered).
    #[error("the email is invalid or cannot be registered")]
    EmailRefused,
    /// Password too short.
    #[error("the password {0}: choose a passphrase of at least 12 characters that is not a common one")]
    WeakPassword(&'static str),
    /// Wrong email or password (one error for both).
    #[error("wrong email or password")]
    BadCredentials,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Hashing failed.
    #[error("password hashing failed")]
    Hashing,
}

/// Whether `email` looks like one email address: something, one `@`, a domain with a dot, no
/// blanks or list separators, at most 254 characters.
pub fn plausible_email(email: &str) -> bool {
    let Some((local, domain)) = email.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.contains('@')
        && !email.contains([',', ';'])
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && email.len() <= 254
        && !email.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// Passwords of 12 characters or more that lists of leaked passwords hold most often (a short
/// list shipped in the binary; shorter ones are refused by their length anyway).
const COMMON_PASSWORDS: &[&str] = &[
    "123456789012",
    "1234567890123",
    "12345678901234",
    "123456789123",
    "123123123123",
    "qwertyuiopas",
    "qwerty123456",
    "qwertyuiop123",
    "qwertyuiop12",
    "1q2w3e4r5t6y",
    "1qaz2wsx3edc",
    "qazwsxedcrfv",
    "zaq12wsxcde3",
    "asdfghjkl123",
    "zxcvbnm12345",
    "passwordpassword",
    "password1234",
    "password12345",
    "password123456",
    "passw0rd1234",
    "p@ssw0rd1234",
    "iloveyou1234",
    "letmein12345",
    "welcome12345",
    "changeme1234",
    "administrator",
    "admin1234567",
    "football1234",
    "baseball1234",
    "superman1234",
    "sunshine1234",
    "princess1234",
    "monkey123456",
    "dragon123456",
    "trustno1trustno1",
    "abc123456789",
    "abcd12345678",
    "abcdefghijkl",
    "abcdef123456",
    "0987654321qw",
    "contraseña123",
    "contrasena123",
    "contraseña1234",
    "contrasena1234",
    "micontraseña",
    "paraguay1234",
    "paraguay12345",
    "asuncion1234",
    "asuncion12345",
    "facturacion1",
    "facturacion123",
    "kuatia123456",
    "bienvenido123",
    "holamundo123",
    "teamo1234567",
];

/// Why a password is refused, or `None`: fewer than 12 characters, only spaces, one character
/// repeated, a run such as `123456789012` or `abcdefghijkl`, or one of [`COMMON_PASSWORDS`].
pub fn password_weakness(password: &str) -> Option<&'static str> {
    let chars: Vec<char> = password.chars().collect();
    if chars.len() < MIN_PASSWORD_CHARS {
        return Some("has fewer than 12 characters");
    }
    if chars.iter().all(|c| c.is_whitespace()) {
        return Some("is only spaces");
    }
    if chars.iter().all(|c| *c == chars[0]) {
        return Some("repeats one character");
    }
    let step = |a: char, b: char| {
        let (a, b) = (a.to_ascii_lowercase() as i32, b.to_ascii_lowercase() as i32);
        b - a == 1 || (a == '9' as i32 && b == '0' as i32)
    };
    let run = |forward: bool| {
        chars.windows(2).all(|w| {
            if forward {
                step(w[0], w[1])
            } else {
                step(w[1], w[0])
            }
        })
    };
    if run(true) || run(false) {
        return Some("is a simple sequence");
    }
    let folded = password.trim().to_lowercase();
    if COMMON_PASSWORDS.contains(&folded.as_str()) {
        return Some("is one of the most common passwords");
    }
    None
}

fn hash_password(password: &str) -> Result<String, IdentityError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|_| IdentityError::Hashing)
}

fn verify_password(password: &str, phc: &str) -> bool {
    PasswordHash::new(phc).is_ok_and(|hash| {
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .is_ok()
    })
}

/// A valid Argon2id hash of a password nobody has, verified against when an email is unknown so
/// that a login takes as long whether or not the user exists.
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password that nobody has").unwrap_or_default())
}

/// Now, at the microsecond precision both databases keep, so that what a call returns equals what
/// a later read returns.
fn now() -> DateTime<Utc> {
    let now = Utc::now();
    DateTime::from_timestamp_micros(now.timestamp_micros()).unwrap_or(now)
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("unreadable {what}"))
}

fn user_row(r: &[SqlValue]) -> Result<User, StoreError> {
    Ok(User {
        id: r[0].as_uuid().ok_or_else(|| corrupt("user id"))?,
        email: r[1].as_text().ok_or_else(|| corrupt("email"))?,
        name: r[2].non_null().and_then(SqlValue::as_text),
        created_at: r[3].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
    })
}

/// Registers a user. Blocking work (Argon2) runs off the async threads.
pub async fn register(
    store: &SharedStore,
    email: &str,
    password: &str,
    name: Option<String>,
) -> Result<User, IdentityError> {
    let email = email.trim().to_lowercase();
    if !plausible_email(&email) {
        return Err(IdentityError::EmailRefused);
    }
    if let Some(why) = password_weakness(password) {
        return Err(IdentityError::WeakPassword(why));
    }
    let password = password.to_owned();
    let hash = tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|_| IdentityError::Hashing)??;
    let user = User {
        id: Uuid::now_v7(),
        email,
        name: name.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty()),
        created_at: now(),
    };
    let inserted = store
        .execute(
            "INSERT INTO users (id, tenant_id, email, name, password_hash, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                SqlValue::Uuid(user.id),
                SqlValue::Uuid(TenantId::SYSTEM.as_uuid()),
                SqlValue::Text(user.email.clone()),
                user.name.clone().map_or(SqlValue::Null, SqlValue::Text),
                SqlValue::Text(hash),
                SqlValue::Timestamp(user.created_at),
            ],
        )
        .await;
    match inserted {
        Ok(_) => Ok(user),
        Err(StoreError::Duplicate(_)) => Err(IdentityError::EmailRefused),
        Err(other) => Err(other.into()),
    }
}

/// Finds a user by email.
pub async fn user_by_email(store: &SharedStore, email: &str) -> Result<Option<User>, StoreError> {
    let rows = store
        .query(
            "SELECT id, email, name, created_at FROM users WHERE email = $1",
            &[SqlValue::Text(email.trim().to_lowercase())],
        )
        .await?;
    rows.first().map(|r| user_row(r)).transpose()
}

/// Finds a user by id.
pub async fn user_by_id(store: &SharedStore, id: Uuid) -> Result<Option<User>, StoreError> {
    let rows = store
        .query(
            "SELECT id, email, name, created_at FROM users WHERE id = $1",
            &[SqlValue::Uuid(id)],
        )
        .await?;
    rows.first().map(|r| user_row(r)).transpose()
}

/// A new session: the cookie value (shown once) and its id.
#[derive(Clone)]
pub struct NewSession {
    /// Session id.
    pub id: Uuid,
    /// Cookie value.
    pub token: String,
    /// The user.
    pub user: User,
}

impl std::fmt::Debug for NewSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSession")
            .field("id", &self.id)
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

/// 43 random base62 characters (256 bits): a session cookie or an invitation token, of which
/// only the SHA-256 is stored.
fn secret_token() -> String {
    let mut rng = rand::rng();
    const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..43)
        .map(|_| char::from(BASE62[rng.random_range(0..BASE62.len())]))
        .collect()
}

/// Checks a password and opens a session.
pub async fn login(store: &SharedStore, email: &str, password: &str) -> Result<NewSession, IdentityError> {
    let email = email.trim().to_lowercase();
    let rows = store
        .query(
            "SELECT id, email, name, created_at, password_hash FROM users WHERE email = $1",
            &[SqlValue::Text(email)],
        )
        .await?;
    let found = rows
        .first()
        .map(|r| Ok::<_, StoreError>((user_row(r)?, r[4].as_text().unwrap_or_default())))
        .transpose()?;
    let (user, phc) = match found {
        Some((user, phc)) => (Some(user), phc),
        None => (None, decoy_hash().to_owned()),
    };
    let password = password.to_owned();
    let ok = tokio::task::spawn_blocking(move || verify_password(&password, &phc))
        .await
        .map_err(|_| IdentityError::Hashing)?;
    let user = match (user, ok) {
        (Some(user), true) => user,
        _ => return Err(IdentityError::BadCredentials),
    };
    let token = secret_token();
    let now = now();
    let id = Uuid::now_v7();
    store
        .execute(
            "INSERT INTO sessions (id, tenant_id, user_id, token_sha256, created_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                SqlValue::Uuid(id),
                SqlValue::Uuid(TenantId::SYSTEM.as_uuid()),
                SqlValue::Uuid(user.id),
                SqlValue::Text(sha256_hex(&token)),
                SqlValue::Timestamp(now),
                SqlValue::Timestamp(now + SESSION_LIFETIME),
            ],
        )
        .await?;
    Ok(NewSession { id, token, user })
}

/// The live session of a cookie value, sliding its expiry forward; `None` when unknown, revoked
/// or expired.
pub async fn session(store: &SharedStore, token: &str) -> Result<Option<(Uuid, User)>, StoreError> {
    let now = Utc::now();
    let rows = store
        .query(
            "SELECT s.id, s.expires_at, s.revoked_at, u.id, u.email, u.name, u.created_at \
             FROM sessions s JOIN users u ON u.id = s.user_id WHERE s.token_sha256 = $1",
            &[SqlValue::Text(sha256_hex(token))],
        )
        .await?;
    let Some(r) = rows.first() else { return Ok(None) };
    let id = r[0].as_uuid().ok_or_else(|| corrupt("session id"))?;
    let expires_at = r[1].as_timestamp().ok_or_else(|| corrupt("expires_at"))?;
    if r[2].non_null().is_some() || expires_at <= now {
        return Ok(None);
    }
    // Slide, but write at most once a minute per session.
    if expires_at - (now + SESSION_LIFETIME) < -Duration::minutes(1) {
        store
            .execute(
                "UPDATE sessions SET expires_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                &[SqlValue::Uuid(id), SqlValue::Timestamp(now + SESSION_LIFETIME)],
            )
            .await?;
    }
    Ok(Some((id, user_row(&r[3..])?)))
}

/// Ends a session.
pub async fn logout(store: &SharedStore, session_id: Uuid) -> Result<(), StoreError> {
    store
        .execute(
            "UPDATE sessions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
            &[SqlValue::Uuid(session_id), SqlValue::Timestamp(Utc::now())],
        )
        .await?;
    Ok(())
}

/// A user's live session, as the user's session list shows it (never its cookie).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionInfo {
    /// Id.
    pub id: Uuid,
    /// When it was opened (the login).
    pub created_at: DateTime<Utc>,
    /// When it ends unless used again (it slides with use, so this says when it was last used).
    pub expires_at: DateTime<Utc>,
}

/// A user's live sessions (not ended, not expired), newest first.
pub async fn sessions_of(store: &SharedStore, user_id: Uuid) -> Result<Vec<SessionInfo>, StoreError> {
    let rows = store
        .query(
            "SELECT id, created_at, expires_at FROM sessions \
             WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > $2 ORDER BY created_at DESC, id DESC",
            &[SqlValue::Uuid(user_id), SqlValue::Timestamp(Utc::now())],
        )
        .await?;
    rows.iter()
        .map(|r| {
            Ok(SessionInfo {
                id: r[0].as_uuid().ok_or_else(|| corrupt("session id"))?,
                created_at: r[1].as_timestamp().ok_or_else(|| corrupt("created_at"))?,
                expires_at: r[2].as_timestamp().ok_or_else(|| corrupt("expires_at"))?,
            })
        })
        .collect()
}

/// Ends every live session of a user but `keep` ("sign out everywhere else"); how many ended.
pub async fn end_sessions(store: &SharedStore, user_id: Uuid, keep: Option<Uuid>) -> Result<u64, StoreError> {
    let keep = keep.map_or(
        SqlValue::TypedNull(crate::projection::SqlType::Uuid),
        SqlValue::Uuid,
    );
    store
        .execute(
            "UPDATE sessions SET revoked_at = $2 \
             WHERE user_id = $1 AND revoked_at IS NULL AND ($3 IS NULL OR id <> $3)",
            &[SqlValue::Uuid(user_id), SqlValue::Timestamp(Utc::now()), keep],
        )
        .await
}

/// Why a password could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum PasswordChangeError {
    /// The current password given is not the user's.
    #[error("the current password is not right")]
    WrongCurrent,
    /// The new one is too weak.
    #[error("the new password {0}: choose a passphrase of at least 12 characters that is not a common one")]
    Weak(&'static str),
    /// The store or the hashing failed.
    #[error(transparent)]
    Identity(#[from] IdentityError),
}

impl From<StoreError> for PasswordChangeError {
    fn from(e: StoreError) -> Self {
        Self::Identity(IdentityError::Store(e))
    }
}

/// Changes a user's password once the current one is shown to be known, and ends every other
/// session of the user (a session opened with the old password by someone else ends with it);
/// `keep` is the session asking. Argon2 runs off the async threads.
pub async fn change_password(
    store: &SharedStore,
    user_id: Uuid,
    current: &str,
    new: &str,
    keep: Option<Uuid>,
) -> Result<u64, PasswordChangeError> {
    let rows = store
        .query(
            "SELECT password_hash FROM users WHERE id = $1",
            &[SqlValue::Uuid(user_id)],
        )
        .await?;
    let phc = rows
        .first()
        .and_then(|r| r[0].as_text())
        .unwrap_or_else(|| decoy_hash().to_owned());
    let current = current.to_owned();
    let known = tokio::task::spawn_blocking(move || verify_password(&current, &phc))
        .await
        .map_err(|_| IdentityError::Hashing)?;
    if !known || rows.is_empty() {
        return Err(PasswordChangeError::WrongCurrent);
    }
    if let Some(why) = password_weakness(new) {
        return Err(PasswordChangeError::Weak(why));
    }
    let new = new.to_owned();
    let hash = tokio::task::spawn_blocking(move || hash_password(&new))
        .await
        .map_err(|_| IdentityError::Hashing)?
        .map_err(PasswordChangeError::Identity)?;
    store
        .execute(
            "UPDATE users SET password_hash = $2 WHERE id = $1",
            &[SqlValue::Uuid(user_id), SqlValue::Text(hash)],
        )
        .await?;
    Ok(end_sessions(store, user_id, keep).await?)
}

/// Sets (or, empty, clears) the name a user goes by; answers the user as it is now.
pub async fn rename(store: &SharedStore, user_id: Uuid, name: &str) -> Result<Option<User>, StoreError> {
    let name = name.trim();
    store
        .execute(
            "UPDATE users SET name = $2 WHERE id = $1",
            &[
                SqlValue::Uuid(user_id),
                if name.is_empty() {
                    SqlValue::TypedNull(crate::projection::SqlType::Text)
                } else {
                    SqlValue::Text(name.to_owned())
                },
            ],
        )
        .await?;
    user_by_id(store, user_id).await
}

/// How long an invitation can be accepted.
pub const INVITATION_LIFETIME: Duration = Duration::days(7);

/// A new invitation: the token that accepts it is shown once.
#[derive(Clone)]
pub struct NewInvitation {
    /// Invitation id.
    pub id: Uuid,
    /// The accepting token (43 base62 characters).
    pub token: String,
    /// The invited address, lower case.
    pub email: String,
    /// The role it grants.
    pub role: Role,
    /// Until when it can be accepted.
    pub expires_at: DateTime<Utc>,
}

impl std::fmt::Debug for NewInvitation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewInvitation")
            .field("id", &self.id)
            .field("email", &self.email)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

/// Why an invitation could not be made or accepted.
#[derive(Debug, thiserror::Error)]
pub enum InvitationError {
    /// The address does not look like one.
    #[error("the email is not a valid address")]
    BadEmail,
    /// No invitation has this token.
    #[error("no invitation matches this link")]
    UnknownToken,
    /// The tenant refused (ownership, expiry, revoked, another address, already a member).
    #[error(transparent)]
    Access(#[from] AccessError),
}

impl From<StoreError> for InvitationError {
    fn from(e: StoreError) -> Self {
        Self::Access(AccessError::Store(e))
    }
}

/// Invites `email` to `role` in a tenant on behalf of a caller with `by`: whether or not the
/// address belongs to a registered user, the answer is the same, and nobody is added until the
/// invitee accepts with their own session. The token's hash is written before the event, so
/// an invitation in the log always has its token (a failed append leaves only an unusable row).
pub async fn invite(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    email: &str,
    role: Role,
    by: Role,
    metadata: EventMetadata,
) -> Result<NewInvitation, InvitationError> {
    let email = email.trim().to_lowercase();
    if !plausible_email(&email) {
        return Err(InvitationError::BadEmail);
    }
    let id = Uuid::now_v7();
    let token = secret_token();
    let created_at = now();
    let expires_at = created_at + INVITATION_LIFETIME;
    let actor = metadata.actor.clone().unwrap_or_default();
    store
        .execute(
            "INSERT INTO invitation_tokens (token_sha256, tenant_id, invitation_id, created_at) VALUES ($1, $2, $3, $4)",
            &[
                SqlValue::Text(sha256_hex(&token)),
                SqlValue::Uuid(tenant.as_uuid()),
                SqlValue::Uuid(id),
                SqlValue::Timestamp(created_at),
            ],
        )
        .await?;
    let command = TenantCommand::Invite {
        invitation_id: id,
        email: email.clone(),
        role,
        expires_at,
        by,
        actor,
    };
    CommandExecutor::<Tenant>::new(store.clone(), ())
        .execute(tenant, stream_id, command, metadata)
        .await
        .map_err(crate::access::from_execute)?;
    Ok(NewInvitation {
        id,
        token,
        email,
        role,
        expires_at,
    })
}

/// The invitation a token accepts: its tenant and id (`None`: no such token).
pub async fn invitation_of_token(
    store: &SharedStore,
    token: &str,
) -> Result<Option<(TenantId, Uuid)>, StoreError> {
    let rows = store
        .query(
            "SELECT tenant_id, invitation_id FROM invitation_tokens WHERE token_sha256 = $1",
            &[SqlValue::Text(sha256_hex(token))],
        )
        .await?;
    Ok(rows
        .first()
        .and_then(|r| Some((TenantId::from_uuid(r[0].as_uuid()?), r[1].as_uuid()?))))
}

/// `user` accepts the invitation `invitation_id` of a tenant: the membership it becomes (its id).
pub async fn accept_invitation(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    invitation_id: Uuid,
    user: &User,
    metadata: EventMetadata,
) -> Result<Uuid, InvitationError> {
    let membership_id = Uuid::now_v7();
    let command = TenantCommand::AcceptInvitation {
        invitation_id,
        membership_id,
        user_id: user.id,
        email: user.email.clone(),
        now: Utc::now(),
    };
    CommandExecutor::<Tenant>::new(store.clone(), ())
        .execute(tenant, stream_id, command, metadata)
        .await
        .map_err(crate::access::from_execute)?;
    Ok(membership_id)
}

/// Withdraws a pending invitation on behalf of a caller with `by` (revoking a closed one changes
/// nothing).
pub async fn revoke_invitation(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    invitation_id: Uuid,
    by: Role,
    metadata: EventMetadata,
) -> Result<(), AccessError> {
    let command = TenantCommand::RevokeInvitation {
        invitation_id,
        by,
        actor: metadata.actor.clone().unwrap_or_default(),
    };
    CommandExecutor::<Tenant>::new(store.clone(), ())
        .execute(tenant, stream_id, command, metadata)
        .await
        .map_err(crate::access::from_execute)?;
    Ok(())
}

/// Changes a member's role (`role`) or removes the member (`None`), on behalf of a caller
/// with `by` (the tenant aggregate keeps the last owner and ownership to owners).
pub async fn change_member(
    store: &SharedStore,
    tenant: TenantId,
    stream_id: &str,
    user_id: Uuid,
    role: Option<Role>,
    by: Role,
    metadata: EventMetadata,
) -> Result<(), AccessError> {
    let executor = CommandExecutor::<Tenant>::new(store.clone(), ());
    let command = match role {
        Some(role) => TenantCommand::ChangeMemberRole { user_id, role, by },
        None => TenantCommand::RemoveMember { user_id, by },
    };
    executor
        .execute(tenant, stream_id, command, metadata)
        .await
        .map_err(crate::access::from_execute)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_passwords_are_refused_with_the_reason() {
        for (password, why) in [
            ("short", "fewer than 12"),
            ("            ", "only spaces"),
            ("aaaaaaaaaaaaaa", "repeats"),
            ("123456789012", "sequence"),
            ("abcdefghijklm", "sequence"),
            ("876543210987", "sequence"),
            ("Password1234", "most common"),
            ("  paraguay1234 ", "most common"),
        ] {
            assert!(
                password_weakness(password).is_some_and(|w| w.contains(why)),
                "{password:?}"
            );
        }
        for good in [
            "correct horse battery",
            "Ñandutí de Itauguá 2026",
            "tres-gatos-en-luque",
        ] {
            assert_eq!(password_weakness(good), None, "{good}");
        }
    }

    #[test]
    fn argon2id_hashes_verify_only_their_password() {
        let hash = hash_password("correct horse battery").expect("hash");
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse battery!", &hash));
        assert!(!verify_password("anything", "not a phc string"));
        assert!(!verify_password("decoy", decoy_hash()));
    }

    #[test]
    fn emails_must_look_like_emails() {
        for good in ["ana@example.com", "a.b+c@sub.example.com.py"] {
            assert!(plausible_email(good), "{good}");
        }
        for bad in [
            "",
            "ana",
            "ana@",
            "@example.com",
            "ana@example",
            "ana @example.com",
            "ana@.com",
        ] {
            assert!(!plausible_email(bad), "{bad}");
        }
    }
}
