# Sourced by the scripts that assemble PostgreSQL SQL from sql/postgres/:
# the plain SQL install (build-plain-sql.sh) and the extension's update
# scripts (build-update-sql.sh). One list of files, one order: pg_ext/src/lib.rs.
#
#   pg_version            the version being built (Cargo.toml's workspace version)
#   pg_schema_file        the full current schema (fresh installs)
#   pg_code_files         every other file, in install order (all CREATE OR REPLACE)
#   pg_steps_from V       the upgrade steps from released version V to pg_version,
#                         in order, as "FROM TO FILE" lines (fails if there is no path)
#   pg_released           every version an upgrade starts from (oldest first)

pg_version() {
  sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml
}

pg_schema_file() {
  grep -o 'sql/postgres/[a-z_]*\.sql' pg_ext/src/lib.rs | head -n 1
}

pg_code_files() {
  grep -o 'sql/postgres/[a-z_]*\.sql' pg_ext/src/lib.rs | tail -n +2
}

# Versions compare as dotted numbers.
pg_vsort() { sort -t. -k1,1n -k2,2n -k3,3n; }

pg_released() {
  local f
  for f in sql/postgres/upgrade/*--*.sql; do
    f=${f##*/}
    echo "${f%%--*}"
  done | pg_vsort
}

pg_steps_from() {
  local at=$1 target
  target=$(pg_version)
  while [ "$at" != "$target" ]; do
    local step
    step=$(ls sql/postgres/upgrade/"$at"--*.sql 2>/dev/null | head -n 1)
    if [ -z "$step" ]; then
      echo "pg-sources: no upgrade step from $at toward $target in sql/postgres/upgrade/" >&2
      return 1
    fi
    local to=${step##*/}
    to=${to#*--}
    to=${to%.sql}
    echo "$at $to $step"
    at=$to
  done
}

# Fails if a dollar-quote tag the assembled scripts use appears in a source.
pg_check_tags() {
  if grep -l -F -e '$alkstore_step$' -e '$alkstore_install$' "$@" >/dev/null 2>&1; then
    echo "pg-sources: a source file uses a reserved dollar-quote tag" >&2
    return 1
  fi
}
