package main

import (
	"bytes"
	"context"
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// version names the newest migration embedded, the schema `migrate up`
// brings a database to: the last up file of migrations/. Before, --version
// printed run's usage and "flag provided but not defined".
func TestVersionNamesTheNewestMigration(t *testing.T) {
	ups, err := filepath.Glob(filepath.Join("..", "..", "..", "migrations", "*.up.sql"))
	require.NoError(t, err)
	require.NotEmpty(t, ups)
	newest := filepath.Base(ups[len(ups)-1])[:6]

	var out bytes.Buffer
	require.NoError(t, versionCmd(nil, &out))
	require.Contains(t, out.String(), "migrations embedded up to "+newest+"\n")
	require.Regexp(t, `^ordertimeout \S+\ncommit \S+`, out.String())
	require.ErrorContains(t, versionCmd([]string{"extra"}, &out), "version takes no arguments")
	out.Reset()
	require.ErrorIs(t, versionCmd([]string{"--help"}, &out), flag.ErrHelp)
	require.Contains(t, out.String(), "Usage: ordertimeout version")
	require.NoError(t, realMain(context.Background(), []string{"--version"}), "--version is the version subcommand")
	require.NoError(t, realMain(context.Background(), []string{"--http", "-", "--version"}), "and a flag of run")
	require.NoError(t, realMain(context.Background(), []string{"run", "--version"}))
}
