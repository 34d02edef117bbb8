#!/usr/bin/env bash
# Installs the PostgreSQL server the store's tests run against: Debian's
# `postgresql` package, when no /usr/lib/postgresql/*/bin/initdb is there
# yet (apt-get, as root or through sudo). The tests start their own
# cluster in a temporary directory on 127.0.0.1 (satchel_store::testing);
# nothing here starts a server or touches one.
#
# Prints the bin directory on success. Exits 1 when PostgreSQL cannot be
# installed (no apt-get, no root and no sudo, no network).
set -euo pipefail

find_bin() {
    local found=""
    for dir in /usr/lib/postgresql/*/bin; do
        [ -x "$dir/initdb" ] && found="$dir"
    done
    [ -n "$found" ] && echo "$found"
}

if bin=$(find_bin); then
    echo "$bin"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-postgres: no apt-get here; install PostgreSQL (initdb, pg_ctl, psql) and set SATCHEL_TEST_PG_BIN" >&2
    exit 1
fi
sudo_cmd=""
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
        echo "install-postgres: not root and no sudo; install the postgresql package" >&2
        exit 1
    fi
    sudo_cmd="sudo"
fi
echo "install-postgres: installing Debian's postgresql package" >&2
# The package would start a system cluster on 5432; the tests need none.
export DEBIAN_FRONTEND=noninteractive
$sudo_cmd apt-get update -qq >&2
$sudo_cmd apt-get install -y -qq --no-install-recommends postgresql >&2
if command -v pg_ctlcluster >/dev/null 2>&1; then
    for cluster in /etc/postgresql/*/main; do
        [ -d "$cluster" ] || continue
        version=$(basename "$(dirname "$cluster")")
        $sudo_cmd pg_ctlcluster "$version" main stop >/dev/null 2>&1 || true
    done
fi
bin=$(find_bin) || {
    echo "install-postgres: the postgresql package installed no initdb" >&2
    exit 1
}
echo "$bin"
