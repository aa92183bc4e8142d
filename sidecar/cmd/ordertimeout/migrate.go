package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/ordertimeout/ordertimeout/sidecar/internal/config"
	"github.com/ordertimeout/ordertimeout/sidecar/internal/migrator"
)

const migrateDescription = `
Applies the migrations embedded in the binary (River's tables, then the
ordertimeout schema) with golang-migrate.

  up         apply every migration not yet applied; a version a killed
             or failed migration left marked dirty is settled first (the
             schema's fingerprint tells whether that migration committed,
             and the version it has is recorded as clean), and so is the
             mark of a migration that fails now (it rolled back): fix what
             its error names and run up again
  down N     roll back the last N migrations; refused, rolling back nothing,
             if fewer than N are applied, or if one of them drops data the
             database holds (000061 the ids of orders purged lately,
             000060 the refund ids of purged orders,
             000058 the conflicts handed to a person,
             000055 the payment ids of purged orders, 000031 the units
             sold by purged orders, 000013 the notes of resolutions,
             000010 the watermarks, payment methods and the
             money columns of conflicts and payments, 000009 every row of
             every ordertimeout table but those every install has, 000002
             every River job): the error names it; --drop-data rolls back
             anyway; a version marked dirty is settled as up does, and
             nothing is rolled back: run down again
  down --all roll back every migration: drops ordertimeout and River's
             tables WITH ALL THEIR DATA
  version    print the applied version, and warn when the schema is not
             that version's (changed by hand, or a version forced by
             mistake: its fingerprint names the version it is, if any);
             when it is marked dirty, which version's schema the database
             has (exit status 1)
  force N    record version N (0, or a migration's) as applied and clean,
             running nothing: for a schema up and down cannot tell (one
             changed by hand, or by a build with other migrations; they
             say so, naming the versions they compared)`

func migrateCmd(ctx context.Context, args []string) error {
	var (
		databaseURL string
		all         bool
		dropData    bool
		log         config.Logging
	)
	f := config.New("migrate", "ordertimeout migrate up|down N|down --all|version|force N [flags]", migrateDescription)
	f.String(&databaseURL, "database-url", "", "PostgreSQL connection string (URL or key=value)", "DATABASE_URL", config.EnvName("database-url"))
	f.Bool(&all, "all", false, "with down: roll back every migration")
	f.CommandLineOnly("all") // it drops every table: never from a variable left in the environment
	f.Bool(&dropData, "drop-data", false, "with down N: roll back even migrations whose down drops data the database holds")
	f.CommandLineOnly("drop-data")
	log.AddFlags(f)
	if len(args) == 0 {
		f.PrintUsage(os.Stderr)
		return errors.New("migrate: want up, down, version or force")
	}
	action, rest := args[0], args[1:]
	if action == "-h" || action == "--help" || action == "-help" {
		f.PrintUsage(os.Stderr)
		return nil
	}
	var steps int
	if action == "down" && len(rest) > 0 && rest[0] != "" && rest[0][0] != '-' {
		n, err := strconv.Atoi(rest[0])
		if err != nil || n <= 0 {
			return fmt.Errorf("migrate down: %q is not a positive number of migrations", rest[0])
		}
		steps, rest = n, rest[1:]
	}
	force := -1
	if action == "force" {
		if len(rest) == 0 || rest[0] == "" || rest[0][0] == '-' {
			return errors.New("migrate force: give the version to record, such as 32")
		}
		n, err := strconv.Atoi(rest[0])
		if err != nil || n < 0 {
			return fmt.Errorf("migrate force: %q is not a migration version", rest[0])
		}
		force, rest = n, rest[1:]
	}
	if err := f.Parse(rest, os.Getenv); err != nil {
		return err
	}
	if all && action != "down" {
		return fmt.Errorf("migrate %s: --all goes with down only", action)
	}
	if dropData && action != "down" {
		return fmt.Errorf("migrate %s: --drop-data goes with down only", action)
	}
	if databaseURL == "" {
		return errors.New("migrate: database URL is required (--database-url or DATABASE_URL)")
	}
	logger, err := log.Logger(os.Stderr)
	if err != nil {
		return err
	}

	m, err := migrator.Open(databaseURL, logger)
	if err != nil {
		return err
	}
	defer m.Close()
	switch action {
	case "up":
		changed, err := m.Up(ctx)
		if err != nil {
			return err
		}
		return printVersion(ctx, m, changed)
	case "down":
		if steps == 0 && !all {
			return errors.New("migrate down: give a number of migrations, or --all to roll back everything (drops all data)")
		}
		if steps > 0 && all {
			return fmt.Errorf("migrate down: give a number of migrations (%d) or --all, not both; nothing was rolled back", steps)
		}
		changed, err := m.Down(ctx, steps, dropData)
		if err != nil {
			return err
		}
		return printVersion(ctx, m, changed)
	case "version":
		return printVersion(ctx, m, false)
	case "force":
		if err := m.Force(force); err != nil {
			return err
		}
		return printVersion(ctx, m, true)
	default:
		return fmt.Errorf("migrate: unknown action %q: want up, down, version or force", action)
	}
}

func printVersion(ctx context.Context, m *migrator.Migrator, changed bool) error {
	v, dirty, err := m.Version()
	if err != nil {
		return err
	}
	state := "unchanged"
	if changed {
		state = "changed"
	}
	if dirty {
		s, derr := m.Diagnose(ctx)
		if derr != nil {
			fmt.Printf("version %d (dirty: a migration failed, or was interrupted; %v)\n", v, derr)
		} else {
			fmt.Printf("version %d (dirty: %s; migrate up records that and goes on, unless a migrate is running now)\n", v, s)
		}
		return errors.New("migrate: database is dirty")
	}
	fmt.Printf("version %d (%s)\n", v, state)
	// The schema itself, by its fingerprint: a version forced by hand, or
	// a schema changed by hand, shows here rather than at the next dirty
	// mark, which could not be settled then.
	have, err := m.SchemaVersions(ctx)
	switch {
	case err != nil:
		fmt.Printf("the schema could not be compared with version %d's: %v\n", v, err)
	case slices.Contains(have, v):
	case len(have) > 0:
		fmt.Printf("warning: the schema is not version %d's but version %s's (a version forced by mistake? migrate force the one it has)\n",
			v, joinUints(have, " or "))
	default:
		fmt.Printf("warning: the schema is not version %d's as its migrations build it, nor any version's: "+
			"changed by hand (an index, a function), or by another build's migrations; a migration killed midway could not be settled on it\n", v)
	}
	return nil
}

func joinUints(vs []uint, sep string) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(out, sep)
}
