//! `GET /v1/events`: a tenant's events in commit order, page by page (reconciliation).

use kuatia_tests::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

async fn send(request: reqwest::RequestBuilder) -> (u16, Value) {
    let response = request.send().await.expect("send");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_reconciliation_job_pages_through_its_tenants_events_in_commit_order() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (other, other_key) = app.tenant("globex").await;
    send(
        app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    send(
        app.as_key(Method::POST, "/v1/companies", &other_key, &other)
            .json(&TestApp::company_body("80013884-8")),
    )
    .await;
    send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "erp", "role": "issuer"})),
    )
    .await;

    let (status, all) = send(app.as_key(Method::GET, "/v1/events", &owner, &tenant)).await;
    assert_eq!(status, 200, "{all}");
    let events = all["events"].as_array().expect("events");
    let types: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
    assert_eq!(
        types,
        vec![
            "TenantCreated",
            "ApiKeyIssued",
            "CompanyRegistered",
            "ApiKeyIssued"
        ]
    );
    assert!(
        events
            .windows(2)
            .all(|w| w[0]["position"].as_i64() < w[1]["position"].as_i64())
    );
    assert!(
        !all.to_string().contains("80013884"),
        "another tenant's events never appear"
    );
    assert!(
        events
            .iter()
            .all(|e| e["hash"].as_str().is_some_and(|h| h.len() == 64))
    );
    assert_eq!(events[2]["data"]["CompanyRegistered"]["ruc"], "80069563-1");
    assert!(
        events[2]["metadata"]["actor"]
            .as_str()
            .unwrap_or("")
            .starts_with("api_key:")
    );

    let mut paged = Vec::new();
    let mut after = 0;
    loop {
        let (_, page) = send(app.as_key(
            Method::GET,
            &format!("/v1/events?after={after}&limit=3"),
            &owner,
            &tenant,
        ))
        .await;
        let batch = page["events"].as_array().expect("events").clone();
        if batch.is_empty() {
            assert_eq!(page["next_after"], after, "an empty page keeps the cursor");
            break;
        }
        after = page["next_after"].as_i64().expect("cursor");
        paged.extend(batch);
    }
    assert_eq!(
        &paged, events,
        "pages add up to the whole log, nothing skipped or repeated"
    );

    for bad in ["limit=0", "limit=1001", "after=-1"] {
        let (status, _) = send(app.as_key(Method::GET, &format!("/v1/events?{bad}"), &owner, &tenant)).await;
        assert_eq!(status, 400, "{bad}");
    }
    let (_, issuer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "i", "role": "issuer"})),
    )
    .await;
    let (status, _) = send(app.as_key(
        Method::GET,
        "/v1/events",
        issuer["key"].as_str().expect("k"),
        &tenant,
    ))
    .await;
    assert_eq!(status, 403, "issuers do not read the audit log");
    let (_, auditor) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "a", "role": "auditor"})),
    )
    .await;
    let (status, _) = send(app.as_key(
        Method::GET,
        "/v1/events",
        auditor["key"].as_str().expect("k"),
        &tenant,
    ))
    .await;
    assert_eq!(status, 200, "auditors do");
    let company = events[2]["data"]["CompanyRegistered"]["company_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let (_, scoped) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "s", "role": "admin", "company_id": company})),
    )
    .await;
    let (status, _) = send(app.as_key(
        Method::GET,
        "/v1/events",
        scoped["key"].as_str().expect("k"),
        &tenant,
    ))
    .await;
    assert_eq!(
        status, 403,
        "a company-scoped key cannot read the whole tenant's log"
    );
    app.stop().await;
}
