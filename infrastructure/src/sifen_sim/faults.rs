//! Fault injection: what the simulator does instead of (or after) answering normally.
//!
//! A fault is written as comma- (or `|`-) separated tokens: `latency=200ms` (also `2s`, or a
//! bare number of milliseconds) delays the answer; at most one action among `http500` (an HTML
//! 500 page), `fault` (a SOAP Fault), `0161` (SIFEN's "server unavailable" answer, nothing
//! processed), `timeout` (nothing processed, no answer), `drop` (processed and recorded, then
//! no answer), `0301` (a lot refused as not queued; other services ignore it) and any other
//! four-digit code (`0420`, `0362`, `1001`, `9999`: the operation answers with that code in its
//! own shape, nothing processed), so that every row of SIFEN's answers table
//! (`kuatia_domain::sifen::answers`) can be driven from a test.
//!
//! Faults come from the `X-Sim-Fault` header of a request, from the queue filled by
//! `POST /sim/faults`, or at random: per operation from `SimConfig::faults`
//! (`--fault siConsDE:0161:0.05`, [`RandomFault`]), then from the rates of `SimConfig`; a
//! header wins over the queue, the queue over chance.

use std::str::FromStr;
use std::time::Duration;

/// The header that carries a per-request fault.
pub const FAULT_HEADER: &str = "x-sim-fault";

/// What to do instead of answering normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultAction {
    /// `http500`: HTTP 500 with an HTML page, nothing processed.
    Http500,
    /// `fault`: HTTP 500 with a SOAP 1.2 Fault, nothing processed.
    SoapFault,
    /// `0161`: SIFEN's own "servidor momentáneamente sin respuesta", nothing processed.
    Unavailable,
    /// `timeout`: nothing processed and no answer (the connection is held until the client
    /// gives up or the simulator's hang time passes).
    Timeout,
    /// `drop`: processed and recorded (an approval counts), then no answer.
    Drop,
    /// `0301`: a lot is refused as "no encolado"; ignored by the other services.
    LotNotQueued,
    /// Any other four-digit code: the operation answers with it in its own shape (a DE or event
    /// "Rechazado" with it, a lot or question with it as `dCodRes`), nothing processed.
    Answer(u16),
}

impl FaultAction {
    /// The token that names it.
    pub fn token(self) -> String {
        match self {
            Self::Http500 => "http500".into(),
            Self::SoapFault => "fault".into(),
            Self::Unavailable => "0161".into(),
            Self::Timeout => "timeout".into(),
            Self::Drop => "drop".into(),
            Self::LotNotQueued => "0301".into(),
            Self::Answer(code) => format!("{code:04}"),
        }
    }
}

/// A fault drawn at random on one operation (or every one): `siConsDE:0161:0.05` answers 5 % of
/// siConsDE's requests with 0161; `*:drop:0.1` withholds 10 % of every operation's answers.
#[derive(Debug, Clone, PartialEq)]
pub struct RandomFault {
    /// The operation's name (`siConsDE`), `None` for every one.
    pub service: Option<String>,
    /// What happens.
    pub spec: FaultSpec,
    /// Probability (0–1) per request.
    pub rate: f64,
}

impl FromStr for RandomFault {
    type Err = String;

    /// `OPERATION:FAULT:RATE`, OPERATION a SIFEN service name or `*`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let parts: Vec<&str> = text.trim().split(':').collect();
        let [service, fault, rate] = parts.as_slice() else {
            return Err(format!(
                "expected OPERATION:FAULT:RATE (siConsDE:0161:0.05), not {text:?}"
            ));
        };
        let service = match service.trim() {
            "*" | "any" => None,
            name if crate::sifen_soap::Service::ALL
                .iter()
                .any(|s| s.name().eq_ignore_ascii_case(name)) =>
            {
                Some(name.to_owned())
            }
            name => return Err(format!("unknown SIFEN operation {name:?}")),
        };
        let spec: FaultSpec = fault.parse()?;
        if spec.action.is_none() {
            return Err(format!("{text:?} names no fault"));
        }
        let rate: f64 = rate
            .trim()
            .parse()
            .ok()
            .filter(|r: &f64| (0.0..=1.0).contains(r))
            .ok_or_else(|| format!("the rate of {text:?} must be between 0 and 1"))?;
        Ok(Self { service, spec, rate })
    }
}

/// A fault: an optional delay and an optional action.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultSpec {
    /// Added before the answer (or before the action).
    pub latency: Option<Duration>,
    /// What happens instead of a normal answer.
    pub action: Option<FaultAction>,
}

impl FaultSpec {
    /// Whether it changes nothing.
    pub fn is_none(&self) -> bool {
        self.latency.is_none() && self.action.is_none()
    }

    /// `self`, with the gaps filled from `other`.
    pub fn or(self, other: FaultSpec) -> FaultSpec {
        FaultSpec {
            latency: self.latency.or(other.latency),
            action: self.action.or(other.action),
        }
    }
}

fn duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Some(ms) = text.strip_suffix("ms") {
        return ms.trim().parse().ok().map(Duration::from_millis);
    }
    if let Some(s) = text.strip_suffix('s') {
        return s
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(Duration::from_secs_f64);
    }
    text.parse().ok().map(Duration::from_millis)
}

impl FromStr for FaultSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut spec = FaultSpec::default();
        for token in text
            .split([',', '|', ' ', ';'])
            .map(str::trim)
            .filter(|t| !t.is_empty())
        {
            let token = token.to_ascii_lowercase();
            if let Some(value) = token.strip_prefix("latency=") {
                spec.latency = Some(duration(value).ok_or_else(|| format!("not a duration: {value:?}"))?);
                continue;
            }
            let action = match token.as_str() {
                "http500" | "500" => FaultAction::Http500,
                "fault" | "soapfault" => FaultAction::SoapFault,
                "0161" | "unavailable" => FaultAction::Unavailable,
                "timeout" => FaultAction::Timeout,
                "drop" => FaultAction::Drop,
                "0301" => FaultAction::LotNotQueued,
                "none" => continue,
                code if code.len() == 4 && code.bytes().all(|b| b.is_ascii_digit()) => {
                    FaultAction::Answer(code.parse().map_err(|_| format!("not a code: {code}"))?)
                }
                other => return Err(format!("unknown fault {other:?}")),
            };
            if spec.action.is_some_and(|a| a != action) {
                return Err("at most one fault action at a time".into());
            }
            spec.action = Some(action);
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_headers_read_as_the_brief_writes_them() {
        assert_eq!(
            "latency=200ms".parse::<FaultSpec>().unwrap(),
            FaultSpec {
                latency: Some(Duration::from_millis(200)),
                action: None
            }
        );
        assert_eq!(
            "drop, latency=1.5s".parse::<FaultSpec>().unwrap(),
            FaultSpec {
                latency: Some(Duration::from_millis(1500)),
                action: Some(FaultAction::Drop)
            }
        );
        for (text, action) in [
            ("http500", FaultAction::Http500),
            ("0161", FaultAction::Unavailable),
            ("timeout", FaultAction::Timeout),
            ("0301", FaultAction::LotNotQueued),
            ("fault", FaultAction::SoapFault),
        ] {
            assert_eq!(text.parse::<FaultSpec>().unwrap().action, Some(action));
            assert_eq!(action.token().parse::<FaultSpec>().unwrap().action, Some(action));
        }
        assert_eq!(
            "0420".parse::<FaultSpec>().unwrap().action,
            Some(FaultAction::Answer(420))
        );
        assert_eq!(FaultAction::Answer(362).token(), "0362");
        assert!("042".parse::<FaultSpec>().is_err());
        assert!("".parse::<FaultSpec>().unwrap().is_none());
        assert!("explode".parse::<FaultSpec>().is_err());
        assert!("drop|timeout".parse::<FaultSpec>().is_err());
        assert!("latency=soon".parse::<FaultSpec>().is_err());
    }

    #[test]
    fn random_faults_read_as_the_cli_writes_them() {
        let f: RandomFault = "siConsDE:0161:0.05".parse().unwrap();
        assert_eq!(f.service.as_deref(), Some("siConsDE"));
        assert_eq!(f.spec.action, Some(FaultAction::Unavailable));
        assert_eq!(f.rate, 0.05);
        let any: RandomFault = "*:drop:1".parse().unwrap();
        assert_eq!((any.service, any.spec.action), (None, Some(FaultAction::Drop)));
        for bad in [
            "siConsDE:0161",
            "siNada:0161:0.1",
            "siConsDE:0161:2",
            "siConsDE:none:0.1",
            "x:y:z",
        ] {
            assert!(bad.parse::<RandomFault>().is_err(), "{bad}");
        }
    }
}
