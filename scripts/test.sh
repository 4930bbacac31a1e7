#!/usr/bin/env bash
# The README's test command: the whole suite on a fresh machine with nothing else done.
#
#   ./scripts/test.sh            ruff check, ruff format --check, mypy, then pytest
#   ./scripts/test.sh -k money   extra arguments go to pytest
#
# It creates or refreshes .venv, starts PostgreSQL when it is installed but not listening on
# 127.0.0.1:5432, installs Azurite into .azurite/ with npm and starts its blob service on
# 127.0.0.1:10000 unless something already listens there, installs unixODBC (for pyodbc) as
# root when it is missing, and stops only what it started. Beside ruff and mypy it checks
# compose.yaml and the CI workflow against their schemas (check-jsonschema's built-in copies:
# no network), since nothing here runs Docker or GitHub Actions, and scans infra/ with checkov
# (offline; its own .venv-infra), since nothing here reaches Azure.
# Under CI=true a suite skipped for a missing service fails (tests/conftest.py), and so does a
# whole run in which the SQLite, PostgreSQL, Azurite or worker suite passed no test, or the SQL
# Server suite passed none while AZUREBANK_TEST_SQLSERVER is set.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
# shellcheck source=scripts/_venv.sh
source "$ROOT/scripts/_venv.sh"

# Azurite 3.35.0 is the last release that runs on Node 20 (3.37 needs Node 22).
AZURITE_VERSION="3.35.0"
# The same endpoints tests/conftest.py uses; the defaults are this machine's services.
PG_URL="${AZUREBANK_TEST_POSTGRES:-postgresql+psycopg://postgres@127.0.0.1:5432/postgres}"
PG_CLUSTER="${AZUREBANK_PG_CLUSTER:-main}"
BLOB_URL="${AZUREBANK_TEST_AZURITE_BLOB:-http://127.0.0.1:10000/devstoreaccount1}"
PG_HOST=127.0.0.1
PG_PORT=5432
BLOB_HOST=127.0.0.1
BLOB_PORT=10000
if [[ "$PG_URL" =~ @([^:/@]+):([0-9]+)/ ]]; then
  PG_HOST="${BASH_REMATCH[1]}"
  PG_PORT="${BASH_REMATCH[2]}"
fi
if [[ "$BLOB_URL" =~ ://([^:/]+):([0-9]+)/ ]]; then
  BLOB_HOST="${BASH_REMATCH[1]}"
  BLOB_PORT="${BASH_REMATCH[2]}"
fi

STARTED_PG_VERSION=""
AZURITE_PID=""
AZURITE_DATA=""
SUMMARY_FILE=""

log() { echo "test.sh: $*" >&2; }

listening() { # host port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

wait_listening() { # host port seconds [pid]
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    listening "$1" "$2" && return 0
    if [[ -n "${4:-}" ]] && ! kill -0 "$4" 2>/dev/null; then
      return 1
    fi
    sleep 0.2
  done
  return 1
}

cleanup() {
  local code=$?
  if [[ -n "$AZURITE_PID" ]]; then
    kill "$AZURITE_PID" 2>/dev/null || true
    wait "$AZURITE_PID" 2>/dev/null || true
    log "stopped the Azurite this run started"
  fi
  [[ -n "$AZURITE_DATA" ]] && rm -rf "$AZURITE_DATA"
  if [[ -n "$STARTED_PG_VERSION" ]]; then
    pg_ctlcluster --skip-systemctl-redirect "$STARTED_PG_VERSION" "$PG_CLUSTER" stop || true
    log "stopped the PostgreSQL this run started"
  fi
  [[ -n "$SUMMARY_FILE" ]] && rm -f "$SUMMARY_FILE"
  exit "$code"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_postgres() {
  if listening "$PG_HOST" "$PG_PORT"; then
    log "PostgreSQL listens on $PG_HOST:$PG_PORT"
    return 0
  fi
  if [[ "$PG_HOST" != 127.0.0.1 && "$PG_HOST" != localhost ]]; then
    log "PostgreSQL at $PG_HOST:$PG_PORT does not answer; this script starts only a local one"
    return 0
  fi
  local version
  version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
  if ! command -v pg_ctlcluster >/dev/null 2>&1 || [[ -z "$version" ]]; then
    log "PostgreSQL is not installed; its suite will be skipped (a failure under CI=true)"
    return 0
  fi
  log "starting PostgreSQL $version/$PG_CLUSTER"
  if pg_ctlcluster --skip-systemctl-redirect "$version" "$PG_CLUSTER" start; then
    STARTED_PG_VERSION="$version"
    wait_listening "$PG_HOST" "$PG_PORT" 60 || log "PostgreSQL did not listen on $PG_PORT"
  else
    log "PostgreSQL $version did not start"
  fi
}

start_azurite() {
  if listening "$BLOB_HOST" "$BLOB_PORT"; then
    log "reusing what listens on $BLOB_HOST:$BLOB_PORT as Azurite's blob service"
    return 0
  fi
  if [[ "$BLOB_HOST" != 127.0.0.1 && "$BLOB_HOST" != localhost ]]; then
    log "Azurite at $BLOB_HOST:$BLOB_PORT does not answer; this script starts only a local one"
    return 0
  fi
  if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    log "node/npm not found; the Azurite suite will be skipped (a failure under CI=true)"
    return 0
  fi
  local main=".azurite/node_modules/azurite/dist/src/blob/main.js"
  local installed
  installed="$(node -p "require('./.azurite/node_modules/azurite/package.json').version" \
    2>/dev/null || true)"
  if [[ "$installed" != "$AZURITE_VERSION" ]]; then
    log "installing azurite@$AZURITE_VERSION into .azurite/"
    mkdir -p .azurite
    npm install --prefix .azurite --no-audit --no-fund --loglevel=error \
      "azurite@$AZURITE_VERSION" >&2
  fi
  AZURITE_DATA="$(mktemp -d "${TMPDIR:-/tmp}/azurebank-azurite.XXXXXX")"
  # node directly, so $! is Azurite's own PID; azure-storage-blob sends an API version newer
  # than Azurite 3.35 knows, hence --skipApiVersionCheck.
  node "$main" --silent --location "$AZURITE_DATA" --blobHost "$BLOB_HOST" \
    --blobPort "$BLOB_PORT" --skipApiVersionCheck --disableTelemetry >&2 &
  AZURITE_PID=$!
  if wait_listening "$BLOB_HOST" "$BLOB_PORT" 60 "$AZURITE_PID"; then
    log "started Azurite $AZURITE_VERSION (pid $AZURITE_PID) on $BLOB_HOST:$BLOB_PORT"
  else
    log "Azurite did not start"
  fi
}

odbc_driver_manager() {
  # pyodbc needs unixODBC's libodbc.so.2: the SQL Server suite connects through it, and the unit
  # ring's Entra sign-in test builds a SQL Server engine (a skip without it, a failure under CI).
  ldconfig -p 2>/dev/null | grep -q 'libodbc\.so\.2' && return 0
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    log "installing unixodbc for pyodbc"
    apt-get install -y -q unixodbc >&2 ||
      { apt-get update -q >&2 && apt-get install -y -q unixodbc >&2; } ||
      log "could not install unixodbc; the tests that build a SQL Server engine cannot run"
  else
    log "libodbc.so.2 is missing: install unixODBC (and ODBC Driver 18 for the SQL Server suite)"
  fi
}

azurebank_venv "$ROOT"
VENV_BIN="$ROOT/.venv/bin"
start_postgres
start_azurite
odbc_driver_manager

failed=()
step() { # name command...
  local name="$1"
  shift
  log "== $name"
  if "$@"; then
    log "== $name: ok"
  else
    log "== $name: FAILED (exit $?)"
    failed+=("$name")
  fi
}

step "ruff check" "$VENV_BIN/ruff" check .
step "ruff format --check" "$VENV_BIN/ruff" format --check .
step "mypy" "$VENV_BIN/mypy"
# Built-in schemas (check-jsonschema ships them): the check runs offline.
step "check-jsonschema compose.yaml" "$VENV_BIN/check-jsonschema" \
  --builtin-schema vendor.compose-spec compose.yaml
step "check-jsonschema .github/workflows/ci.yml" "$VENV_BIN/check-jsonschema" \
  --builtin-schema vendor.github-workflows .github/workflows/ci.yml

# infra/ through checkov's Bicep and secrets checks, offline (--skip-download: no guideline or
# policy download); a check is skipped only inside the resource it concerns, with its reason.
# checkov has a venv of its own (requirements-infra.txt): its pins conflict with pytest's.
checkov_scan() { # directory
  "$ROOT/.venv-infra/bin/checkov" --directory "$1" --framework bicep secrets --compact --quiet \
    --skip-download
}
# The control: the same scan over a copy of infra/ with a storage account key planted in an app
# setting must fail, so a green scan means the scan reads the settings.
checkov_control() {
  local copy out code=0
  copy="$(mktemp -d "${TMPDIR:-/tmp}/azurebank-infra.XXXXXX")"
  cp -r "$ROOT/infra/." "$copy/"
  # The shape of an account key (88 base64 characters), not a key.
  local planted="DefaultEndpointsProtocol=https;AccountName=stplanted;AccountKey="
  planted+="Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4MTIzNA=="
  sed -i "s|^    AzureWebJobsStorage__credential: |    AzureWebJobsStorage: '$planted'\n&|" "$copy/app.bicep"
  out="$(checkov_scan "$copy" 2>&1)" || code=$?
  rm -rf "$copy"
  if [[ "$code" == 1 ]] && grep -q "CKV_SECRET_3" <<<"$out"; then
    return 0
  fi
  echo "$out" >&2
  log "checkov passed a storage key planted in an app setting (exit $code)"
  return 1
}
azurebank_tool_venv "$ROOT" .venv-infra requirements-infra.txt
step "checkov infra/" checkov_scan "$ROOT/infra"
step "checkov control: a planted storage key fails the scan" checkov_control

SUMMARY_FILE="$(mktemp "${TMPDIR:-/tmp}/azurebank-suites.XXXXXX")"
export AZUREBANK_SUITE_SUMMARY="$SUMMARY_FILE"
# pytest exits 5 when it ran no test: any non-zero exit, that one included, fails the run.
step "pytest" "$VENV_BIN/python" -m pytest "$@"

# The closing line counts the tests; under CI=true a whole run must also have passed tests in
# each of the SQLite, PostgreSQL, Azurite and worker suites, and in the SQL Server suite when its
# URL is set (a CI job that means to test SQL Server must not go green on skips).
if ! closing="$("$VENV_BIN/python" - "$SUMMARY_FILE" "$#" <<'PY'
import json
import os
import sys

path, extra_args = sys.argv[1], int(sys.argv[2])
try:
    with open(path) as f:
        suites = json.load(f)
except (OSError, ValueError):
    print("test.sh: pytest wrote no suite summary", file=sys.stderr)
    sys.exit(1)
total = {k: sum(s[k] for s in suites.values()) for k in ("passed", "failed", "skipped")}
print(f"tests: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
required = ["sqlite", "postgres", "azurite", "worker"]
if os.environ.get("AZUREBANK_TEST_SQLSERVER"):
    required.append("sqlserver")
missing = [n for n in required if suites.get(n, {}).get("passed", 0) == 0]
if os.environ.get("CI", "").lower() == "true" and extra_args == 0 and missing:
    print(f"test.sh: CI=true and no test passed in: {', '.join(missing)}", file=sys.stderr)
    sys.exit(1)
PY
)"; then
  failed+=("suite summary")
fi

if ((${#failed[@]})); then
  log "FAILED: ${failed[*]}"
else
  log "all checks passed"
fi
[[ -n "$closing" ]] && echo "$closing"
((${#failed[@]} == 0))
