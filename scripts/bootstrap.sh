#!/usr/bin/env bash
# Creates (or refreshes) the project's virtual environment in .venv from pyproject.toml.
# Sourced by scripts/test and scripts/local; safe to run again: it reinstalls only when
# pyproject.toml changed since the last install.
set -euo pipefail
if [ "${BASH_SOURCE[0]}" = "$0" ] && { [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; }; then
  sed -n '2,4s/^# //p' "$0"  # run, not sourced: its callers' --help is theirs
  exit 0
fi
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.installed-from"
want="$(sha256sum "$root/pyproject.toml" | cut -d' ' -f1)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  python="${PYTHON:-}"
  if [ -z "$python" ]; then
    python="$(command -v python3.11 || command -v python3 || true)"
  fi
  [ -n "$python" ] \
    || { echo "duetime needs Python 3.11 or newer on PATH (or set PYTHON=...)" >&2; exit 1; }
  "$python" -c 'import sys; assert sys.version_info[:2] >= (3, 11), sys.version' \
    || { echo "duetime needs Python 3.11 or newer (set PYTHON=...)" >&2; exit 1; }
  echo "Setting up $venv (one time, about a minute)..." >&2
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "uv==0.13.8"
  "$venv/bin/uv" pip install --quiet --python "$venv/bin/python" -e "$root[dev,infra,local]"
  echo "$want" > "$stamp"
fi
