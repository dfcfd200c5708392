//! Users, console sessions and memberships, black-box.

use kuatia_tests::{TestApp, send_with_headers};
use reqwest::Method;
use serde_json::{Value, json};

async fn register(app: &TestApp, email: &str, password: &str) -> (u16, Value) {
    let (status, _, body) = send_with_headers(
        app.client
            .post(format!("{}/v1/users", app.base))
            .json(&json!({"email": email, "password": password, "name": "Ana"})),
    )
    .await;
    (status, body)
}

async fn login(app: &TestApp, email: &str, password: &str) -> (u16, Option<String>, Value) {
    let (status, headers, body) = send_with_headers(
        app.client
            .post(format!("{}/v1/auth/login", app.base))
            .json(&json!({"email": email, "password": password})),
    )
    .await;
    let cookie = headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.to_owned());
    (status, cookie, body)
}

fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().expect("pair").to_owned()
}

/// The token at the end of an invitation's `accept_url`.
fn token_of(invitation: &Value) -> String {
    let url = invitation["accept_url"].as_str().expect("accept_url");
    url.rsplit('/').next().expect("token").to_owned()
}

/// Invites `email` (registering it first if needed) with `key`, then accepts as that user: the
/// membership and the user's session cookie.
pub(crate) async fn join(app: &TestApp, tenant: &str, key: &str, email: &str, role: &str) -> (Value, String) {
    let password = "a long enough secret";
    register(app, email, password).await;
    let (status, _, invitation) = send_with_headers(
        app.as_key(Method::POST, "/v1/memberships", key, tenant)
            .json(&json!({"email": email, "role": role})),
    )
    .await;
    assert_eq!(status, 202, "{invitation}");
    let (status, set_cookie, body) = login(app, email, password).await;
    assert_eq!(status, 200, "{body}");
    let cookie = cookie_pair(&set_cookie.expect("cookie"));
    let (status, _, membership) = send_with_headers(
        app.client
            .post(format!(
                "{}/v1/invitations/{}/accept",
                app.base,
                token_of(&invitation)
            ))
            .header("Cookie", &cookie),
    )
    .await;
    assert_eq!(status, 200, "{membership}");
    (membership, cookie)
}

#[tokio::test]
async fn registration_refuses_bad_or_taken_emails_alike_and_short_passwords() {
    let app = TestApp::spawn().await;
    let (status, user) = register(&app, "Ana@Example.com", "a long enough secret").await;
    assert_eq!(status, 201, "{user}");
    assert_eq!(user["email"], "ana@example.com");
    assert!(user.get("password").is_none() && user.get("password_hash").is_none());
    let created =
        chrono::DateTime::parse_from_rfc3339(user["created_at"].as_str().expect("time")).expect("rfc3339");
    assert_eq!(
        created.timestamp_subsec_nanos() % 1000,
        0,
        "microsecond precision, as stored"
    );

    let (status, taken) = register(&app, "ana@example.COM", "another long secret").await;
    let (status2, invalid) = register(&app, "not-an-email", "another long secret").await;
    assert_eq!((status, status2), (400, 400));
    assert_eq!(
        taken["message"], invalid["message"],
        "the answer does not reveal who is registered"
    );
    let (status, weak) = register(&app, "bea@example.com", "short").await;
    assert_eq!(
        (status, weak["details"]["errors"][0]["field"].as_str()),
        (400, Some("password"))
    );
    app.stop().await;
}

#[tokio::test]
async fn a_member_logs_in_works_through_the_cookie_and_logs_out() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, other_tenant_key) = app.tenant("globex").await;
    register(&app, "ana@example.com", "a long enough secret").await;

    let (status, _, body) = login(&app, "ana@example.com", "wrong password!!").await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("authentication_error"))
    );
    let (status, _, unknown) = login(&app, "nobody@example.com", "a long enough secret").await;
    assert_eq!(status, 401);
    assert_eq!(
        unknown["message"], body["message"],
        "one message for unknown users and wrong passwords"
    );

    let (member, _) = join(&app, &tenant, &owner, "ana@example.com", "admin").await;
    assert_eq!(
        (member["role"].as_str(), member["tenant_id"].as_str()),
        (Some("admin"), Some(tenant.as_str()))
    );
    // Invited again, she cannot join twice.
    let (status, _, again) = send_with_headers(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"user_id": member["user_id"], "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 202, "{again}");
    let (_, set_cookie, _) = login(&app, "ana@example.com", "a long enough secret").await;
    let (status, _, twice) = send_with_headers(
        app.client
            .post(format!("{}/v1/invitations/{}/accept", app.base, token_of(&again)))
            .header("Cookie", cookie_pair(&set_cookie.expect("cookie"))),
    )
    .await;
    assert_eq!(
        (status, twice["code"].as_str()),
        (409, Some("conflict_error")),
        "{twice}"
    );

    let (status, set_cookie, answer) = login(&app, "ana@example.com", "a long enough secret").await;
    assert_eq!(status, 200, "{answer}");
    let set_cookie = set_cookie.expect("a session cookie");
    for attribute in [
        "kuatia_session=",
        "HttpOnly",
        "SameSite=Lax",
        "Secure",
        "Max-Age=43200",
    ] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    assert_eq!(
        answer["memberships"],
        json!([{"tenant_id": tenant, "role": "admin"}])
    );
    let cookie = cookie_pair(&set_cookie);
    let with_cookie = |method: Method, path: &str| {
        app.client
            .request(method, format!("{}{path}", app.base))
            .header("Cookie", cookie.clone())
    };

    let (status, _, read) = send_with_headers(
        with_cookie(Method::GET, &format!("/v1/tenants/{tenant}")).header("X-Tenant-Id", &tenant),
    )
    .await;
    assert_eq!((status, read["slug"].as_str()), (200, Some("acme")));
    // A cross-site form can send the cookie but not a header: refused.
    let (status, _, csrf) = send_with_headers(
        with_cookie(Method::POST, "/v1/api-keys").json(&json!({"name": "forged", "role": "owner"})),
    )
    .await;
    assert_eq!((status, csrf["code"].as_str()), (400, Some("validation_error")));
    let globex = {
        let (_, _, current) = send_with_headers(app.as_key(
            Method::GET,
            "/v1/api-keys/current",
            &other_tenant_key,
            "00000000-0000-0000-0000-000000000000",
        ))
        .await;
        current
    };
    assert_eq!(globex["code"], "permission_error");
    let (status, _, _) = send_with_headers(
        with_cookie(Method::GET, "/v1/api-keys/current")
            .header("X-Tenant-Id", uuid::Uuid::now_v7().to_string()),
    )
    .await;
    assert_eq!(status, 403, "not a member of that tenant");
    let (status, _, created) = send_with_headers(
        with_cookie(Method::POST, "/v1/api-keys")
            .header("X-Tenant-Id", &tenant)
            .json(&json!({"name": "from the console", "role": "issuer"})),
    )
    .await;
    assert_eq!(status, 201, "an admin session issues keys: {created}");
    let (status, _, _) =
        send_with_headers(with_cookie(Method::GET, "/v1/api-keys/current").header("X-Tenant-Id", &tenant))
            .await;
    assert_eq!(status, 404, "a session is not an API key");

    let (status, headers, out) = send_with_headers(with_cookie(Method::POST, "/v1/auth/logout")).await;
    assert_eq!((status, out["session_ended"].as_bool()), (200, Some(true)));
    assert!(
        headers["set-cookie"]
            .to_str()
            .expect("ascii")
            .contains("Max-Age=0")
    );
    let (status, _, _) = send_with_headers(
        with_cookie(Method::GET, &format!("/v1/tenants/{tenant}")).header("X-Tenant-Id", &tenant),
    )
    .await;
    assert_eq!(status, 401, "the session ended server-side");
    app.stop().await;
}

#[tokio::test]
async fn an_expired_session_no_longer_authenticates() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, cookie) = join(&app, &tenant, &owner, "ana@example.com", "viewer").await;
    let read = || {
        app.client
            .get(format!("{}/v1/tenants/{tenant}", app.base))
            .header("Cookie", cookie.clone())
            .header("X-Tenant-Id", &tenant)
    };
    assert_eq!(send_with_headers(read()).await.0, 200);
    kuatia_tests::execute(
        &app.service().database,
        "UPDATE sessions SET expires_at = created_at",
    )
    .await
    .expect("age the session");
    assert_eq!(send_with_headers(read()).await.0, 401);
    app.stop().await;
}

#[tokio::test]
async fn only_owners_and_admins_add_members_and_only_owners_add_owners() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    register(&app, "ana@example.com", "a long enough secret").await;
    let (_, _, viewer) = send_with_headers(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    let (_, _, admin) = send_with_headers(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "a", "role": "admin"})),
    )
    .await;
    let add = |key: String, role: &'static str| {
        app.as_key(Method::POST, "/v1/memberships", &key, &tenant)
            .json(&json!({"email": "ana@example.com", "role": role}))
    };
    let (status, _, _) =
        send_with_headers(add(viewer["key"].as_str().expect("k").to_owned(), "viewer")).await;
    assert_eq!(status, 403);
    let (status, _, _) = send_with_headers(add(admin["key"].as_str().expect("k").to_owned(), "owner")).await;
    assert_eq!(status, 403);
    let (status, _, _) = send_with_headers(add(owner.clone(), "owner")).await;
    assert_eq!(status, 202);
    app.stop().await;
}

#[tokio::test]
async fn an_invitation_neither_reveals_who_is_registered_nor_adds_anyone_until_its_invitee_accepts() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, other_key) = app.tenant("globex").await;
    let password = "a long enough secret";
    register(&app, "ana@example.com", password).await;
    let invite = |email: &str| {
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": email, "role": "issuer"}))
    };
    // A registered and an unknown address get the same answer.
    let (status, _, known) = send_with_headers(invite("Ana@Example.com ")).await;
    assert_eq!(status, 202, "{known}");
    let (status, _, unknown) = send_with_headers(invite("ghost@example.com")).await;
    assert_eq!(status, 202, "{unknown}");
    let keys = |v: &Value| {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&known), keys(&unknown));
    assert_eq!(
        keys(&known),
        [
            "accept_url",
            "email",
            "expires_at",
            "invitation_id",
            "role",
            "status"
        ]
    );
    assert_eq!(
        (
            known["status"].as_str(),
            known["email"].as_str(),
            known["role"].as_str()
        ),
        (Some("invited"), Some("ana@example.com"), Some("issuer"))
    );
    let expires: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(known["expires_at"].clone()).expect("expires_at");
    let days = (expires - chrono::Utc::now()).num_hours();
    assert!((167..=168).contains(&days), "{known}");
    let token = token_of(&known);
    assert_eq!(token.len(), 43, "{known}");
    assert!(
        known["accept_url"]
            .as_str()
            .expect("url")
            .starts_with(&format!("{}/invitations/", app.base))
    );
    let accept = |token: &str| {
        app.client
            .post(format!("{}/v1/invitations/{token}/accept", app.base))
    };

    // Nobody was added; Ana's login shows no membership yet.
    let (_, set_cookie, answer) = login(&app, "ana@example.com", password).await;
    assert_eq!(answer["memberships"], json!([]), "{answer}");
    let ana = cookie_pair(&set_cookie.expect("cookie"));
    let (_, _, members) =
        send_with_headers(app.as_key(Method::GET, "/v1/memberships", &owner, &tenant)).await;
    assert_eq!(members, json!([]));

    // The token alone grants nothing: no credentials, an API key, another user's session.
    let (status, _, body) = send_with_headers(accept(&token)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (401, Some("authentication_error")),
        "{body}"
    );
    let (status, _, body) = send_with_headers(accept(&token).bearer_auth(&other_key)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("permission_error")),
        "{body}"
    );
    register(&app, "beto@example.com", password).await;
    let (_, set_cookie, _) = login(&app, "beto@example.com", password).await;
    let beto = cookie_pair(&set_cookie.expect("cookie"));
    let (status, _, body) = send_with_headers(accept(&token).header("Cookie", &beto)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (403, Some("permission_error")),
        "{body}"
    );
    let (status, _, body) = send_with_headers(accept("x".repeat(43).as_str()).header("Cookie", &ana)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );

    // Ana accepts with her own session: now she is a member, once.
    let (status, _, membership) = send_with_headers(accept(&token).header("Cookie", &ana)).await;
    assert_eq!(status, 200, "{membership}");
    assert_eq!(
        (membership["tenant_id"].as_str(), membership["role"].as_str()),
        (Some(tenant.as_str()), Some("issuer"))
    );
    let (status, _, body) = send_with_headers(accept(&token).header("Cookie", &ana)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("conflict_error")),
        "{body}"
    );
    let (status, _, _) = send_with_headers(
        app.client
            .get(format!("{}/v1/tenants/{tenant}", app.base))
            .header("Cookie", &ana)
            .header("X-Tenant-Id", &tenant),
    )
    .await;
    assert_eq!(status, 200);

    // A revoked invitation accepts no more; the list shows each one's state.
    let (_, _, for_beto) = send_with_headers(invite("beto@example.com")).await;
    let id = for_beto["invitation_id"].as_str().expect("id").to_owned();
    let (status, _, _) = send_with_headers(app.as_key(
        Method::DELETE,
        &format!("/v1/invitations/{id}"),
        &other_key,
        &tenant,
    ))
    .await;
    assert_eq!(status, 403, "another tenant's key");
    let (status, _, _) = send_with_headers(app.as_key(
        Method::DELETE,
        &format!("/v1/invitations/{}", uuid::Uuid::now_v7()),
        &owner,
        &tenant,
    ))
    .await;
    assert_eq!(status, 404);
    let (status, _, _) =
        send_with_headers(app.as_key(Method::DELETE, &format!("/v1/invitations/{id}"), &owner, &tenant))
            .await;
    assert_eq!(status, 204);
    let (status, _, body) = send_with_headers(accept(&token_of(&for_beto)).header("Cookie", &beto)).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (409, Some("conflict_error")),
        "{body}"
    );
    let (status, _, listed) =
        send_with_headers(app.as_key(Method::GET, "/v1/invitations", &owner, &tenant)).await;
    assert_eq!(status, 200, "{listed}");
    let states: Vec<(&str, &str)> = listed
        .as_array()
        .expect("list")
        .iter()
        .map(|i| {
            (
                i["email"].as_str().unwrap_or(""),
                i["status"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        states,
        [
            ("beto@example.com", "revoked"),
            ("ghost@example.com", "invited"),
            ("ana@example.com", "accepted"),
        ]
    );
    assert!(
        listed
            .as_array()
            .expect("list")
            .iter()
            .all(|i| i.get("accept_url").is_none())
    );
    assert_eq!(listed[2]["membership_id"], membership["id"]);

    // Each step is an event; none carries the token.
    let (_, _, page) =
        send_with_headers(app.as_key(Method::GET, "/v1/events?after=0&limit=1000", &owner, &tenant)).await;
    let text = page.to_string();
    for kind in ["MemberInvited", "MemberAdded", "InvitationRevoked"] {
        assert!(text.contains(kind), "{kind}: {text}");
    }
    assert!(!text.contains(&token), "the token is in the log");
    app.stop().await;
}

#[tokio::test]
async fn with_a_mail_server_the_invitation_link_is_emailed_and_not_answered() {
    let (smtp_port, mail) = crate::webhooks::start_smtp().await;
    let app = TestApp::spawn_with(|c| {
        c.smtp_url = Some(kuatia_infrastructure::config::Secret::new(format!(
            "smtp://127.0.0.1:{smtp_port}"
        )));
    })
    .await;
    let (tenant, owner) = app.tenant("acme").await;
    let (status, _, invitation) = send_with_headers(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "ana@example.com", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 202, "{invitation}");
    assert!(invitation.get("accept_url").is_none(), "{invitation}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let (to, raw) = loop {
        if let Some(m) = mail.lock().expect("mail").first().cloned() {
            break m;
        }
        assert!(std::time::Instant::now() < deadline, "no email arrived");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(to, vec!["ana@example.com".to_owned()]);
    let message = crate::webhooks::summary(&raw);
    let text = message["text"].as_str().expect("text");
    let url = text
        .split_whitespace()
        .find(|w| w.contains("/invitations/"))
        .unwrap_or_else(|| panic!("no link in {text}"));
    let token = url.rsplit('/').next().expect("token");
    // The emailed link accepts, with Ana's session.
    register(&app, "ana@example.com", "a long enough secret").await;
    let (_, set_cookie, _) = login(&app, "ana@example.com", "a long enough secret").await;
    let (status, _, membership) = send_with_headers(
        app.client
            .post(format!("{}/v1/invitations/{token}/accept", app.base))
            .header("Cookie", cookie_pair(&set_cookie.expect("cookie"))),
    )
    .await;
    assert_eq!(
        (status, membership["role"].as_str()),
        (200, Some("viewer")),
        "{membership}"
    );
    app.stop().await;
}

#[tokio::test]
async fn the_invitation_page_logs_the_invitee_in_and_accepts_without_javascript() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    register(&app, "ana@example.com", "a long enough secret").await;
    let (_, _, invitation) = send_with_headers(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "ana@example.com", "role": "issuer"})),
    )
    .await;
    let url = invitation["accept_url"].as_str().expect("url").to_owned();
    let page = app.client.get(&url).send().await.expect("page");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("html");
    assert!(
        html.contains("ana@example.com") && html.contains("emisor"),
        "{html}"
    );
    assert!(html.contains("name=\"password\""), "{html}");
    let form = |password: &str| {
        app.client
            .post(&url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("password={}", password.replace(' ', "+")))
    };
    let wrong = form("not her password").send().await.expect("post");
    assert_eq!(wrong.status(), 401);
    let done = form("a long enough secret").send().await.expect("post");
    assert_eq!(done.status(), 200);
    let cookie = done
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .map(cookie_pair)
        .expect("a session");
    assert!(done.text().await.expect("html").contains("Invitación aceptada"));
    let (status, _, _) = send_with_headers(
        app.client
            .get(format!("{}/v1/tenants/{tenant}", app.base))
            .header("Cookie", &cookie)
            .header("X-Tenant-Id", &tenant),
    )
    .await;
    assert_eq!(status, 200);
    // Closed now, and a made-up link is not found; what the inviter typed is escaped.
    assert_eq!(app.client.get(&url).send().await.expect("page").status(), 409);
    let (_, _, hostile) = send_with_headers(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "<script>alert(1)</script>@example.com", "role": "viewer"})),
    )
    .await;
    if let Some(url) = hostile["accept_url"].as_str() {
        let html = app
            .client
            .get(url)
            .send()
            .await
            .expect("page")
            .text()
            .await
            .expect("html");
        assert!(!html.contains("<script>"), "{html}");
    }
    let missing = app
        .client
        .get(format!("{}/invitations/{}", app.base, "y".repeat(43)))
        .send()
        .await
        .expect("page");
    assert_eq!(missing.status(), 404);
    app.stop().await;
}

#[tokio::test]
async fn weak_passwords_are_refused_saying_why() {
    let app = TestApp::spawn().await;
    for (password, why) in [
        ("            ", "only spaces"),
        ("zzzzzzzzzzzzzzzz", "repeats one character"),
        ("123456789012", "simple sequence"),
        ("Password1234", "most common"),
        ("contraseña123", "most common"),
    ] {
        let (status, body) = register(&app, "weak@example.com", password).await;
        assert_eq!(status, 400, "{password:?}: {body}");
        let error = &body["details"]["errors"][0];
        assert_eq!(error["field"], "password", "{body}");
        assert_eq!(error["code"], "weak_password", "{body}");
        assert!(
            error["message"].as_str().unwrap_or_default().contains(why),
            "{password:?}: {body}"
        );
    }
    let (status, body) = register(&app, "weak@example.com", "tres gatos en Luque").await;
    assert_eq!(status, 201, "{body}");
    app.stop().await;
}

#[tokio::test]
async fn members_are_listed_changed_and_removed_and_the_last_owner_stays() {
    let app = TestApp::spawn().await;
    let (tenant, owner_key) = app.tenant("members").await;
    let as_key = |method: Method, path: &str| app.as_key(method, path, &owner_key, &tenant);
    let mut members = Vec::new();
    for (email, role) in [("ana@example.com", "owner"), ("beto@example.com", "admin")] {
        let (membership, _) = join(&app, &tenant, &owner_key, email, role).await;
        members.push(membership["id"].as_str().expect("id").to_owned());
    }
    let (ana, beto) = (members[0].clone(), members[1].clone());
    let (status, _, listed) = send_with_headers(as_key(Method::GET, "/v1/memberships")).await;
    assert_eq!(status, 200, "{listed}");
    let roles: Vec<&str> = listed
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, vec!["owner", "admin"]);

    // Beto (admin) may not touch the owner; nobody lowers or removes the last owner.
    let (_, set_cookie, _) = login(&app, "beto@example.com", "a long enough secret").await;
    let cookie = cookie_pair(&set_cookie.expect("cookie"));
    let as_beto = |method: Method, path: &str| {
        app.client
            .request(method, format!("{}{path}", app.base))
            .header("Cookie", cookie.clone())
            .header("X-Tenant-Id", &tenant)
    };
    let (status, _, refused) = send_with_headers(
        as_beto(Method::PATCH, &format!("/v1/memberships/{ana}")).json(&json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("permission_error")),
        "{refused}"
    );
    let (status, _, refused) = send_with_headers(
        as_key(Method::PATCH, &format!("/v1/memberships/{ana}")).json(&json!({"role": "admin"})),
    )
    .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("conflict_error")),
        "{refused}"
    );
    let (status, _, _) = send_with_headers(as_key(Method::DELETE, &format!("/v1/memberships/{ana}"))).await;
    assert_eq!(status, 409);

    // The owner lowers Beto, then removes him: his session no longer reaches the tenant.
    let (status, _, changed) = send_with_headers(
        as_key(Method::PATCH, &format!("/v1/memberships/{beto}")).json(&json!({"role": "viewer"})),
    )
    .await;
    assert_eq!(
        (status, changed["role"].as_str()),
        (200, Some("viewer")),
        "{changed}"
    );
    let (status, _, _) = send_with_headers(as_beto(Method::GET, &format!("/v1/tenants/{tenant}"))).await;
    assert_eq!(status, 200);
    let (status, _, _) = send_with_headers(as_key(Method::DELETE, &format!("/v1/memberships/{beto}"))).await;
    assert_eq!(status, 204);
    let (status, _, gone) = send_with_headers(as_beto(Method::GET, &format!("/v1/tenants/{tenant}"))).await;
    assert_eq!(status, 403, "{gone}");
    let (status, _, _) = send_with_headers(as_key(Method::DELETE, &format!("/v1/memberships/{beto}"))).await;
    assert_eq!(status, 404);

    // Each change is an event of the audit log.
    let (_, _, page) = send_with_headers(as_key(Method::GET, "/v1/events?after=0&limit=1000")).await;
    let types: Vec<&str> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        types.contains(&"MemberRoleChanged") && types.contains(&"MemberRemoved"),
        "{types:?}"
    );
    app.stop().await;
}
