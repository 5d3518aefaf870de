#!/usr/bin/env bash
# Render a report.html to a PNG with headless Chromium, to check that it reads well.
#   scripts/render_report.sh report/report.html report/report.png [WIDTHxHEIGHT]
# Needs chromium (Debian: apt-get install -y chromium).
set -euo pipefail
html=$(realpath "$1")
png=$(realpath -m "${2:-${1%.html}.png}")
size=${3:-1400,2000}
browser=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [ -z "$browser" ]; then
    echo "error: no chromium found; install it (apt-get install -y chromium)" >&2
    exit 1
fi
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
    --disable-component-update --disable-sync --user-data-dir="$profile" \
    --screenshot="$png" --window-size="$size" "file://$html" >/dev/null 2>&1
test -s "$png" && echo "$png"
