package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/reconcile"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/sidecartest"
	"github.com/ordertimeout/ordertimeout/sidecar/pgtest"
)

// Go's flag package stops at the first argument that is not a flag, so a
// stray one (a flag's name forgotten) would silently drop every flag after
// it: a reconcile meant as --dry-run applied the file, and "pause ops:anna"
// recorded the default actor. Every subcommand refuses such arguments,
// naming them, and does nothing.
func TestSubcommandsRefuseStrayArguments(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.NewPool(t)
	url := pgtest.URL(t, db)
	sidecartest.Setup(t, db)
	sidecartest.CreateOrder(t, db, "S1", time.Hour, `{"amount": 10, "currency": "EUR"}`)
	now := time.Now().UTC()
	file := filepath.Join(t.TempDir(), "dry.csv")
	require.NoError(t, os.WriteFile(file, []byte(reconcile.CSVHeader+"\nP-S1,S1,10.00,EUR,paid,"+now.Format(time.RFC3339)+"\n"), 0o600))
	before := snapshot(t, db)

	// The reviewer's command: --to forgotten before the period's end.
	err := realMain(ctx, []string{"reconcile", "--database-url", url, "--file", file, "--format", "csv",
		"--from", now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339), "--dry-run"})
	require.ErrorContains(t, err, `(after --from and its value) is not a flag or a flag's value (a flag's name forgotten?); the flags after it were not read: --dry-run; nothing was done`)
	require.Equal(t, "PENDING", sidecartest.Status(t, db, "S1"), "nothing applied")

	err = realMain(ctx, []string{"pause", "--database-url", url, "ops:anna"})
	require.ErrorContains(t, err, `pause: argument 3 of 3 (after --database-url and its value) is not a flag or a flag's value`)
	var paused bool
	require.NoError(t, db.QueryRow(ctx, "SELECT paused FROM ordertimeout.settings").Scan(&paused))
	require.False(t, paused, "nothing paused")

	for _, args := range [][]string{
		{"resume", "--database-url", url, "now"},
		{"status", "--database-url", url, "5m", "--window", "1m"},
		{"run", "--database-url", url, "--gateway-url", "http://127.0.0.1:1", "--http", "-", "extra"},
		{"--database-url", url, "--gateway-url", "http://127.0.0.1:1", "--http", "-", "extra"},
		{"migrate", "version", "--database-url", url, "extra"},
	} {
		require.ErrorContains(t, realMain(ctx, args), "is not a flag or a flag's value", "%q", args)
	}
	require.Equal(t, before, snapshot(t, db))
}
