#!/usr/bin/env bash
# Installs the editor-side validator the tests run against the spec schema: taplo, the engine of the Even Better
# TOML extension, from npm (@taplo/cli, pinned) into .tools/taplo/ (project-local, ignored by git). Needs Node.js
# and npm; does nothing when the pinned version is already there. tests/it/editor_schema.rs looks for it there.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAPLO_CLI_VERSION=0.7.0
DIR="$ROOT/.tools/taplo"
installed=$(node -p "require('$DIR/node_modules/@taplo/cli/package.json').version" 2>/dev/null || true)
[ "$installed" = "$TAPLO_CLI_VERSION" ] && exit 0
command -v npm >/dev/null 2>&1 || { echo "error: npm not found (install Node.js 20 and npm)" >&2; exit 1; }
echo "==> installing @taplo/cli $TAPLO_CLI_VERSION (taplo) into $DIR" >&2
mkdir -p "$DIR"
npm install --prefix "$DIR" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
    "@taplo/cli@$TAPLO_CLI_VERSION" >/dev/null
