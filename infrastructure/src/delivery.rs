//! Delivery of a document to its customer or issuer (docs/webhooks.md), the adapters behind the
//! delivery process manager's ports (`kuatia_application::process::delivery`): email over SMTP
//! (lettre, rustls) is its [`Mailer`](delivery::Mailer), WhatsApp through the Cloud API
//! (`/{phone-number-id}/media` then `/{phone-number-id}/messages`) and Telegram through the Bot
//! API (`sendDocument`) are [`ChatSender`](delivery::ChatSender)s. Base URLs and tokens come from
//! configuration, so a test points them at a local double that speaks the same HTTP API.

use async_trait::async_trait;
use kuatia_application::process::delivery::{self, Message, NotSent};
use lettre::message::header::ContentType;
use lettre::message::{Attachment as MailAttachment, Mailbox, MultiPart, SinglePart};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use std::time::Duration;

/// Sends email through one SMTP server.
#[derive(Clone)]
pub struct SmtpMailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl std::fmt::Debug for SmtpMailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpMailer")
            .field("from", &self.from)
            .finish_non_exhaustive()
    }
}

impl SmtpMailer {
    /// A mailer for `smtp://[user:pass@]host[:port]` (plain; add `?tls=required` for STARTTLS)
    /// or `smtps://…` (TLS), sending as `from`.
    pub fn from_url(url: &str, from: &str) -> Result<Self, String> {
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| format!("KUATIA_SMTP_URL: {e}"))?
            .timeout(Some(Duration::from_secs(30)))
            .build();
        let from = from.parse().map_err(|e| format!("KUATIA_SMTP_FROM: {e}"))?;
        Ok(Self { transport, from })
    }

    /// Sends one message to every address; returns the server's answer. A permanent SMTP answer
    /// (5xx: no such mailbox, domain refused) or an address that is not one is a permanent
    /// [`NotSent`]; a server that is down or answers 4xx, a transient one.
    pub async fn send(&self, to: &[String], message: &Message) -> Result<String, NotSent> {
        let mut builder = lettre::Message::builder()
            .from(self.from.clone())
            .subject(message.subject.clone());
        for address in to {
            builder = builder.to(address
                .parse()
                .map_err(|e| NotSent::permanent(format!("the address {address:?}: {e}")))?);
        }
        let mut parts = MultiPart::mixed().singlepart(SinglePart::plain(message.text.clone()));
        for file in &message.attachments {
            let kind = ContentType::parse(&file.content_type).unwrap_or(ContentType::TEXT_PLAIN);
            parts =
                parts.singlepart(MailAttachment::new(file.filename.clone()).body(file.bytes.clone(), kind));
        }
        let email = builder
            .multipart(parts)
            .map_err(|e| NotSent::permanent(e.to_string()))?;
        let response = self.transport.send(email).await.map_err(|e| {
            let mut text = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                text.push_str(": ");
                text.push_str(&s.to_string());
                source = s.source();
            }
            NotSent {
                reason: text,
                permanent: e.is_permanent(),
            }
        })?;
        Ok(response.message().collect::<Vec<_>>().join(" "))
    }
}

#[async_trait]
impl delivery::Mailer for SmtpMailer {
    async fn send(&self, to: &[String], message: &Message) -> Result<String, NotSent> {
        SmtpMailer::send(self, to, message).await
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("an HTTP client")
}

async fn answer(response: Result<reqwest::Response, reqwest::Error>) -> Result<serde_json::Value, String> {
    let response = response.map_err(|e| e.to_string())?;
    let status = response.status();
    let body = response.text().await.map_err(|e| e.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "{status}: {}",
            body.chars().take(300).collect::<String>()
        ));
    }
    serde_json::from_str(&body).map_err(|e| format!("an unreadable answer: {e}"))
}

/// Sends documents through a Telegram bot.
#[derive(Debug, Clone)]
pub struct Telegram {
    base: String,
    token: String,
    client: reqwest::Client,
}

impl Telegram {
    /// A bot at `base` (`https://api.telegram.org`) with its token.
    pub fn new(base: &str, token: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            client: client(),
        }
    }

    /// `sendDocument` per attachment (the first carries the caption); returns the message ids.
    pub async fn send(&self, chat_id: &str, message: &Message) -> Result<String, String> {
        let mut ids = Vec::new();
        for (i, file) in message.attachments.iter().enumerate() {
            let part = reqwest::multipart::Part::bytes(file.bytes.clone())
                .file_name(file.filename.clone())
                .mime_str(&file.content_type)
                .map_err(|e| e.to_string())?;
            let mut form = reqwest::multipart::Form::new()
                .text("chat_id", chat_id.to_owned())
                .part("document", part);
            if i == 0 {
                form = form.text("caption", message.subject.clone());
            }
            let url = format!("{}/bot{}/sendDocument", self.base, self.token);
            let body = answer(self.client.post(url).multipart(form).send().await).await?;
            if body["ok"] != serde_json::Value::Bool(true) {
                return Err(format!("Telegram refused: {body}"));
            }
            ids.push(body["result"]["message_id"].to_string());
        }
        Ok(format!("telegram message {}", ids.join(", ")))
    }
}

#[async_trait]
impl delivery::ChatSender for Telegram {
    async fn send(&self, to: &str, message: &Message) -> Result<String, String> {
        Telegram::send(self, to, message).await
    }
}

/// Sends documents through the WhatsApp Cloud API.
#[derive(Debug, Clone)]
pub struct WhatsApp {
    base: String,
    token: String,
    phone_number_id: String,
    client: reqwest::Client,
}

impl WhatsApp {
    /// The API at `base` (`https://graph.facebook.com/v21.0`), sending from `phone_number_id`.
    pub fn new(base: &str, token: &str, phone_number_id: &str) -> Self {
        Self {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            phone_number_id: phone_number_id.to_owned(),
            client: client(),
        }
    }

    /// Uploads each attachment (`/media`) and sends it as a `document` message; returns the
    /// message ids.
    pub async fn send(&self, phone: &str, message: &Message) -> Result<String, String> {
        let to: String = phone.chars().filter(char::is_ascii_digit).collect();
        let mut ids = Vec::new();
        for file in &message.attachments {
            let part = reqwest::multipart::Part::bytes(file.bytes.clone())
                .file_name(file.filename.clone())
                .mime_str(&file.content_type)
                .map_err(|e| e.to_string())?;
            let form = reqwest::multipart::Form::new()
                .text("messaging_product", "whatsapp")
                .text("type", file.content_type.clone())
                .part("file", part);
            let uploaded = answer(
                self.client
                    .post(format!("{}/{}/media", self.base, self.phone_number_id))
                    .bearer_auth(&self.token)
                    .multipart(form)
                    .send()
                    .await,
            )
            .await?;
            let media_id = uploaded["id"]
                .as_str()
                .ok_or_else(|| format!("WhatsApp gave no media id: {uploaded}"))?
                .to_owned();
            let sent = answer(
                self.client
                    .post(format!("{}/{}/messages", self.base, self.phone_number_id))
                    .bearer_auth(&self.token)
                    .json(&serde_json::json!({
                        "messaging_product": "whatsapp",
                        "recipient_type": "individual",
                        "to": to,
                        "type": "document",
                        "document": {"id": media_id, "filename": file.filename, "caption": message.subject},
                    }))
                    .send()
                    .await,
            )
            .await?;
            ids.push(
                sent["messages"][0]["id"]
                    .as_str()
                    .ok_or_else(|| format!("WhatsApp gave no message id: {sent}"))?
                    .to_owned(),
            );
        }
        Ok(format!("whatsapp message {}", ids.join(", ")))
    }
}

#[async_trait]
impl delivery::ChatSender for WhatsApp {
    async fn send(&self, to: &str, message: &Message) -> Result<String, String> {
        WhatsApp::send(self, to, message).await
    }
}
