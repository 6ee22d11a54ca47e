#!/usr/bin/env bash
# System services the test suite can use, each only when asked for (see each script):
#   PRIVLAB_TEST_POSTGRES_URL=...  -> scripts/ci-postgres.sh starts PostgreSQL on 127.0.0.1
#   PRIVLAB_TEST_CHROMIUM=1        -> scripts/ci-chromium.sh installs headless Chromium
# With neither set it does nothing and the tests that need them skip, saying why.
set -euo pipefail
here="$(dirname "$0")"
"$here/ci-postgres.sh"
"$here/ci-chromium.sh"
