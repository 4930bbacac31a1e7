# shellcheck shell=bash
# Sourced by scripts/test.sh and scripts/run.sh: create or refresh the project's .venv.
#
# The venv is rebuilt only when it is missing or is not Python 3.11, and pip runs only when
# requirements.txt, requirements-dev.txt or pyproject.toml changed since the last good install
# (a hash stamp inside .venv), so a second run starts in seconds.

azurebank_python() {
  # pyproject.toml: requires-python >=3.11,<3.12 (the Functions runtime's version).
  local candidate
  for candidate in "${AZUREBANK_PYTHON:-}" python3.11 python3; do
    [[ -n "$candidate" ]] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "azurebank: Python 3.11 is needed (python3.11 or python3); set AZUREBANK_PYTHON to one" >&2
  return 1
}

azurebank_venv() {
  local root="$1"
  local venv="$root/.venv"
  local stamp="$venv/.azurebank-requirements.sha256"
  local python want have
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    2>/dev/null; then
    python="$(azurebank_python)"
    echo "azurebank: creating .venv with $python" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
  fi
  want="$(cat "$root/requirements.txt" "$root/requirements-dev.txt" "$root/pyproject.toml" |
    sha256sum | cut -d' ' -f1)"
  have="$(cat "$stamp" 2>/dev/null || true)"
  if [[ "$want" != "$have" ]]; then
    echo "azurebank: installing requirements-dev.txt and the project into .venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
      -r "$root/requirements-dev.txt" -e "$root"
    echo "$want" >"$stamp"
  fi
}

azurebank_tool_venv() { # root venv-dir requirements-file
  # A tool whose pins conflict with requirements-dev.txt's gets a venv of its own, refreshed
  # the same way: pip runs only when its requirements file changed.
  local root="$1" venv="$1/$2" requirements="$1/$3"
  local stamp="$venv/.azurebank-requirements.sha256" python want have
  if ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    2>/dev/null; then
    python="$(azurebank_python)"
    echo "azurebank: creating $2 with $python" >&2
    rm -rf "$venv"
    "$python" -m venv "$venv"
  fi
  want="$(sha256sum "$requirements" | cut -d' ' -f1)"
  have="$(cat "$stamp" 2>/dev/null || true)"
  if [[ "$want" != "$have" ]]; then
    echo "azurebank: installing $3 into $2" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$want" >"$stamp"
  fi
}
