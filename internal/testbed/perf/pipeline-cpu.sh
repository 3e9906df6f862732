#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# pipeline-cpu.sh: the ocb-built collector's CPU per span with stall, and with
# stall and stall_metrics, against the same collector receiving only, on OTLP
# spans of 200 chunk events; interleaved rounds with a second receive-only
# collector as the A-vs-A control (docs/performance.md). Flags go to
# pipelinecpu (-rounds, -spans, -chunks, -per-request, -compare-otelcol).
set -eu
cd "$(dirname "$0")/../../.."
make otelcol
go run -C internal/testbed/perf ./pipelinecpu -otelcol "$PWD/_build/otelcol-streamstall" "$@"
