#!/bin/sh
# Debian's chromium + chromedriver for the dashboard's browser test (tests/operator/dashboard/test_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is already there. The Python driver is the
# `playwright` package, used with executable_path=/usr/bin/chromium (its own browser download
# is not used).
set -eu
if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
    exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends chromium chromium-driver
/usr/bin/chromium --version
