//! Companies, black-box.

use kuatia_tests::{TestApp, send};
use reqwest::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn a_company_is_registered_with_a_verified_ruc_once_per_tenant() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let post = |body: Value| {
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&body)
    };

    let (status, wrong_dv) = send(post(TestApp::company_body("80069563-2"))).await;
    assert_eq!(status, 400, "{wrong_dv}");
    assert_eq!(wrong_dv["details"]["errors"][0]["field"], "ruc");
    assert_eq!(wrong_dv["details"]["errors"][0]["code"], "invalid_check_digit");
    assert!(
        wrong_dv["message"].as_str().expect("message").contains("is 1"),
        "names the right digit: {wrong_dv}"
    );

    let (status, created) = send(post(TestApp::company_body("80069563-1"))).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["ruc"], "80069563-1");
    assert_eq!(created["legal_name"], "DE GENERACION ELECTRONICA S.A.");
    assert_eq!(created["economic_activities"][0]["code"], "62010");

    let (status, dup) = send(post(TestApp::company_body("80069563-1"))).await;
    assert_eq!((status, dup["code"].as_str()), (409, Some("conflict_error")));
    let (other_tenant, other_key) = app.tenant("globex").await;
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/companies", &other_key, &other_tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    assert_eq!(status, 201, "the same RUC may be registered in another tenant");

    let (status, list) = send(app.as_key(Method::GET, "/v1/companies", &key, &tenant)).await;
    assert_eq!(status, 200);
    assert_eq!(list.as_array().map(Vec::len), Some(1));
    app.stop().await;
}

#[tokio::test]
async fn every_problem_of_a_company_record_is_listed_at_once_and_typos_are_refused() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let mut body = TestApp::company_body("80013884-8");
    body["legal_name"] = json!("");
    body["email"] = json!("not an email");
    body["economic_activities"] = json!([]);
    let (status, err) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&body),
    )
    .await;
    assert_eq!(status, 400);
    let fields: Vec<&str> = err["details"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .filter_map(|e| e["field"].as_str())
        .collect();
    assert_eq!(fields, vec!["legal_name", "email", "economic_activities"]);

    let mut typo = TestApp::company_body("80013884-8");
    typo["legal_nmae"] = json!("oops");
    let (status, err) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&typo),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        err["message"].as_str().expect("message").contains("legal_nmae"),
        "{err}"
    );
    let mut missing = TestApp::company_body("80013884-8");
    missing.as_object_mut().expect("object").remove("city_code");
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&missing),
    )
    .await;
    assert_eq!(status, 400);
    app.stop().await;
}

#[tokio::test]
async fn a_company_is_placed_by_sets_geographic_table_and_named_by_it() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let post = |body: &Value| {
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(body)
    };
    // Department 11 with city 6 named Luque: city 6 is Aguará, in Concepción (2).
    let mut wrong = TestApp::company_body("80069563-1");
    wrong["department_code"] = json!(11);
    wrong["department_name"] = json!("ALTO PARANA");
    wrong["city_code"] = json!(6);
    wrong["city_name"] = json!("LUQUE");
    let (status, err) = send(post(&wrong)).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("validation_error")),
        "{err}"
    );
    assert_eq!(err["details"]["errors"][0]["field"], "department_code", "{err}");
    assert_eq!(
        err["details"]["errors"][0]["code"], "city_department_mismatch",
        "{err}"
    );
    assert!(
        err["details"]["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("CONCEPCION")),
        "{err}"
    );
    wrong["department_code"] = json!(2);
    wrong.as_object_mut().expect("object").remove("department_name");
    let (status, err) = send(post(&wrong)).await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["details"]["errors"][0]["field"], "city_name", "{err}");
    assert_eq!(err["details"]["errors"][0]["code"], "city_name_mismatch", "{err}");
    assert!(
        err["details"]["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"AGUARA\"")),
        "{err}"
    );

    // Luque without names, spelled otherwise: recorded as the table writes it.
    let mut luque = TestApp::company_body("80069563-1");
    luque["department_code"] = json!(12);
    luque.as_object_mut().expect("object").remove("department_name");
    luque["district_code"] = json!(159);
    luque["city_code"] = json!(5946);
    luque["city_name"] = json!("Luque");
    let (status, created) = send(post(&luque)).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        (
            created["department_name"].as_str(),
            created["district_name"].as_str(),
            created["city_name"].as_str()
        ),
        (Some("CENTRAL"), Some("LUQUE"), Some("LUQUE"))
    );

    // Moving the company by its codes alone names the new place (the old names do not stay).
    let id = created["id"].as_str().expect("id").to_owned();
    let (status, moved) = send(
        app.as_key(Method::PATCH, &format!("/v1/companies/{id}"), &key, &tenant)
            .json(&json!({"department_code": 1, "city_code": 1})),
    )
    .await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(
        (
            moved["department_name"].as_str(),
            moved["district_code"].as_u64(),
            moved["city_name"].as_str()
        ),
        (Some("CAPITAL"), None, Some("ASUNCION (DISTRITO)"))
    );
    app.stop().await;
}

#[tokio::test]
async fn patch_changes_any_field_but_the_ruc_and_roles_are_enforced() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, created) = send(
        app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    let id = created["id"].as_str().expect("id").to_owned();
    let patch = |key: &str, body: Value| {
        app.as_key(Method::PATCH, &format!("/v1/companies/{id}"), key, &tenant)
            .json(&body)
    };

    let (status, updated) = send(patch(
        &owner,
        json!({"trade_name": "DEGE", "phone": "0981 000 000"}),
    ))
    .await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(
        (updated["trade_name"].as_str(), updated["phone"].as_str()),
        (Some("DEGE"), Some("0981 000 000"))
    );
    assert_eq!(
        updated["legal_name"], created["legal_name"],
        "untouched fields stay"
    );
    assert!(updated["updated_at"].as_str() > created["updated_at"].as_str());

    let (status, err) = send(patch(&owner, json!({"ruc": "80013884-8"}))).await;
    assert_eq!(
        (status, err["details"]["errors"][0]["field"].as_str()),
        (400, Some("ruc"))
    );
    let (status, _) = send(patch(&owner, json!({"email": "broken"}))).await;
    assert_eq!(status, 400);
    let ghost = uuid::Uuid::now_v7();
    let (status, _) = send(
        app.as_key(Method::PATCH, &format!("/v1/companies/{ghost}"), &owner, &tenant)
            .json(&json!({"phone": "1"})),
    )
    .await;
    assert_eq!(status, 404);

    let (_, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    let viewer = viewer["key"].as_str().expect("key").to_owned();
    let (status, _) = send(patch(&viewer, json!({"phone": "1"}))).await;
    assert_eq!(status, 403);
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/companies", &viewer, &tenant)
            .json(&TestApp::company_body("80013884-8")),
    )
    .await;
    assert_eq!(status, 403);
    let (status, list) = send(app.as_key(Method::GET, "/v1/companies", &viewer, &tenant)).await;
    assert_eq!((status, list[0]["trade_name"].as_str()), (200, Some("DEGE")));
    app.stop().await;
}

#[tokio::test]
async fn branches_and_issuance_points_have_unique_three_digit_codes() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let (_, company) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    let company_id = company["id"].as_str().expect("id").to_owned();
    let branch = |code: &str, default: bool| {
        app.as_key(Method::POST, "/v1/branches", &key, &tenant)
            .json(&json!({"company_id": company_id, "code": code, "name": format!("Sucursal {code}"), "is_default": default}))
    };
    let (status, main) = send(branch("001", true)).await;
    assert_eq!(status, 201, "{main}");
    assert_eq!(
        (main["code"].as_str(), main["is_default"].as_bool()),
        (Some("001"), Some(true))
    );
    let (status, second) = send(branch("002", false)).await;
    assert_eq!(status, 201);
    let (status, dup) = send(branch("001", false)).await;
    assert_eq!((status, dup["code"].as_str()), (409, Some("conflict_error")));
    for bad in ["1", "000", "01a", "1000"] {
        let (status, err) = send(branch(bad, false)).await;
        assert_eq!(
            (status, err["details"]["errors"][0]["field"].as_str()),
            (400, Some("code")),
            "{bad}"
        );
    }
    let (status, list) = send(app.as_key(
        Method::GET,
        &format!("/v1/branches?company_id={company_id}"),
        &key,
        &tenant,
    ))
    .await;
    assert_eq!(status, 200);
    let codes: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|b| b["code"].as_str())
        .collect();
    assert_eq!(codes, vec!["001", "002"]);

    let point = |branch_id: &str, code: &str| {
        app.as_key(Method::POST, "/v1/issuance-points", &key, &tenant)
            .json(&json!({"branch_id": branch_id, "code": code, "is_default": true}))
    };
    let main_id = main["id"].as_str().expect("id").to_owned();
    let (status, p) = send(point(&main_id, "001")).await;
    assert_eq!(status, 201, "{p}");
    assert_eq!(
        (p["branch_id"].as_str(), p["company_id"].as_str()),
        (Some(main_id.as_str()), Some(company_id.as_str()))
    );
    let (status, _) = send(point(&main_id, "001")).await;
    assert_eq!(status, 409, "unique within the branch");
    let (status, _) = send(point(second["id"].as_str().expect("id"), "001")).await;
    assert_eq!(status, 201, "the same code in another branch is fine");
    let (status, _) = send(point(&uuid::Uuid::now_v7().to_string(), "001")).await;
    assert_eq!(status, 404);

    // Another tenant cannot hang a point on this tenant's branch.
    let (other, other_key) = app.tenant("globex").await;
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/issuance-points", &other_key, &other)
            .json(&json!({"branch_id": main_id, "code": "009"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, none) = send(app.as_key(Method::GET, "/v1/branches", &other_key, &other)).await;
    assert_eq!((status, none.as_array().map(Vec::len)), (200, Some(0)));
    app.stop().await;
}

#[tokio::test]
async fn a_branch_and_a_point_change_everything_but_their_code() {
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let (_, company) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    let company_id = company["id"].as_str().expect("id").to_owned();
    let (status, branch) = send(
        app.as_key(Method::POST, "/v1/branches", &key, &tenant)
            .json(&json!({"company_id": company_id, "code": "001", "name": "Sucursal 001"})),
    )
    .await;
    assert_eq!(status, 201, "{branch}");
    let branch_id = branch["id"].as_str().expect("id").to_owned();
    let (status, point) = send(
        app.as_key(Method::POST, "/v1/issuance-points", &key, &tenant)
            .json(&json!({"branch_id": branch_id, "code": "001"})),
    )
    .await;
    assert_eq!(status, 201, "{point}");
    let point_id = point["id"].as_str().expect("id").to_owned();
    let patch_branch = |body: Value| {
        app.as_key(Method::PATCH, &format!("/v1/branches/{branch_id}"), &key, &tenant)
            .json(&body)
    };
    let patch_point = |body: Value| {
        app.as_key(
            Method::PATCH,
            &format!("/v1/issuance-points/{point_id}"),
            &key,
            &tenant,
        )
        .json(&body)
    };
    let events = || async {
        let (status, page) =
            send(app.as_key(Method::GET, "/v1/events?after=0&limit=1000", &key, &tenant)).await;
        assert_eq!(status, 200, "{page}");
        page["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter_map(|e| e["type"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    };

    // Moved to Luque by its codes: the names are SET's; the code (sent unchanged) stays.
    let (status, moved) = send(patch_branch(json!({
        "code": "001", "name": "  Sucursal Luque ", "address": "Ruta 2", "house_number": "10",
        "department_code": 12, "city_code": 5946, "is_default": true
    })))
    .await;
    assert_eq!(status, 200, "{moved}");
    assert_eq!(
        (
            moved["code"].as_str(),
            moved["name"].as_str(),
            moved["address"].as_str(),
            moved["city_name"].as_str(),
            moved["department_name"].as_str(),
            moved["is_default"].as_bool()
        ),
        (
            Some("001"),
            Some("Sucursal Luque"),
            Some("Ruta 2"),
            Some("LUQUE"),
            Some("CENTRAL"),
            Some(true)
        )
    );
    let (_, listed) = send(app.as_key(
        Method::GET,
        &format!("/v1/branches?company_id={company_id}"),
        &key,
        &tenant,
    ))
    .await;
    assert_eq!(listed[0], moved, "the list shows the change");
    assert_eq!(events().await.iter().filter(|t| *t == "BranchUpdated").count(), 1);

    // The same again is no event; back to the company's place clears the names with the codes.
    let (status, same) = send(patch_branch(json!({"name": "Sucursal Luque"}))).await;
    assert_eq!((status, &same), (200, &moved));
    assert_eq!(events().await.iter().filter(|t| *t == "BranchUpdated").count(), 1);
    let (status, back) = send(patch_branch(json!({"department_code": null, "city_code": null}))).await;
    assert_eq!(status, 200, "{back}");
    assert_eq!(
        (
            back["city_code"].clone(),
            back["city_name"].clone(),
            back["department_name"].clone()
        ),
        (Value::Null, Value::Null, Value::Null)
    );

    // Refusals, each at its field, and nothing changed by them.
    let refusals = [
        (json!({"code": "002"}), "code", "immutable"),
        (
            json!({"company_id": uuid::Uuid::now_v7()}),
            "company_id",
            "immutable",
        ),
        (json!({"colour": "red"}), "colour", "unknown_field"),
        (json!({"name": " "}), "name", "invalid_length"),
        (
            json!({"city_code": 6}),
            "department_code",
            "city_department_mismatch",
        ),
    ];
    for (body, field, code) in refusals {
        let (status, err) = send(patch_branch(body.clone())).await;
        assert_eq!(status, 400, "{body}: {err}");
        assert_eq!(
            (
                err["code"].as_str(),
                err["details"]["errors"][0]["field"].as_str(),
                err["details"]["errors"][0]["code"].as_str()
            ),
            (Some("validation_error"), Some(field), Some(code)),
            "{body}: {err}"
        );
    }
    let (status, wrong_type) = send(patch_branch(json!({"is_default": "yes"}))).await;
    assert_eq!(
        (status, wrong_type["code"].as_str()),
        (400, Some("validation_error"))
    );
    let (_, listed) = send(app.as_key(Method::GET, "/v1/branches", &key, &tenant)).await;
    assert_eq!(listed[0], back, "a refused patch changes nothing");

    // A point: its name and default flag; never its code or branch.
    let (status, named) = send(patch_point(json!({"name": " Caja 1 ", "is_default": true}))).await;
    assert_eq!(status, 200, "{named}");
    assert_eq!(
        (
            named["name"].as_str(),
            named["is_default"].as_bool(),
            named["code"].as_str()
        ),
        (Some("Caja 1"), Some(true), Some("001"))
    );
    let (status, cleared) = send(patch_point(json!({"name": null}))).await;
    assert_eq!((status, cleared["name"].clone()), (200, Value::Null), "{cleared}");
    for (body, field) in [
        (json!({"code": "002"}), "code"),
        (json!({"branch_id": uuid::Uuid::now_v7()}), "branch_id"),
    ] {
        let (status, err) = send(patch_point(body)).await;
        assert_eq!(
            (status, err["details"]["errors"][0]["field"].as_str()),
            (400, Some(field)),
            "{err}"
        );
    }
    assert_eq!(
        events()
            .await
            .iter()
            .filter(|t| *t == "IssuancePointUpdated")
            .count(),
        2
    );

    // Another tenant finds neither; a viewer may not change them.
    let (other, other_key) = app.tenant("globex").await;
    for path in [
        format!("/v1/branches/{branch_id}"),
        format!("/v1/issuance-points/{point_id}"),
        format!("/v1/branches/{}", uuid::Uuid::now_v7()),
    ] {
        let (status, err) = send(
            app.as_key(Method::PATCH, &path, &other_key, &other)
                .json(&json!({"name": "x"})),
        )
        .await;
        assert_eq!(status, 404, "{path}: {err}");
    }
    let (status, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &key, &tenant)
            .json(&json!({"name": "reader", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 201, "{viewer}");
    let (status, _) = send(
        app.as_key(
            Method::PATCH,
            &format!("/v1/branches/{branch_id}"),
            viewer["key"].as_str().expect("key"),
            &tenant,
        )
        .json(&json!({"name": "x"})),
    )
    .await;
    assert_eq!(status, 403);
    app.stop().await;
}

fn settings_body(company_id: &str) -> Value {
    json!({
        "company_id": company_id,
        "logo_text": "ACME",
        "logo_image_data_url": null,
        "logo_image_name": null,
        "business_activity": "Venta de software",
        "footer_note": "Gracias por su compra",
        "copy_label": "ORIGINAL",
        "show_logo": false,
        "show_item_tax": true,
        "show_payment_terms": true,
        "show_copy_label": true,
        "page_width": 80,
        "page_height": 297,
        "template_elements": [{"kind": "text", "x": 1}]
    })
}

#[tokio::test]
async fn print_settings_default_until_saved_and_refuse_a_logo_that_is_not_a_small_jpeg() {
    use base64::Engine;
    let app = TestApp::spawn().await;
    let (tenant, key) = app.tenant("acme").await;
    let (_, company) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    let company_id = company["id"].as_str().expect("id").to_owned();
    let get = || {
        app.as_key(
            Method::GET,
            &format!("/v1/print-settings?company_id={company_id}"),
            &key,
            &tenant,
        )
    };

    let (status, defaults) = send(get()).await;
    assert_eq!(status, 200, "{defaults}");
    assert_eq!(defaults["id"], Value::Null);
    assert_eq!(defaults["logo_text"], "DE GENERACION ELECTRONICA S.A.");
    assert_eq!(defaults["tenant_id"], tenant.as_str());

    let (status, saved) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&settings_body(&company_id)),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    assert!(saved["id"].is_string());
    assert_eq!(
        (saved["page_width"].as_f64(), saved["copy_label"].as_str()),
        (Some(80.0), Some("ORIGINAL"))
    );
    let (_, read) = send(get()).await;
    assert_eq!(read, saved, "what was saved is what is read");
    let (_, again) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&settings_body(&company_id)),
    )
    .await;
    assert_eq!(
        (again["id"].clone(), again["updated_at"].clone()),
        (saved["id"].clone(), saved["updated_at"].clone()),
        "an unchanged save changes nothing"
    );

    let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0];
    jpeg.resize(600 * 1024, 7);
    for (logo, code) in [
        (
            format!(
                "data:image/jpeg;base64,{}",
                base64::engine::general_purpose::STANDARD.encode(&jpeg)
            ),
            "logo_too_large",
        ),
        ("data:image/png;base64,iVBORw0KGgo=".to_owned(), "invalid_logo"),
    ] {
        let mut body = settings_body(&company_id);
        body["logo_image_data_url"] = json!(logo);
        body["show_logo"] = json!(true);
        let (status, err) = send(
            app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
                .json(&body),
        )
        .await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["details"]["errors"][0]["code"], code);
    }
    let mut small = settings_body(&company_id);
    jpeg.truncate(20_000);
    small["logo_image_data_url"] = json!(format!(
        "data:image/jpeg;base64,{}",
        base64::engine::general_purpose::STANDARD.encode(&jpeg)
    ));
    let (status, _) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&small),
    )
    .await;
    assert_eq!(status, 200);
    let mut bad_page = settings_body(&company_id);
    bad_page["page_width"] = json!(5);
    let (status, err) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&bad_page),
    )
    .await;
    assert_eq!(
        (status, err["details"]["errors"][0]["field"].as_str()),
        (400, Some("page_width"))
    );
    let mut missing = settings_body(&company_id);
    missing.as_object_mut().expect("object").remove("footer_note");
    let (status, _) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&missing),
    )
    .await;
    assert_eq!(status, 400);
    let (status, _) = send(app.as_key(Method::GET, "/v1/print-settings", &key, &tenant)).await;
    assert_eq!(status, 400, "company_id is required");

    let (other, other_key) = app.tenant("globex").await;
    let (status, _) = send(app.as_key(
        Method::GET,
        &format!("/v1/print-settings?company_id={company_id}"),
        &other_key,
        &other,
    ))
    .await;
    assert_eq!(status, 404, "another tenant's company");
    let (status, _) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &other_key, &other)
            .json(&settings_body(&company_id)),
    )
    .await;
    assert_eq!(status, 404);
    let (_, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &key, &tenant)
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    let viewer = viewer["key"].as_str().expect("key").to_owned();
    let (status, _) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &viewer, &tenant)
            .json(&settings_body(&company_id)),
    )
    .await;
    assert_eq!(status, 403);
    app.stop().await;
}

async fn company_with_print_settings(app: &TestApp) -> (String, String, String) {
    let (tenant, key) = app.tenant("acme").await;
    let (_, company) = send(
        app.as_key(Method::POST, "/v1/companies", &key, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    (tenant, key, company["id"].as_str().expect("id").to_owned())
}

/// Issue 26, item 7: a PUT names every missing, unknown and mistyped field in one answer.
#[tokio::test]
async fn a_print_settings_put_names_every_problem_at_once() {
    let app = TestApp::spawn().await;
    let (tenant, key, company_id) = company_with_print_settings(&app).await;
    let put = |body: Value| {
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&body)
    };
    let (status, err) = send(put(json!({"company_id": company_id}))).await;
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("validation_error")),
        "{err}"
    );
    let fields: Vec<(&str, &str)> = err["details"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap_or(""),
                e["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            ("business_activity", "required"),
            ("copy_label", "required"),
            ("footer_note", "required"),
            ("logo_text", "required"),
            ("show_copy_label", "required"),
            ("show_item_tax", "required"),
            ("show_logo", "required"),
            ("show_payment_terms", "required"),
        ],
        "{err}"
    );

    let mut body = settings_body(&company_id);
    body.as_object_mut().expect("object").remove("footer_note");
    body["show_logo"] = json!("yes");
    body["copy_label"] = json!("COPY");
    body["logo_txt"] = json!("ACME");
    let (status, err) = send(put(body)).await;
    assert_eq!(status, 400, "{err}");
    let fields: Vec<(&str, &str)> = err["details"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap_or(""),
                e["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            ("copy_label", "invalid_enum"),
            ("footer_note", "required"),
            ("logo_txt", "unknown_field"),
            ("show_logo", "invalid_type"),
        ],
        "{err}"
    );
    app.stop().await;
}

/// Issue 26, item 7: the GET answer sent back by PUT is accepted: its read-only fields are
/// ignored, the settings saved.
#[tokio::test]
async fn the_print_settings_get_answer_can_be_put_back_as_it_came() {
    let app = TestApp::spawn().await;
    let (tenant, key, company_id) = company_with_print_settings(&app).await;
    let get = || {
        app.as_key(
            Method::GET,
            &format!("/v1/print-settings?company_id={company_id}"),
            &key,
            &tenant,
        )
    };
    // The defaults, never saved: id and times are null.
    let (_, mut defaults) = send(get()).await;
    defaults["footer_note"] = json!("Gracias");
    let (status, saved) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&defaults),
    )
    .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["footer_note"], "Gracias");
    assert!(
        saved["id"].is_string() && saved["created_at"].is_string(),
        "{saved}"
    );

    // A saved one, with every read-only field set: sent back with a change, it saves the change.
    let (_, mut read) = send(get()).await;
    read["logo_text"] = json!("ACME S.A.");
    read["tenant_id"] = json!(uuid::Uuid::now_v7());
    let (status, again) = send(
        app.as_key(Method::PUT, "/v1/print-settings", &key, &tenant)
            .json(&read),
    )
    .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (
            &again["logo_text"],
            &again["id"],
            &again["created_at"],
            &again["tenant_id"]
        ),
        (
            &json!("ACME S.A."),
            &saved["id"],
            &saved["created_at"],
            &json!(tenant)
        ),
        "read-only fields are ignored"
    );
    app.stop().await;
}

/// Issue 26, item 7: PATCH changes only the fields sent, checked as PUT checks them, with PUT's
/// role.
#[tokio::test]
async fn a_print_settings_patch_changes_only_the_fields_sent() {
    let app = TestApp::spawn().await;
    let (tenant, key, company_id) = company_with_print_settings(&app).await;
    let patch = |key: &str, body: Value| {
        app.as_key(Method::PATCH, "/v1/print-settings", key, &tenant)
            .json(&body)
    };

    // Before any save: the defaults, with the change.
    let (status, first) = send(patch(&key, json!({"company_id": company_id, "page_width": 80}))).await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (
            first["page_width"].as_f64(),
            &first["logo_text"],
            &first["copy_label"]
        ),
        (
            Some(80.0),
            &json!("DE GENERACION ELECTRONICA S.A."),
            &json!("ORIGINAL")
        ),
        "{first}"
    );
    assert!(first["id"].is_string(), "saved: {first}");

    let (status, second) = send(patch(
        &key,
        json!({"company_id": company_id, "footer_note": "Gracias", "copy_label": "COPIA", "created_at": "ignored"}),
    ))
    .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(
        (
            second["page_width"].as_f64(),
            &second["footer_note"],
            &second["copy_label"],
            &second["id"]
        ),
        (Some(80.0), &json!("Gracias"), &json!("COPIA"), &first["id"]),
        "the first change stays: {second}"
    );
    let (_, read) = send(app.as_key(
        Method::GET,
        &format!("/v1/print-settings?company_id={company_id}"),
        &key,
        &tenant,
    ))
    .await;
    assert_eq!(read, second, "what PATCH answers is what GET reads");

    // A null clears an optional setting; a required one cannot be null.
    let (status, cleared) = send(patch(&key, json!({"company_id": company_id, "page_width": null}))).await;
    assert_eq!((status, &cleared["page_width"]), (200, &Value::Null), "{cleared}");

    // Every problem at once, and the settings' own rules as PUT has them.
    let (status, err) = send(patch(
        &key,
        json!({"company_id": company_id, "show_logo": null, "colour": "red", "page_height": "297"}),
    ))
    .await;
    assert_eq!(status, 400, "{err}");
    let fields: Vec<(&str, &str)> = err["details"]["errors"]
        .as_array()
        .expect("errors")
        .iter()
        .map(|e| {
            (
                e["field"].as_str().unwrap_or(""),
                e["code"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        fields,
        vec![
            ("colour", "unknown_field"),
            ("page_height", "invalid_type"),
            ("show_logo", "invalid_type"),
        ],
        "{err}"
    );
    let (status, err) = send(patch(&key, json!({"company_id": company_id, "page_width": 5}))).await;
    assert_eq!(
        (status, err["details"]["errors"][0]["code"].as_str()),
        (400, Some("out_of_range")),
        "{err}"
    );
    let (status, err) = send(patch(&key, json!({"footer_note": "x"}))).await;
    assert_eq!(
        (status, err["details"]["errors"][0]["field"].as_str()),
        (400, Some("company_id")),
        "{err}"
    );

    // PUT's role: a viewer may not.
    let (_, viewer) = send(
        app.as_key(Method::POST, "/v1/api-keys", &key, &tenant)
            .json(&json!({"name": "v", "role": "viewer"})),
    )
    .await;
    let viewer = viewer["key"].as_str().expect("key").to_owned();
    let (status, _) = send(patch(
        &viewer,
        json!({"company_id": company_id, "footer_note": "x"}),
    ))
    .await;
    assert_eq!(status, 403);
    app.stop().await;
}

/// Issue 26, item 7: the print settings bodies are typed in the OpenAPI document, PATCH included.
#[tokio::test]
async fn the_print_settings_bodies_are_typed_in_the_openapi_document() {
    let app = TestApp::spawn().await;
    let doc: Value = app.get("/openapi.json").await.json().await.expect("json");
    let path = &doc["paths"]["/v1/print-settings"];
    let body =
        |method: &str| path[method]["requestBody"]["content"]["application/json"]["schema"]["$ref"].clone();
    assert_eq!(
        body("put"),
        json!("#/components/schemas/PrintSettingsRequest"),
        "{path}"
    );
    assert_eq!(
        body("patch"),
        json!("#/components/schemas/PrintSettingsPatch"),
        "{path}"
    );
    let schemas = &doc["components"]["schemas"];
    let put = &schemas["PrintSettingsRequest"];
    let patch = &schemas["PrintSettingsPatch"];
    assert_eq!(put["properties"], patch["properties"], "the same fields");
    for field in [
        "company_id",
        "logo_text",
        "copy_label",
        "show_logo",
        "page_width",
        "template_elements",
    ] {
        assert!(put["properties"][field].is_object(), "{field}: {put}");
    }
    assert_eq!(put["properties"]["created_at"]["readOnly"], json!(true), "{put}");
    assert_eq!(put["additionalProperties"], json!(false));
    assert!(put["required"].as_array().is_some_and(|r| r.len() == 9), "{put}");
    assert_eq!(patch["required"], json!(["company_id"]));
    assert!(path["patch"]["x-kuatia-roles"].is_array(), "{path}");
    app.stop().await;
}

#[tokio::test]
async fn a_company_scoped_key_sees_and_writes_only_its_company() {
    let app = TestApp::spawn().await;
    let (tenant, owner) = app.tenant("acme").await;
    let (_, mine) = send(
        app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body("80069563-1")),
    )
    .await;
    let (_, theirs) = send(
        app.as_key(Method::POST, "/v1/companies", &owner, &tenant)
            .json(&TestApp::company_body("80013884-8")),
    )
    .await;
    let (mine, theirs) = (
        mine["id"].as_str().expect("id").to_owned(),
        theirs["id"].as_str().expect("id").to_owned(),
    );
    let (status, scoped) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "branch office", "role": "admin", "company_id": mine})),
    )
    .await;
    assert_eq!(status, 201, "{scoped}");
    assert_eq!(scoped["company_id"], mine.as_str());
    let scoped = scoped["key"].as_str().expect("key").to_owned();

    let (_, list) = send(app.as_key(Method::GET, "/v1/companies", &scoped, &tenant)).await;
    let ids: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(ids, vec![mine.as_str()]);
    let (status, _) = send(
        app.as_key(
            Method::PATCH,
            &format!("/v1/companies/{theirs}"),
            &scoped,
            &tenant,
        )
        .json(&json!({"phone": "1"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = send(
        app.as_key(Method::PATCH, &format!("/v1/companies/{mine}"), &scoped, &tenant)
            .json(&json!({"phone": "0981 111 111"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/branches", &scoped, &tenant)
            .json(&json!({"company_id": theirs, "code": "001", "name": "x"})),
    )
    .await;
    assert_eq!(status, 404);
    let (status, branch) = send(
        app.as_key(Method::POST, "/v1/branches", &scoped, &tenant)
            .json(&json!({"code": "001", "name": "Central"})),
    )
    .await;
    assert_eq!(
        (status, branch["company_id"].as_str()),
        (201, Some(mine.as_str())),
        "the key's company is the default"
    );
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/companies", &scoped, &tenant)
            .json(&TestApp::company_body("80002201-7")),
    )
    .await;
    assert_eq!(status, 403);
    let (status, _) = send(
        app.as_key(Method::POST, "/v1/api-keys", &scoped, &tenant)
            .json(&json!({"name": "x", "role": "viewer"})),
    )
    .await;
    assert_eq!(status, 403, "a scoped key cannot mint keys");
    let (status, err) = send(
        app.as_key(Method::POST, "/v1/api-keys", &owner, &tenant)
            .json(&json!({"name": "ghost", "role": "viewer", "company_id": uuid::Uuid::now_v7()})),
    )
    .await;
    assert_eq!((status, err["code"].as_str()), (400, Some("configuration_error")));
    app.stop().await;
}
