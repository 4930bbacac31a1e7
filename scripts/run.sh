#!/usr/bin/env bash
# The README's run command: the whole job on the embedded default (SQLite), from a fresh clone.
#
#   ./scripts/run.sh                      serve on http://127.0.0.1:7071 and print the journey
#   ./scripts/run.sh --demo               the same, then run the journey itself, print each
#                                         step's answer, stop the server (exit 1 if a step did
#                                         not answer as expected)
#   AZUREBANK_PORT=8080 ./scripts/run.sh  another port
#
# It creates or refreshes .venv, keeps its state in .azurebank/ (git-ignored; AZUREBANK_STATE
# moves it): a local signing key and audit chain key generated on the first run (local.env,
# mode 600) and the SQLite database. It delivers notices with the API's relay (Notices__Runner=Api)
# into a pickup directory outside any git tree, ${XDG_STATE_HOME:-~/.local/state}/azurebank/pickup,
# which it creates and prints. Each run seeds a payer (a PIN and 1000.00) and a payee, serves,
# and once the server answers prints the journey (docs/quickstart.md) as commands to paste,
# each with the answer to expect. Settings already in the environment win over these.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/_venv.sh
source "$ROOT/scripts/_venv.sh"

usage() { echo "usage: scripts/run.sh [--demo]" >&2; }
DEMO=0
case "${1:-}" in
  "") ;;
  --demo) DEMO=1 ;;
  -h | --help) usage && exit 0 ;;
  *) usage && exit 64 ;;
esac

STATE="${AZUREBANK_STATE:-$ROOT/.azurebank}"
PORT="${AZUREBANK_PORT:-7071}"
HOST="${AZUREBANK_HOST:-127.0.0.1}"

log() { echo "run.sh: $*" >&2; }

azurebank_venv "$ROOT"
PY="$ROOT/.venv/bin/python"
AZUREBANK="$ROOT/.venv/bin/azurebank"

mkdir -p "$STATE"
chmod 700 "$STATE"

# Local secrets, generated once and kept: tokens printed earlier stay valid across restarts.
if [[ ! -s "$STATE/local.env" ]]; then
  log "generating a local signing key and audit chain key in $STATE/local.env"
  (
    umask 077
    "$PY" - >"$STATE/local.env.tmp" <<'PY'
import base64
import secrets

print(f"Auth__SigningKey={secrets.token_urlsafe(48)}")
print(f"Audit__ChainKey={base64.b64encode(secrets.token_bytes(32)).decode()}")
PY
    mv "$STATE/local.env.tmp" "$STATE/local.env"
  )
fi
chmod 600 "$STATE/local.env"
while IFS= read -r line; do
  # Split at the first "=" only: `read` with IFS="=" would drop base64's trailing "=".
  key="${line%%=*}"
  [[ -n "$line" && "$line" != \#* && "$key" != "$line" ]] || continue
  if [[ -z "${!key:-}" ]]; then
    export "$key=${line#*=}"
  fi
done <"$STATE/local.env"

export Database__Url="${Database__Url:-sqlite:///$STATE/azurebank.db}"
# ADR-0048 D6: the pickup directory is a spool of addresses at rest, so it lives in the user's
# state directory, never in this checkout (serve refuses one inside a git tree).
export Notices__Runner="${Notices__Runner:-Api}"
export Notices__PickupDirectory="${Notices__PickupDirectory:-${XDG_STATE_HOME:-$HOME/.local/state}/azurebank/pickup}"
export Notices__Contact="${Notices__Contact:-AzureBank support, support@azurebank.example}"
# A short period so the demo's notice lands in seconds (the lease, 120s, stays above twice it).
export Notices__PeriodSeconds="${Notices__PeriodSeconds:-5}"
PICKUP="$Notices__PickupDirectory"
mkdir -p "$PICKUP"
chmod 700 "$PICKUP"
LIMIT="${DailyLimit__Amount:-5000}"

"$AZUREBANK" db upgrade >&2

# A payer and a payee of their own on every run, so the journey's answers hold however often it
# runs: a PIN changed, a day's limit spent or a key used by an earlier run belongs to other users.
suffix="$("$PY" -c 'import secrets; print(secrets.token_hex(4))')"
password="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(18))')"
PAYER_EMAIL="payer-$suffix@azurebank.example"
PAYEE_TAG="payee-$suffix"
FIRST_PIN=135790
NEW_PIN=246802
log "seeding payer-$suffix (one account holding 1000.00, a PIN) and $PAYEE_TAG (a payee)"
# --password=VALUE: a URL-safe token may begin with "-", which argparse would read as an option.
payer_json="$("$AZUREBANK" users add --email "$PAYER_EMAIL" --password="$password" \
  --azure-tag "payer-$suffix" --balance 1000.00 --accounts 1 | tail -n 1)"
"$AZUREBANK" users add --email "payee-$suffix@azurebank.example" \
  --password="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(18))')" \
  --azure-tag "$PAYEE_TAG" --balance 0 --accounts 1 >/dev/null
read -r USER_ID ACCOUNT_ID < <("$PY" -c \
  'import json, sys; u = json.loads(sys.argv[1]); print(u["userId"], u["accountIds"][0])' \
  "$payer_json")
TOKEN="$("$AZUREBANK" token --user "$USER_ID" --minutes 480)"
BASE="http://$HOST:$PORT/api"
KEY="transfer-$suffix"
# Over the day's limit once step 3 has spent 100.00 of it (ADR-0050 D7's 422, with the right PIN).
OVER="$("$PY" -c 'import sys; from decimal import Decimal as D; print(D(sys.argv[1]) - 100 + D("0.01"))' "$LIMIT")"

SERVER_PID=""
INTERRUPTED=0
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    # Ctrl-C reached the server too (one process group): a second SIGINT would make uvicorn
    # skip its graceful shutdown, and with it the relay's last marks (ADR-0048 D3).
    for _ in $(seq 1 $((INTERRUPTED ? 50 : 0))); do
      kill -0 "$SERVER_PID" 2>/dev/null || break
      sleep 0.2
    done
    kill -INT "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT
trap 'INTERRUPTED=1; exit 130' INT
trap 'exit 143' TERM

if ((DEMO)); then
  SERVE_LOG="$STATE/serve.log"
  log "serving on $BASE; the server's log is $SERVE_LOG"
  "$AZUREBANK" serve --host "$HOST" --port "$PORT" >"$SERVE_LOG" 2>&1 &
else
  "$AZUREBANK" serve --host "$HOST" --port "$PORT" &
fi
SERVER_PID=$!

for _ in $(seq 1 300); do
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    wait "$SERVER_PID" && code=0 || code=$?
    SERVER_PID=""
    log "the server exited ($code) before it answered${SERVE_LOG:+; see $SERVE_LOG}"
    exit "$code"
  fi
  [[ "$(curl -s -o /dev/null -w '%{http_code}' "$BASE/health" || true)" == 200 ]] && break
  sleep 0.2
done

# The PIN through the API's own enrolment (POST /api/pin, behind the password): it writes the
# audit row and the owed PinEnrolled notice as any customer's enrolment does (DESIGN §7).
enrolled="$(curl -s -o /dev/null -w '%{http_code}' -X POST "$BASE/pin" \
  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' \
  -d "{\"password\":\"$password\",\"pin\":\"$FIRST_PIN\"}" || true)"
if [[ "$enrolled" != 201 ]]; then
  log "enrolling the payer's PIN answered $enrolled, not 201"
  exit 1
fi

# The journey: title, the answer to expect, and the command. `expect:` is read by the demo below
# and by tests/e2e/test_quickstart_journey.py from this script's real output; its clauses are
# separated by "; ": the status, `header NAME: VALUE`, `errorCode CODE`, `members A, B`,
# `shows TEXT` (in the output) and `the same body as step N`.
AUTHZ='-H "Authorization: Bearer $TOKEN"'
JSON="-H 'Content-Type: application/json'"
TITLES=(
  "Change the PIN, behind the current one (ADR-0047). The PinChanged notice is owed in the same transaction; the relay delivers it into the pickup directory within one period, ${Notices__PeriodSeconds}s (ADR-0048 D1), beside the enrolment's PinEnrolled notice."
  "Look for the notices: two .eml files addressed to the payer (ADR-0048 D3: {noticeId}.eml, never overwritten)."
  "Mint: the PIN is checked and a transfer authorization issued (ADR-0042; the day's limit is checked before the PIN, ADR-0050 D4)."
  "Transfer 100.00 with an Idempotency-Key: the authorization is spent and the money moves (ADR-0050 D5, ADR-0009)."
  "The same request again, same key: the stored answer, byte for byte, and nothing moves twice (ADR-0009)."
  "What today's external transfers have left: the UTC day's limit, used and remaining (ADR-0050 D1, D8)."
  "Mint ${OVER} with the right PIN: over the day's limit, refused before the PIN is checked (ADR-0050 D4, D7)."
)
EXPECTS=(
  "200; shows {\"status\":\"PinChanged\"}"
  "shows Subject: A PIN was set on your AzureBank account; shows Subject: Your AzureBank PIN was changed"
  "201; members authorizationId, expiresAt, accountId, recipientAzureTag, amount"
  "201; members transactionId, accountId, recipientAzureTag, amount, balance, createdAt"
  "201; header Idempotency-Replayed: true; the same body as step 4"
  "200; members limit, used, remaining, resetsAt"
  "422; errorCode DAILY_LIMIT_EXCEEDED; members limit, used, requested, resetsAt"
)
COMMANDS=(
  "curl -si -X PUT \"\$BASE/pin\" $AUTHZ $JSON -d '{\"currentPin\":\"$FIRST_PIN\",\"newPin\":\"$NEW_PIN\"}'"
  "sleep $((Notices__PeriodSeconds + 2)); grep -l '$PAYER_EMAIL' '$PICKUP'/*.eml | xargs grep -H '^Subject:'"
  "MINT=\$(curl -si -X POST \"\$BASE/transactions/transfer/authorizations\" $AUTHZ $JSON -d '{\"accountId\":\"$ACCOUNT_ID\",\"recipientAzureTag\":\"$PAYEE_TAG\",\"amount\":100.00,\"pin\":\"$NEW_PIN\"}'); echo \"\$MINT\"; AUTH=\$(echo \"\$MINT\" | sed -n 's/.*\"authorizationId\":\"\\([^\"]*\\)\".*/\\1/p')"
  "curl -si -X POST \"\$BASE/transactions/transfer\" $AUTHZ -H \"Idempotency-Key: \$KEY\" $JSON -d '{\"accountId\":\"$ACCOUNT_ID\",\"recipientAzureTag\":\"$PAYEE_TAG\",\"amount\":100.00,\"authorizationId\":\"'\"\$AUTH\"'\"}'"
  "curl -si -X POST \"\$BASE/transactions/transfer\" $AUTHZ -H \"Idempotency-Key: \$KEY\" $JSON -d '{\"accountId\":\"$ACCOUNT_ID\",\"recipientAzureTag\":\"$PAYEE_TAG\",\"amount\":100.00,\"authorizationId\":\"'\"\$AUTH\"'\"}'"
  "curl -si \"\$BASE/transactions/allowance\" $AUTHZ"
  "curl -si -X POST \"\$BASE/transactions/transfer/authorizations\" $AUTHZ $JSON -d '{\"accountId\":\"$ACCOUNT_ID\",\"recipientAzureTag\":\"$PAYEE_TAG\",\"amount\":$OVER,\"pin\":\"$NEW_PIN\"}'"
)
PRELUDE="BASE=$BASE TOKEN=$TOKEN KEY=$KEY"

cat <<EOF

AzureBank Functions — local API on SQLite ($Database__Url)
Notices (Notices__Runner=$Notices__Runner, every ${Notices__PeriodSeconds}s) land in the pickup directory:
  $PICKUP
Payer $USER_ID (PIN $FIRST_PIN, account $ACCOUNT_ID holding 1000.00); payee $PAYEE_TAG.
API page: $BASE/docs — OpenAPI: $BASE/openapi.json — readiness: $BASE/health/ready

The journey (docs/quickstart.md explains each answer). Paste each line that starts with "\$ "
into bash or zsh, in order; the first sets the variables the others use:

  \$ $PRELUDE
EOF
for i in "${!COMMANDS[@]}"; do
  printf '\n%d. %s\n   expect: %s\n  $ %s\n' "$((i + 1))" "${TITLES[$i]}" "${EXPECTS[$i]}" \
    "${COMMANDS[$i]}"
done
echo

if ((!DEMO)); then
  echo "Ctrl-C stops the server."
  wait "$SERVER_PID" && code=0 || code=$?
  SERVER_PID=""
  exit "$code"
fi

# --demo: the same lines, run in this shell in order (so MINT and AUTH carry over), each answer
# printed and held against its `expect:`.
echo "Running the journey against $BASE:"
ANSWERS="$(mktemp -d "${TMPDIR:-/tmp}/azurebank-journey.XXXXXX")"
trap 'stop_server; rm -rf "$ANSWERS"' EXIT
eval "$PRELUDE"
failed=0
for i in "${!COMMANDS[@]}"; do
  n=$((i + 1))
  printf '\n%d. %s\n' "$n" "${TITLES[$i]}"
  eval "${COMMANDS[$i]}" >"$ANSWERS/$n" 2>&1 || true
  sed 's/^/   | /' "$ANSWERS/$n" | tr -d '\r'
  [[ -z "$(tail -c 1 "$ANSWERS/$n")" ]] || echo # a JSON body ends without a newline
  if verdict="$("$PY" - "${EXPECTS[$i]}" "$ANSWERS" "$n" <<'PY'
import json
import re
import sys
from pathlib import Path

expect, answers, step = sys.argv[1], Path(sys.argv[2]), sys.argv[3]


def parts(text: str) -> tuple[str | None, dict[str, str], str]:
    """The status, the headers and the body of `curl -si` output (the last response in it)."""
    text = text.replace("\r\n", "\n")
    heads = [m.start() for m in re.finditer(r"^HTTP/\S+ \d{3}", text, re.M)]
    if not heads:
        return None, {}, text
    head, _, body = text[heads[-1] :].partition("\n\n")
    lines = head.split("\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0].split()[1], headers, body


output = (answers / step).read_text()
status, headers, body = parts(output)
misses = []
for clause in expect.split("; "):
    if re.fullmatch(r"\d{3}", clause):
        if status != clause:
            misses.append(f"status {status}, not {clause}")
    elif clause.startswith("header "):
        name, _, value = clause[len("header ") :].partition(": ")
        if headers.get(name.lower()) != value:
            misses.append(f"no {clause}")
    elif clause.startswith("errorCode "):
        if json.loads(body or "{}").get("errorCode") != clause.split()[1]:
            misses.append(f"no {clause}")
    elif clause.startswith("members "):
        found = json.loads(body or "{}")
        missing = [m for m in clause[len("members ") :].split(", ") if m not in found]
        if missing:
            misses.append("no member " + ", ".join(missing))
    elif clause.startswith("shows "):
        if clause[len("shows ") :] not in output:
            misses.append(f"does not show {clause[len('shows '):]}")
    elif m := re.fullmatch(r"the same body as step (\d+)", clause):
        if parts((answers / m.group(1)).read_text())[2] != body:
            misses.append(clause.replace("the", "not the", 1))
    else:
        misses.append(f"unknown clause {clause!r}")
print("; ".join(misses) if misses else "as expected: " + expect)
sys.exit(1 if misses else 0)
PY
  )"; then
    echo "   ✓ $verdict"
  else
    echo "   ✗ $verdict"
    failed=1
  fi
done
echo
if ((failed)); then
  echo "The journey did not answer as expected (the server's log: $SERVE_LOG)."
  exit 1
fi
echo "Every step answered as expected. The notices are in $PICKUP."
