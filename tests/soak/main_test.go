package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/sidecarproc"
	"github.com/ordertimeout/ordertimeout/tests/internal/pgcluster"
	"github.com/ordertimeout/ordertimeout/tests/internal/soak"
)

// A short soak through the program's own flags: 20 s at 200 orders/s with
// one fault of each kind, in order, then the drain and the checks. It must
// report every fault, a recovery after each PostgreSQL restart, no
// violation, and exit cleanly; the report must carry its seed and sections.
func TestShortSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("a 20 s soak with a private PostgreSQL: not in -short mode")
	}
	if _, err := os.Stat(pgcluster.DefaultBin + "/initdb"); err != nil && os.Getenv("PGBIN") == "" {
		t.Skipf("needs PostgreSQL's server programs (set PGBIN): %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	bin, err := sidecarproc.Build(ctx, t.TempDir())
	require.NoError(t, err)

	out := &sidecarproc.Buffer{}
	err = realMain(ctx, []string{
		"--bin", bin,
		"--duration", "20s",
		"--rate", "200",
		"--faults", "all",
		"--sequence",
		"--fault-every", "2s",
		"--check-every", "5s",
		"--progress", "5s",
		"--seed", "42",
	}, out)
	text := out.String()
	t.Log("\n" + text)
	if errors.Is(err, pgcluster.ErrUnsupported) {
		t.Skipf("needs a private PostgreSQL cluster: %v", err)
	}
	require.NoError(t, err)
	for _, kind := range soak.AllKinds {
		require.Contains(t, text, "fault "+string(kind)+": ", "every kind of fault injected")
	}
	require.NotContains(t, text, "FAILED")
	require.NotContains(t, text, "NOT recovered")
	require.Contains(t, text, "seed 42 (replay with --seed 42)")
	require.Contains(t, text, "faults: 6 injected")
	require.Contains(t, text, "time to recover:")
	require.Contains(t, text, "during faults, direct:")
	require.Contains(t, text, "violations: 0")
	require.NotContains(t, text, "VIOLATED")
	require.Equal(t, 12, strings.Count(text, "\n  ok       "), "seven invariants and five outcome checks, all ok")
}

// Flags are checked before anything starts.
func TestFlags(t *testing.T) {
	out := &sidecarproc.Buffer{}
	require.ErrorContains(t, realMain(t.Context(), []string{"--faults", "meteor"}, out), `unknown fault "meteor"`)
	require.ErrorContains(t, realMain(t.Context(), []string{"extra"}, out), "unexpected arguments")
	require.ErrorIs(t, realMain(t.Context(), []string{"--help"}, out), flag.ErrHelp)
	require.Contains(t, out.String(), "-rate")
}
