// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command demo runs streamstall end to end on one machine with no outside
// service: fakellm (a scripted LLM upstream with realistic stalls), the
// ocb-built collector with sse_capture -> stall -> stall_metrics, real
// clients (the official openai-go and anthropic SDKs through the proxy, the
// hedging client beside it), and prints what the collector derived.
// `make run` builds everything and starts it; `make run JAEGER=1` adds
// Jaeger and prints the queries of its API that find the stalled calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

type options struct {
	otelcol, fakellm, jaeger string
	streams, concurrency     int
	timeFactor               float64
	seed                     uint64
	hold                     bool
}

// defaultOptions are what `make run` runs, and what the golden test holds
// the demo's output to. Seed 80 draws a mix with every profile, and plans
// whose silences are all chunk pacing or stalls of 4.4 s and more: none is
// near the 2 s threshold, so a loaded machine's late timers cannot change a
// stall count.
func defaultOptions() options {
	return options{
		otelcol: "_build/otelcol-streamstall", fakellm: "_build/fakellm",
		streams: 36, concurrency: 12, timeFactor: 0.1, seed: 80, hold: true,
	}
}

func main() {
	o := defaultOptions()
	flag.StringVar(&o.otelcol, "otelcol", o.otelcol, "path of the ocb-built collector")
	flag.StringVar(&o.fakellm, "fakellm", o.fakellm, "path of the fakellm program")
	flag.StringVar(&o.jaeger, "jaeger", o.jaeger, "path of a Jaeger v2 binary; empty: run without Jaeger")
	flag.IntVar(&o.streams, "streams", o.streams, "streaming calls to send through the proxy")
	flag.IntVar(&o.concurrency, "concurrency", o.concurrency, "calls in flight at once")
	flag.Float64Var(&o.timeFactor, "time-factor", o.timeFactor, "speed of fakellm's field profile (1 = real time: 55 s median stalls)")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of fakellm's profiles")
	flag.BoolVar(&o.hold, "hold", o.hold, "with -jaeger: keep running after the summary until Ctrl-C, so that Jaeger can be queried")
	flag.Parse()

	os.Exit(runMain(o))
}

// runMain runs the demo until it ends or is interrupted and returns the
// exit code, after the signal handler is gone.
func runMain(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o, os.Stdout)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "demo: interrupted")
		return 130
	default:
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
}

// run starts the stack, sends the traffic and writes the summary to w.
func run(ctx context.Context, o options, w io.Writer) error {
	st, err := startStack(ctx, o)
	if err != nil {
		return err
	}
	defer st.stop()

	if _, err := fmt.Fprintf(w, "streamstall demo: fakellm at %s, sse_capture proxy at %s, collector logs in %s\n",
		st.fakellmURL, st.proxyURL, st.dir); err != nil {
		return err
	}
	calls, err := sendTraffic(ctx, st, o)
	if err != nil {
		return err
	}
	spans, metrics, err := st.collect(ctx, calls)
	if err != nil {
		return err
	}
	if err := printSummary(w, spans, metrics); err != nil {
		return fmt.Errorf("print the summary: %w", err)
	}
	if st.jaeger == nil {
		return nil
	}
	if err := printJaegerQueries(ctx, w, st.jaeger, spans); err != nil {
		return fmt.Errorf("query jaeger: %w", err)
	}
	if !o.hold {
		return nil
	}
	if _, err := fmt.Fprintln(w, "Press Ctrl-C to stop."); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}
