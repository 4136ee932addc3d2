#!/usr/bin/env bash
# Installs the real Alertmanager and amtool (Debian's prometheus-alertmanager) that the
# compatibility tests run against, and Debian's chromium, which the status page tests drive
# with Playwright. Idempotent: does nothing when all three are already present.
set -euo pipefail

if command -v amtool >/dev/null 2>&1 && command -v prometheus-alertmanager >/dev/null 2>&1 \
    && command -v chromium >/dev/null 2>&1; then
    echo "amtool, prometheus-alertmanager and chromium already installed"
    exit 0
fi

SUDO=
if [ "$(id -u)" -ne 0 ]; then
    SUDO=sudo
fi

# The tests run their own Alertmanager on a free port; keep the package's postinst from
# starting the system service (invoke-rc.d and deb-systemd-invoke honour policy-rc.d).
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
    $SUDO chmod +x "$POLICY"
    trap '$SUDO rm -f "$POLICY"' EXIT
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends prometheus-alertmanager chromium

command -v amtool >/dev/null
command -v prometheus-alertmanager >/dev/null
command -v chromium >/dev/null
echo "installed: $(amtool --version 2>&1 | head -n 1)"
