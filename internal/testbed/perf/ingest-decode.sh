#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# ingest-decode.sh: the ingest endpoint's decoder on the repository's
# benchmark body (100 records of 100 chunk offsets, BenchmarkDecodeRecords)
# and its anchor, encoding/json decoding the same body into plain structs
# (internal/testbed/perf/ingestanchor), one after the other, COUNT (5) runs
# each, alternating; prints nanoseconds per chunk and the median ratio
# (docs/performance.md). Where the ingest package has BenchmarkDecodeVersusJSON
# (both decoders in one loop), it runs too and its ratio-vs-json is printed.
set -eu
cd "$(dirname "$0")/../../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for _ in $(seq "${COUNT:-5}"); do
  go test -run '^$' -bench '^Benchmark(DecodeRecords|DecodeVersusJSON)$' -benchmem ./receiver/ssecapture/internal/ingest/ | grep '^Benchmark' | tee -a "$out"
  go test -C internal/testbed/perf -run '^$' -bench '^BenchmarkEncodingJSON$' -benchmem ./ingestanchor/ | grep '^Benchmark' | tee -a "$out"
done
awk '/^BenchmarkDecodeRecords/ { d[++nd] = $3 / 10000 }
     /^BenchmarkEncodingJSON/ { j[++nj] = $3 / 10000 }
     /^BenchmarkDecodeVersusJSON/ { for (f = 1; f < NF; f++) if ($(f + 1) == "ratio-vs-json") v = v " " $f }
     END {
       n = nd < nj ? nd : nj
       for (i = 1; i <= n; i++) r[i] = d[i] / j[i]
       for (i = 1; i <= n; i++) for (k = i + 1; k <= n; k++) if (r[k] < r[i]) { t = r[i]; r[i] = r[k]; r[k] = t }
       printf "ns per chunk, last run: decoder %.0f, encoding/json %.0f; decoder / encoding/json, median of %d: %.2fx [%.2f, %.2f]\n", d[nd], j[nj], n, r[int((n + 1) / 2)], r[1], r[n]
       if (v != "") printf "BenchmarkDecodeVersusJSON, ratio-vs-json per run:%s\n", v
     }' "$out"
