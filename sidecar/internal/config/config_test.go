package config

import (
	"bytes"
	"flag"
	"testing"
	"time"

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

// Arguments that are not flags are refused without writing any argument's
// value: "run --http - stray --gateway-url https://merchant:pw@...
// --gateway-token tok" once printed the password and the token in the error
// line, which a supervisor writes to its log; and with the URL's password
// masked, a review still found tokens and key=value passwords printed. The
// error names the argument by its position and the flag before it, and the
// names of this command's flags after it.
func TestStrayArgumentsKeepSecrets(t *testing.T) {
	parse := func(args ...string) error {
		var http, gw, token, secret string
		var dry bool
		f := New("run", "ordertimeout run [flags]", "Runs it.")
		f.String(&http, "http", "", "listen address")
		f.String(&gw, "gateway-url", "", "gateway")
		f.String(&token, "gateway-token", "", "token")
		f.String(&secret, "webhook-secret", "", "secret")
		f.Bool(&dry, "dry-run", false, "dry run")
		f.stdout, f.stderr = &bytes.Buffer{}, &bytes.Buffer{}
		return f.Parse(args, func(string) string { return "" })
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "-", "stray", "--gateway-url", "https://merchant:GwPassw0rd@pay.example.com", "--gateway-token", "tok_SECRET"},
			`run: argument 3 of 7 (after --http and its value) is not a flag or a flag's value (a flag's name forgotten?); the flags after it were not read: --gateway-url, --gateway-token; nothing was done`},
		// $GATEWAY_TOKEN unset: --gateway-token takes --webhook-secret as
		// its value, and the secret is the stray argument.
		{[]string{"--gateway-token", "--webhook-secret", "whsec_TOPSECRET123"},
			`run: argument 3 of 3 (after --gateway-token and its value) is not a flag or a flag's value`},
		{[]string{"host=db", "password=S3cretPw", "user=shop"}, `run: argument 1 of 3 is not a flag`},
		{[]string{"--http", "-", "https://sk_live_SECRETKEY@pay.example.com"}, `argument 3 of 3 (after --http and its value)`},
		{[]string{"--http=-", "--", "--gateway-token=tok_SECRET"}, `run: argument 3 of 3 (after "--") is not a flag`},
		{[]string{"--dry-run", "postgres://shop:S3cret%Pw@db/shop"}, `run: argument 2 of 2 (after --dry-run) is not a flag`},
		{[]string{"--http=-", "x", "-not-a-flag"}, `run: argument 2 of 3 (after --http) is not a flag or a flag's value (a flag's name forgotten?); nothing was done`},
	} {
		err := parse(c.args...)
		require.ErrorContains(t, err, c.want, "%q", c.args)
		for _, secret := range []string{"GwPassw0rd", "tok_SECRET", "whsec_", "S3cret", "SECRETKEY", "not-a-flag"} {
			require.NotContains(t, err.Error(), secret, "%q", c.args)
		}
	}
}

// A variable the flag cannot read names the flag and the form of its
// default, never the value. Before: "environment variable
// ORDERTIMEOUT_MAX_SLEEP: parse error".
func TestBadEnvironmentValueNamesTheFlag(t *testing.T) {
	var d time.Duration
	f := New("run", "ordertimeout run [flags]", "Runs it.")
	f.Duration(&d, "max-sleep", time.Second, "longest sleep")
	f.stdout, f.stderr = &bytes.Buffer{}, &bytes.Buffer{}
	err := f.Parse(nil, func(v string) string {
		if v == "ORDERTIMEOUT_MAX_SLEEP" {
			return "s3cret-ish"
		}
		return ""
	})
	require.ErrorContains(t, err, `environment variable ORDERTIMEOUT_MAX_SLEEP: not a value of --max-sleep (its default is "1s")`)
	require.NotContains(t, err.Error(), "s3cret")
}
