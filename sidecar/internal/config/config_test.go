package config

import (
	"bytes"
	"flag"
	"testing"

	"github.com/stretchr/testify/require"
)

// A subcommand's --help goes to standard output, as the top-level help does,
// so that "ordertimeout run --help | less" shows it; the usage after a bad
// flag goes to standard error with the error.
func TestHelpOnStandardOutput(t *testing.T) {
	parse := func(args ...string) (stdout, stderr string, err error) {
		var n int
		f := New("run", "ordertimeout run [flags]", "Runs it.")
		f.Int(&n, "sweep-batch", 1000, "claims per sweep")
		var o, e bytes.Buffer
		f.stdout, f.stderr = &o, &e
		err = f.Parse(args, func(string) string { return "" })
		return o.String(), e.String(), err
	}
	out, errOut, err := parse("--help")
	require.ErrorIs(t, err, flag.ErrHelp)
	require.Contains(t, out, "Usage: ordertimeout run [flags]")
	require.Contains(t, out, "--sweep-batch")
	require.Empty(t, errOut)

	out, errOut, err = parse("--no-such-flag")
	require.ErrorContains(t, err, "flag provided but not defined: -no-such-flag")
	require.Empty(t, out)
	require.Contains(t, errOut, "Usage: ordertimeout run [flags]")
}
