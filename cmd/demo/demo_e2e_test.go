// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite "+goldenPath+" from this run of the demo")

// binary is the program at the environment variable env (make e2e sets
// it), or _build/name; the test fails when it is missing.
func binary(t *testing.T, env, name string) string {
	t.Helper()
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join("..", "..", "_build", name)
	}
	abs, err := filepath.Abs(p)
	require.NoError(t, err)
	_, err = os.Stat(abs)
	require.NoError(t, err, "run this test with `make e2e`, which builds the collector and fakellm, or set %s", env)
	return abs
}

// TestDemoMatchesGolden runs the demo as `make run` does and compares its
// summary with the golden one, which docs/quickstart.md quotes: the same
// calls, counts, outcomes and timeline shapes, and timings within jitter.
func TestDemoMatchesGolden(t *testing.T) {
	o := defaultOptions()
	o.otelcol = binary(t, "STREAMSTALL_OTELCOL", "otelcol-streamstall")
	o.fakellm = binary(t, "STREAMSTALL_FAKELLM", "fakellm")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	require.NoError(t, run(ctx, o, &out))
	got := normalizeSummary(out.String())
	if *update {
		require.NoError(t, os.WriteFile(goldenPath, []byte(got), 0o600))
		return
	}
	if diffs := summaryDiff(readGolden(t), got); len(diffs) > 0 {
		t.Fatalf("the demo's summary left the golden (%s; rerun with -update after a deliberate change, then update docs/quickstart.md):\n%s",
			goldenPath, strings.Join(diffs, "\n"))
	}
}
