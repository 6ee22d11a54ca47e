#!/usr/bin/env bash
# Start a throwaway PostgreSQL on 127.0.0.1 for the gateway tests (CI and developers).
#
#   PRIVLAB_TEST_POSTGRES_URL=postgresql+psycopg://privlab:privlab@127.0.0.1:5433/privlab_test \
#       scripts/ci-postgres.sh
#
# Without PRIVLAB_TEST_POSTGRES_URL it does nothing (the PostgreSQL tests then skip, saying
# why). With it, it makes sure a server answers at that URL: already running -> only the
# role and database are ensured; otherwise Debian's PostgreSQL is installed if missing
# (apt-get, root only), a cluster is initialised under $PRIVLAB_PG_DATA
# (default /var/tmp/privlab-ci-postgres-PORT) and started listening on 127.0.0.1 only.
# Any failure exits non-zero: when the URL is set, the PostgreSQL tests must run.
set -euo pipefail

URL="${PRIVLAB_TEST_POSTGRES_URL:-}"
if [ -z "$URL" ]; then
  echo "ci-postgres: PRIVLAB_TEST_POSTGRES_URL not set; nothing to start (PostgreSQL tests" \
       "skip unless a server answers at their default URL)" >&2
  exit 0
fi

re='^postgresql(\+[a-z0-9]+)?://([A-Za-z0-9_]+)(:([^@]*))?@(127\.0\.0\.1|localhost):([0-9]+)/([A-Za-z0-9_]+)$'
if [[ ! "$URL" =~ $re ]]; then
  echo "ci-postgres: PRIVLAB_TEST_POSTGRES_URL must look like" \
       "postgresql+psycopg://USER[:PASSWORD]@127.0.0.1:PORT/DB, got $URL" >&2
  exit 2
fi
PGUSER_NAME="${BASH_REMATCH[2]}"
PGPASS="${BASH_REMATCH[4]}"
PORT="${BASH_REMATCH[6]}"
DB="${BASH_REMATCH[7]}"
HOST=127.0.0.1
DATA="${PRIVLAB_PG_DATA:-/var/tmp/privlab-ci-postgres-$PORT}"

as_postgres() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

find_bin() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; fi
}

BIN="$(find_bin)"
if [ -z "$BIN" ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "ci-postgres: PostgreSQL is not installed and this is not root; install Debian's" \
         "postgresql package or unset PRIVLAB_TEST_POSTGRES_URL" >&2
    exit 1
  fi
  echo "ci-postgres: installing Debian's postgresql" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  BIN="$(find_bin)"
  [ -n "$BIN" ] || { echo "ci-postgres: postgresql installed but initdb not found" >&2; exit 1; }
fi

if "$BIN/pg_isready" -q -h "$HOST" -p "$PORT"; then
  echo "ci-postgres: a server already answers on $HOST:$PORT" >&2
else
  if [ ! -s "$DATA/PG_VERSION" ]; then
    mkdir -p "$DATA"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$DATA"; fi
    chmod 700 "$DATA"
    as_postgres "$BIN/initdb" -D "$DATA" -U postgres --auth-local=trust \
      --auth-host=scram-sha-256 --encoding=UTF8 --locale=C.UTF-8 >/dev/null
    # superuser over the local socket only; TCP logins need the role's password
  fi
  as_postgres "$BIN/pg_ctl" -D "$DATA" -l "$DATA/server.log" -w -t 60 start \
    -o "-c listen_addresses=$HOST -p $PORT -c unix_socket_directories=$DATA" >/dev/null
  echo "ci-postgres: started PostgreSQL $("$BIN/postgres" -V | awk '{print $3}') on" \
       "$HOST:$PORT (data $DATA)" >&2
fi

psql_admin() {
  as_postgres "$BIN/psql" -v ON_ERROR_STOP=1 -qtA -h "$DATA" -p "$PORT" -U postgres \
    -d postgres "$@"
}
if [ -d "$DATA" ] && [ -S "$DATA/.s.PGSQL.$PORT" ]; then
  sql_pass="NULL"
  if [ -n "$PGPASS" ]; then sql_pass="'${PGPASS//\'/\'\'}'"; fi
  if [ "$(psql_admin -c "SELECT 1 FROM pg_roles WHERE rolname = '$PGUSER_NAME'")" != 1 ]; then
    psql_admin -c "CREATE ROLE \"$PGUSER_NAME\" LOGIN CREATEDB PASSWORD $sql_pass"
  else
    psql_admin -c "ALTER ROLE \"$PGUSER_NAME\" LOGIN CREATEDB PASSWORD $sql_pass"
  fi
  if [ "$(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$DB'")" != 1 ]; then
    psql_admin -c "CREATE DATABASE \"$DB\" OWNER \"$PGUSER_NAME\""
  fi
else
  echo "ci-postgres: server on $HOST:$PORT was not started by this script; assuming its" \
       "role and database exist" >&2
fi

PGPASSWORD="$PGPASS" "$BIN/psql" -qtA -h "$HOST" -p "$PORT" -U "$PGUSER_NAME" -d "$DB" \
  -c "SELECT 1" >/dev/null \
  || { echo "ci-postgres: cannot log in at $HOST:$PORT as $PGUSER_NAME to $DB" >&2; exit 1; }
echo "ci-postgres: ready at $HOST:$PORT/$DB" >&2
