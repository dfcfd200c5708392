#!/usr/bin/env bash
# Coverage-guided fuzzing of kuatia's parsers of untrusted input (issue 10; docs/fuzzing.md).
#
# Builds the cargo-fuzz targets of fuzz/ on the stable toolchain (`-s none`: no sanitizer, which
# is what stable allows; Rust's own checks, debug assertions and overflow checks still turn a bug
# into a panic, and a panic into a crash), seeds each target's corpus from the test vectors and
# the repository's samples, and runs each target for a bounded time. Exits non-zero on any crash,
# timeout or out-of-memory, printing the input that caused it and how to replay it.
#
#   bash tests/scripts/fuzz.sh                       # every target, KUATIA_FUZZ_SECONDS each
#   KUATIA_FUZZ_SECONDS=300 bash tests/scripts/fuzz.sh soap_response
#
# Environment: KUATIA_FUZZ_SECONDS (run time per target, default 20), KUATIA_FUZZ_TARGET_DIR
# (build directory, default ~/.cache/kuatia-fuzz-target: apart from the main build so that
# neither locks nor invalidates the other), KUATIA_SHARED_DIR (the shared specs with the test
# vectors, default ../shared).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

CARGO_FUZZ_VERSION=0.13.2
ALL_TARGETS=(canonical_document soap_response pfx_upload pfx_work registry_line)
seconds="${KUATIA_FUZZ_SECONDS:-20}"
shared="${KUATIA_SHARED_DIR:-$root/../shared}"
vectors="$shared/sifen/vectors"
if (($#)); then targets=("$@"); else targets=("${ALL_TARGETS[@]}"); fi

say() { printf 'fuzz: %s\n' "$*"; }

# cargo-fuzz itself, pinned (0.13.2 builds on rustc 1.95 stable). Installed with its own
# temporary build directory, whatever CARGO_TARGET_DIR the caller has.
if [[ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]]; then
  say "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  env -u CARGO_TARGET_DIR cargo install cargo-fuzz --version "$CARGO_FUZZ_VERSION" --locked --quiet
fi

export CARGO_TARGET_DIR="${KUATIA_FUZZ_TARGET_DIR:-$HOME/.cache/kuatia-fuzz-target}"
export CARGO_INCREMENTAL=0
mkdir -p "$CARGO_TARGET_DIR"

# fuzz/ is a workspace of its own; it resolves to the main workspace's versions (and adds
# libfuzzer-sys), so the fuzzed code is the code that ships.
cp Cargo.lock fuzz/Cargo.lock

# The same flags for build and run, or `cargo fuzz run` would rebuild. 16 codegen units: the
# instrumented dependency tree builds in a fraction of the time of cargo-fuzz's default of 1.
fuzz_flags=(-s none --release --codegen-units 16)
say "building ${targets[*]} (cargo fuzz build ${fuzz_flags[*]})"
started=$SECONDS
if (($#)); then
  for target in "${targets[@]}"; do cargo fuzz build "${fuzz_flags[@]}" "$target"; done
else
  cargo fuzz build "${fuzz_flags[@]}"
fi
say "built in $((SECONDS - started)) s"

# ---------------------------------------------------------------------------------------------
# Seeds made at run time (the committed ones are in fuzz/seeds/<target>/).
work=$(mktemp -d "${TMPDIR:-/tmp}/kuatia-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
for target in "${ALL_TARGETS[@]}"; do mkdir -p "$work/$target" "fuzz/corpus/$target"; done

xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g'; }
envelope() {
  printf '%s' '<?xml version="1.0" encoding="UTF-8"?><env:Envelope xmlns:env="http://www.w3.org/2003/05/soap-envelope"><env:Header/><env:Body>'
  printf '<ns2:rEnviConsDeResponse xmlns:ns2="http://ekuatia.set.gov.py/sifen/xsd"><ns2:dFecProc>2026-03-02T10:20:01-03:00</ns2:dFecProc><ns2:dCodRes>0422</ns2:dCodRes><ns2:dMsgRes>CDC encontrado</ns2:dMsgRes><ns2:xContenDE>%s</ns2:xContenDE></ns2:rEnviConsDeResponse>' "$1"
  printf '%s' '</env:Body></env:Envelope>'
}

if [[ -d "$vectors" ]]; then
  # Signed documents and the known-bad ones: as they are (the XML reader), and as the container
  # of a siConsDE answer, escaped as SIFEN sends it and nested as some stacks do.
  while IFS= read -r -d '' file; do
    name=$(basename "$(dirname "$file")")-$(basename "$file" .xml)
    cp "$file" "$work/soap_response/$name.xml"
    envelope "$(xml_escape <"$file")" >"$work/soap_response/$name-escaped.xml"
    envelope "$(sed -e '1s/^<?xml[^>]*?>//' "$file")" >"$work/soap_response/$name-nested.xml"
    # Their issuers and receivers as registry lines (RUC|NAME|DV|OLD_RUC|STATE|).
    paste -d'|' \
      <(grep -o '<dRuc\(Em\|Rec\)>[^<]*' "$file" | sed 's/.*>//') \
      <(grep -o '<dNom\(Emi\|Rec\)>[^<]*' "$file" | sed 's/.*>//') \
      <(grep -o '<dDV\(Emi\|Rec\)>[^<]*' "$file" | sed 's/.*>//') |
      sed 's/$/||ACTIVO|/' >"$work/registry_line/$name.txt" || true
  done < <(find "$vectors" -name '*.xml' -print0)
  # The JSON inputs of the vectors: another product's document format, refused field by field.
  while IFS= read -r -d '' file; do
    cp "$file" "$work/canonical_document/vector-$(basename "$file")"
  done < <(find "$vectors" -name '*.json' -print0)
else
  say "no test vectors at $vectors: running on the committed seeds only"
fi

# The JSON examples of the docs (webhook payloads, error bodies): JSON that is not a document.
for doc in docs/*.md README.md; do
  awk -v out="$work/canonical_document/doc-$(basename "$doc" .md)" \
    '/^```json/ { f = 1; n++; next } /^```/ { f = 0 } f { print > (out "-" n ".json") }' "$doc"
done

# PFX files like the ones uploaded: EC and RSA keys, with and without a password, OpenSSL 3's
# default encryption and the legacy one, with a chain, without a key. The files with no MAC and
# no encryption let mutations reach the key and certificate parsers (a MAC stops everything else).
if command -v openssl >/dev/null 2>&1; then
  (
    cd "$work"
    subject='/CN=DE GENERACION ELECTRONICA S.A./serialNumber=RUC80069563-1/C=PY'
    openssl ecparam -name prime256v1 -genkey -noout -out ec.key 2>/dev/null
    openssl req -x509 -new -key ec.key -subj "$subject" -days 365 -addext extendedKeyUsage=clientAuth \
      -out ec.crt 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj '/CN=Kuatia Fuzz CA' -days 365 \
      -out ca.crt 2>/dev/null
    openssl req -new -newkey rsa:2048 -nodes -keyout rsa.key -subj "$subject" -out rsa.csr 2>/dev/null
    openssl x509 -req -in rsa.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -out rsa.crt 2>/dev/null
    out=pfx_upload
    openssl pkcs12 -export -inkey ec.key -in ec.crt -passout pass:kuatia-fuzz -out $out/ec-aes.pfx
    openssl pkcs12 -export -inkey ec.key -in ec.crt -passout pass: -nomac -keypbe NONE -certpbe NONE \
      -out $out/ec-plain-nomac.pfx
    openssl pkcs12 -export -inkey rsa.key -in rsa.crt -certfile ca.crt -passout pass:kuatia-fuzz \
      -out $out/rsa-chain-aes.pfx
    openssl pkcs12 -export -inkey rsa.key -in rsa.crt -certfile ca.crt -passout pass:kuatia-fuzz -nomac \
      -keypbe NONE -certpbe NONE -out $out/rsa-chain-plain-nomac.pfx
    openssl pkcs12 -export -legacy -inkey rsa.key -in rsa.crt -passout pass:kuatia-fuzz \
      -out $out/rsa-legacy.pfx 2>/dev/null || true
    openssl pkcs12 -export -nokeys -in ca.crt -passout pass:kuatia-fuzz -out $out/no-key.pfx
    if [[ -f "$vectors/generated/selfsigned-test-cert.pem" ]]; then
      openssl pkcs12 -export -nokeys -in "$vectors/generated/selfsigned-test-cert.pem" -passout pass: \
        -nomac -certpbe NONE -out $out/vector-cert-only.pfx
    fi
    # The work counter reads the same files, and some that ask for more than it allows.
    cp $out/*.pfx pfx_work/
    openssl pkcs12 -export -inkey ec.key -in ec.crt -passout pass:kuatia-fuzz -iter 6000 \
      -out pfx_work/ec-iter-6000.pfx
  )
else
  say "openssl not found: the PFX target runs on its committed seeds only"
fi

# ---------------------------------------------------------------------------------------------
# The runs: each target for $seconds, its corpus (kept in fuzz/corpus/, ignored by git) first,
# the seed directories after it (read only).
bin="$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release"
passed=0
failed=0
for target in "${targets[@]}"; do
  log="$work/$target.log"
  mkdir -p "fuzz/artifacts/$target"
  say "running $target for ${seconds} s"
  status=0
  dirs=("fuzz/corpus/$target")
  [[ -d "fuzz/seeds/$target" ]] && dirs+=("fuzz/seeds/$target")
  dirs+=("$work/$target")
  cargo fuzz run "${fuzz_flags[@]}" "$target" "${dirs[@]}" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$root/fuzz/artifacts/$target/" >"$log" 2>&1 || status=$?
  if ((status == 0)); then
    passed=$((passed + 1))
    grep -E '^(#[0-9]+\s+DONE|Done [0-9]+ runs|stat::number_of_executed_units|stat::peak_rss_mb)' "$log" |
      sed "s/^/fuzz: $target: /" || true
  else
    failed=$((failed + 1))
    say "$target FAILED (exit $status); the end of its log:"
    tail -n 80 "$log"
    for artifact in $(grep -oE "$root/fuzz/artifacts/$target/[a-z-]+-[0-9a-f]+" "$log" | sort -u); do
      say "reproducer $artifact ($(wc -c <"$artifact") bytes), base64:"
      base64 -w 76 "$artifact"
      say "replay: cargo fuzz run ${fuzz_flags[*]} $target $artifact"
    done
  fi
done

say "$passed passed, $failed failed"
((failed == 0))
