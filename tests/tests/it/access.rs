//! Tenants, API keys, X-Tenant-Id and roles, black-box.

use kuatia_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

async fn body(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_new_tenant_gets_a_bootstrap_owner_key_that_works_at_once() {
    let app = TestApp::spawn().await;
    let (status, created) = app.create_tenant("acme").await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["slug"], "acme");
    assert_eq!(created["environment"], "demo");
    let key = created["bootstrap_api_key"].as_str().expect("key");
    assert!(
        key.starts_with("kt_test_") && key.len() == "kt_test_".len() + 40,
        "{key}"
    );
    let tenant = created["id"].as_str().expect("id");

    let (status, current) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", key, tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 200, "{current}");
    assert_eq!(current["role"], "owner");
    assert_eq!(current["tenant_id"], tenant);
    assert_eq!(current["prefix"], &key[..12]);
    assert!(
        !current.to_string().contains(key),
        "the secret is never shown again"
    );

    let (status, read) = body(
        app.as_key(Method::GET, &format!("/v1/tenants/{tenant}"), key, tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        (read["id"].as_str(), read["name"].as_str()),
        (Some(tenant), Some("acme S.A."))
    );
    assert!(read.get("bootstrap_api_key").is_none());
    app.stop().await;
}

#[tokio::test]
async fn slugs_are_validated_and_taken_once_even_by_racing_requests() {
    let app = TestApp::spawn().await;
    let (status, err) = app.create_tenant("Not A Slug").await;
    assert_eq!(status, 400);
    assert_eq!(err["code"], "validation_error");
    assert_eq!(err["details"]["errors"][0]["field"], "slug");

    let (status, err) = body(
        app.client
            .post(format!("{}/v1/tenants", app.base))
            .json(&json!({"slug": "ok-slug", "name": "x", "plan": "gold"}))
            .send()
            .await
            .expect("post"),
    )
    .await;
    assert_eq!(status, 400, "unknown fields are refused: {err}");

    let racers: Vec<_> = (0..8)
        .map(|_| {
            let client = app.client.clone();
            let url = format!("{}/v1/tenants", app.base);
            tokio::spawn(async move {
                client
                    .post(url)
                    .json(&json!({"slug": "contested", "name": "C"}))
                    .send()
                    .await
                    .expect("post")
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for r in racers {
        statuses.push(r.await.expect("task"));
    }
    statuses.sort_unstable();
    assert_eq!(statuses, vec![201, 409, 409, 409, 409, 409, 409, 409]);
    app.stop().await;
}

#[tokio::test]
async fn public_signup_can_be_switched_off() {
    let app = TestApp::spawn_with(|c| c.public_signup = false).await;
    let (status, err) = app.create_tenant("closed").await;
    assert_eq!((status, err["code"].as_str()), (403, Some("permission_error")));
    app.stop().await;
}

#[tokio::test]
async fn credentials_and_the_tenant_header_are_checked_in_order() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let (other, _) = app.tenant("globex").await;
    let url = format!("{}/v1/api-keys/current", app.base);

    let none = app
        .client
        .get(&url)
        .header("X-Tenant-Id", &tenant)
        .send()
        .await
        .expect("get");
    assert_eq!(none.status(), 401);
    assert_eq!(none.headers()["www-authenticate"], "Bearer");
    let (status, err) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", "kt_test_nope", &tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(
        (status, err["code"].as_str()),
        (401, Some("authentication_error"))
    );

    let (status, err) = body(app.client.get(&url).bearer_auth(&key).send().await.expect("get")).await;
    assert_eq!((status, err["code"].as_str()), (400, Some("validation_error")));
    let (status, _) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", &key, "not-a-uuid")
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 400);
    let (status, err) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", &key, &other)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!((status, err["code"].as_str()), (403, Some("permission_error")));
    app.stop().await;
}

async fn issue(app: &TestApp, key: &str, tenant: &str, body_json: Value) -> (u16, Value) {
    body(
        app.as_key(Method::POST, "/v1/api-keys", key, tenant)
            .json(&body_json)
            .send()
            .await
            .expect("post"),
    )
    .await
}

#[tokio::test]
async fn roles_decide_who_may_issue_and_revoke_keys() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let mut keys = std::collections::HashMap::new();
    for role in ["admin", "issuer", "viewer", "auditor"] {
        let (status, created) = issue(
            &app,
            &owner,
            &tenant,
            json!({"name": format!("{role} key"), "role": role}),
        )
        .await;
        assert_eq!(status, 201, "{created}");
        assert_eq!(created["role"], role);
        keys.insert(
            role,
            (
                created["id"].as_str().expect("id").to_owned(),
                created["key"].as_str().expect("key").to_owned(),
            ),
        );
    }
    for role in ["issuer", "viewer", "auditor"] {
        let (_, key) = &keys[role];
        let (status, err) = issue(&app, key, &tenant, json!({"name": "x", "role": "viewer"})).await;
        assert_eq!(
            (status, err["code"].as_str()),
            (403, Some("permission_error")),
            "{role}"
        );
        let (status, _) = body(
            app.as_key(Method::GET, "/v1/api-keys/current", key, &tenant)
                .send()
                .await
                .expect("get"),
        )
        .await;
        assert_eq!(status, 200, "{role} reads its own key");
    }
    let (_, admin) = &keys["admin"];
    let (status, err) = issue(&app, admin, &tenant, json!({"name": "sneaky", "role": "owner"})).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (403, Some("permission_error")),
        "only owners mint owners"
    );
    let (status, _) = issue(&app, admin, &tenant, json!({"name": "ci", "role": "issuer"})).await;
    assert_eq!(status, 201);

    let (viewer_id, viewer_key) = &keys["viewer"];
    let (status, err) = body(
        app.as_key(
            Method::DELETE,
            &format!("/v1/api-keys/{viewer_id}"),
            &keys["issuer"].1,
            &tenant,
        )
        .send()
        .await
        .expect("del"),
    )
    .await;
    assert_eq!((status, err["code"].as_str()), (403, Some("permission_error")));
    let (status, revoked) = body(
        app.as_key(
            Method::DELETE,
            &format!("/v1/api-keys/{viewer_id}"),
            admin,
            &tenant,
        )
        .send()
        .await
        .expect("del"),
    )
    .await;
    assert_eq!(status, 200, "{revoked}");
    assert!(revoked["revoked_at"].is_string());
    let (status, _) = body(
        app.as_key(
            Method::DELETE,
            &format!("/v1/api-keys/{viewer_id}"),
            admin,
            &tenant,
        )
        .send()
        .await
        .expect("del"),
    )
    .await;
    assert_eq!(status, 200, "revoking twice is harmless");
    let (status, _) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", viewer_key, &tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 401, "a revoked key stops working at once");
    let unknown = uuid::Uuid::now_v7();
    let (status, _) = body(
        app.as_key(Method::DELETE, &format!("/v1/api-keys/{unknown}"), admin, &tenant)
            .send()
            .await
            .expect("del"),
    )
    .await;
    assert_eq!(status, 404);
    app.stop().await;
}

#[tokio::test]
async fn keys_expire_and_bad_key_requests_are_refused_with_reasons() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(1500)).to_rfc3339();
    let (status, created) = issue(
        &app,
        &owner,
        &tenant,
        json!({"name": "temp", "role": "viewer", "expires_at": soon}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let temp = created["key"].as_str().expect("key").to_owned();
    let (status, _) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", &temp, &tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 200);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    let (status, _) = body(
        app.as_key(Method::GET, "/v1/api-keys/current", &temp, &tenant)
            .send()
            .await
            .expect("get"),
    )
    .await;
    assert_eq!(status, 401, "an expired key stops working");

    let past = (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339();
    let (status, err) = issue(
        &app,
        &owner,
        &tenant,
        json!({"name": "late", "role": "viewer", "expires_at": past}),
    )
    .await;
    assert_eq!(
        (status, err["details"]["errors"][0]["field"].as_str()),
        (400, Some("expires_at"))
    );
    let (status, _) = issue(&app, &owner, &tenant, json!({"name": "x", "role": "superuser"})).await;
    assert_eq!(status, 400);
    let (status, _) = issue(&app, &owner, &tenant, json!({"name": "", "role": "viewer"})).await;
    assert_eq!(status, 400);
    let (status, err) = issue(
        &app,
        &owner,
        &tenant,
        json!({"name": "scoped", "role": "viewer", "company_id": uuid::Uuid::now_v7()}),
    )
    .await;
    assert_eq!((status, err["code"].as_str()), (400, Some("configuration_error")));
    app.stop().await;
}

/// Every tenant route (one that takes `X-Tenant-Id`), from the OpenAPI document, so routes
/// added later are walked too: `(method, path template)`.
fn tenant_routes(doc: &Value) -> Vec<(Method, String)> {
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("item") {
            let scoped = op["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["in"] == "header" && p["name"] == "X-Tenant-Id")
            });
            if scoped {
                routes.push((method.to_uppercase().parse().expect("method"), path.clone()));
            }
        }
    }
    routes
}

#[tokio::test]
async fn every_tenant_route_refuses_a_second_tenants_credentials_and_leaks_nothing() {
    let app = TestApp::spawn().await;
    let (tenant_a, key_a) = app.tenant("alpha").await;
    let (tenant_b, key_b) = app.tenant("bravo").await;
    let (_, a_key) = issue(
        &app,
        &key_a,
        &tenant_a,
        json!({"name": "a-erp", "role": "issuer"}),
    )
    .await;
    let a_key_id = a_key["id"].as_str().expect("id").to_owned();
    let (status, a_company) = body(
        app.as_key(Method::POST, "/v1/companies", &key_a, &tenant_a)
            .json(&TestApp::company_body("80069563-1"))
            .send()
            .await
            .expect("company"),
    )
    .await;
    assert_eq!(status, 201, "{a_company}");
    let a_company_id = a_company["id"].as_str().expect("id").to_owned();
    let (status, a_branch) = body(
        app.as_key(Method::POST, "/v1/branches", &key_a, &tenant_a)
            .json(&json!({"company_id": a_company_id, "code": "001", "name": "Casa matriz"}))
            .send()
            .await
            .expect("branch"),
    )
    .await;
    assert_eq!(status, 201, "{a_branch}");
    let a_branch_id = a_branch["id"].as_str().expect("id").to_owned();
    let (status, a_point) = body(
        app.as_key(Method::POST, "/v1/issuance-points", &key_a, &tenant_a)
            .json(&json!({"branch_id": a_branch_id, "code": "001"}))
            .send()
            .await
            .expect("point"),
    )
    .await;
    assert_eq!(status, 201, "{a_point}");
    let a_point_id = a_point["id"].as_str().expect("id").to_owned();
    let a_secrets = [
        tenant_a.as_str(),
        a_key_id.as_str(),
        "alpha",
        &key_a[..12],
        "80069563",
        &a_company_id,
        "Casa matriz",
    ];

    let doc: Value = app.get("/openapi.json").await.json().await.expect("openapi");
    let routes = tenant_routes(&doc);
    assert!(routes.len() >= 4, "{routes:?}");
    for (method, template) in routes {
        // A's resources in every path parameter.
        let path = template
            .replace("/v1/tenants/{id}", &format!("/v1/tenants/{tenant_a}"))
            .replace("/v1/companies/{id}", &format!("/v1/companies/{a_company_id}"))
            .replace("/v1/branches/{id}", &format!("/v1/branches/{a_branch_id}"))
            .replace(
                "/v1/issuance-points/{id}",
                &format!("/v1/issuance-points/{a_point_id}"),
            )
            .replace("{id}", &a_key_id)
            .replace("{linkId}", &a_key_id)
            .replace("{delivery_id}", &a_key_id);
        assert!(!path.contains('{'), "unhandled path parameter in {template}");
        let json_body = json!({"name": "probe", "role": "viewer"});

        // B's key claiming to act in A's tenant.
        let (status, err) = body(
            app.as_key(method.clone(), &path, &key_b, &tenant_a)
                .json(&json_body)
                .send()
                .await
                .expect("send"),
        )
        .await;
        assert_eq!(
            status, 403,
            "{method} {template} with B's key in A's tenant: {err}"
        );
        assert_eq!(err["code"], "permission_error");

        // B's key in its own tenant, aimed at A's resources.
        if template.contains('{') {
            let (status, body_b) = body(
                app.as_key(method.clone(), &path, &key_b, &tenant_b)
                    .json(&json_body)
                    .send()
                    .await
                    .expect("send"),
            )
            .await;
            assert!(
                status == 404 || status == 403,
                "{method} {template} on A's ids answered {status}: {body_b}"
            );
            for secret in a_secrets {
                assert!(
                    !body_b.to_string().contains(secret),
                    "{method} {template} leaked {secret}: {body_b}"
                );
            }
        }
    }
    // A's key survived the walk (nobody revoked it from outside).
    let (status, _) = body(
        app.as_key(
            Method::GET,
            "/v1/api-keys/current",
            a_key["key"].as_str().expect("k"),
            &tenant_a,
        )
        .send()
        .await
        .expect("get"),
    )
    .await;
    assert_eq!(status, 200);
    app.stop().await;
}

#[tokio::test]
async fn the_openapi_document_lists_the_roles_of_every_tenant_route() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.expect("openapi");
    let routes = tenant_routes(&doc);
    assert!(!routes.is_empty());
    for (method, path) in routes {
        let op = &doc["paths"][&path][method.as_str().to_lowercase()];
        let roles: Vec<&str> = op["x-kuatia-roles"]
            .as_array()
            .unwrap_or_else(|| panic!("{method} {path} lists no roles: add it to routes::PERMISSIONS"))
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(roles.contains(&"owner"), "{method} {path}: {roles:?}");
        assert!(
            op["description"].as_str().unwrap_or("").contains("Roles: "),
            "{method} {path}"
        );
    }
    let create_key = &doc["paths"]["/v1/api-keys"]["post"];
    assert_eq!(create_key["x-kuatia-roles"], json!(["owner", "admin"]));
    assert_eq!(create_key["x-kuatia-permission"], "manage_access");
    assert_eq!(
        doc["paths"]["/v1/api-keys/current"]["get"]["x-kuatia-roles"],
        json!(["owner", "admin", "issuer", "viewer", "auditor"])
    );
    app.stop().await;
}

#[tokio::test]
async fn admins_cannot_revoke_owner_keys_and_scoped_keys_revoke_only_their_company_s() {
    // Any admin (even one scoped to a company) could revoke every owner key and lock the owner
    // out; a scoped key could revoke other companies' keys. The event now names who revoked.
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("revokers").await;
    let company = |ruc: &'static str| {
        let app = &app;
        let (tenant, owner) = (tenant.clone(), owner.clone());
        async move {
            let (status, body) = kuatia_tests::send(
                app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
                    .json(&TestApp::company_body(ruc)),
            )
            .await;
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().expect("id").to_owned()
        }
    };
    let (a, b) = (company("80069563-1").await, company("80000005-6").await);
    let key = |role: &'static str, scope: Option<&str>| {
        let mut request = json!({"name": format!("{role}-{scope:?}"), "role": role});
        if let Some(company) = scope {
            request["company_id"] = json!(company);
        }
        request
    };
    let issued = |v: &Value| {
        (
            v["id"].as_str().unwrap().to_owned(),
            v["key"].as_str().unwrap().to_owned(),
        )
    };
    let (status, second_owner) = issue(&app, &owner, &tenant, key("owner", None)).await;
    assert_eq!(status, 201, "{second_owner}");
    let (second_owner_id, _) = issued(&second_owner);
    let (_, admin) = issue(&app, &owner, &tenant, key("admin", None)).await;
    let (_, admin) = issued(&admin);
    let (_, admin_a) = issue(&app, &owner, &tenant, key("admin", Some(&a))).await;
    let (_, admin_a) = issued(&admin_a);
    let (_, issuer_a) = issue(&app, &owner, &tenant, key("issuer", Some(&a))).await;
    let (issuer_a_id, _) = issued(&issuer_a);
    let (_, issuer_b) = issue(&app, &owner, &tenant, key("issuer", Some(&b))).await;
    let (issuer_b_id, _) = issued(&issuer_b);
    let (_, issuer_all) = issue(&app, &owner, &tenant, key("issuer", None)).await;
    let (issuer_all_id, _) = issued(&issuer_all);
    let revoke = |caller: String, id: String| {
        let app = &app;
        let tenant = tenant.clone();
        async move {
            kuatia_tests::send(app.as_key(Method::DELETE, &format!("/v1/api-keys/{id}"), &caller, &tenant))
                .await
        }
    };
    for (who, caller, target) in [
        ("an admin, an owner key", admin.clone(), second_owner_id.clone()),
        (
            "a scoped admin, an owner key",
            admin_a.clone(),
            second_owner_id.clone(),
        ),
        (
            "a scoped admin, another company's key",
            admin_a.clone(),
            issuer_b_id.clone(),
        ),
        (
            "a scoped admin, a tenant-wide key",
            admin_a.clone(),
            issuer_all_id.clone(),
        ),
    ] {
        let (status, body) = revoke(caller, target).await;
        assert_eq!(status, 403, "{who}: {body}");
        assert_eq!(body["code"], "permission_error", "{who}: {body}");
    }
    // Allowed: a scoped admin its own company's key, an admin a tenant key, an owner an owner key.
    for (caller, target) in [
        (admin_a, issuer_a_id.clone()),
        (admin.clone(), issuer_b_id),
        (owner.clone(), second_owner_id),
    ] {
        let (status, body) = revoke(caller, target).await;
        assert_eq!(status, 200, "{body}");
        assert!(body["revoked_at"].is_string(), "{body}");
    }
    // The revocation names the caller in the audit log.
    let (status, page) =
        kuatia_tests::send(app.as_key(Method::GET, "/v1/events?after=0&limit=1000", &owner, &tenant)).await;
    assert_eq!(status, 200, "{page}");
    let revoked: Vec<&Value> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "ApiKeyRevoked")
        .collect();
    assert_eq!(revoked.len(), 3, "{revoked:?}");
    let of_issuer_a = revoked
        .iter()
        .find(|e| e["data"]["ApiKeyRevoked"]["key_id"] == issuer_a_id.as_str())
        .expect("the scoped issuer's revocation");
    assert!(
        of_issuer_a["data"]["ApiKeyRevoked"]["revoked_by"]
            .as_str()
            .is_some_and(|by| by.starts_with("api_key:")),
        "{of_issuer_a}"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_never_replays_another_company_s_document() {
    // Two issuers of one tenant, scoped to different companies, post the same body (no
    // company_id: each key routes to its own company) with the same Idempotency-Key. The second
    // used to get 201 "Idempotent-Replayed" with the first company's document, and its own was
    // never created.
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("idem-scope").await;
    let (a, _, _) =
        kuatia_tests::add_company_at(&app, &tenant, &owner, "80069563-1", "http://127.0.0.1:9").await;
    let (b, _, _) =
        kuatia_tests::add_company_at(&app, &tenant, &owner, "80000005-6", "http://127.0.0.1:9").await;
    let mut keys = Vec::new();
    for company in [&a, &b] {
        let (status, issued) = issue(
            &app,
            &owner,
            &tenant,
            json!({"name": format!("issuer {company}"), "role": "issuer", "company_id": company}),
        )
        .await;
        assert_eq!(status, 201, "{issued}");
        keys.push(issued["key"].as_str().expect("key").to_owned());
    }
    let mut doc = kuatia_domain::document::canonical::sample_invoice();
    doc.as_object_mut().expect("object").remove("company_id");
    doc["external_id"] = json!("SAME-BODY-1");
    doc["issue_datetime"] = json!(kuatia_tests::hours_ago(1));
    let mut created = Vec::new();
    for key in &keys {
        let response = app
            .as_key(Method::POST, "/v1/documents", key, &tenant)
            .header("Idempotency-Key", "shared-key-1")
            .json(&doc)
            .send()
            .await
            .expect("post");
        let replayed = response.headers().get("idempotent-replayed").is_some();
        let (status, body) = body(response).await;
        assert_eq!(status, 201, "{body}");
        assert!(!replayed, "{body}");
        created.push(body);
    }
    assert_eq!(created[0]["company_id"], a.as_str(), "{}", created[0]);
    assert_eq!(created[1]["company_id"], b.as_str(), "{}", created[1]);
    assert_ne!(created[0]["id"], created[1]["id"]);
    // The same caller again is a replay of its own document.
    let response = app
        .as_key(Method::POST, "/v1/documents", &keys[1], &tenant)
        .header("Idempotency-Key", "shared-key-1")
        .json(&doc)
        .send()
        .await
        .expect("post");
    assert!(response.headers().get("idempotent-replayed").is_some());
    let (status, again) = body(response).await;
    assert_eq!(status, 201, "{again}");
    assert_eq!(again["id"], created[1]["id"]);
    app.stop().await;
}

#[tokio::test]
async fn a_company_scoped_admin_key_cannot_make_tenant_wide_members() {
    // A scoped admin key could register a user, make it admin of the tenant, log in as it and
    // mint an unscoped key: tenant-wide access from a company's key.
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("scoped-members").await;
    let (status, company) = kuatia_tests::send(
        app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    assert_eq!(status, 201, "{company}");
    let (status, scoped) = issue(
        &app,
        &owner,
        &tenant,
        json!({"name": "scoped admin", "role": "admin", "company_id": company["id"]}),
    )
    .await;
    assert_eq!(status, 201, "{scoped}");
    let scoped = scoped["key"].as_str().expect("key").to_owned();
    let (status, user) =
        kuatia_tests::send(app.client.post(format!("{}/v1/users", app.base)).json(
            &json!({"email": "mallory@example.com", "password": "a long enough passphrase", "name": "M"}),
        ))
        .await;
    assert_eq!(status, 201, "{user}");
    for body in [
        json!({"email": "mallory@example.com", "role": "admin"}),
        json!({"user_id": user["id"], "role": "viewer"}),
    ] {
        let (status, answer) = kuatia_tests::send(
            app.as_key(Method::POST, "/v1/memberships", &scoped, &tenant)
                .json(&body),
        )
        .await;
        assert_eq!(status, 403, "{answer}");
        assert_eq!(answer["code"], "permission_error", "{answer}");
    }
    // The tenant-wide owner still can.
    let (status, answer) = kuatia_tests::send(
        app.as_key(Method::POST, "/v1/memberships", &owner, &tenant)
            .json(&json!({"user_id": user["id"], "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    app.stop().await;
}

#[tokio::test]
async fn events_about_keys_carry_no_hash() {
    // `/v1/events` showed auditors every API key's SHA-256.
    let app = TestApp::spawn().await;
    let (status, created) = app.create_tenant("hashless").await;
    assert_eq!(status, 201, "{created}");
    let tenant = created["id"].as_str().expect("id").to_owned();
    let owner = created["bootstrap_api_key"].as_str().expect("key").to_owned();
    let (status, erp) = issue(&app, &owner, &tenant, json!({"name": "ERP", "role": "issuer"})).await;
    assert_eq!(status, 201, "{erp}");
    let erp_key = erp["key"].as_str().expect("key").to_owned();
    let (status, page) = body(
        app.as_key(Method::GET, "/v1/events?after=0&limit=1000", &owner, &tenant)
            .send()
            .await
            .expect("events"),
    )
    .await;
    assert_eq!(status, 200, "{page}");
    let text = page.to_string();
    for key in [&owner, &erp_key] {
        let hash = kuatia_application::access::sha256_hex(key);
        assert!(!text.contains(&hash), "a key hash is in the log: {text}");
        assert!(!text.contains(key.as_str()), "a key is in the log");
    }
    let issued: Vec<&Value> = page["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "ApiKeyIssued")
        .collect();
    assert_eq!(issued.len(), 2, "{text}");
    assert!(
        issued.iter().any(|e| e.to_string().contains(&erp_key[..12])),
        "the prefix: {text}"
    );

    // Both keys still authenticate, also after the access projection is rebuilt from the log.
    let store = app.service().database.store();
    kuatia_projections::runtime::rebuild(&store, &kuatia_projections::access::Access, &|_, _| {})
        .await
        .expect("rebuild access");
    for key in [&owner, &erp_key] {
        let (status, current) = body(
            app.as_key(Method::GET, "/v1/api-keys/current", key, &tenant)
                .send()
                .await
                .expect("current"),
        )
        .await;
        assert_eq!(status, 200, "{current}");
    }
    app.stop().await;
}
