//! A small W3C WebDriver client that drives headless Chromium through Debian's `chromedriver`,
//! for tests that look at the service's pages as a person's browser does.
//!
//! [`Browser::start`] spawns `chromedriver` on a free port and opens one session on it; it gives
//! `None` when the browser is not installed, except in CI (`CI=true`), where that is an error.
//! [`Browser::axe`] runs axe-core on the current page; `npm ci` in `tests/browser/` installs it.
//! Nothing here needs more than the crates the tests already use: the protocol is JSON over HTTP.

use anyhow::{Context, anyhow, bail};
use base64::Engine;
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The key under which WebDriver names an element in its answers and arguments.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Where `chromedriver` is unless `KUATIA_CHROMEDRIVER` names another.
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Where Chromium is unless `KUATIA_CHROMIUM` names another.
const CHROMIUM: &str = "/usr/bin/chromium";

/// How long a script run by [`Browser::execute_async`] or a page load may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(30);

/// axe-core's browser bundle, as `npm ci` in `tests/browser/` installs it.
const AXE_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/browser/node_modules/axe-core/axe.min.js"
);

/// Whether this run is CI's, where a missing browser or axe-core is an error rather than a skip.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// An error that the WebDriver server answered with: its HTTP status, its error code (such as
/// `no such element`) and its message.
#[derive(Debug, Clone)]
pub struct WebDriverError {
    /// The HTTP status of the answer.
    pub status: u16,
    /// The WebDriver error code, such as `no such element` or `javascript error`.
    pub error: String,
    /// The server's explanation.
    pub message: String,
}

impl std::fmt::Display for WebDriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WebDriver error {} ({}): {}",
            self.error, self.status, self.message
        )
    }
}

impl std::error::Error for WebDriverError {}

/// Whether an error is WebDriver's answer with the given error code.
fn is_webdriver_error(err: &anyhow::Error, code: &str) -> bool {
    err.downcast_ref::<WebDriverError>()
        .is_some_and(|e| e.error == code)
}

/// A headless Chromium driven over WebDriver: the `chromedriver` process it spawned and the one
/// session opened on it. Dropping it ends the session and kills `chromedriver`; [`Browser::quit`]
/// does the same from async code.
pub struct Browser {
    http: reqwest::Client,
    driver_url: String,
    session_id: String,
    driver: Option<Child>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("driver_url", &self.driver_url)
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Starts a browser whose language is Paraguayan Spanish (`es-PY`), as
    /// [`Browser::start_with_language`] does.
    pub async fn start() -> anyhow::Result<Option<Browser>> {
        Self::start_with_language("es-PY").await
    }

    /// Starts `chromedriver` on a free port and opens a headless Chromium session whose interface
    /// language (`--lang`) and `Accept-Language` are `lang` (then its primary language, so
    /// `es-PY` asks for `es-PY,es`). Gives `None`, after saying so on standard error, when
    /// `chromedriver` or Chromium is not installed and this is not CI; in CI that is an error.
    pub async fn start_with_language(lang: &str) -> anyhow::Result<Option<Browser>> {
        let driver_path = std::env::var("KUATIA_CHROMEDRIVER").unwrap_or_else(|_| CHROMEDRIVER.into());
        let chromium = std::env::var("KUATIA_CHROMIUM").unwrap_or_else(|_| CHROMIUM.into());
        for (what, path) in [("chromedriver", &driver_path), ("Chromium", &chromium)] {
            if !Path::new(path).exists() {
                if in_ci() {
                    bail!(
                        "{what} is not installed at {path}; CI needs it (apt-get install chromium chromium-driver)"
                    );
                }
                eprintln!(
                    "notice: {what} is not installed at {path}; skipping the browser test \
                     (apt-get install chromium chromium-driver)"
                );
                return Ok(None);
            }
        }
        let http = reqwest::Client::builder()
            .timeout(SCRIPT_TIMEOUT + Duration::from_secs(30))
            .build()
            .context("build the WebDriver HTTP client")?;
        // The free port is found by binding and letting go of it, which another process could
        // take in between: try a few times.
        let mut last_error = None;
        for _ in 0..3 {
            match spawn_driver(&http, &driver_path).await {
                Ok((driver, driver_url)) => {
                    let mut browser = Browser {
                        http,
                        driver_url,
                        session_id: String::new(),
                        driver: Some(driver),
                    };
                    browser.session_id = browser.new_session(&chromium, lang).await?;
                    return Ok(Some(browser));
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow!("chromedriver did not start")))
    }

    /// Opens the WebDriver session and gives its id.
    async fn new_session(&self, chromium: &str, lang: &str) -> anyhow::Result<String> {
        let primary = lang.split(['-', '_']).next().unwrap_or(lang);
        let accept_languages = if primary == lang {
            lang.to_owned()
        } else {
            format!("{lang},{primary}")
        };
        let capabilities = json!({
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "pageLoadStrategy": "normal",
                    "timeouts": {
                        "script": SCRIPT_TIMEOUT.as_millis() as u64,
                        "pageLoad": SCRIPT_TIMEOUT.as_millis() as u64,
                        "implicit": 0
                    },
                    "goog:chromeOptions": {
                        "binary": chromium,
                        "args": [
                            "--headless=new",
                            "--no-sandbox",
                            "--disable-dev-shm-usage",
                            "--disable-gpu",
                            "--window-size=1280,900",
                            format!("--lang={lang}")
                        ],
                        "prefs": {"intl.accept_languages": accept_languages}
                    }
                }
            }
        });
        let url = format!("{}/session", self.driver_url);
        let value = send(self.http.post(&url).json(&capabilities), "POST", &url).await?;
        value["sessionId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| anyhow!("chromedriver opened a session without an id: {value}"))
    }

    /// Sends one command of this session and gives the `value` of the answer.
    async fn command(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Value> {
        let url = format!("{}/session/{}{path}", self.driver_url, self.session_id);
        let mut request = self.http.request(method.clone(), &url);
        if let Some(body) = body {
            request = request.json(&body);
        }
        send(request, method.as_str(), &url).await
    }

    /// `GET` of a session command.
    async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.command(reqwest::Method::GET, path, None).await
    }

    /// `POST` of a session command with a JSON body.
    async fn post(&self, path: &str, body: Value) -> anyhow::Result<Value> {
        self.command(reqwest::Method::POST, path, Some(body)).await
    }

    /// Opens `url` and waits for the page to load.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.post("/url", json!({ "url": url }))
            .await
            .with_context(|| format!("open {url}"))?;
        Ok(())
    }

    /// The address of the current page.
    pub async fn current_url(&self) -> anyhow::Result<String> {
        string(self.get("/url").await?, "the current URL")
    }

    /// The current page's title.
    pub async fn title(&self) -> anyhow::Result<String> {
        string(self.get("/title").await?, "the title")
    }

    /// The current page's DOM serialised as HTML (as it is now, not as the server sent it).
    pub async fn page_source(&self) -> anyhow::Result<String> {
        string(self.get("/source").await?, "the page source")
    }

    /// Goes back one page in the history, as the browser's back button does.
    pub async fn back(&self) -> anyhow::Result<()> {
        self.post("/back", json!({})).await?;
        Ok(())
    }

    /// The first element matching a CSS selector; the error names the selector and the page
    /// when none does.
    pub async fn find(&self, css: &str) -> anyhow::Result<Element<'_>> {
        match self
            .post("/element", json!({"using": "css selector", "value": css}))
            .await
        {
            Ok(value) => Element::from_value(self, &value),
            Err(e) if is_webdriver_error(&e, "no such element") => {
                let url = self
                    .current_url()
                    .await
                    .unwrap_or_else(|_| "an unknown page".into());
                Err(anyhow!("no element matches `{css}` on {url}"))
            }
            Err(e) => Err(e.context(format!("find `{css}`"))),
        }
    }

    /// Every element matching a CSS selector, in document order (none is not an error).
    pub async fn find_all(&self, css: &str) -> anyhow::Result<Vec<Element<'_>>> {
        let value = self
            .post("/elements", json!({"using": "css selector", "value": css}))
            .await
            .with_context(|| format!("find all `{css}`"))?;
        elements(self, value)
    }

    /// Whether any element matches a CSS selector.
    pub async fn exists(&self, css: &str) -> anyhow::Result<bool> {
        Ok(!self.find_all(css).await?.is_empty())
    }

    /// Waits until an element matches a CSS selector, looking every 100 ms, and gives the first;
    /// the error names the selector, the page and how long it waited.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> anyhow::Result<Element<'_>> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(first) = self.find_all(css).await?.into_iter().next() {
                return Ok(first);
            }
            if Instant::now() >= deadline {
                let url = self
                    .current_url()
                    .await
                    .unwrap_or_else(|_| "an unknown page".into());
                bail!("no element matched `{css}` on {url} within {timeout:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Runs a script as the body of a function (`arguments` holds `args`; elements are passed
    /// as [`Element::to_json`]) and gives what it returns. WebDriver's scripts are not subject
    /// to the page's Content-Security-Policy.
    pub async fn execute(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        self.post("/execute/sync", json!({"script": script, "args": args}))
            .await
    }

    /// Runs an asynchronous script: its last argument is the callback to call with the result,
    /// which must come within 30 seconds.
    pub async fn execute_async(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        self.post("/execute/async", json!({"script": script, "args": args}))
            .await
    }

    /// A PNG of the viewport.
    pub async fn screenshot_png(&self) -> anyhow::Result<Vec<u8>> {
        let encoded = string(self.get("/screenshot").await?, "the screenshot")?;
        base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .context("decode the screenshot's base64")
    }

    /// Writes a PNG of the viewport to `path`, creating its folder when needed.
    pub async fn save_screenshot(&self, path: impl AsRef<Path>) -> anyhow::Result<()> {
        let path = path.as_ref();
        let png = self.screenshot_png().await?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
        }
        std::fs::write(path, png).with_context(|| format!("write {}", path.display()))
    }

    /// Resizes the window to `width` by `height` CSS pixels (the window, of which the viewport
    /// is the part below the browser's own bars).
    pub async fn set_window_size(&self, width: u32, height: u32) -> anyhow::Result<()> {
        self.post("/window/rect", json!({"width": width, "height": height}))
            .await?;
        Ok(())
    }

    /// The cookies visible to the current page, as WebDriver gives them (`name`, `value`,
    /// `path`, `domain`, `secure`, `httpOnly`, `sameSite`, `expiry`).
    pub async fn cookies(&self) -> anyhow::Result<Vec<Value>> {
        match self.get("/cookie").await? {
            Value::Array(cookies) => Ok(cookies),
            other => bail!("WebDriver gave cookies that are not a list: {other}"),
        }
    }

    /// Deletes every cookie of the current page's domain.
    pub async fn delete_all_cookies(&self) -> anyhow::Result<()> {
        self.command(reqwest::Method::DELETE, "/cookie", None).await?;
        Ok(())
    }

    /// Runs axe-core on the current page and gives its serious and critical violations (each
    /// as axe reports it: `id`, `impact`, `help`, `helpUrl`, `nodes`). axe-core comes from
    /// `tests/browser/node_modules` (`npm ci` there); without it this is an error in CI, and
    /// elsewhere a notice and no violations.
    pub async fn axe(&self) -> anyhow::Result<Vec<Value>> {
        let injected = self
            .execute(
                "return typeof window.axe === 'object' && typeof window.axe.run === 'function';",
                vec![],
            )
            .await?;
        if injected != Value::Bool(true) {
            let source = match std::fs::read_to_string(AXE_PATH) {
                Ok(source) => source,
                Err(e) => {
                    if in_ci() {
                        bail!("axe-core is not installed at {AXE_PATH} ({e}); run `npm ci` in tests/browser");
                    }
                    eprintln!(
                        "notice: axe-core is not installed at {AXE_PATH} ({e}); skipping the \
                         accessibility check (run `npm ci` in tests/browser)"
                    );
                    return Ok(Vec::new());
                }
            };
            // The bundle ends in a call on `window` that sets `window.axe`; run as a script body
            // it does so whatever the page's Content-Security-Policy says.
            let ready = self
                .execute(
                    &format!("{source}\n;return typeof window.axe === 'object';"),
                    vec![],
                )
                .await
                .context("inject axe-core")?;
            if ready != Value::Bool(true) {
                bail!("axe-core was injected but window.axe is missing ({ready})");
            }
        }
        let outcome = self
            .execute_async(
                "const done = arguments[arguments.length - 1];\
                 window.axe.run(document, {resultTypes: ['violations']})\
                   .then(r => done({violations: r.violations}),\
                         e => done({error: String(e && e.stack || e)}));",
                vec![],
            )
            .await
            .context("run axe-core")?;
        if let Some(error) = outcome.get("error") {
            bail!("axe-core failed: {}", error.as_str().unwrap_or_default());
        }
        let Some(Value::Array(violations)) = outcome.get("violations").cloned() else {
            bail!("axe-core gave no violations list: {outcome}");
        };
        Ok(violations
            .into_iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect())
    }

    /// Ends the session (which closes Chromium) and stops `chromedriver`.
    pub async fn quit(mut self) -> anyhow::Result<()> {
        let ended = self.command(reqwest::Method::DELETE, "", None).await.map(|_| ());
        self.session_id.clear();
        self.kill_driver();
        ended
    }

    /// Kills `chromedriver` and reaps it. Chromium outlives a killed `chromedriver` unless its
    /// session was ended, so the whole process group that `chromedriver` leads (Chromium's
    /// processes are in it) is killed too.
    fn kill_driver(&mut self) {
        if let Some(mut driver) = self.driver.take() {
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", driver.id())])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            let _ = driver.kill();
            let _ = driver.wait();
        }
    }
}

impl Drop for Browser {
    /// Ends the session when [`Browser::quit`] did not, then kills `chromedriver`. Drop runs
    /// inside the test's runtime, which cannot block on itself: the request goes from a thread
    /// with a runtime and an HTTP client of its own.
    fn drop(&mut self) {
        if !self.session_id.is_empty() && self.driver.is_some() {
            let url = format!("{}/session/{}", self.driver_url, self.session_id);
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(client) = reqwest::Client::builder()
                        .timeout(Duration::from_secs(10))
                        .build()
                    {
                        let _ = client.delete(&url).send().await;
                    }
                });
            })
            .join();
        }
        self.kill_driver();
    }
}

/// A page element found by [`Browser::find`] and its kin, valid while its page is.
pub struct Element<'b> {
    browser: &'b Browser,
    id: String,
}

impl std::fmt::Debug for Element<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Element").field("id", &self.id).finish()
    }
}

impl<'b> Element<'b> {
    /// The element that a WebDriver answer names.
    fn from_value(browser: &'b Browser, value: &Value) -> anyhow::Result<Self> {
        let id = value[ELEMENT_KEY]
            .as_str()
            .ok_or_else(|| anyhow!("WebDriver gave something that is not an element: {value}"))?;
        Ok(Self {
            browser,
            id: id.to_owned(),
        })
    }

    /// The element as a script argument for [`Browser::execute`].
    pub fn to_json(&self) -> Value {
        json!({ ELEMENT_KEY: self.id })
    }

    /// `POST` of a command on this element.
    async fn post(&self, what: &str, body: Value) -> anyhow::Result<Value> {
        self.browser
            .post(&format!("/element/{}{what}", self.id), body)
            .await
    }

    /// `GET` of a command on this element.
    async fn get(&self, what: &str) -> anyhow::Result<Value> {
        self.browser.get(&format!("/element/{}{what}", self.id)).await
    }

    /// Clicks the element in its middle, scrolling it into view first, as a person would; a
    /// form is submitted by clicking its submit button.
    pub async fn click(&self) -> anyhow::Result<()> {
        self.post("/click", json!({})).await?;
        Ok(())
    }

    /// Types `text` into the element after what it already holds.
    pub async fn send_keys(&self, text: &str) -> anyhow::Result<()> {
        self.post("/value", json!({ "text": text })).await?;
        Ok(())
    }

    /// Empties an input or a text area.
    pub async fn clear(&self) -> anyhow::Result<()> {
        self.post("/clear", json!({})).await?;
        Ok(())
    }

    /// The element's text as rendered (what a person reads, without hidden parts).
    pub async fn text(&self) -> anyhow::Result<String> {
        string(self.get("/text").await?, "the element's text")
    }

    /// An HTML attribute of the element as the markup has it, `None` when absent.
    pub async fn attribute(&self, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self
            .get(&format!("/attribute/{name}"))
            .await?
            .as_str()
            .map(str::to_owned))
    }

    /// A DOM property of the element (such as `value` or `checked`), `null` when it has none.
    pub async fn property(&self, name: &str) -> anyhow::Result<Value> {
        self.get(&format!("/property/{name}")).await
    }

    /// Chooses the option whose value is `value` in this `<select>` by clicking it; the error
    /// lists the values there are when none matches.
    pub async fn select_by_value(&self, value: &str) -> anyhow::Result<()> {
        let options = elements(
            self.browser,
            self.post("/elements", json!({"using": "css selector", "value": "option"}))
                .await?,
        )?;
        let mut seen = Vec::new();
        for option in options {
            let this = option.property("value").await?;
            if this.as_str() == Some(value) {
                return option.click().await;
            }
            seen.push(this);
        }
        bail!("the select has no option of value {value:?}; it has {seen:?}")
    }
}

/// Spawns `chromedriver` on a free local port and waits until its `/status` says it is ready;
/// gives the process and its address.
async fn spawn_driver(http: &reqwest::Client, driver_path: &str) -> anyhow::Result<(Child, String)> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("find a free port")?
        .port();
    // Its own process group, which Chromium joins, so that [`Browser::kill_driver`] can end
    // them all.
    let mut driver = Command::new(driver_path)
        .arg(format!("--port={port}"))
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawn {driver_path}"))?;
    let url = format!("http://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Ok(Some(status)) = driver.try_wait() {
            bail!("{driver_path} exited at start with {status}");
        }
        let ready = http
            .get(format!("{url}/status"))
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        if let Ok(response) = ready
            && let Ok(body) = response.json::<Value>().await
            && body["value"]["ready"] == Value::Bool(true)
        {
            return Ok((driver, url));
        }
        if Instant::now() >= deadline {
            let _ = driver.kill();
            let _ = driver.wait();
            bail!("{driver_path} was not ready on port {port} within 15 s");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends a WebDriver request and gives the `value` of its answer, or the [`WebDriverError`] it
/// answered with.
async fn send(request: reqwest::RequestBuilder, method: &str, url: &str) -> anyhow::Result<Value> {
    let response = request
        .send()
        .await
        .with_context(|| format!("WebDriver {method} {url}"))?;
    let status = response.status().as_u16();
    let mut body: Value = response
        .json()
        .await
        .with_context(|| format!("WebDriver {method} {url}: an answer that is not JSON"))?;
    let value = body["value"].take();
    if (200..300).contains(&status) {
        return Ok(value);
    }
    Err(anyhow::Error::new(WebDriverError {
        status,
        error: value["error"].as_str().unwrap_or("unknown error").to_owned(),
        message: value["message"].as_str().unwrap_or_default().to_owned(),
    })
    .context(format!("WebDriver {method} {url}")))
}

/// The elements of a WebDriver answer that lists them.
fn elements(browser: &Browser, value: Value) -> anyhow::Result<Vec<Element<'_>>> {
    match value {
        Value::Array(items) => items.iter().map(|v| Element::from_value(browser, v)).collect(),
        other => bail!("WebDriver gave elements that are not a list: {other}"),
    }
}

/// The string that a WebDriver answer is.
fn string(value: Value, what: &str) -> anyhow::Result<String> {
    match value {
        Value::String(s) => Ok(s),
        other => bail!("WebDriver gave {what} as something other than a string: {other}"),
    }
}
