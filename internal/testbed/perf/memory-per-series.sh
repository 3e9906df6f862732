#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# memory-per-series.sh: what a collector holds per metric attribute set
# (docs/performance.md, docs/deployment.md). First in one process (memseries:
# stall and stall_metrics, or contrib's spanmetrics as the anchor, in front of
# contrib's prometheus exporter or otlp_http; the live heap after a GC, and the
# highest heap in use), at 2,000 and 10,000 sets; then, unless MEMSERIES_ONLY=1,
# the whole ocb-built collector's peak resident set (e2e's
# TestConnectorMemoryPerSeries). PROFILES=dir keeps heap profiles
# (go tool pprof -sample_index=inuse_space).
set -eu
cd "$(dirname "$0")/../../.."
profiles=${PROFILES:+-profiles $PROFILES}
for n in 2000 10000; do
  for args in "-connector stall_metrics" "-connector spanmetrics" "-exporter otlphttp" "-trickle 60" "-temporality delta -trickle 60"; do
    # shellcheck disable=SC2086 # word splitting wanted
    go run -C internal/testbed/perf ./memseries -series "$n" $args $profiles
  done
done
if [ "${MEMSERIES_ONLY:-}" != 1 ]; then
  make otelcol
  STREAMSTALL_OTELCOL="$PWD/_build/otelcol-streamstall" \
    go test -tags e2e -count=1 -run 'TestConnectorMemoryPerSeries' -v ./e2e/ | grep -E 'series:|^(---|ok|FAIL)'
fi
