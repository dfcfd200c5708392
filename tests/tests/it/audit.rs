//! `GET /v1/events`: a tenant's events in commit order, page by page (reconciliation).

use kuatia_tests::{TestApp, send};
use reqwest::Method;
use serde_json::{Value, json};

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
    let (status, own) = send(app.as_key(
        Method::GET,
        "/v1/events",
        scoped["key"].as_str().expect("k"),
        &tenant,
    ))
    .await;
    assert_eq!(
        status, 200,
        "a company-scoped key reads its company's events: {own}"
    );
    let own_types: Vec<&str> = own["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert_eq!(
        own_types,
        ["CompanyRegistered"],
        "never the tenant's other events: {own}"
    );
    app.stop().await;
}

#[tokio::test]
async fn events_filter_by_type_and_company_show_chain_links_and_named_actors_and_refuse_unknown_parameters() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let company = |ruc: &str| {
        let request = app
            .as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body(ruc));
        async move {
            let (status, body) = send(request).await;
            assert_eq!(status, 201, "{body}");
            body["id"].as_str().expect("id").to_owned()
        }
    };
    let a = company("80069563-1").await;
    let b = company("80013884-8").await;
    let (status, branch) = send(
        app.as_key(Method::POST, "/v1/branches", &owner, &tenant)
            .json(&json!({"company_id": b, "code": "001", "name": "Casa central", "is_default": true})),
    )
    .await;
    assert_eq!(status, 201, "{branch}");
    let get = |path: String, key: String| {
        let request = app.as_key(Method::GET, &path, &key, &tenant);
        async move { send(request).await }
    };
    let types = |page: &Value| -> Vec<String> {
        page["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["type"].as_str().expect("type").to_owned())
            .collect()
    };

    // By type.
    let (status, registered) = get("/v1/events?type=CompanyRegistered".into(), owner.clone()).await;
    assert_eq!(status, 200, "{registered}");
    assert_eq!(types(&registered), ["CompanyRegistered", "CompanyRegistered"]);
    // By company: that company's stream only, the other company's branch left out.
    let (_, of_b) = get(format!("/v1/events?company={b}"), owner.clone()).await;
    let of_b_types = types(&of_b);
    assert_eq!(
        of_b_types.first().map(String::as_str),
        Some("CompanyRegistered"),
        "{of_b}"
    );
    assert!(
        of_b_types.len() >= 2,
        "the branch is the company's event too: {of_b}"
    );
    assert!(!of_b.to_string().contains(&a), "{of_b}");
    let (_, of_a) = get(
        format!("/v1/events?company={a}&type=CompanyRegistered"),
        owner.clone(),
    )
    .await;
    assert_eq!(types(&of_a), ["CompanyRegistered"]);
    assert!(of_a.to_string().contains("80069563-1"));
    // A document that does not exist has no events.
    let (status, none) = get(
        format!("/v1/events?document={}", uuid::Uuid::now_v7()),
        owner.clone(),
    )
    .await;
    assert_eq!((status, types(&none).len()), (200, 0), "{none}");

    // A company-scoped key: its company's events; another company named is not found.
    let (_, scoped) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "b-auditor", "role": "auditor", "company_id": b})),
    )
    .await;
    let scoped = scoped["key"].as_str().expect("key").to_owned();
    let (status, mine) = get("/v1/events".into(), scoped.clone()).await;
    assert_eq!(status, 200, "{mine}");
    assert_eq!(
        types(&mine),
        of_b_types,
        "a scoped key reads what ?company= of its company reads"
    );
    let (status, refused) = get(format!("/v1/events?company={a}"), scoped.clone()).await;
    assert_eq!(
        status, 404,
        "another company is not found, as on every route: {refused}"
    );

    // Unknown and malformed parameters are refused, naming them.
    for (query, field) in [
        ("stream=x", "stream"),
        ("event_type=CompanyRegistered", "event_type"),
        ("company=not-a-uuid", ""),
        ("type=no%20spaces", "type"),
    ] {
        let (status, body) = get(format!("/v1/events?{query}"), owner.clone()).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["code"], "validation_error", "{body}");
        if !field.is_empty() {
            assert_eq!(body["details"]["errors"][0]["field"], field, "{query}: {body}");
        }
    }

    // Every event shows its chain links and its actor resolved to the key's name.
    let (_, all) = get("/v1/events".into(), owner.clone()).await;
    let events = all["events"].as_array().expect("events");
    let first_of_b = events
        .iter()
        .position(|e| e["stream_id"] == of_b["events"][0]["stream_id"])
        .expect("b's stream");
    let second_of_b = events
        .iter()
        .rposition(|e| e["stream_id"] == of_b["events"][0]["stream_id"])
        .expect("b's stream");
    assert!(events[first_of_b]["prev_hash"].is_null(), "{all}");
    assert_eq!(
        events[second_of_b]["prev_hash"], events[first_of_b]["hash"],
        "{all}"
    );
    let (_, me) = get("/v1/api-keys/current".into(), owner.clone()).await;
    let actor = &events[first_of_b]["actor"];
    assert_eq!(
        (
            actor["type"].as_str(),
            actor["id"].as_str(),
            actor["name"].as_str()
        ),
        (Some("api_key"), me["id"].as_str(), me["name"].as_str()),
        "{actor}"
    );
    assert!(
        events[first_of_b]["metadata"]["actor"]
            .as_str()
            .is_some_and(|a| a.starts_with("api_key:")),
        "the stored metadata is unchanged"
    );
    // A sign-up has no one to name; a person is named by their email.
    assert_eq!(
        events[0]["actor"],
        json!({"type": "anonymous", "id": "signup", "name": null}),
        "{all}"
    );
    let (membership, _) = crate::identity::join(&app, &tenant, &owner, "ana@acme.com.py", "admin").await;
    let (_, added) = get("/v1/events?type=MemberAdded".into(), owner.clone()).await;
    assert_eq!(
        added["events"][0]["actor"],
        json!({"type": "user", "id": membership["user_id"], "name": "ana@acme.com.py"}),
        "{added}"
    );
    app.stop().await;
}

#[tokio::test]
async fn an_auditor_resolves_key_and_issuance_point_ids_and_a_keys_last_use_is_listed() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let post = |path: &str, body: Value| {
        let request = app.as_key(Method::POST, path, &owner, &tenant).json(&body);
        async move {
            let (status, body) = send(request).await;
            assert_eq!(status, 201, "{body}");
            body
        }
    };
    let company = post("/v1/companies", TestApp::company_body("80069563-1")).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let other = post("/v1/companies", TestApp::company_body("80013884-8")).await["id"]
        .as_str()
        .expect("id")
        .to_owned();
    let branch = post(
        "/v1/branches",
        json!({"company_id": company, "code": "001", "name": "Casa central", "is_default": true}),
    )
    .await;
    let other_branch = post(
        "/v1/branches",
        json!({"company_id": other, "code": "001", "name": "Matriz", "is_default": true}),
    )
    .await;
    let point = post(
        "/v1/issuance-points",
        json!({"branch_id": branch["id"], "code": "001", "name": "Caja 1", "is_default": true}),
    )
    .await;
    post(
        "/v1/issuance-points",
        json!({"branch_id": other_branch["id"], "code": "002", "is_default": true}),
    )
    .await;
    let auditor = post("/v1/api-keys", json!({"name": "auditoria", "role": "auditor"})).await;
    let auditor_key = auditor["key"].as_str().expect("key").to_owned();
    let unused = post("/v1/api-keys", json!({"name": "never used", "role": "viewer"})).await;
    let scoped = post(
        "/v1/api-keys",
        json!({"name": "branch office", "role": "viewer", "company_id": other}),
    )
    .await;
    let scoped_key = scoped["key"].as_str().expect("key").to_owned();
    let get = |path: &str, key: &str| send(app.as_key(Method::GET, path, key, &tenant));

    // Keys: every one, no secret, with when it was last used.
    let (status, keys) = get("/v1/api-keys", &auditor_key).await;
    assert_eq!(status, 200, "{keys}");
    let listed = keys.as_array().expect("keys");
    let names: Vec<&str> = listed.iter().filter_map(|k| k["name"].as_str()).collect();
    assert_eq!(
        names,
        ["bootstrap", "auditoria", "never used", "branch office"],
        "{keys}"
    );
    assert!(!keys.to_string().contains(&auditor_key), "never a secret");
    let by_name = |name: &str| listed.iter().find(|k| k["name"] == name).expect("listed").clone();
    assert!(by_name("bootstrap")["last_used_at"].is_string(), "{keys}");
    assert!(
        by_name("auditoria")["last_used_at"].is_string(),
        "this very request used it: {keys}"
    );
    assert!(by_name("never used")["last_used_at"].is_null(), "{keys}");
    assert_eq!(by_name("never used")["id"], unused["id"]);
    assert!(by_name("never used")["revoked_at"].is_null());

    // Issuance points: every one, of a company, of a branch; a scoped key sees its company's.
    let (status, points) = get("/v1/issuance-points", &auditor_key).await;
    assert_eq!(status, 200, "{points}");
    assert_eq!(points.as_array().map(Vec::len), Some(2), "{points}");
    let (_, of_company) = get(&format!("/v1/issuance-points?company_id={company}"), &auditor_key).await;
    assert_eq!(of_company.as_array().map(Vec::len), Some(1), "{of_company}");
    assert_eq!(of_company[0]["id"], point["id"]);
    assert_eq!(of_company[0]["name"], "Caja 1");
    assert_eq!(of_company[0]["branch_id"], branch["id"]);
    let (_, of_branch) = get(
        &format!(
            "/v1/issuance-points?branch_id={}",
            other_branch["id"].as_str().expect("id")
        ),
        &auditor_key,
    )
    .await;
    assert_eq!(of_branch[0]["code"], "002", "{of_branch}");
    let (status, scoped_points) = get("/v1/issuance-points", &scoped_key).await;
    assert_eq!(status, 200);
    assert_eq!(scoped_points.as_array().map(Vec::len), Some(1), "{scoped_points}");
    assert_eq!(scoped_points[0]["company_id"], other.as_str());
    let (status, _) = get(&format!("/v1/issuance-points?company_id={company}"), &scoped_key).await;
    assert_eq!(status, 404, "another company is not found");
    let (status, body) = get("/v1/issuance-points?companyid=x", &auditor_key).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["details"]["errors"][0]["field"], "companyid", "{body}");

    // Viewers read configuration but not who holds keys.
    let (status, _) = get("/v1/api-keys", &scoped_key).await;
    assert_eq!(status, 403);
    app.stop().await;
}

/// An auditor takes a document's stream home: the NDJSON the service answers is the stream as
/// stored, and a checker written from the published hash formula alone
/// (`tests/scripts/verify_chain.py`, no kuatia code) verifies it, while a line changed in the file
/// breaks it at that event. The service checks the chain too (`/chain`), and an event rewritten in
/// the database breaks it there; `/state?version=N` is the document as it stood after event N.
/// An auditor key reads all of it; an issuer's may not; another tenant sees no such document.
#[tokio::test]
async fn an_auditor_verifies_a_documents_stream_offline_and_replays_it_to_any_event() {
    use kuatia_tests::{ScratchDir, Simulated, error_code};
    use std::time::Duration;
    let f = Simulated::named(
        "audited",
        kuatia_infrastructure::sifen_sim::SimConfig::default(),
        |_| {},
    )
    .await;
    let doc = f.post(&f.invoice("AUDIT-1")).await;
    f.wait_status(&doc, "accepted", Duration::from_secs(30)).await;
    f.wait_recorded(&doc, "kude", 1, Duration::from_secs(60)).await;
    let (auditor, _) = f.api_key("auditor", None).await;
    let as_auditor = |path: &str| f.app.as_key(Method::GET, path, &auditor, &f.r.tenant);

    let response = as_auditor(&format!("/v1/documents/{doc}/events"))
        .send()
        .await
        .expect("events");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let ndjson = response.text().await.expect("text");
    let lines: Vec<Value> = ndjson
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object a line"))
        .collect();
    let timeline = f.timeline(&doc).await;
    assert_eq!(lines.len(), timeline.len(), "the whole stream");
    for (line, entry) in lines.iter().zip(&timeline) {
        assert_eq!(line["hash"], entry["hash"], "{line}");
        assert_eq!(line["stream_version"], entry["version"]);
    }

    let dir = ScratchDir::new();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/verify_chain.py");
    let check = |text: &str| {
        let file = dir.0.join(format!("{}.ndjson", uuid::Uuid::now_v7()));
        std::fs::write(&file, text).expect("write");
        let out = std::process::Command::new("python3")
            .arg(&script)
            .arg(&file)
            .output()
            .expect("python3 runs the checker");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(check(&ndjson), format!("ok {}", lines.len()));
    let mut tampered = lines.clone();
    tampered[1]["payload"]["DocumentValidated"]["warnings"] =
        json!([{"field": "x", "code": "y", "message": "z"}]);
    let tampered: String = tampered.iter().map(|l| format!("{l}\n")).collect();
    assert!(check(&tampered).starts_with("broken 2 "), "{}", check(&tampered));

    let (status, chain) = send(as_auditor(&format!("/v1/documents/{doc}/chain"))).await;
    assert_eq!(status, 200, "{chain}");
    assert_eq!(chain["verified"], true, "{chain}");
    assert_eq!(chain["events"], lines.len());
    assert_eq!(chain["head_hash"], lines[lines.len() - 1]["hash"]);

    let state_at = |version: &str| as_auditor(&format!("/v1/documents/{doc}/state?version={version}"));
    let (status, first) = send(state_at("1")).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (first["version"].clone(), first["state"]["status"].clone()),
        (json!(1), json!("received"))
    );
    assert_eq!(first["state"]["cdc"], Value::Null, "not numbered yet then");
    let (status, now) = send(state_at("9999")).await;
    assert_eq!(status, 200, "{now}");
    assert_eq!(now["version"], lines.len());
    assert_eq!(now["state"]["status"], "accepted");
    assert!(now["state"]["cdc"].is_string(), "{now}");
    for bad in ["0", "-1", "two", ""] {
        let (status, answer) = send(state_at(bad)).await;
        error_code(status, &answer, 400, "validation_error");
    }

    let (issuer, _) = f.api_key("issuer", None).await;
    let (status, answer) = send(f.app.as_key(
        Method::GET,
        &format!("/v1/documents/{doc}/events"),
        &issuer,
        &f.r.tenant,
    ))
    .await;
    error_code(status, &answer, 403, "permission_error");
    let other = f.app.ready_at("audited-other", &f.sim.base_url()).await;
    for path in ["events", "chain", "state?version=1"] {
        let (status, answer) = send(other.req(Method::GET, &format!("/v1/documents/{doc}/{path}"))).await;
        error_code(status, &answer, 404, "not_found");
    }

    // Someone with the database owner's credentials rewrites event 2: the service says where.
    let stream = lines[0]["stream_id"].as_str().expect("stream id").to_owned();
    let rewrite = format!(
        "UPDATE events SET payload = '{{\"DocumentValidated\": {{\"warnings\": [], \"at\": \"2026-01-01T00:00:00Z\"}}}}' \
         WHERE stream_id = '{stream}' AND stream_version = 2"
    );
    if let Some(mut owner) = f.app.db.owner_pg().await {
        for sql in [
            "ALTER TABLE events DISABLE TRIGGER events_no_update_or_delete",
            rewrite.as_str(),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut owner)
                .await
                .expect("rewritten");
        }
    } else if let Some(mut owner) = f.app.db.owner_sqlite().await {
        for sql in ["DROP TRIGGER events_no_update", rewrite.as_str()] {
            sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                .execute(&mut owner)
                .await
                .expect("rewritten");
        }
    }
    let (status, chain) = send(as_auditor(&format!("/v1/documents/{doc}/chain"))).await;
    assert_eq!(status, 200, "{chain}");
    assert_eq!(chain["verified"], false, "{chain}");
    assert_eq!(chain["broken_at"]["version"], 2, "{chain}");
    f.app.stop().await;
}
