//! Fault injection: what the simulator does instead of (or after) answering normally.
//!
//! A fault is written as comma- (or `|`-) separated tokens: `latency=200ms` (also `2s`, or a
//! bare number of milliseconds) delays the answer; at most one action among `http500` (an HTML
//! 500 page), `fault` (a SOAP Fault), `0161` (SIFEN's "server unavailable" answer, nothing
//! processed), `timeout` (nothing processed, no answer), `drop` (processed and recorded, then
//! no answer) and `0301` (a lot refused as not queued; other services ignore it).
//!
//! Faults come from the `X-Sim-Fault` header of a request, from the queue filled by
//! `POST /sim/faults`, or at random from the rates of `SimConfig`; a header wins over the
//! queue, the queue over chance.

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
}

impl FaultAction {
    /// The token that names it.
    pub fn token(self) -> &'static str {
        match self {
            Self::Http500 => "http500",
            Self::SoapFault => "fault",
            Self::Unavailable => "0161",
            Self::Timeout => "timeout",
            Self::Drop => "drop",
            Self::LotNotQueued => "0301",
        }
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
        assert!("".parse::<FaultSpec>().unwrap().is_none());
        assert!("explode".parse::<FaultSpec>().is_err());
        assert!("drop|timeout".parse::<FaultSpec>().is_err());
        assert!("latency=soon".parse::<FaultSpec>().is_err());
    }
}
