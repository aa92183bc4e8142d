package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := realMain(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if _, ok := errors.AsType[needsPerson](err); ok {
		fmt.Fprintln(os.Stderr, "ordertimeout:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ordertimeout:", err)
		os.Exit(1)
	}
}

// needsPerson is the error of a command that did its work, but whose result
// a person must look at (see the report or the warning it printed): the
// command exits 2, not 1.
type needsPerson string

func (e needsPerson) Error() string { return string(e) }

const usage = `Usage: ordertimeout <subcommand> [flags]

Cancels unpaid orders on time, exactly once, and never a paid one.

Subcommands:
  run          run the sidecar (the default when the first argument is a flag)
  migrate      apply the embedded migrations: migrate up | down | version | force
  status       print orders by state, the due backlog, cancel lag and conflicts
  pause        stop every timeout cancel (an incident at the gateway) until resume
  resume       let timeout cancels go on; the backlog drains at once
  reconcile    reconcile a file of the gateway's transactions (CSV, WeChat Pay bill)
  version      print the build and the newest migration embedded (also --version)
  help         print this help

Run 'ordertimeout <subcommand> --help' for the flags of a subcommand.
`

// realMain runs the subcommand named by args[0] until ctx ends.
func realMain(ctx context.Context, args []string) error {
	cmd := "run"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "-help" || args[0] == "--help") {
		fmt.Print(usage)
		return flag.ErrHelp
	}
	if len(args) > 0 && (args[0] == "-version" || args[0] == "--version") {
		args[0] = "version"
	}
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return runCmd(ctx, args)
	case "migrate":
		return migrateCmd(ctx, args)
	case "status":
		return statusCmd(ctx, args)
	case "pause":
		return pauseCmd(ctx, args, true)
	case "resume":
		return pauseCmd(ctx, args, false)
	case "reconcile":
		return reconcileCmd(ctx, args, os.Stdout)
	case "version":
		return versionCmd(args, os.Stdout)
	case "help":
		fmt.Print(usage)
		return nil
	default:
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown subcommand %q", cmd)
	}
}
