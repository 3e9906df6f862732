#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# ingest-decode.sh: the ingest endpoint's decoder on the repository's
# benchmark body (100 records of 100 chunk offsets): BenchmarkDecodeRecords and its
# sub-benchmarks in one run, with the nanoseconds per chunk of
# BenchmarkDecodeRecords (docs/performance.md). COUNT (5) runs each.
set -eu
cd "$(dirname "$0")/../../.."
go test -run '^$' -bench 'DecodeRecords' -benchmem -count "${COUNT:-5}" ./receiver/ssecapture/internal/ingest/ |
  awk '{ print } /^BenchmarkDecodeRecords/ { printf "  %.0f ns per chunk\n", $3 / 10000 }'
