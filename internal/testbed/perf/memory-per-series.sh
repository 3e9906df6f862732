#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# memory-per-series.sh: what a collector holds per metric attribute set
# (docs/performance.md, docs/deployment.md). First in one process (memseries:
# stall and stall_metrics, or contrib's spanmetrics as the anchor, in front of
# contrib's prometheus exporter, otlp_http, or prometheusremotewrite into a real
# Prometheus started here on loopback, one for each run, with its remote-write
# receiver and native histograms (`make prometheus` installs Debian's); the
# live heap after a GC, and the highest heap in use), at 2,000 and 10,000
# sets; then, unless MEMSERIES_ONLY=1,
# the whole ocb-built collector's peak resident set (e2e's
# TestConnectorMemoryPerSeries). PROFILES=dir keeps heap profiles
# (go tool pprof -sample_index=inuse_space).
set -eu
cd "$(dirname "$0")/../../.."
profiles=${PROFILES:+-profiles $PROFILES}
make prometheus
prom_pid= prom_dir=

# start_prometheus starts a Prometheus of its own on a free loopback port and
# sets prom_url once it is ready.
start_prometheus() {
  prom_dir=$(mktemp -d)
  printf 'global:\n  scrape_interval: 15s\n' >"$prom_dir/prometheus.yml"
  for _ in 1 2 3 4 5; do
    port=$(shuf -i 20000-60999 -n 1)
    if [ -n "$(ss -ltnH "sport = :$port")" ]; then continue; fi
    prometheus --config.file="$prom_dir/prometheus.yml" --storage.tsdb.path="$prom_dir/data" \
      --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
      --enable-feature=native-histograms --log.level=warn 2>"$prom_dir/log" &
    prom_pid=$!
    prom_url="http://127.0.0.1:$port"
    for _ in $(seq 60); do
      if curl -fs "$prom_url/-/ready" >/dev/null; then return 0; fi
      if ! kill -0 "$prom_pid" 2>/dev/null; then break; fi
      sleep 0.5
    done
    stop_prometheus
  done
  echo "prometheus did not start" >&2
  exit 1
}

stop_prometheus() {
  if [ -n "$prom_pid" ]; then
    kill "$prom_pid" 2>/dev/null || true
    wait "$prom_pid" 2>/dev/null || true
    grep -v 'Received SIGTERM' "$prom_dir/log" | sed 's/^/prometheus: /' >&2 || true
    rm -rf "$prom_dir"
  fi
  prom_pid=
}
trap stop_prometheus EXIT
trap 'exit 1' INT TERM

for n in 2000 10000; do
  for args in "-connector stall_metrics" "-connector spanmetrics" "-exporter otlphttp" "-exporter prometheusremotewrite" "-trickle 60" "-temporality delta -trickle 60"; do
    url=
    case $args in *prometheusremotewrite*)
      start_prometheus
      url="-prometheus-url $prom_url" ;;
    esac
    # shellcheck disable=SC2086 # word splitting wanted
    go run -C internal/testbed/perf ./memseries -series "$n" $args $url $profiles
    stop_prometheus
  done
done
if [ "${MEMSERIES_ONLY:-}" != 1 ]; then
  make otelcol
  STREAMSTALL_OTELCOL="$PWD/_build/otelcol-streamstall" \
    go test -tags e2e -count=1 -run 'TestConnectorMemoryPerSeries' -v ./e2e/ | grep -E 'series:|^(---|ok|FAIL)'
fi
