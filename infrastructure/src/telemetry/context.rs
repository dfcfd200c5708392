//! W3C Trace Context (`traceparent`): parsing what a client or a job payload carries, and
//! writing what a response, a job and a SIFEN request carry.

use rand::Rng as _;

/// A span's place in a trace: the trace, the span, and whether the trace is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceContext {
    /// 16 bytes, never all zero.
    pub trace_id: [u8; 16],
    /// 8 bytes, never all zero.
    pub span_id: [u8; 8],
    /// The `sampled` flag: a trace the caller did not sample is propagated but not exported.
    pub sampled: bool,
}

impl TraceContext {
    /// A new trace's root context (sampled).
    pub fn new_root() -> Self {
        Self {
            trace_id: new_id(),
            span_id: new_id(),
            sampled: true,
        }
    }

    /// A new span in this context's trace.
    pub fn child(&self) -> Self {
        Self {
            trace_id: self.trace_id,
            span_id: new_id(),
            sampled: self.sampled,
        }
    }

    /// Reads a `traceparent` header value. Version `00` must be exactly
    /// `00-<32 hex>-<16 hex>-<2 hex>`; a later version may append fields, which are ignored;
    /// `ff`, uppercase hex and all-zero ids are invalid (W3C Trace Context §3.2).
    pub fn parse(traceparent: &str) -> Option<Self> {
        let value = traceparent.trim();
        let mut parts = value.split('-');
        let version = parts.next()?;
        let trace = parts.next()?;
        let span = parts.next()?;
        let flags = parts.next()?;
        if version.len() != 2 || !is_lower_hex(version) || version == "ff" {
            return None;
        }
        if version == "00" && (parts.next().is_some() || value.len() != 55) {
            return None;
        }
        if flags.len() != 2 || !is_lower_hex(flags) {
            return None;
        }
        let trace_id: [u8; 16] = decode(trace)?;
        let span_id: [u8; 8] = decode(span)?;
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        let flags = u8::from_str_radix(flags, 16).ok()?;
        Some(Self {
            trace_id,
            span_id,
            sampled: flags & 1 == 1,
        })
    }

    /// The `traceparent` value naming this span as the parent.
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{}",
            self.trace_id_hex(),
            self.span_id_hex(),
            if self.sampled { "01" } else { "00" }
        )
    }

    /// The trace id as 32 lowercase hex digits (OTLP/JSON and the log lines write it so).
    pub fn trace_id_hex(&self) -> String {
        hex::encode(self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub fn span_id_hex(&self) -> String {
        hex::encode(self.span_id)
    }
}

fn is_lower_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn decode<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2 || !is_lower_hex(s) {
        return None;
    }
    let mut out = [0u8; N];
    hex::decode_to_slice(s, &mut out).ok()?;
    Some(out)
}

/// A random id that is not all zero.
fn new_id<const N: usize>() -> [u8; N] {
    let mut rng = rand::rng();
    loop {
        let mut id = [0u8; N];
        rng.fill(&mut id[..]);
        if id != [0u8; N] {
            return id;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_traceparent_round_trips() {
        let ctx = TraceContext::parse(EXAMPLE).expect("valid");
        assert_eq!(ctx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(ctx.span_id_hex(), "00f067aa0ba902b7");
        assert!(ctx.sampled);
        assert_eq!(ctx.traceparent(), EXAMPLE);
        let unsampled =
            TraceContext::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00").expect("valid");
        assert!(!unsampled.sampled);
        // A later version may carry more fields.
        assert!(
            TraceContext::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra").is_some()
        );
    }

    #[test]
    fn malformed_traceparents_are_refused() {
        for bad in [
            "",
            "00",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902g7-01",
        ] {
            assert_eq!(TraceContext::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_child_keeps_the_trace_and_gets_a_new_span() {
        let root = TraceContext::new_root();
        let child = root.child();
        assert_eq!(child.trace_id, root.trace_id);
        assert_ne!(child.span_id, root.span_id);
        assert_ne!(root.trace_id, TraceContext::new_root().trace_id);
        assert_eq!(TraceContext::parse(&child.traceparent()), Some(child));
    }
}
