#!/usr/bin/env bash
# Make headless Chromium available for the report render tests (tests/risk/test_report_render.py,
# tests/report/test_report_chromium.py: first page fits one screen, no overlapping text, PDF).
#
#   PRIVLAB_TEST_CHROMIUM=1 scripts/ci-chromium.sh
#
# Without PRIVLAB_TEST_CHROMIUM=1 it does nothing (the render test then skips, saying why).
# With it, Debian's chromium is installed if missing (apt-get, root only) and any failure
# exits non-zero: when the variable is set, the render test must run.
set -euo pipefail

if [ "${PRIVLAB_TEST_CHROMIUM:-}" != 1 ]; then
  echo "ci-chromium: PRIVLAB_TEST_CHROMIUM not set to 1; nothing to install (the render" \
       "test skips unless chromium is on PATH)" >&2
  exit 0
fi
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
  echo "ci-chromium: chromium already installed" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ci-chromium: chromium is not installed and this is not root; install Debian's" \
       "chromium package or unset PRIVLAB_TEST_CHROMIUM" >&2
  exit 1
fi
echo "ci-chromium: installing Debian's chromium" >&2
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null 2>&1 \
  || { echo "ci-chromium: chromium installed but not on PATH" >&2; exit 1; }
echo "ci-chromium: ready ($(chromium --version 2>/dev/null || echo chromium))" >&2
