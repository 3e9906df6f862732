// Copyright The streamstall Authors
// SPDX-License-Identifier: Apache-2.0

// Command fakellm serves a scripted LLM upstream (OpenAI, Anthropic, Gemini, Ollama and Bedrock wire formats) whose
// timing follows named, seedable profiles. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/streamstall/streamstall/internal/testbed/fakellm"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "fakellm:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done. The listening address goes to stdout with -print-addr.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("fakellm", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address")
	profile := fs.String("profile", fakellm.ProfileSteady,
		"default timing profile ("+strings.Join(fakellm.Profiles, ", ")+") or a JSON script")
	seed := fs.Uint64("seed", 1, "seed of the per-request generators")
	timeFactor := fs.Float64("time-factor", 1, "scale of the named profiles' durations (0.001 = 1000x faster)")
	chunks := fs.Int("chunks", fakellm.DefaultChunks, "default number of content chunks per response")
	printAddr := fs.Bool("print-addr", false, "print the listening address (host:port) on stdout once ready")
	discard := fs.Bool("discard-bodies", false, "do not keep the bytes sent (long benchmark runs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *chunks < 1 { // Config reads 0 as "default"; on the command line it is a mistake
		return fmt.Errorf("-chunks must be at least 1, got %d", *chunks)
	}
	srv, err := fakellm.New(fakellm.Config{
		Profile: *profile, Seed: *seed, TimeFactor: *timeFactor, Chunks: *chunks, DiscardBodies: *discard,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if *printAddr {
		if _, err := fmt.Fprintln(stdout, ln.Addr().String()); err != nil {
			_ = ln.Close()
			return fmt.Errorf("print address: %w", err)
		}
	}
	log.Printf("fakellm listening on http://%s (profile %s, seed %d, time factor %g)", ln.Addr(), *profile, *seed, *timeFactor)

	// Streams in a long stall must end on shutdown rather than hold it: they share ctx.
	hs := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-serveErr; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}
