#!/usr/bin/env bash
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
# rehearse.sh: a release as a stranger consumes it, offline (make rehearse,
# part of make test; docs/releasing.md).
#
# In a scratch clone of this checkout (tracked changes included),
# `make release VERSION=v0.99.0` makes the release commit and the tags. A
# file-system module proxy is written from exactly those tags (modproxy).
# Then, with that proxy and the developer's module cache as the only sources
# (no network), no replace, no go.work and a module cache of its own:
#   (a) ocb builds the README's manifest, and the collector it builds
#       validates every config of examples/;
#   (b) a program that imports only hedge builds and runs in an empty module,
#       and its module graph holds no collector module.
# Any failure ends the run and says what broke. The build cache is the
# developer's, so only streamstall's own packages are compiled again.
#
#   internal/tools/release/rehearse.sh          # what make rehearse runs
#   KEEP=1 internal/tools/release/rehearse.sh   # keep the scratch directory
set -euo pipefail

version=${REHEARSE_VERSION:-v0.99.0}
placeholder=v0.0.0-00010101000000-000000000000
repo=$(cd "$(dirname "$0")/../../.." && pwd)
work=$(mktemp -d)
if [ -z "${KEEP:-}" ]; then
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
else
  echo "rehearse: scratch directory $work"
fi

fail() {
  echo "rehearse: FAIL: $*" >&2
  exit 1
}
# step NAME: prints how long the step since the previous one took.
started=${EPOCHREALTIME/./}
last=$started
step() {
  local now=${EPOCHREALTIME/./}
  printf 'rehearse: %-62s %6.1f s\n' "$1" "$(((now - last) / 100000))e-1"
  last=$now
}
# quiet LOG CMD...: runs CMD with its output in LOG, shown only when it fails.
quiet() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    return 1
  fi
}

# The tools, from the checkout's tools module. Nothing here writes to the
# checkout: it is read by release check and cloned.
devcache=$(go env GOMODCACHE)
go build -C "$repo/internal/tools" -o "$work/bin/" ./release ./modproxy go.opentelemetry.io/collector/cmd/builder
"$work/bin/release" -C "$repo" check || fail "the checkout does not name one version (above): fix it before any release"
step "tools built, checkout consistent"

# The scratch clone, with the checkout's uncommitted changes to tracked files.
export GIT_AUTHOR_NAME=rehearsal GIT_AUTHOR_EMAIL=rehearsal@localhost
export GIT_COMMITTER_NAME=rehearsal GIT_COMMITTER_EMAIL=rehearsal@localhost
clone=$work/repo
git clone -q --no-tags "$repo" "$clone"
if ! git -C "$repo" diff HEAD --quiet; then
  git -C "$repo" diff HEAD --binary | git -C "$clone" apply --index
  git -C "$clone" commit -q -m "rehearsal: the checkout's uncommitted changes"
fi
quiet "$work/release.log" make -C "$clone" --no-print-directory release VERSION="$version" ||
  fail "make release VERSION=$version failed (above)"
sed 's/^/  /' "$work/release.log"

[ -z "$(git -C "$clone" status --porcelain)" ] || fail "the working tree is not clean after make release"
[ "$(git -C "$clone" log -1 --format=%s)" = "release $version" ] || fail "HEAD is not the commit \"release $version\""
want=$("$work/bin/release" -C "$clone" tags "$version" | sort)
got=$(git -C "$clone" tag --points-at HEAD | sort)
[ "$want" = "$got" ] || fail "the tags at HEAD are not one per module of versions.yaml: want
$want
got
$got"
if git -C "$clone" grep -n "$placeholder" HEAD -- '*go.mod'; then
  fail "the tagged commit still requires the placeholder $placeholder (above)"
fi
"$work/bin/release" -C "$clone" check || fail "the tagged commit does not name $version everywhere (above)"
# The third-party modules that the consumers below need, in the developer's
# cache (make otelcol and the tests have fetched them already; this is a no-op then).
for m in . hedge; do (cd "$clone/$m" && go mod download); done
[ -z "$(git -C "$clone" status --porcelain)" ] || fail "go mod download changed the tagged go.mod files: $(git -C "$clone" status --porcelain)"
step "make release VERSION=$version in a scratch clone"

"$work/bin/modproxy" -repo "$clone" -version "$version" -out "$work/proxy" | sed 's/^/  proxy: /'
step "module proxy from the $(echo "$got" | wc -l) tags"

# From here on: no network, no replace, no go.work, a fresh module cache.
export GOPROXY="file://$work/proxy,file://$devcache/cache/download"
export GOMODCACHE=$work/mod-ocb GOFLAGS=-modcacherw GOWORK=off GOTOOLCHAIN=local
# The rehearsal's modules are in no checksum database; the third-party ones
# come from the developer's cache, which verified them when it fetched them.
export GOSUMDB=off GONOSUMDB='' GONOPROXY='' GOPRIVATE=''

# (a) The README's manifest, as `make release` pinned it, built by ocb.
mkdir -p "$work/ocb"
"$work/bin/release" -C "$clone" manifest >"$work/ocb/manifest.yaml"
(cd "$work/ocb" && quiet "$work/ocb.log" "$work/bin/builder" --config manifest.yaml) ||
  fail "ocb could not build the README's manifest at $version from the tags alone (above)"
dist=$work/ocb/$(sed -n 's/^  output_path: *//p' "$work/ocb/manifest.yaml")
collector=$dist/$(sed -n 's/^  name: *//p' "$work/ocb/manifest.yaml" | head -n 1)
[ -x "$collector" ] || fail "ocb built no $collector"
if grep -n '^replace\|=>' "$dist/go.mod"; then
  fail "the distribution's go.mod replaces a module (above)"
fi
# What is compiled in, from the binary's build information: streamstall's
# modules at the release, none of them replaced.
go version -m "$collector" | awk -v v="$version" '$1 == "=>" || ($2 ~ /^github\.com\/streamstall\// && $3 != v) { bad = 1; print }
  END { exit bad }' || fail "the collector was built from other streamstall modules than the tags of $version (above)"
step "(a) ocb built the README's manifest"

configs=$(find "$clone/examples" -name '*.yaml' | sort)
[ -n "$configs" ] || fail "no config in examples/"
for cfg in $configs; do
  # Each ${env:NAME} that a config reads gets a value, as a deployment would give it.
  # shellcheck disable=SC2016 # the ${env:...} are the configs' own, not the shell's
  vars=$(grep -o '\${env:[A-Za-z_][A-Za-z0-9_]*' "$cfg" | sed 's/^${env://; s/$/=rehearsal/' | sort -u || true)
  # shellcheck disable=SC2086
  out=$(env $vars "$collector" validate --config "$cfg" 2>&1) ||
    fail "otelcol validate --config examples/$(basename "$cfg"):
$out"
done
step "(a) the built collector validated $(echo "$configs" | wc -l) configs of examples/"

# (b) A program that imports only hedge, in an empty module, with a module
# cache of its own: what it downloads is what a stranger's go get downloads.
user=$work/hedgeuser
export GOMODCACHE=$work/mod-hedge
mkdir -p "$user"
cp "$repo/internal/tools/release/testdata/hedgeuser/main.go" "$user/"
(
  cd "$user"
  quiet "$work/hedge.log" go mod init example.com/hedgeuser &&
    quiet "$work/hedge.log" go get "github.com/streamstall/streamstall/hedge@$version" &&
    quiet "$work/hedge.log" go mod tidy &&
    quiet "$work/hedge.log" go build -trimpath -o hedgeuser .
) || fail "a program importing hedge@$version does not build from the tags alone (above)"
"$user/hedgeuser" || fail "the hedge program failed"
# -e: the developer's cache holds no .info (the version's date) of the modules
# whose go.mod alone it fetched; a module that is missing fails the build above.
graph=$(cd "$user" && go list -m -e -f '{{.Path}} {{.Version}}' all)
if echo "$graph" | grep '^go\.opentelemetry\.io/collector'; then
  fail "the hedge program's module graph holds the collector modules above"
fi
if echo "$graph" | grep '^github\.com/streamstall/streamstall '; then
  fail "the hedge program's module graph holds the collector components' module"
fi
# Compiled in: hedge and what it imports, never fakellm (hedge's tests' server)
# nor the collector components.
if go version -m "$user/hedgeuser" | grep -E 'testbed/fakellm|streamstall/streamstall[[:space:]]|go\.opentelemetry\.io/collector'; then
  fail "the hedge program has the modules above compiled in"
fi
zips=$(find "$GOMODCACHE/cache/download" -name '*.zip' | wc -l)
step "(b) hedge program ran: $(($(echo "$graph" | wc -l) - 1)) modules in its graph, $zips downloaded, no collector"

printf 'rehearse: passed in %.1f s\n' "$(((${EPOCHREALTIME/./} - started) / 100000))e-1"
