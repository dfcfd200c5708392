//! The integrator's first hour, black-box: from an empty service to a SIFEN channel whose
//! readiness is green, with every refusal on the way answering the contract's error body.

use base64::Engine;
use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_tests::{TestApp, id, legacy_pfx, multipart_form, pkcs12_info, send_with_headers};
use reqwest::Method;
use serde_json::{Value, json};

const EMAIL: &str = "integradora@example.com.py";
const USER_PASSWORD: &str = "a long enough console secret";
const PFX_PASSWORD: &str = "firma 2026 pass";
const CSC: &str = "ABCD0000000000000000000000000000";

/// A refusal: the status, the code, and the contract's body `{code, message, request_id}` with
/// the request id echoed in `X-Request-Id`.
fn refused(step: &str, answer: &(u16, reqwest::header::HeaderMap, Value), status: u16, code: &str) {
    let (got, headers, body) = answer;
    assert_eq!(
        (*got, body["code"].as_str()),
        (status, Some(code)),
        "{step}: {body}"
    );
    let message = body["message"].as_str().unwrap_or_default();
    assert!(!message.is_empty(), "{step}: a message: {body}");
    let request_id = body["request_id"].as_str().unwrap_or_default();
    assert!(!request_id.is_empty(), "{step}: a request_id: {body}");
    assert_eq!(
        headers.get("x-request-id").and_then(|v| v.to_str().ok()),
        Some(request_id),
        "{step}: the same request id in the header"
    );
}

fn created(step: &str, answer: &(u16, reqwest::header::HeaderMap, Value)) -> Value {
    assert_eq!(answer.0, 201, "{step}: {}", answer.2);
    answer.2.clone()
}

#[tokio::test]
async fn an_integrator_goes_from_nothing_to_a_ready_sifen_channel_in_the_first_hour() {
    let app = TestApp::spawn_with(|c| c.insecure_cookies = true).await;
    let url = |path: &str| format!("{}{path}", app.base);

    // 1. A tenant, unauthenticated; the answer carries the bootstrap owner key once.
    let tenant_body = json!({"slug": "primera-hora", "name": "Primera Hora S.A."});
    let tenant = created(
        "tenant",
        &send_with_headers(app.client.post(url("/v1/tenants")).json(&tenant_body)).await,
    );
    let tenant_id = id(&tenant);
    let bootstrap = tenant["bootstrap_api_key"]
        .as_str()
        .expect("bootstrap key")
        .to_owned();
    assert!(bootstrap.starts_with("kt_test_"), "a demo tenant's key: {tenant}");
    refused(
        "the same slug again",
        &send_with_headers(app.client.post(url("/v1/tenants")).json(&tenant_body)).await,
        409,
        "conflict_error",
    );
    let with_key = |method: Method, path: &str| app.as_key(method, path, &bootstrap, &tenant_id);

    // 2. A console user (the bootstrap key in hand; the endpoint itself needs none).
    refused(
        "a short password",
        &send_with_headers(
            with_key(Method::POST, "/v1/users")
                .json(&json!({"email": EMAIL, "password": "short", "name": "Ana"})),
        )
        .await,
        400,
        "validation_error",
    );
    let user = created(
        "user",
        &send_with_headers(
            with_key(Method::POST, "/v1/users")
                .json(&json!({"email": EMAIL, "password": USER_PASSWORD, "name": "Ana"})),
        )
        .await,
    );
    assert_eq!(user["email"], EMAIL);

    // 3. Her membership as admin: an invitation made with the bootstrap key.
    refused(
        "a membership without credentials",
        &send_with_headers(
            app.client
                .post(url("/v1/memberships"))
                .header("X-Tenant-Id", &tenant_id)
                .json(&json!({"email": EMAIL, "role": "admin"})),
        )
        .await,
        401,
        "authentication_error",
    );
    let (status, _, invitation) = send_with_headers(
        with_key(Method::POST, "/v1/memberships").json(&json!({"email": EMAIL, "role": "admin"})),
    )
    .await;
    assert_eq!(status, 202, "an invitation: {invitation}");
    assert_eq!(
        (invitation["status"].as_str(), invitation["role"].as_str()),
        (Some("invited"), Some("admin"))
    );
    let accept_url = invitation["accept_url"]
        .as_str()
        .expect("accept_url (no mail server)");
    let token = accept_url.rsplit('/').next().expect("token").to_owned();

    // 4. Login: the session lives in the kuatia_session cookie; she accepts the invitation with it.
    refused(
        "a wrong password",
        &send_with_headers(
            app.client
                .post(url("/v1/auth/login"))
                .json(&json!({"email": EMAIL, "password": "not her password"})),
        )
        .await,
        401,
        "authentication_error",
    );
    let (status, headers, answer) = send_with_headers(
        app.client
            .post(url("/v1/auth/login"))
            .json(&json!({"email": EMAIL, "password": USER_PASSWORD})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["memberships"], json!([]), "not a member before accepting");
    let set_cookie = headers
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    assert!(
        set_cookie.starts_with("kuatia_session=") && set_cookie.contains("HttpOnly"),
        "{set_cookie}"
    );
    let cookie = set_cookie.split(';').next().expect("pair").to_owned();
    let (status, _, membership) = send_with_headers(
        app.client
            .post(url(&format!("/v1/invitations/{token}/accept")))
            .header("Cookie", cookie.clone()),
    )
    .await;
    assert_eq!(status, 200, "{membership}");
    assert_eq!(
        (membership["user_id"].as_str(), membership["role"].as_str()),
        (user["id"].as_str(), Some("admin"))
    );
    // Cookie-authenticated unsafe requests carry X-Tenant-Id (the CSRF defence).
    let console = |method: Method, path: &str| {
        app.client
            .request(method, url(path))
            .header("Cookie", cookie.clone())
            .header("X-Tenant-Id", &tenant_id)
    };

    // 5. The company: a wrong check digit first, then the right one.
    refused(
        "a cookie request without X-Tenant-Id",
        &send_with_headers(
            app.client
                .post(url("/v1/companies"))
                .header("Cookie", cookie.clone())
                .json(&TestApp::company_body("80069563-1")),
        )
        .await,
        400,
        "validation_error",
    );
    let wrong_dv =
        send_with_headers(console(Method::POST, "/v1/companies").json(&TestApp::company_body("80069563-7")))
            .await;
    refused("a wrong DV", &wrong_dv, 400, "validation_error");
    assert_eq!(
        (
            wrong_dv.2["details"]["errors"][0]["field"].as_str(),
            wrong_dv.2["details"]["errors"][0]["code"].as_str()
        ),
        (Some("ruc"), Some("invalid_check_digit")),
        "{}",
        wrong_dv.2
    );
    let company = created(
        "company",
        &send_with_headers(console(Method::POST, "/v1/companies").json(&TestApp::company_body("80069563-1")))
            .await,
    );
    let company_id = id(&company);

    // 6. A branch and its issuance point.
    refused(
        "a branch code that is not 3 digits",
        &send_with_headers(
            console(Method::POST, "/v1/branches")
                .json(&json!({"company_id": company_id, "code": "1", "name": "Casa central"})),
        )
        .await,
        400,
        "validation_error",
    );
    let branch = created(
        "branch",
        &send_with_headers(
            console(Method::POST, "/v1/branches")
                .json(&json!({"company_id": company_id, "code": "001", "name": "Casa central"})),
        )
        .await,
    );
    let point = created(
        "issuance point",
        &send_with_headers(
            console(Method::POST, "/v1/issuance-points")
                .json(&json!({"branch_id": id(&branch), "code": "001", "name": "Caja 1"})),
        )
        .await,
    );
    assert_eq!(point["company_id"], json!(company_id));

    // 7. Certificates: a modern PFX as JSON, a legacy RC2/3DES one as a multipart upload.
    let modern = SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", "80069563-1", 365)
        .pfx(PFX_PASSWORD)
        .expect("pfx");
    let modern_b64 = base64::engine::general_purpose::STANDARD.encode(&modern);
    refused(
        "a wrong PFX password",
        &send_with_headers(console(Method::POST, "/v1/certificates").json(&json!({
            "company_id": company_id, "pfx_base64": modern_b64, "password": "not the pfx password"
        })))
        .await,
        400,
        "certificate_error",
    );
    let modern_cert = created(
        "modern certificate",
        &send_with_headers(console(Method::POST, "/v1/certificates").json(&json!({
            "company_id": company_id, "pfx_base64": modern_b64, "password": PFX_PASSWORD,
            "label": "firma moderna"
        })))
        .await,
    );
    assert_eq!(
        (modern_cert["ruc"].as_str(), modern_cert["status"].as_str()),
        (Some("80069563-1"), Some("valid"))
    );
    refused(
        "the same certificate twice",
        &send_with_headers(console(Method::POST, "/v1/certificates").json(&json!({
            "company_id": company_id, "pfx_base64": modern_b64, "password": PFX_PASSWORD
        })))
        .await,
        409,
        "conflict_error",
    );
    let legacy = legacy_pfx(
        &SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", "80069563-1", 730),
        PFX_PASSWORD,
    );
    let info = pkcs12_info(&legacy, PFX_PASSWORD);
    assert!(info.contains("RC2"), "a real legacy file: {info}");
    let (content_type, body) = multipart_form(&[
        ("company_id", None, company_id.as_bytes()),
        ("password", None, PFX_PASSWORD.as_bytes()),
        ("label", None, "firma legacy".as_bytes()),
        ("pfx", Some("firma-legacy.pfx"), &legacy),
    ]);
    let legacy_cert = created(
        "legacy certificate",
        &send_with_headers(
            console(Method::POST, "/v1/certificates")
                .header("Content-Type", content_type)
                .body(body),
        )
        .await,
    );
    assert_eq!(legacy_cert["status"], "valid", "{legacy_cert}");
    for certificate in [&modern_cert, &legacy_cert] {
        let (status, _, validation) = send_with_headers(console(
            Method::POST,
            &format!("/v1/certificates/{}/validate", id(certificate)),
        ))
        .await;
        assert_eq!(
            (status, &validation["valid"]),
            (200, &json!(true)),
            "{validation}"
        );
    }

    // Before the channel: readiness says what is missing.
    let readiness = |path: String| {
        let request = console(Method::GET, &path);
        async move {
            let (status, _, body) = send_with_headers(request).await;
            assert_eq!(status, 200, "{body}");
            body["channels"].as_array().expect("channels").clone()
        }
    };
    let before = readiness(format!("/v1/emission-channels/readiness?company_id={company_id}")).await;
    let sifen_before = before
        .iter()
        .find(|c| c["channel"] == "sifen")
        .expect("sifen listed");
    assert_eq!(
        (&sifen_before["channel_id"], &sifen_before["ready"]),
        (&Value::Null, &json!(false)),
        "{sifen_before}"
    );

    // 8. The SIFEN channel: refused without its CSC, then created.
    let mut channel = json!({
        "company_id": company_id,
        "channel": "sifen",
        "is_default": true,
        "credentials": {"endpoint": "http://127.0.0.1:8082"},
        "sifen": {
            "environment": "test",
            "timbrado": "12345678",
            "timbrado_valid_from": "2024-01-01",
            "csc_id": "0001",
            "certificate_id": id(&modern_cert),
        },
    });
    let missing_csc = send_with_headers(console(Method::POST, "/v1/emission-channels").json(&channel)).await;
    refused(
        "a sifen channel without its CSC",
        &missing_csc,
        400,
        "validation_error",
    );
    assert_eq!(
        missing_csc.2["details"]["errors"][0]["field"], "sifen.csc",
        "{}",
        missing_csc.2
    );
    channel["sifen"]["csc"] = json!(CSC);
    let channel = created(
        "sifen channel",
        &send_with_headers(console(Method::POST, "/v1/emission-channels").json(&channel)).await,
    );
    assert_eq!(channel["sifen"]["csc_configured"], true);
    assert!(!channel.to_string().contains(CSC), "{channel}");

    // 9. Readiness: all green for sifen.
    let after = readiness(format!("/v1/emission-channels/readiness?company_id={company_id}")).await;
    let sifen = after
        .iter()
        .find(|c| c["channel"] == "sifen")
        .expect("sifen listed");
    assert_eq!(sifen["channel_id"], json!(id(&channel)));
    assert_eq!(sifen["company_id"], json!(company_id));
    assert_eq!(sifen["ready"], true, "{sifen}");
    let checks = sifen["checks"].as_array().expect("checks");
    let names: Vec<&str> = checks.iter().map(|c| c["name"].as_str().expect("name")).collect();
    assert_eq!(
        names,
        vec![
            "company",
            "branch",
            "issuance_point",
            "timbrado",
            "certificate",
            "csc"
        ]
    );
    assert!(checks.iter().all(|c| c["ok"] == true), "{sifen}");
    assert!(
        checks[1]["message"]
            .as_str()
            .expect("message")
            .contains(&id(&branch)),
        "the branch a document would use: {sifen}"
    );
    app.stop().await;
}
