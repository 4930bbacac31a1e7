#!/usr/bin/env bash
# azd's postprovision hook (azure.yaml): what the template cannot do without putting a secret in
# a parameter, an output or the deployment history, done with the deployer's own sign-in
# (`az login`, `azd auth login`):
#
#   1. the two keys: each generated once by `azurebank keys generate` and stored in Key Vault as
#      it is made (never echoed, never on a command line); an existing key is left as it is;
#   2. the migrations: `azurebank db upgrade` as the deployer, the SQL server's Entra admin;
#   3. the app identity's database user: `azurebank db grant` (read and write, no DDL).
#
# For 2 and 3 the SQL firewall admits the deployer's public address for the length of this run
# only (DEPLOYER_IP_ADDRESS, or the address a public echo service reports). Every SQL statement
# is the CLI's; none is in this script. azd passes main.bicep's outputs as variables.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
log() { echo "postprovision: $*" >&2; }

for name in AZURE_RESOURCE_GROUP AZURE_KEY_VAULT_NAME AZURE_FUNCTION_APP_NAME \
  AZURE_SQL_SERVER_NAME AZURE_SQL_SERVER_FQDN AZURE_SQL_DATABASE APP_IDENTITY_NAME \
  APP_IDENTITY_PRINCIPAL_ID; do
  if [[ -z "${!name:-}" ]]; then
    log "$name is not set: run this through azd (azd provision), which passes main.bicep's outputs"
    exit 1
  fi
done
# The deployer's DefaultAzureCredential must be the deployer (the Azure CLI's sign-in), never
# pointed at a managed identity by a variable left in the environment.
unset AZURE_CLIENT_ID AZURE_CLIENT_SECRET

# The project's own .venv, as scripts/run.sh and scripts/test.sh make it.
# shellcheck source=scripts/_venv.sh
source "$ROOT/scripts/_venv.sh"
azurebank_venv "$ROOT"
AZUREBANK="$ROOT/.venv/bin/azurebank"

# --- 1. the keys ---------------------------------------------------------------------------
# Role assignments take minutes to reach Key Vault: list until the deployer's Secrets Officer
# role is seen (at most ~5 minutes), then create what is missing.
existing=""
for attempt in $(seq 1 20); do
  if existing="$(az keyvault secret list --vault-name "$AZURE_KEY_VAULT_NAME" \
    --query '[].name' -o tsv 2>/dev/null)"; then
    break
  fi
  ((attempt == 20)) && { log "Key Vault $AZURE_KEY_VAULT_NAME refused the listing"; exit 1; }
  log "waiting for the Key Vault role to take effect ($attempt/20)"
  sleep 15
done

created=0
store_key() { # secret-name setting
  if grep -qx "$1" <<<"$existing"; then
    log "$2: $1 is in Key Vault already; left as it is"
    return 0
  fi
  local file
  file="$(umask 077 && mktemp)"
  # The key goes from the generator to a file only this user can read, then into the vault.
  "$AZUREBANK" keys generate "$2" | tr -d '\n' >"$file"
  if ! az keyvault secret set --vault-name "$AZURE_KEY_VAULT_NAME" --name "$1" \
    --file "$file" --encoding utf-8 --content-type "$2" --output none; then
    rm -f "$file"
    log "could not store $1"
    return 1
  fi
  rm -f "$file"
  created=1
  log "$2: generated and stored as $1"
}
store_key audit-chain-key Audit__ChainKey
store_key auth-signing-key Auth__SigningKey
if ((created)); then
  # The app read its Key Vault references before the secrets existed; a restart reads them again.
  az functionapp restart --resource-group "$AZURE_RESOURCE_GROUP" \
    --name "$AZURE_FUNCTION_APP_NAME" --output none
  log "restarted $AZURE_FUNCTION_APP_NAME so its Key Vault references resolve"
fi

# --- 2 and 3. the database, through a firewall opening of this run's own -----------------------
address="${DEPLOYER_IP_ADDRESS:-}"
if [[ -z "$address" ]]; then
  address="$(curl -fsS --max-time 10 https://api.ipify.org)" || {
    log "could not learn this machine's public address: set DEPLOYER_IP_ADDRESS"
    exit 1
  }
fi
RULE="azd-postprovision"
close_firewall() {
  az sql server firewall-rule delete --resource-group "$AZURE_RESOURCE_GROUP" \
    --server "$AZURE_SQL_SERVER_NAME" --name "$RULE" --output none 2>/dev/null || true
}
trap close_firewall EXIT
az sql server firewall-rule create --resource-group "$AZURE_RESOURCE_GROUP" \
  --server "$AZURE_SQL_SERVER_NAME" --name "$RULE" \
  --start-ip-address "$address" --end-ip-address "$address" --output none
log "the SQL firewall admits $address until this hook ends"

# No password: the engine signs in with the deployer's Entra token (shared/db/engine.py).
export Database__Url="mssql+pyodbc://@${AZURE_SQL_SERVER_FQDN}:1433/${AZURE_SQL_DATABASE}?driver=ODBC+Driver+18+for+SQL+Server&Encrypt=yes"
"$AZUREBANK" db upgrade
"$AZUREBANK" db grant --principal "$APP_IDENTITY_NAME" --object-id "$APP_IDENTITY_PRINCIPAL_ID"
log "done: keys in Key Vault, schema at head, $APP_IDENTITY_NAME granted"
