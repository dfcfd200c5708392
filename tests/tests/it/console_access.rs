//! The console's access page over plain HTTP: API keys made, shown once, used over REST and
//! revoked; people invited, their roles changed, removed; the tenant's last owner kept; the
//! role table of the API obeyed. The browser drives the same page in `console_browser`.

use crate::console::{Visitor, flash, hidden, input_value, row_id, service_with_an_accepted_invoice};
use reqwest::Method;
use serde_json::Value;

const PASSWORD: &str = "a long enough secret";

async fn rest_status(f: &kuatia_tests::Simulated, key: &str) -> u16 {
    f.app
        .as_key(Method::GET, "/v1/documents?limit=1", key, &f.tenant)
        .send()
        .await
        .expect("send")
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_key_made_in_the_console_is_shown_once_works_over_rest_and_stops_once_revoked_there() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let page = v.get("/console/access").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("Claves de API") && page.body.contains("aria-current=\"page\">Acceso"));
    let csrf = hidden(&page.body, "csrf");

    // Made: the answer itself shows the key once, never cached.
    let made = v
        .post(
            "/console/access/keys",
            &[
                ("csrf", &csrf),
                ("name", "Tienda en línea"),
                ("role", "issuer"),
                ("company", ""),
                ("expires", ""),
            ],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(made.headers["cache-control"], "no-store");
    assert!(
        made.body.contains("Clave «Tienda en línea» creada"),
        "{}",
        made.body
    );
    let key = input_value(&made.body, "once-value");
    assert!(key.len() > 20, "{key}");
    assert_eq!(rest_status(&f, &key).await, 200, "the new key works over REST");

    // Listed with its role and prefix, the secret nowhere on the page.
    let again = v.get("/console/access").await;
    assert!(!again.body.contains(&key), "the key is shown only once");
    let id = row_id(&again.body, "key", "Tienda en línea");
    let listed: Value = kuatia_tests::send(f.req(Method::GET, "/v1/api-keys")).await.1;
    let record = listed
        .as_array()
        .and_then(|keys| keys.iter().find(|k| k["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{listed}"));
    assert_eq!(record["role"], "issuer");
    assert!(
        again
            .body
            .contains(&format!("{}…", record["prefix"].as_str().expect("prefix")))
    );

    // Revoked there: the key stops working.
    let revoked = v
        .post(&format!("/console/access/keys/{id}/revoke"), &[("csrf", &csrf)])
        .await;
    assert_eq!(
        (revoked.status, revoked.location.as_deref()),
        (303, Some("/console/access"))
    );
    let after = v.get("/console/access").await;
    assert!(flash(&after).contains("Clave revocada"), "{}", after.body);
    assert_eq!(rest_status(&f, &key).await, 401, "a revoked key is refused");
    // Without the form's token nothing is revoked.
    assert_eq!(
        v.post(
            &format!("/console/access/keys/{id}/revoke"),
            &[("csrf", "forged")]
        )
        .await
        .status,
        403
    );
    assert_eq!(rest_status(&f, &f.key).await, 200);
    f.app.stop().await;
}

#[tokio::test]
async fn a_refused_key_form_says_why_in_spanish_and_keeps_what_was_typed() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    crate::identity::join(&f.app, &f.tenant, &f.key, "admin@example.com.py", "admin").await;
    let key_ids = || async {
        let listed = kuatia_tests::send(f.req(Method::GET, "/v1/api-keys")).await.1;
        listed
            .as_array()
            .map(|keys| keys.iter().map(|k| k["id"].clone()).collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let before = key_ids().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let csrf = hidden(&v.get("/console/access").await.body, "csrf");
    // A name of spaces only.
    let blank = v
        .post(
            "/console/access/keys",
            &[
                ("csrf", &csrf),
                ("name", "   "),
                ("role", "viewer"),
                ("company", ""),
                ("expires", ""),
            ],
        )
        .await;
    assert_eq!(blank.status, 200, "{}", blank.body);
    assert!(blank.body.contains("id=\"access-problem\""), "{}", blank.body);
    assert!(
        blank
            .body
            .contains("El nombre de la clave tiene de 1 a 100 caracteres"),
        "{}",
        blank.body
    );
    assert!(
        blank.body.contains("<option value=\"viewer\" selected>"),
        "the role chosen is kept"
    );
    // A last day already past.
    let past = v
        .post(
            "/console/access/keys",
            &[
                ("csrf", &csrf),
                ("name", "ERP viejo"),
                ("role", "issuer"),
                ("company", ""),
                ("expires", "2020-01-31"),
            ],
        )
        .await;
    assert!(
        past.body.contains("La fecha de vencimiento ya pasó"),
        "{}",
        past.body
    );
    assert!(past.body.contains("value=\"ERP viejo\"") && past.body.contains("value=\"2020-01-31\""));
    // Not a date at all.
    let nonsense = v
        .post(
            "/console/access/keys",
            &[
                ("csrf", &csrf),
                ("name", "ERP"),
                ("role", "issuer"),
                ("company", ""),
                ("expires", "31/01/2020"),
            ],
        )
        .await;
    assert!(
        nonsense.body.contains("La fecha de vencimiento no es válida"),
        "{}",
        nonsense.body
    );

    // An admin is not offered the owner role, and a forged one is refused in words.
    let mut admin = Visitor::new(&f.app.base);
    admin.log_in("admin@example.com.py", PASSWORD).await;
    let page = admin.get("/console/access").await;
    assert!(!page.body.contains("<option value=\"owner\""), "{}", page.body);
    let forged = admin
        .post(
            "/console/access/keys",
            &[
                ("csrf", &hidden(&page.body, "csrf")),
                ("name", "Dueño"),
                ("role", "owner"),
                ("company", ""),
                ("expires", ""),
            ],
        )
        .await;
    assert!(
        forged
            .body
            .contains("Solo un propietario puede crear una clave de propietario"),
        "{}",
        forged.body
    );
    assert_eq!(key_ids().await, before, "no key was made by a refused form");
    f.app.stop().await;
}

#[tokio::test]
async fn people_are_invited_given_roles_and_removed_in_the_console_and_the_last_owner_stays() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let page = v.get("/console/access").await;
    let mine = page
        .body
        .split("data-email=\"duena@example.com.py\"")
        .nth(1)
        .and_then(|row| row.split("</tr>").next())
        .unwrap_or_default();
    assert!(
        mine.contains("(vos)"),
        "the person's own row says so: {}",
        page.body
    );
    let csrf = hidden(&page.body, "csrf");
    // The API's member list names the people (what the page shows).
    let members = kuatia_tests::send(f.req(Method::GET, "/v1/memberships")).await.1;
    assert!(
        members
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m["email"] == "consulta@example.com.py")),
        "{members}"
    );

    // Invited without a mail server: the link to pass on is shown once.
    let invited = v
        .post(
            "/console/access/members",
            &[
                ("csrf", &csrf),
                ("email", "nuevo@example.com.py"),
                ("role", "issuer"),
            ],
        )
        .await;
    assert_eq!(invited.status, 200, "{}", invited.body);
    assert!(
        input_value(&invited.body, "once-value").contains("/invitations/"),
        "{}",
        invited.body
    );
    let listed = v.get("/console/access").await;
    assert!(
        listed
            .body
            .contains("class=\"invitation\" data-email=\"nuevo@example.com.py\"")
    );
    // Inviting a bad address keeps it in the form.
    let bad = v
        .post(
            "/console/access/members",
            &[("csrf", &csrf), ("email", "not an email"), ("role", "issuer")],
        )
        .await;
    assert!(
        bad.body.contains("Esa dirección de correo no es válida"),
        "{}",
        bad.body
    );
    assert!(bad.body.contains("value=\"not an email\""), "{}", bad.body);

    // A role changed; the last owner refused, in words, and still an owner.
    let viewer = row_id(&listed.body, "member", "consulta@example.com.py");
    let me = row_id(&listed.body, "member", "duena@example.com.py");
    let changed = v
        .post(
            &format!("/console/access/members/{viewer}/role"),
            &[("csrf", &csrf), ("role", "auditor")],
        )
        .await;
    assert_eq!(changed.status, 303);
    assert!(flash(&v.get("/console/access").await).contains("Rol cambiado"));
    let lowered = v
        .post(
            &format!("/console/access/members/{me}/role"),
            &[("csrf", &csrf), ("role", "admin")],
        )
        .await;
    assert_eq!(lowered.status, 303);
    let said = v.get("/console/access").await;
    assert!(flash(&said).contains("último propietario"), "{}", said.body);
    let members = kuatia_tests::send(f.req(Method::GET, "/v1/memberships")).await.1;
    let role_of = |email: &str| {
        members
            .as_array()
            .and_then(|m| m.iter().find(|m| m["email"] == email))
            .map(|m| m["role"].clone())
    };
    assert_eq!(role_of("consulta@example.com.py"), Some("auditor".into()));
    assert_eq!(role_of("duena@example.com.py"), Some("owner".into()));

    // The auditor sees the keys but manages nothing.
    let mut auditor = Visitor::new(&f.app.base);
    auditor.log_in("consulta@example.com.py", PASSWORD).await;
    let seen = auditor.get("/console/access").await;
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert!(!seen.body.contains("id=\"key-form\"") && !seen.body.contains("id=\"invite-form\""));
    let tried = auditor
        .post(
            "/console/access/keys",
            &[
                ("csrf", &hidden(&seen.body, "csrf")),
                ("name", "x"),
                ("role", "viewer"),
                ("company", ""),
                ("expires", ""),
            ],
        )
        .await;
    assert_eq!(
        tried.status, 403,
        "the API's role table refuses it: {}",
        tried.body
    );

    // Removed: the person's session no longer reaches the tenant.
    let removed = v
        .post(
            &format!("/console/access/members/{viewer}/remove"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(removed.status, 303);
    assert_eq!(auditor.get("/console/access").await.status, 403);
    // The invitation revoked.
    let invitation = listed
        .body
        .split("/console/access/invitations/")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .expect("the invitation's form")
        .to_owned();
    let gone = v
        .post(
            &format!("/console/access/invitations/{invitation}/revoke"),
            &[("csrf", &csrf)],
        )
        .await;
    assert_eq!(gone.status, 303);
    assert!(
        !v.get("/console/access")
            .await
            .body
            .contains("data-email=\"nuevo@example.com.py\"")
    );
    f.app.stop().await;
}

#[tokio::test]
async fn a_viewer_has_no_access_page() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("consulta@example.com.py", PASSWORD).await;
    let home = v.get("/console").await;
    assert!(!home.body.contains("href=\"/console/access\""), "no menu entry");
    assert_eq!(v.get("/console/access").await.status, 403);
    let made = v
        .post(
            "/console/access/keys",
            &[
                ("csrf", &hidden(&home.body, "csrf")),
                ("name", "x"),
                ("role", "viewer"),
                ("company", ""),
                ("expires", ""),
            ],
        )
        .await;
    assert_eq!(made.status, 403);
    f.app.stop().await;
}

#[tokio::test]
async fn a_person_renames_changes_the_password_and_signs_out_everywhere_else() {
    let (f, _doc) = service_with_an_accepted_invoice().await;
    let mut v = Visitor::new(&f.app.base);
    v.log_in("duena@example.com.py", PASSWORD).await;
    let mut elsewhere = Visitor::new(&f.app.base);
    elsewhere.log_in("duena@example.com.py", PASSWORD).await;
    let sessions = |body: &str| -> Vec<Value> {
        serde_json::from_str::<Value>(body)
            .expect("JSON")
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    let listed = v.get("/v1/auth/sessions").await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let live = sessions(&listed.body);
    assert!(live.len() >= 2, "{live:?}");
    assert_eq!(live.iter().filter(|s| s["current"] == true).count(), 1);
    assert!(
        !listed.body.contains(&v.cookie("kuatia_session")),
        "never a cookie"
    );
    // An API key has no person behind it.
    let (status, _) = kuatia_tests::send(f.req(Method::GET, "/v1/auth/me")).await;
    assert_eq!(status, 404);

    // The name.
    let page = v.get("/console/account").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("id=\"account-email\">duena@example.com.py<"));
    let csrf = hidden(&page.body, "csrf");
    let named = v
        .post(
            "/console/account/name",
            &[("csrf", &csrf), ("name", "  Ana María  ")],
        )
        .await;
    assert_eq!(named.status, 303);
    assert!(flash(&v.get("/console/account").await).contains("Nombre guardado"));
    let me: Value = serde_json::from_str(&v.get("/v1/auth/me").await.body).expect("JSON");
    assert_eq!(me["name"], "Ana María");

    // The password: refusals said above the form, nothing changed.
    let change = |current: &'static str, new: &'static str, repeat: &'static str| {
        [("current", current), ("new", new), ("repeat", repeat)]
    };
    for (fields, words) in [
        (
            change(
                "not the password",
                "another long passphrase",
                "another long passphrase",
            ),
            "La contraseña actual no es correcta",
        ),
        (
            change(PASSWORD, "another long passphrase", "another long passphrasx"),
            "no son iguales",
        ),
        (change(PASSWORD, "short", "short"), "demasiado corta"),
    ] {
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend(fields.iter().map(|(k, v)| (*k, *v)));
        let refused = v.post("/console/account/password", &form).await;
        assert_eq!(refused.status, 200, "{}", refused.body);
        assert!(refused.body.contains(words), "{words}: {}", refused.body);
        assert!(
            !refused.body.contains("another long passphrase"),
            "no password written back"
        );
    }
    assert_eq!(elsewhere.get("/console").await.status, 200, "still in elsewhere");

    // Changed: every other session ends, this one goes on; the new password logs in.
    let mut form = vec![("csrf", csrf.as_str())];
    form.extend(change(
        PASSWORD,
        "another long passphrase",
        "another long passphrase",
    ));
    let changed = v.post("/console/account/password", &form).await;
    assert_eq!(changed.status, 303, "{}", changed.body);
    assert!(flash(&v.get("/console/account").await).contains("Contraseña cambiada"));
    assert_eq!(v.get("/console").await.status, 200, "this session goes on");
    assert_eq!(
        elsewhere.get("/console").await.status,
        303,
        "the other session ended"
    );
    let old = kuatia_tests::send(
        f.app
            .client
            .post(format!("{}/v1/auth/login", f.app.base))
            .json(&serde_json::json!({"email": "duena@example.com.py", "password": PASSWORD})),
    )
    .await;
    assert_eq!(old.0, 401, "the old password no longer logs in");
    elsewhere
        .log_in("duena@example.com.py", "another long passphrase")
        .await;

    // Sign out everywhere else.
    let ended = v.post("/console/account/sessions/end", &[("csrf", &csrf)]).await;
    assert_eq!(ended.status, 303);
    assert!(flash(&v.get("/console/account").await).contains("Sesiones cerradas en otros lugares: 1"));
    assert_eq!(elsewhere.get("/console").await.status, 303);
    assert_eq!(sessions(&v.get("/v1/auth/sessions").await.body).len(), 1);
    assert_eq!(
        v.post("/console/account/sessions/end", &[("csrf", "forged")])
            .await
            .status,
        403
    );
    f.app.stop().await;
}
