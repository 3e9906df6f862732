#!/usr/bin/env bash
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
# usercost.sh: what a program that imports only the hedge client costs its
# user, from a clean module cache and a clean build cache. A throwaway module
# outside the repository requires streamstall through a replace directive to
# this checkout, so its go.sum holds what a user of a published version would
# hold (the replaced module's go.mod is read the same way, pruned graph
# included). Downloads come from GOPROXY (the module proxy by default).
#
#   hedge/usercost.sh                # the plain client
#   hedge/usercost.sh openaisdk      # the client with the openai-go adapter
#   hedge/usercost.sh stdlib         # the floor: the same program on net/http alone
#   KEEP=1 hedge/usercost.sh         # keep the throwaway module and caches
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
variant=${1:-plain}
work=$(mktemp -d)
if [ -z "${KEEP:-}" ]; then
  trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
else
  echo "work directory: $work"
fi
mkdir -p "$work/user"
cd "$work/user"

# Every module of the checkout (the root one and any nested one) is replaced
# by its directory: the throwaway module sees the repository as published.
replaces=$(find "$repo" -name go.mod -not -path '*/internal/tools/*' -not -path '*/_build/*' -not -path '*/testdata/*' |
  while read -r f; do echo "replace $(awk '/^module /{print $2; exit}' "$f") => $(dirname "$f")"; done)
cat >go.mod <<MOD
module example.com/hedgeuser

go 1.26.0

$replaces
MOD

if [ "$variant" = openaisdk ]; then
  sdkimport='"github.com/openai/openai-go/v3"
	"github.com/streamstall/streamstall/hedge/openaisdk"'
  sdksource='openaisdk.NewSource("sdk", openai.NewClient(), openai.ChatCompletionNewParams{Model: "gpt-4.1"}),'
else
  sdkimport=''
  sdksource=''
fi
cat >main.go <<GO
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/streamstall/streamstall/hedge"
	$sdkimport
)

func main() {
	h, err := hedge.New([]hedge.Source{
		hedge.NewOpenAIChatSource(hedge.Endpoint{BaseURL: "http://127.0.0.1:1/v1", Model: "gpt-4.1"}),
		hedge.NewAnthropicSource(hedge.Endpoint{BaseURL: "http://127.0.0.1:1/v1", Model: "claude-sonnet-4-5"}),
		$sdksource
	}, hedge.StallTimeout(60*time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer h.Close()
	res, err := h.Complete(context.Background(), hedge.Request{Messages: []hedge.Message{{Role: "user", Content: "Hi"}}})
	fmt.Println(res.Text, err)
}
GO
if [ "$variant" = stdlib ]; then
  printf 'module example.com/hedgeuser\n\ngo 1.26.0\n' >go.mod
  cat >main.go <<'GO'
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

func main() {
	body, _ := json.Marshal(map[string]any{"model": "gpt-4.1", "stream": true})
	resp, err := http.Post("http://127.0.0.1:1/v1/chat/completions", "application/json", bytes.NewReader(body))
	fmt.Println(resp, err)
}
GO
fi

export GOMODCACHE="$work/mod" GOCACHE="$work/cache" GOFLAGS="-modcacherw -buildvcs=false"
s=$(date +%s.%N)
go mod tidy >/dev/null 2>&1 || go mod tidy
tidy=$(echo "$(date +%s.%N) - $s" | bc)
# Wall time depends on what else runs; CPU time (user + sys, all cores) less so.
TIMEFORMAT='%R %U %S'
read -r build bu bs < <({ time go build -trimpath -o hedgeuser . >/dev/null; } 2>&1)
buildcpu=$(echo "$bu + $bs" | bc)

dl="$GOMODCACHE/cache/download"
mkdir -p "$dl"
touch go.sum
printf 'variant:                         %s\n' "$variant"
printf 'modules in go.sum:               %d (%d with source, the rest go.mod only)\n' \
  "$(cut -d' ' -f1 go.sum | sort -u | wc -l)" "$(grep -v '/go.mod h1:' go.sum | cut -d' ' -f1 | sort -u | wc -l)"
printf 'modules in its module graph:      %d (go list -m all; MVS selects their versions)\n' "$(go list -m all | tail -n +2 | wc -l)"
printf 'modules whose code is built:     %d\n' "$(go list -deps -f '{{with .Module}}{{.Path}}{{end}}' . | sort -u | grep -vc '^example.com/hedgeuser$' || true)"
printf 'downloaded (module cache):       %.1f MB in %d zips and %d go.mod files\n' \
  "$(echo "$(du -sk "$dl" | cut -f1) / 1024" | bc -l)" "$(find "$dl" -name '*.zip' | wc -l)" "$(find "$dl" -name '*.mod' | wc -l)"
printf 'extracted sources:               %.0f MB\n' "$(echo "$(du -sk --exclude=cache "$GOMODCACHE" | cut -f1) / 1024" | bc -l)"
printf 'go mod tidy (download):          %.1f s\n' "$tidy"
printf 'go build, clean build cache:     %.1f s wall, %.0f s CPU\n' "$build" "$buildcpu"
printf 'binary (-trimpath):              %.1f MB\n' "$(echo "$(stat -c %s hedgeuser) / 1048576" | bc -l)"
