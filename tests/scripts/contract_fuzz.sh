#!/usr/bin/env bash
# Contract fuzzing: Schemathesis against the served /openapi.json of both services (the invoicing
# API with the demo tenant's API key, the taxpayer lookup API anonymously and with a key). Fails
# on any 5xx, undocumented status, content type or response that does not match its schema.
#
#   tests/scripts/contract_fuzz.sh PATH/TO/kuatia      (CI passes its debug build)
#
# Needs schemathesis (`python3 -m pip install schemathesis==4.32.5`). Bounded: 25 examples per
# operation and phase, a fixed seed, loopback ports only.
set -euo pipefail
bin="${1:?usage: contract_fuzz.sh PATH/TO/kuatia}"
work="$(mktemp -d)"
api=127.0.0.1:18180
lookup=127.0.0.1:18181
cleanup() {
  [[ -n "${pid:-}" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The database lives in the scratch folder too (the embedded default, ./data/kuatia.db, would
# outlive the run: a second run on the same checkout met secrets sealed under the first run's
# master key); KUATIA_DEMO=1 seeds the demo tenant all the same.
mkdir -p "$work/data"
DATABASE_URL="sqlite://$work/data/kuatia.db" KUATIA_DEMO=1 \
KUATIA_DATA_DIR="$work/data" KUATIA_LISTEN="$api" KUATIA_LOOKUP_LISTEN="$lookup" \
  KUATIA_SIFEN_SIM_LISTEN=127.0.0.1:18182 KUATIA_RATE_LIMIT_PER_KEY=1000000 KUATIA_RATE_LIMIT_PER_TENANT=1000000 \
  KUATIA_RATE_LIMIT_PER_IP=1000000 KUATIA_LOOKUP_QUOTA_ANONYMOUS=1000000 \
  "$bin" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  [[ -s "$work/data/demo-api-key" ]] && grep -q "X-Tenant-Id: " "$work/serve.log" && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.5
done
key="$(cat "$work/data/demo-api-key")"
tenant="$(grep -o 'X-Tenant-Id: [0-9a-f-]*' "$work/serve.log" | head -1 | cut -d' ' -f2)"
lookup_key="$(DATABASE_URL="sqlite://$work/data/kuatia.db" KUATIA_DATA_DIR="$work/data" "$bin" lookup keys create --plan business --name contract-fuzz | head -1)"

st() { python3 -c 'import sys; from schemathesis.cli import schemathesis; sys.argv[0] = "st"; sys.exit(schemathesis())' "$@"; }
checks=not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance
common=(--checks "$checks" --max-examples 25 --workers 2 --seed 20261124 --no-color)

echo "--- invoicing API (demo tenant, API key)"
st run "http://$api/openapi.json" -H "Authorization: Bearer $key" -H "X-Tenant-Id: $tenant" "${common[@]}" | tail -25
echo "--- taxpayer lookup API (anonymous)"
st run "http://$lookup/openapi.json" "${common[@]}" | tail -12
echo "--- taxpayer lookup API (business key)"
st run "http://$lookup/openapi.json" -H "X-API-Key: $lookup_key" "${common[@]}" | tail -12
