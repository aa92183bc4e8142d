package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// EnvPrefix starts the environment variable of every flag.
const EnvPrefix = "ORDERTIMEOUT_"

// EnvName returns the environment variable of flag name: "max-sleep" →
// "ORDERTIMEOUT_MAX_SLEEP".
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// FlagSet is a subcommand's flags, each also read from the environment.
type FlagSet struct {
	fs          *flag.FlagSet
	usage       string
	description string
	env         map[string][]string
	order       []string
	// stdout and stderr receive the usage (tests replace them).
	stdout, stderr io.Writer
}

// New returns the flags of a subcommand. usage is its synopsis ("ordertimeout
// run [flags]"); description explains what it does.
func New(name, usage, description string) *FlagSet {
	f := &FlagSet{
		fs:          flag.NewFlagSet(name, flag.ContinueOnError),
		usage:       usage,
		description: description,
		env:         map[string][]string{},
	}
	// The flag package prints nothing itself: Parse prints the usage, on
	// standard output when asked for (--help, so that "run --help | less"
	// shows it), on standard error after a bad flag.
	f.fs.SetOutput(io.Discard)
	f.fs.Usage = func() {}
	f.stdout, f.stderr = os.Stdout, os.Stderr
	return f
}

func (f *FlagSet) register(name string, envVars []string) {
	if len(envVars) == 0 {
		envVars = []string{EnvName(name)}
	}
	f.env[name] = envVars
	f.order = append(f.order, name)
}

// String defines a string flag. envVars, if given, replace the default
// environment variable (they are tried in order).
func (f *FlagSet) String(p *string, name, value, help string, envVars ...string) {
	f.fs.StringVar(p, name, value, help)
	f.register(name, envVars)
}

// Int defines an int flag.
func (f *FlagSet) Int(p *int, name string, value int, help string) {
	f.fs.IntVar(p, name, value, help)
	f.register(name, nil)
}

// Float64 defines a float64 flag.
func (f *FlagSet) Float64(p *float64, name string, value float64, help string) {
	f.fs.Float64Var(p, name, value, help)
	f.register(name, nil)
}

// Duration defines a duration flag (Go syntax: 500ms, 2s, 1m30s).
func (f *FlagSet) Duration(p *time.Duration, name string, value time.Duration, help string) {
	f.fs.DurationVar(p, name, value, help)
	f.register(name, nil)
}

// Bool defines a bool flag.
func (f *FlagSet) Bool(p *bool, name string, value bool, help string) {
	f.fs.BoolVar(p, name, value, help)
	f.register(name, nil)
}

// CommandLineOnly makes flag name a command-line flag only, read from no
// environment variable: for a flag that destroys data (migrate down --all),
// which a variable left in a shell or a service's environment must never
// set.
func (f *FlagSet) CommandLineOnly(name string) {
	f.env[name] = nil
}

// Parse applies the environment (through getenv), then the command-line
// args. It returns flag.ErrHelp after printing the usage for -h / --help
// on standard output; after a flag it cannot read, it prints the usage on
// standard error and returns the error.
// Every argument must be a flag or a flag's value: Go's flag package stops
// at the first other argument and would silently drop every flag after it
// (a forgotten "--to" turning "... 2026-12-02T00:00:00Z --dry-run" into a
// real run), so Parse refuses such arguments, naming them. A subcommand
// that takes positional arguments takes them before calling Parse.
func (f *FlagSet) Parse(args []string, getenv func(string) string) error {
	for _, name := range f.order {
		for _, v := range f.env[name] {
			if val := getenv(v); val != "" {
				if err := f.fs.Set(name, val); err != nil {
					return fmt.Errorf("environment variable %s: %w", v, err)
				}
				break
			}
		}
	}
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.PrintUsage(f.stdout)
			return err
		}
		f.PrintUsage(f.stderr)
		return fmt.Errorf("%s: %w", f.fs.Name(), err)
	}
	if rest := f.fs.Args(); len(rest) > 0 {
		return fmt.Errorf("%s: unexpected argument %s: every argument must be a flag or a flag's value (a flag's name forgotten?); nothing was done", f.fs.Name(), f.strays(rest))
	}
	return nil
}

// strays describes the arguments Go's flag package stopped at for an error
// message, without the values they may carry: a password in a URL, a token
// after its flag, which an error line would write to a log. It names the
// first argument (a URL's password masked, at most 64 characters) and the
// names of this command's flags after it, which were not read.
func (f *FlagSet) strays(rest []string) string {
	first := rest[0]
	if u, err := url.Parse(first); err == nil && u.User != nil {
		first = u.Redacted()
	}
	if r := []rune(first); len(r) > 64 {
		first = string(r[:64]) + "..."
	}
	out := strconv.Quote(first)
	var flags []string
	for _, a := range rest[1:] {
		if name, ok := strings.CutPrefix(a, "-"); ok && name != "" && name != "-" {
			name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
			if f.fs.Lookup(name) != nil {
				flags = append(flags, "--"+name)
			}
		}
	}
	switch {
	case len(rest) == 1:
	case len(flags) == 0:
		out += fmt.Sprintf(" (and %d more after it)", len(rest)-1)
	default:
		out += fmt.Sprintf(" (and %d more after it, among them the flags %s, which were not read)", len(rest)-1, strings.Join(flags, ", "))
	}
	return out
}

// PrintUsage prints the synopsis, the description and every flag with its
// environment variable and default.
func (f *FlagSet) PrintUsage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", f.usage, strings.TrimSpace(f.description))
	if len(f.order) == 0 {
		return
	}
	fmt.Fprintf(w, "\nFlags (each may also be set by the environment variable shown; the flag wins):\n")
	for _, name := range f.order {
		fl := f.fs.Lookup(name)
		arg, help := flag.UnquoteUsage(fl)
		line := "  --" + name
		if arg != "" {
			line += " " + arg
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(help, "\n", "\n        "))
		extra := "command line only"
		if len(f.env[name]) > 0 {
			extra = "env " + strings.Join(f.env[name], " or ")
		}
		if fl.DefValue != "" && fl.DefValue != "0" && fl.DefValue != "false" && fl.DefValue != "0s" {
			extra += "; default " + fl.DefValue
		}
		fmt.Fprintf(w, "        (%s)\n", extra)
	}
}

// Logging configures the log output of a subcommand.
type Logging struct {
	Format string
	Level  string
}

// AddFlags defines --log-format and --log-level.
func (l *Logging) AddFlags(f *FlagSet) {
	f.String(&l.Format, "log-format", "text", "log format: text or json")
	f.String(&l.Level, "log-level", "info", "least severe level logged: debug, info, warn or error")
}

// Logger returns a logger writing to w as configured.
func (l *Logging) Logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", l.Level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.Format {
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", l.Format)
	}
}
