#!/usr/bin/env bash
# Copy the front-end libraries named in package.json from npm into static/vendor/.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp package.json "$tmp/"
(cd "$tmp" && npm install --no-audit --no-fund --silent)
mkdir -p static/vendor
cp "$tmp/node_modules/htmx.org/dist/htmx.min.js" static/vendor/htmx.min.js
cp "$tmp/node_modules/htmx-ext-ws/dist/ws.min.js" static/vendor/htmx-ext-ws.min.js
cp "$tmp/node_modules/htmx.org/LICENSE" static/vendor/htmx.LICENSE
echo "vendored: $(ls static/vendor | tr '\n' ' ')"
