#!/bin/sh
# Set-up of the report browser test: makes sure Debian's headless-capable
# chromium is installed. Installs it with apt-get when missing and this runs as
# root; never fails, because the browser test itself skips (and says why) when
# chromium is still missing (e.g. no network, not root).
if [ -x /usr/bin/chromium ]; then
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null)"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "chromium missing and cannot be installed here (needs root and apt-get); the browser test will skip"
  exit 0
fi
echo "installing chromium with apt-get (the report browser test needs it)"
if DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends chromium \
    >/tmp/mlbench-chromium-install.log 2>&1; then
  echo "installed: $(/usr/bin/chromium --version 2>/dev/null)"
else
  echo "apt-get install chromium failed (no network?); see /tmp/mlbench-chromium-install.log; the browser test will skip"
fi
exit 0
