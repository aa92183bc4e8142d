package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// versionCmd prints the build (module version, commit, Go) and the newest
// migration embedded: the schema version `migrate up` brings a database to,
// and the one this sidecar expects.
func versionCmd(args []string, out io.Writer) error {
	if len(args) == 1 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		_, err := fmt.Fprint(out, "Usage: ordertimeout version (or ordertimeout --version)\n\nPrints the build (module version, commit, Go) and the newest migration embedded.\n")
		if err != nil {
			return err
		}
		return flag.ErrHelp
	}
	if len(args) > 0 {
		return fmt.Errorf("version takes no arguments, got %d", len(args))
	}
	version, commit, goVersion := "(unknown)", "(unknown)", "(unknown)"
	if info, ok := debug.ReadBuildInfo(); ok {
		version, goVersion = info.Main.Version, info.GoVersion
		modified := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified {
			commit += " (with uncommitted changes)"
		}
	}
	vs, err := migrations.Versions()
	if err != nil {
		return fmt.Errorf("version: %w", err)
	}
	schema := "none"
	if len(vs) > 0 {
		schema = fmt.Sprintf("%06d", vs[len(vs)-1])
	}
	_, err = fmt.Fprintf(out, "ordertimeout %s\ncommit %s\n%s\nmigrations embedded up to %s\n", version, commit, goVersion, schema)
	return err
}
