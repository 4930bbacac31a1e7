#!/usr/bin/env bash
# The README's run command: the API on the embedded default (SQLite), from a fresh clone.
#
#   ./scripts/run.sh                      serve on http://127.0.0.1:7071
#   AZUREBANK_PORT=8080 ./scripts/run.sh  another port
#
# It creates or refreshes .venv, keeps its state in .azurebank/ (git-ignored): a local signing
# key and audit chain key generated on the first run (local.env, mode 600), the SQLite database,
# and the demo user it seeds once. Then it migrates, prints a bearer token and curl lines, and
# serves. Settings already in the environment win over local.env (e.g. Database__Url).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/_venv.sh
source "$ROOT/scripts/_venv.sh"

STATE="$ROOT/.azurebank"
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
  log "generating a local signing key and audit chain key in .azurebank/local.env"
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

"$AZUREBANK" db upgrade >&2

# The demo user, seeded once per database: its id is kept beside the database it lives in.
demo_file="$STATE/demo-user-$(printf '%s' "$Database__Url" | sha256sum | cut -c1-12).json"
if [[ -s "$demo_file" ]] && ! "$PY" - "$demo_file" <<'PY'; then
import json
import sys

from sqlalchemy import select

from shared.bootstrap import database_url
from shared.db.engine import get_engine
from shared.db.schema import AspNetUser
from shared.settings import load_settings

user_id = json.load(open(sys.argv[1]))["userId"]
with get_engine(database_url(load_settings(), local_default=True)).connect() as conn:
    found = conn.scalar(select(AspNetUser.Id).where(AspNetUser.Id == user_id))
sys.exit(0 if found else 1)
PY
  log "the demo user is gone from the database; seeding it again"
  rm -f "$demo_file"
fi
if [[ ! -s "$demo_file" ]]; then
  suffix="$("$PY" -c 'import secrets; print(secrets.token_hex(4))')"
  password="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(18))')"
  log "seeding a demo user with one PIN-less account holding 1000.00"
  (
    umask 077
    "$AZUREBANK" users add --email "demo-$suffix@azurebank.example" --password "$password" \
      --azure-tag "demo-$suffix" --balance 1000.00 --accounts 1 >"$demo_file.tmp"
    # Kept for the PIN enrolment (POST /api/pin needs the password); never printed.
    "$PY" - "$demo_file.tmp" "$password" <<'PY'
import json
import sys

path, password = sys.argv[1], sys.argv[2]
with open(path) as f:
    user = json.loads(f.read().strip().splitlines()[-1])
user["password"] = password
with open(path, "w") as f:
    json.dump(user, f, indent=2)
PY
    mv "$demo_file.tmp" "$demo_file"
  )
fi

user_id="$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["userId"])' "$demo_file")"
token="$("$AZUREBANK" token --user "$user_id" --minutes 480)"
base="http://$HOST:$PORT/api"

cat <<EOF

AzureBank Functions — local API on SQLite ($Database__Url)

Demo user $user_id (no PIN yet; its password is in ${demo_file#"$ROOT"/}).
Bearer token, valid for 8 hours:

$token

  curl -s $base/health
  curl -s -H "Authorization: Bearer $token" $base/accounts

OpenAPI: $base/openapi.json — Ctrl-C stops the server.

EOF

exec "$AZUREBANK" serve --host "$HOST" --port "$PORT"
