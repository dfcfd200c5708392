//! Users, console sessions and memberships (contract §4.2, DECISIONS §2), black-box.

use kuatia_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

async fn send(request: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

async fn register(app: &TestApp, email: &str, password: &str) -> (u16, Value) {
    let (status, _, body) = send(
        app.client
            .post(format!("{}/v1/users", app.base))
            .json(&json!({"email": email, "password": password, "name": "Ana"})),
    )
    .await;
    (status, body)
}

async fn login(app: &TestApp, email: &str, password: &str) -> (u16, Option<String>, Value) {
    let (status, headers, body) = send(
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

    let (status, _, member) = send(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "ana@example.com", "role": "admin"})),
    )
    .await;
    assert_eq!(status, 201, "{member}");
    assert_eq!(
        (member["role"].as_str(), member["tenant_id"].as_str()),
        (Some("admin"), Some(tenant.as_str()))
    );
    let (status, _, again) = send(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"user_id": member["user_id"], "role": "viewer"})),
    )
    .await;
    assert_eq!((status, again["code"].as_str()), (409, Some("conflict_error")));

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

    let (status, _, read) =
        send(with_cookie(Method::GET, &format!("/v1/tenants/{tenant}")).header("X-Tenant-Id", &tenant)).await;
    assert_eq!((status, read["slug"].as_str()), (200, Some("acme")));
    // A cross-site form can send the cookie but not a header: refused.
    let (status, _, csrf) =
        send(with_cookie(Method::POST, "/v1/api-keys").json(&json!({"name": "forged", "role": "owner"})))
            .await;
    assert_eq!((status, csrf["code"].as_str()), (400, Some("validation_error")));
    let globex = {
        let (_, _, current) = send(app.as_key(
            Method::GET,
            "/v1/api-keys/current",
            &other_tenant_key,
            "00000000-0000-0000-0000-000000000000",
        ))
        .await;
        current
    };
    assert_eq!(globex["code"], "permission_error");
    let (status, _, _) = send(
        with_cookie(Method::GET, "/v1/api-keys/current")
            .header("X-Tenant-Id", uuid::Uuid::now_v7().to_string()),
    )
    .await;
    assert_eq!(status, 403, "not a member of that tenant");
    let (status, _, created) = send(
        with_cookie(Method::POST, "/v1/api-keys")
            .header("X-Tenant-Id", &tenant)
            .json(&json!({"name": "from the console", "role": "issuer"})),
    )
    .await;
    assert_eq!(status, 201, "an admin session issues keys: {created}");
    let (status, _, _) =
        send(with_cookie(Method::GET, "/v1/api-keys/current").header("X-Tenant-Id", &tenant)).await;
    assert_eq!(status, 404, "a session is not an API key");

    let (status, headers, out) = send(with_cookie(Method::POST, "/v1/auth/logout")).await;
    assert_eq!((status, out["session_ended"].as_bool()), (200, Some(true)));
    assert!(
        headers["set-cookie"]
            .to_str()
            .expect("ascii")
            .contains("Max-Age=0")
    );
    let (status, _, _) =
        send(with_cookie(Method::GET, &format!("/v1/tenants/{tenant}")).header("X-Tenant-Id", &tenant)).await;
    assert_eq!(status, 401, "the session ended server-side");
    app.stop().await;
}

#[tokio::test]
async fn an_expired_session_no_longer_authenticates() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    register(&app, "ana@example.com", "a long enough secret").await;
    send(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "ana@example.com", "role": "viewer"})),
    )
    .await;
    let (_, set_cookie, _) = login(&app, "ana@example.com", "a long enough secret").await;
    let cookie = cookie_pair(&set_cookie.expect("cookie"));
    let read = || {
        app.client
            .get(format!("{}/v1/tenants/{tenant}", app.base))
            .header("Cookie", cookie.clone())
            .header("X-Tenant-Id", &tenant)
    };
    assert_eq!(send(read()).await.0, 200);
    kuatia_tests::execute(
        &app.service().database,
        "UPDATE sessions SET expires_at = created_at",
    )
    .await
    .expect("age the session");
    assert_eq!(send(read()).await.0, 401);
    app.stop().await;
}

#[tokio::test]
async fn only_owners_and_admins_add_members_and_only_owners_add_owners() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    register(&app, "ana@example.com", "a long enough secret").await;
    let (_, _, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    let (_, _, admin) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "a", "role": "admin"})),
    )
    .await;
    let add = |key: String, role: &'static str| {
        app.as_key(Method::POST, "/v1/memberships", &key, &tenant)
            .json(&json!({"email": "ana@example.com", "role": role}))
    };
    let (status, _, _) = send(add(viewer["key"].as_str().expect("k").to_owned(), "viewer")).await;
    assert_eq!(status, 403);
    let (status, _, _) = send(add(admin["key"].as_str().expect("k").to_owned(), "owner")).await;
    assert_eq!(status, 403);
    let (status, _, unknown) = send(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"email": "ghost@example.com", "role": "viewer"})),
    )
    .await;
    assert_eq!(
        (status, unknown["code"].as_str()),
        (400, Some("validation_error"))
    );
    let (status, _, _) = send(add(owner.clone(), "owner")).await;
    assert_eq!(status, 201);
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
        let (status, user) = register(&app, email, "a long enough secret").await;
        assert_eq!(status, 201, "{user}");
        let (status, _, membership) =
            send(as_key(Method::POST, "/v1/memberships").json(&json!({"user_id": user["id"], "role": role})))
                .await;
        assert_eq!(status, 201, "{membership}");
        members.push(membership["id"].as_str().expect("id").to_owned());
    }
    let (ana, beto) = (members[0].clone(), members[1].clone());
    let (status, _, listed) = send(as_key(Method::GET, "/v1/memberships")).await;
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
    let (status, _, refused) =
        send(as_beto(Method::PATCH, &format!("/v1/memberships/{ana}")).json(&json!({"role": "viewer"})))
            .await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (403, Some("permission_error")),
        "{refused}"
    );
    let (status, _, refused) =
        send(as_key(Method::PATCH, &format!("/v1/memberships/{ana}")).json(&json!({"role": "admin"}))).await;
    assert_eq!(
        (status, refused["code"].as_str()),
        (409, Some("conflict_error")),
        "{refused}"
    );
    let (status, _, _) = send(as_key(Method::DELETE, &format!("/v1/memberships/{ana}"))).await;
    assert_eq!(status, 409);

    // The owner lowers Beto, then removes him: his session no longer reaches the tenant.
    let (status, _, changed) =
        send(as_key(Method::PATCH, &format!("/v1/memberships/{beto}")).json(&json!({"role": "viewer"})))
            .await;
    assert_eq!(
        (status, changed["role"].as_str()),
        (200, Some("viewer")),
        "{changed}"
    );
    let (status, _, _) = send(as_beto(Method::GET, &format!("/v1/tenants/{tenant}"))).await;
    assert_eq!(status, 200);
    let (status, _, _) = send(as_key(Method::DELETE, &format!("/v1/memberships/{beto}"))).await;
    assert_eq!(status, 204);
    let (status, _, gone) = send(as_beto(Method::GET, &format!("/v1/tenants/{tenant}"))).await;
    assert_eq!(status, 403, "{gone}");
    let (status, _, _) = send(as_key(Method::DELETE, &format!("/v1/memberships/{beto}"))).await;
    assert_eq!(status, 404);

    // Each change is an event of the audit log.
    let (_, _, page) = send(as_key(Method::GET, "/v1/events?after=0&limit=1000")).await;
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
