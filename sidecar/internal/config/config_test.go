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

// Arguments that are not flags are refused without writing the values
// after them: "run --http - stray --gateway-url https://merchant:pw@...
// --gateway-token tok" once printed the password and the token in the error
// line, which a supervisor writes to its log. The error names the first
// stray argument (a URL's password masked) and the known flags after it.
func TestStrayArgumentsKeepSecrets(t *testing.T) {
	parse := func(args ...string) error {
		var http, gw, token string
		f := New("run", "ordertimeout run [flags]", "Runs it.")
		f.String(&http, "http", "", "listen address")
		f.String(&gw, "gateway-url", "", "gateway")
		f.String(&token, "gateway-token", "", "token")
		f.stdout, f.stderr = &bytes.Buffer{}, &bytes.Buffer{}
		return f.Parse(args, func(string) string { return "" })
	}
	err := parse("--http", "-", "stray", "--gateway-url", "https://merchant:GwPassw0rd@pay.example.com", "--gateway-token", "tok_SECRET", "-pw-like-value")
	require.EqualError(t, err, `run: unexpected argument "stray" (and 5 more after it, among them the flags --gateway-url, --gateway-token, which were not read): every argument must be a flag or a flag's value (a flag's name forgotten?); nothing was done`)

	err = parse("postgres://shop:S3cretPw@db.example/shop")
	require.ErrorContains(t, err, `unexpected argument "postgres://shop:xxxxx@db.example/shop":`)
	require.NotContains(t, err.Error(), "S3cretPw")

	err = parse("a", "b")
	require.ErrorContains(t, err, `unexpected argument "a" (and 1 more after it):`)
}
