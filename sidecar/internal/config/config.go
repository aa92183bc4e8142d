package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
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
					// The flag package says only "parse error" for a
					// duration or a number: name the flag and the form of
					// its default (never the value, which could be a
					// secret put in the wrong variable).
					return fmt.Errorf("environment variable %s: not a value of --%s (its default is %q): %w",
						v, name, f.fs.Lookup(name).DefValue, err)
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
		return fmt.Errorf("%s: %s is not a flag or a flag's value (a flag's name forgotten?)%s; nothing was done",
			f.fs.Name(), f.where(args, len(args)-len(rest)), f.after(rest[1:]))
	}
	return nil
}

// where names the argument at index i of args, which Go's flag package
// stopped at, by its position and the flag before it, never by its value:
// an argument may be a secret (a token whose flag's name was forgotten, a
// password in a connection string, a value that an unset environment
// variable left without its flag), and an error line goes to a log. A
// review found "run ... stray --gateway-url https://merchant:pw@..." printing
// the password, and after that was masked, other forms printing tokens and
// key=value passwords.
func (f *FlagSet) where(args []string, i int) string {
	pos := fmt.Sprintf("argument %d of %d", i+1, len(args))
	// Read args[:i] as the flag package did: a flag, with its value in
	// the same argument (=) or the next one unless it is boolean.
	last := ""
	for k := 0; k < i; k++ {
		name, ok := f.flagName(args[k])
		switch {
		case !ok:
			last = ""
		case name == "":
			last = `"--"`
		case strings.Contains(args[k], "=") || isBool(f.fs.Lookup(name)):
			last = "--" + name
		default:
			last = "--" + name + " and its value"
			k++
		}
	}
	if last == "" {
		return pos
	}
	return fmt.Sprintf("%s (after %s)", pos, last)
}

// after names this command's flags among args, which were not read: their
// names only.
func (f *FlagSet) after(args []string) string {
	var names []string
	for _, a := range args {
		if name, ok := f.flagName(a); ok && name != "" {
			names = append(names, "--"+name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return "; the flags after it were not read: " + strings.Join(names, ", ")
}

// flagName returns the name of this command's flag that arg sets ("" for
// the "--" that ends the flags), and whether arg is one of them.
func (f *FlagSet) flagName(arg string) (string, bool) {
	if arg == "--" {
		return "", true
	}
	name, ok := strings.CutPrefix(arg, "-")
	if !ok {
		return "", false
	}
	name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
	if name == "" || f.fs.Lookup(name) == nil {
		return "", false
	}
	return name, true
}

// isBool says whether fl is a boolean flag (it takes no separate value).
func isBool(fl *flag.Flag) bool {
	b, ok := fl.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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
