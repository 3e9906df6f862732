#!/bin/sh
# Copyright The streamstall Authors
# SPDX-License-Identifier: Apache-2.0
#
# proxy-vs-nginx.sh: the ocb-built collector's sse_capture proxy against nginx,
# each a process of its own in front of the same fakellm on loopback: 100
# streams at ~4,000 chunks/s, interleaved rounds with a second sse_capture and
# a second nginx as A-vs-A controls; CPU per chunk of the process under test
# and the latency each chunk gains, as ratios (docs/performance.md).
# Installs Debian's nginx when it is missing (as root, or with sudo); flags
# go to proxynginx (-rounds, -streams, -chunks, -gap, -nginx-workers).
set -eu
cd "$(dirname "$0")/../../.."
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
  sudo=$([ "$(id -u)" = 0 ] || echo sudo)
  echo "installing Debian's nginx package"
  $sudo apt-get update && $sudo apt-get install -y --no-install-recommends nginx
  # The script runs nginx itself; the package's own service is not needed.
  if [ -d /run/systemd/system ]; then $sudo systemctl disable --now nginx || true
  elif [ -x /etc/init.d/nginx ]; then $sudo invoke-rc.d nginx stop || true; fi
fi
make otelcol fakellm
go run -C internal/testbed/perf ./proxynginx -otelcol "$PWD/_build/otelcol-streamstall" -fakellm "$PWD/_build/fakellm" "$@"
