//! The setup wizard over plain HTTP: a new tenant's owner goes from nothing to an accepted
//! invoice through the console's pages only (the simulator as SIFEN): a mistake at each step is
//! said beside its field with what was typed kept, the place is chosen from SET's tables, the
//! certificate's checks are shown, the KuDE preview carries the print settings, leaving and
//! coming back continues at the first step not done, and the same pages edit. A viewer is
//! refused the wizard. The browser drives the same pages in `console_browser`.

use std::time::Duration;

use kuatia_infrastructure::selfsigned::SelfSigned;
use kuatia_infrastructure::sifen_sim::{self, SimConfig};
use kuatia_tests::TestApp;

use crate::console::{Answer, Visitor, hidden, input_value, post_fields};

const PASSWORD: &str = "a long enough secret";
const PFX_PASSWORD: &str = "firma 2026 pass";

/// The error said beside field `name`, if any.
pub(crate) fn field_error(html: &str, name: &str) -> Option<String> {
    let marker = format!("id=\"e-{name}\">");
    let at = html.find(&marker)? + marker.len();
    html[at..].split('<').next().map(str::to_owned)
}

fn location(answer: &Answer) -> &str {
    answer.location.as_deref().unwrap_or_default()
}

/// A service with a SIFEN simulator, a new tenant with nothing configured and its owner and
/// viewer.
pub(crate) async fn new_tenant() -> (TestApp, sifen_sim::RunningSimulator, String, String) {
    let sim = sifen_sim::start("127.0.0.1:0", SimConfig::default())
        .await
        .expect("simulator");
    let app = TestApp::spawn_with(|c| {
        c.insecure_cookies = true;
        c.rate_limit_per_key = 100_000;
    })
    .await;
    let (tenant, key) = app.tenant("nueva").await;
    crate::identity::join(&app, &tenant, &key, "duena@example.com.py", "owner").await;
    crate::identity::join(&app, &tenant, &key, "consulta@example.com.py", "viewer").await;
    (app, sim, tenant, key)
}

/// The company's fields, as typed by hand.
fn company_form(csrf: &str, ruc: &str) -> Vec<(&'static str, String)> {
    vec![
        ("csrf", csrf.to_owned()),
        ("action", "save".to_owned()),
        ("ruc", ruc.to_owned()),
        ("legal_name", "DE GENERACION ELECTRONICA S.A.".to_owned()),
        ("trade_name", String::new()),
        ("taxpayer_type", "legal_entity".to_owned()),
        ("tax_regime_code", "8".to_owned()),
        ("address", "Avda. Mcal. López".to_owned()),
        ("house_number", "1234".to_owned()),
        ("department_code", "12".to_owned()),
        ("district_code", "159".to_owned()),
        ("city_code", "5946".to_owned()),
        ("phone", "021 000 000".to_owned()),
        ("email", "facturas@example.com.py".to_owned()),
        ("activity_code", "62010".to_owned()),
        ("activity_description", "Programación informática".to_owned()),
    ]
}

fn with(
    mut fields: Vec<(&'static str, String)>,
    name: &'static str,
    value: &str,
) -> Vec<(&'static str, String)> {
    for f in &mut fields {
        if f.0 == name {
            f.1 = value.to_owned();
        }
    }
    fields
}

#[tokio::test]
async fn a_new_tenant_goes_through_the_wizard_from_nothing_to_an_accepted_invoice() {
    let (app, sim, tenant, key) = new_tenant().await;
    let mut v = Visitor::new(&app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;

    // Home offers the wizard; /console/setup starts at the company.
    let home = v.get("/console").await;
    assert!(home.body.contains("id=\"setup-needed\""), "{}", home.body);
    let start = v.get("/console/setup").await;
    assert_eq!((start.status, location(&start)), (303, "/console/setup/company"));
    let page = v.get("/console/setup/company").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("aria-current=\"step\""));
    let csrf = hidden(&page.body, "csrf");

    // Districts and cities follow the department chosen (the form is drawn again, kept).
    let places = post(
        &mut v,
        "/console/setup/company",
        &[
            ("csrf", csrf.clone()),
            ("action", "places".into()),
            ("legal_name", "Lo que escribí".into()),
            ("department_code", "12".into()),
        ],
    )
    .await;
    assert_eq!(places.status, 200, "{}", places.body);
    assert!(
        places.body.contains("<option value=\"159\">LUQUE</option>"),
        "Central's districts"
    );
    assert_eq!(input_value(&places.body, "f-legal_name"), "Lo que escribí");
    let luque = post(
        &mut v,
        "/console/setup/company",
        &[
            ("csrf", csrf.clone()),
            ("action", "places".into()),
            ("department_code", "12".into()),
            ("district_code", "159".into()),
        ],
    )
    .await;
    assert!(
        luque.body.contains("<option value=\"5946\">LUQUE</option>"),
        "Luque's cities"
    );

    // A wrong check digit: said beside the RUC, everything typed kept, nothing saved.
    let wrong = post(
        &mut v,
        "/console/setup/company",
        &with(company_form(&csrf, "80069563-1"), "ruc", "80069563-2"),
    )
    .await;
    assert_eq!(wrong.status, 200, "{}", wrong.body);
    let said = field_error(&wrong.body, "ruc").expect("the RUC's error");
    assert!(said.contains('1'), "names the right digit: {said}");
    assert!(wrong.body.contains("id=\"setup-problems\" role=\"alert\""));
    assert_eq!(input_value(&wrong.body, "f-ruc"), "80069563-2");
    assert_eq!(input_value(&wrong.body, "f-address"), "Avda. Mcal. López");
    assert!(
        wrong
            .body
            .contains("<option value=\"5946\" selected>LUQUE</option>")
    );
    // A city of another department: the API's refusal, by field.
    let elsewhere = post(
        &mut v,
        "/console/setup/company",
        &with(company_form(&csrf, "80069563-1"), "city_code", "1"),
    )
    .await;
    assert_eq!(elsewhere.status, 200, "{}", elsewhere.body);
    assert!(
        field_error(&elsewhere.body, "city_code").is_some()
            || field_error(&elsewhere.body, "district_code").is_some(),
        "{}",
        elsewhere.body
    );

    let saved = post(
        &mut v,
        "/console/setup/company",
        &company_form(&csrf, "80069563-1"),
    )
    .await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/branch"),
        "{}",
        saved.body
    );

    // Leaving and coming back continues at the branch.
    let back = v.get("/console/setup").await;
    assert_eq!(location(&back), "/console/setup/branch");

    // Branch and point: a bad point code is the point's, the branch is kept and used again.
    let branch = |point: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("branch_code", "001".into()),
            ("branch_name", "Casa matriz".into()),
            ("branch_address", String::new()),
            ("branch_house_number", String::new()),
            ("branch_department_code", String::new()),
            ("branch_district_code", String::new()),
            ("branch_city_code", String::new()),
            ("point_code", point.into()),
            ("point_name", "Caja 1".into()),
        ]
    };
    let refused = post(&mut v, "/console/setup/branch", &branch("12A")).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(
        field_error(&refused.body, "point_code").is_some(),
        "{}",
        refused.body
    );
    assert_eq!(input_value(&refused.body, "f-point_name"), "Caja 1");
    let saved = post(&mut v, "/console/setup/branch", &branch("001")).await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/certificate"),
        "{}",
        saved.body
    );
    let branches = app
        .as_key(reqwest::Method::GET, "/v1/branches", &key, &tenant)
        .send()
        .await
        .expect("branches")
        .json::<serde_json::Value>()
        .await
        .expect("json");
    assert_eq!(
        branches.as_array().map(Vec::len),
        Some(1),
        "one branch, not two: {branches}"
    );

    // The certificate: a wrong password is said, then the right one shows the checks.
    let pfx = SelfSigned::for_ruc("DE GENERACION ELECTRONICA S.A.", "80069563-1", 365)
        .pfx(PFX_PASSWORD)
        .expect("pfx");
    let upload = |password: &'static str| {
        let csrf = csrf.clone();
        let pfx = pfx.clone();
        (csrf, pfx, password)
    };
    let (c, p, pw) = upload("not the password");
    let refused = v
        .post_multipart(
            "/console/setup/certificate",
            &[
                ("csrf", None, c.as_bytes()),
                ("pfx", Some("firma.pfx"), &p),
                ("password", None, pw.as_bytes()),
                ("label", None, b"firma 2026"),
            ],
        )
        .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(field_error(&refused.body, "pfx").is_some(), "{}", refused.body);
    assert_eq!(input_value(&refused.body, "f-label"), "firma 2026");
    let (c, p, pw) = upload(PFX_PASSWORD);
    let saved = v
        .post_multipart(
            "/console/setup/certificate",
            &[
                ("csrf", None, c.as_bytes()),
                ("pfx", Some("firma.pfx"), &p),
                ("password", None, pw.as_bytes()),
                ("label", None, b"firma 2026"),
            ],
        )
        .await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/certificate"),
        "{}",
        saved.body
    );
    let checks = v.get("/console/setup/certificate").await;
    assert!(
        checks
            .body
            .contains("RUC del titular: el certificado es del RUC 80069563-1"),
        "{}",
        checks.body
    );
    assert!(
        checks.body.contains("Vigencia: válido hasta el "),
        "{}",
        checks.body
    );
    assert!(
        checks.body.contains("Cadena: autofirmado (es su propia raíz)"),
        "the chain said: {}",
        checks.body
    );
    assert!(
        !checks.body.contains("the certificate") && !checks.body.contains("valid until"),
        "every check said in Spanish: {}",
        checks.body
    );
    assert!(
        !checks.body.contains("check-bad"),
        "every check green: {}",
        checks.body
    );

    // The SIFEN channel: a date that is none is said beside it; then saved, to the simulator.
    let channel_page = v.get("/console/setup/channel").await;
    let certificate = input_selected(&channel_page.body, "f-certificate_id");
    let sifen = |from: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("environment", "test".into()),
            ("endpoint", sim.base_url()),
            ("timbrado", "12345678".into()),
            ("timbrado_valid_from", from.into()),
            ("csc_id", "0001".into()),
            ("csc", "ABCD0000000000000000000000000000".into()),
            ("certificate_id", certificate.clone()),
        ]
    };
    let refused = post(&mut v, "/console/setup/channel/sifen", &sifen("2024-13-45")).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(
        field_error(&refused.body, "timbrado_valid_from").is_some(),
        "{}",
        refused.body
    );
    assert_eq!(input_value(&refused.body, "f-timbrado"), "12345678");
    let saved = post(&mut v, "/console/setup/channel/sifen", &sifen("2024-01-01")).await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/channel"),
        "{}",
        saved.body
    );
    // The CSC is never written back into the page.
    let again = v.get("/console/setup/channel").await;
    assert!(!again.body.contains("ABCD0000000000000000000000000000"));

    // Print settings: the footer and the ticket size, and the preview carries them.
    let saved = v
        .post_multipart(
            "/console/setup/print",
            &[
                ("csrf", None, csrf.as_bytes()),
                ("logo_text", None, b"DE GENERACION"),
                ("business_activity", None, "Programación".as_bytes()),
                ("footer_note", None, "Gracias por su compra".as_bytes()),
                ("paper", None, b"a4"),
            ],
        )
        .await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/print"),
        "{}",
        saved.body
    );
    let print = v.get("/console/setup/print").await;
    assert!(print.body.contains("id=\"kude-preview\""), "{}", print.body);
    assert_eq!(input_value(&print.body, "f-footer_note"), "Gracias por su compra");
    let preview = v.get("/console/setup/print/preview").await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    assert_eq!(preview.headers["content-type"], "application/pdf");
    assert_eq!(preview.headers["x-frame-options"], "SAMEORIGIN");
    assert!(
        print.headers["content-security-policy"]
            .to_str()
            .unwrap_or_default()
            .contains("frame-src 'self'")
    );

    // Ready: every check green, and the way to the first invoice.
    let start = v.get("/console/setup").await;
    assert_eq!(location(&start), "/console/setup/ready");
    let ready = v.get("/console/setup/ready").await;
    assert!(!ready.body.contains("check-bad"), "{}", ready.body);
    // The checklist names the records, in Spanish, never by id.
    for said in [
        "Empresa con RUC 80069563-1",
        "Sucursal 001 · Casa matriz",
        "Punto de expedición 001-001 · Caja 1",
        "Certificado firma 2026, válido por ",
        "CSC 0001 cargado",
    ] {
        assert!(ready.body.contains(said), "{said}: {}", ready.body);
    }
    assert!(
        ready.body.contains("href=\"/console/issue\" id=\"setup-next\""),
        "{}",
        ready.body
    );
    assert!(!v.get("/console").await.body.contains("id=\"setup-needed\""));

    // The first invoice, by hand, accepted by the simulator.
    let form = v.get("/console/issue").await;
    assert_eq!(form.status, 200, "{}", form.body);
    let fields = vec![
        ("csrf", hidden(&form.body, "csrf")),
        ("key", hidden(&form.body, "key")),
        ("company", hidden(&form.body, "company")),
        ("type", "invoice".to_owned()),
        ("condition", "cash".to_owned()),
        ("buyer_ruc", "80013884-8".to_owned()),
        ("buyer_name", "CLIENTE S.A.".to_owned()),
        ("description", "Licencia anual".to_owned()),
        ("quantity", "1".to_owned()),
        ("unit_price", "110.000".to_owned()),
        ("tax_rate", "10".to_owned()),
        ("action", "issue".to_owned()),
    ];
    let issued = post_fields(&mut v, &fields).await;
    assert_eq!(issued.status, 303, "{}", issued.body);
    let doc = location(&issued).rsplit('/').next().expect("id").to_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let status = app
            .as_key(
                reqwest::Method::GET,
                &format!("/v1/documents/{doc}/status"),
                &key,
                &tenant,
            )
            .send()
            .await
            .expect("status")
            .json::<serde_json::Value>()
            .await
            .expect("json");
        if status["status"] == "accepted" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not accepted: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    app.stop().await;
}

#[tokio::test]
async fn the_same_pages_edit_and_a_viewer_is_refused_the_wizard() {
    let (app, _sim, tenant, key) = new_tenant().await;
    let mut v = Visitor::new(&app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let csrf = hidden(&v.get("/console/setup/company").await.body, "csrf");
    // Steps after the company send to it while there is none.
    let early = v.get("/console/setup/channel").await;
    assert_eq!(location(&early), "/console/setup/company");
    let saved = post(
        &mut v,
        "/console/setup/company",
        &company_form(&csrf, "80069563-1"),
    )
    .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    // Editing: the RUC is fixed, the rest changes through the same form.
    let page = v.get("/console/setup/company").await;
    assert_eq!(input_value(&page.body, "f-ruc"), "80069563-1");
    assert!(page.body.contains("readonly"));
    assert!(
        page.body
            .contains("<option value=\"5946\" selected>LUQUE</option>"),
        "the stored city chosen"
    );
    let edited = post(
        &mut v,
        "/console/setup/company",
        &with(company_form(&csrf, "80069563-1"), "phone", "0981 000 000"),
    )
    .await;
    assert_eq!(
        (edited.status, location(&edited)),
        (303, "/console/setup/company"),
        "{}",
        edited.body
    );
    assert_eq!(
        input_value(&v.get("/console/setup/company").await.body, "f-phone"),
        "0981 000 000"
    );
    // A branch and its point, then edited from the links beside them: the code stays.
    let made = post(
        &mut v,
        "/console/setup/branch",
        &[
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("branch_code", "001".into()),
            ("branch_name", "Casa matriz".into()),
            ("point_code", "001".into()),
            ("point_name", String::new()),
        ],
    )
    .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let listing = v.get("/console/setup/branch").await.body;
    let edit_branch = link_href(&listing, "edit-branch-001");
    let edit_point = link_href(&listing, "edit-point-001-001");
    let page = v.get(&edit_branch).await;
    assert_eq!(page.status, 200);
    assert_eq!(input_value(&page.body, "f-branch_code"), "001");
    assert!(
        page.body
            .contains("id=\"f-branch_code\" name=\"branch_code\" type=\"text\" value=\"001\" readonly")
    );
    assert_eq!(input_value(&page.body, "f-branch_name"), "Casa matriz");
    let branch_form = |name: &str, department: &str, city: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("branch_code", "999".into()),
            ("branch_name", name.into()),
            ("branch_address", "Ruta 2".into()),
            ("branch_house_number", "10".into()),
            ("branch_department_code", department.into()),
            ("branch_district_code", String::new()),
            ("branch_city_code", city.into()),
            ("branch_default", "1".into()),
        ]
    };
    // No name, and a city of another department: each said at its field, what was typed kept.
    let refused = post(&mut v, &edit_branch, &branch_form(" ", "12", "5946")).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert_eq!(
        field_error(&refused.body, "branch_name").as_deref(),
        Some("Escribí entre 1 y 255 caracteres."),
        "the API's refusal in Spanish"
    );
    assert_eq!(input_value(&refused.body, "f-branch_address"), "Ruta 2");
    let refused = post(&mut v, &edit_branch, &branch_form("Sucursal Luque", "12", "6")).await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(
        field_error(&refused.body, "branch_department_code")
            .is_some_and(|e| e.starts_with("AGUARA es del departamento CONCEPCION")),
        "{}",
        refused.body
    );
    let saved = post(&mut v, &edit_branch, &branch_form("Sucursal Luque", "12", "5946")).await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/branch"),
        "{}",
        saved.body
    );
    let rest = |path: &'static str| {
        let app = &app;
        let (key, tenant) = (&key, &tenant);
        async move {
            app.as_key(reqwest::Method::GET, path, key, tenant)
                .send()
                .await
                .expect("get")
                .json::<serde_json::Value>()
                .await
                .expect("json")
        }
    };
    let branches = rest("/v1/branches").await;
    assert_eq!(
        (
            branches[0]["code"].as_str(),
            branches[0]["name"].as_str(),
            branches[0]["address"].as_str(),
            branches[0]["city_name"].as_str(),
            branches[0]["is_default"].as_bool()
        ),
        (
            Some("001"),
            Some("Sucursal Luque"),
            Some("Ruta 2"),
            Some("LUQUE"),
            Some(true)
        ),
        "the code sent is ignored: {branches}"
    );
    assert!(
        v.get(&edit_branch)
            .await
            .body
            .contains("<option value=\"5946\" selected>LUQUE</option>"),
        "the stored city chosen"
    );
    let page = v.get(&edit_point).await;
    assert_eq!(input_value(&page.body, "f-point_code"), "001");
    let saved = post(
        &mut v,
        &edit_point,
        &[
            ("csrf", csrf.clone()),
            ("point_code", "002".into()),
            ("point_name", "Caja central".into()),
            ("point_default", "1".into()),
        ],
    )
    .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let points = rest("/v1/issuance-points").await;
    assert_eq!(
        (
            points[0]["code"].as_str(),
            points[0]["name"].as_str(),
            points[0]["is_default"].as_bool()
        ),
        (Some("001"), Some("Caja central"), Some(true))
    );
    assert_eq!(
        v.get(&format!("/console/setup/branch/{}", uuid::Uuid::now_v7()))
            .await
            .status,
        404
    );
    let forged = post(
        &mut v,
        &edit_point,
        &[("csrf", "wrong".into()), ("point_name", "x".into())],
    )
    .await;
    assert_eq!(forged.status, 403);

    // A forged form is refused.
    let forged = post(
        &mut v,
        "/console/setup/company",
        &with(company_form("wrong", "80069563-1"), "phone", "1"),
    )
    .await;
    assert_eq!(forged.status, 403);
    // English.
    let mut en = Visitor::new(&app.base);
    en.log_in("duena@example.com.py", PASSWORD).await;
    en.get("/console/lang?to=en&next=/console").await;
    assert!(
        en.get("/console/setup/branch")
            .await
            .body
            .contains("Branch and issuance point")
    );

    let mut viewer = Visitor::new(&app.base);
    viewer.log_in("consulta@example.com.py", PASSWORD).await;
    assert_eq!(viewer.get("/console/setup/company").await.status, 403);
    assert_eq!(viewer.get("/console/setup").await.status, 403);
    assert!(!viewer.get("/console").await.body.contains("/console/setup"));
    app.stop().await;
}

/// The `href` of the link with id `id`.
fn link_href(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id} in {html}"));
    let start = html[..at].rfind("href=\"").expect("an href") + "href=\"".len();
    html[start..]
        .split('"')
        .next()
        .unwrap_or_default()
        .replace("&#x2F;", "/")
}

/// Posts a form of owned values.
async fn post(v: &mut Visitor, path: &str, fields: &[(&'static str, String)]) -> Answer {
    let refs: Vec<(&str, &str)> = fields.iter().map(|(k, value)| (*k, value.as_str())).collect();
    v.post(path, &refs).await
}

/// The value of the selected option of select `id`.
fn input_selected(html: &str, id: &str) -> String {
    let at = html
        .find(&format!("id=\"{id}\""))
        .unwrap_or_else(|| panic!("no #{id}"));
    let rest = &html[at..];
    let rest = &rest[..rest_end(rest)];
    let option = rest
        .split("<option ")
        .find(|o| o.contains(" selected"))
        .or_else(|| rest.split("<option ").nth(1))
        .expect("an option");
    option
        .split("value=\"")
        .nth(1)
        .and_then(|v| v.split('"').next())
        .unwrap_or_default()
        .to_owned()
}

fn rest_end(rest: &str) -> usize {
    rest.find("</select>").unwrap_or(rest.len())
}

#[tokio::test]
async fn an_autoimpresor_taxpayer_skips_the_certificate_and_sets_its_authorization_up() {
    let (app, _sim, _tenant, _key) = new_tenant().await;
    let mut v = Visitor::new(&app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let csrf = hidden(&v.get("/console/setup/company").await.body, "csrf");
    let saved = post(
        &mut v,
        "/console/setup/company",
        &company_form(&csrf, "80069563-1"),
    )
    .await;
    assert_eq!(saved.status, 303, "{}", saved.body);
    let saved = post(
        &mut v,
        "/console/setup/branch",
        &[
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("branch_code", "001".into()),
            ("branch_name", "Casa matriz".into()),
            ("point_code", "001".into()),
        ],
    )
    .await;
    assert_eq!(location(&saved), "/console/setup/certificate");
    // No certificate: the step offers to skip it.
    let certificate = v.get("/console/setup/certificate").await;
    assert!(
        certificate
            .body
            .contains("href=\"/console/setup/channel\" id=\"setup-skip\"")
    );
    let channel = v.get("/console/setup/channel").await;
    let point = input_selected(&channel.body, "f-point_id");
    let autoimpresor = |valid_to: &str, end: &str| {
        vec![
            ("csrf", csrf.clone()),
            ("action", "save".into()),
            ("authorization", "AUT-2026-0001".into()),
            ("a_timbrado", "12345678".into()),
            ("valid_from", "2026-01-01".into()),
            ("valid_to", valid_to.into()),
            ("point_id", point.clone()),
            ("range_start", "1".into()),
            ("range_end", end.into()),
            ("next_number", String::new()),
            ("report_endpoint", "http://127.0.0.1:9/recibidos".into()),
        ]
    };
    // A validity that ends before it starts and a range that ends before it starts: both said.
    let refused = post(
        &mut v,
        "/console/setup/channel/autoimpresor",
        &autoimpresor("2025-12-31", "0"),
    )
    .await;
    assert_eq!(refused.status, 200, "{}", refused.body);
    assert!(
        field_error(&refused.body, "valid_to").is_some(),
        "{}",
        refused.body
    );
    assert!(
        field_error(&refused.body, "range_end").is_some(),
        "{}",
        refused.body
    );
    assert_eq!(input_value(&refused.body, "f-authorization"), "AUT-2026-0001");
    // Letters where a number goes: said before the API is asked.
    let letters = post(
        &mut v,
        "/console/setup/channel/autoimpresor",
        &autoimpresor("2027-12-31", "mil"),
    )
    .await;
    assert_eq!(
        field_error(&letters.body, "range_end").as_deref(),
        Some("Escribí solo números.")
    );
    let saved = post(
        &mut v,
        "/console/setup/channel/autoimpresor",
        &autoimpresor("2027-12-31", "5000"),
    )
    .await;
    assert_eq!(
        (saved.status, location(&saved)),
        (303, "/console/setup/channel"),
        "{}",
        saved.body
    );
    let page = v.get("/console/setup/channel").await;
    assert!(page.body.contains("Canal autoimpresor"), "{}", page.body);
    assert_eq!(
        input_value(&page.body, "f-range_end"),
        "5000",
        "the stored channel fills its form"
    );
    // The certificate step is done for an autoimpresor-only taxpayer: next is printing.
    assert_eq!(location(&v.get("/console/setup").await), "/console/setup/print");
    app.stop().await;
}
