// Command genmigration writes the golang-migrate migration that takes the
// database from the functions, procedures and views of an earlier revision
// to those of the working tree (or of a later revision), so that they are
// generated, not copied by hand.
//
// It reads plpgsql/*.sql and sql/views.sql at the revision (git show) and in
// the working tree, and writes migrations/NAME.up.sql and .down.sql:
//
//   - new views and functions: CREATE, with their COMMENT ON;
//   - changed ones: CREATE OR REPLACE;
//   - functions whose kind, parameters (mode, name, type) or result type
//     changed, or that lost a default, and views whose columns changed: DROP,
//     then CREATE (CREATE OR REPLACE cannot change those), together with the
//     views whose definitions name them (DROP fails while a view reads one);
//   - removed ones: DROP in up, CREATE again in down;
//   - for every function it creates, EXECUTE revoked from PUBLIC, and for
//     everything it creates the GRANTs of sql/grants.sql that name it or its
//     kind (ON ALL TABLES IN SCHEMA, for a view).
//
// Statements come in sql/install.sql's order (views before the functions
// that read them), drops of what is gone after everything that read it was
// replaced; down restores the functions before it drops the new views.
//
// Each file of plpgsql/ and sql/views.sql may hold only CREATE FUNCTION,
// PROCEDURE or VIEW of the schema and COMMENT ON them; the tool refuses
// anything else, naming the file and line. Tables are not diffed: ALTER
// TABLE and the like are written by hand in a prelude file (put before the
// generated part of up) and a postlude file (put after the generated part of
// down). Grants changed on objects that already exist go there too, and so
// does a DROP the tool cannot see coming: it follows dependencies by name in
// view definitions only, not into function bodies (BEGIN ATOMIC), and it
// cannot tell a view column's new type. `make check-migrations` finds those.
//
// A migration that has not shipped may be generated again (-force) after a
// later edit of plpgsql/; when later migrations sit on top of it, -exclude
// leaves out what they change (or -to ends the diff at a commit before them).
//
// Usage (from the repository's root):
//
//	go run ./sidecar/cmd/genmigration -from daea0a1 \
//	    -name 000012_own_river_tables_in_jobs -exclude resolve_conflict \
//	    -up-prelude migrations/hand/000012_own_river_tables_in_jobs.up-prelude.sql ...
//
// or `make gen-migration FROM=... NAME=... [EXCLUDE=...] [TO=...]`, which
// passes the files of migrations/hand/NAME.* that exist.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, ".", os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "genmigration:", err)
		os.Exit(1)
	}
}

// options are the command line's flags.
type options struct {
	from, to, name, dir, schema string
	upPrelude, downPostlude     string
	comment                     string
	exclude                     string
	force                       bool
}

const usageText = `Usage: genmigration -from REV -name NNNNNN_verb_object [flags]

Writes migrations/NNNNNN_verb_object.up.sql and .down.sql: the CREATE, CREATE
OR REPLACE, DROP, REVOKE and GRANT statements that take the functions,
procedures and views of plpgsql/*.sql and sql/views.sql from revision REV to
the working tree (or to -to REV), and back. Tables are not diffed: write
their statements in the -up-prelude and -down-postlude files. Generating an
unreleased migration again (-force) under a later one: -exclude what the later
one changes. Run it from the repository's root; make gen-migration FROM=REV
NAME=NNNNNN_verb_object runs it with the files of migrations/hand/ for that
name.

Flags:
`

// run is the command: dir is the repository's root; paths in args are
// relative to it.
func run(ctx context.Context, dir string, args []string, stdout, stderr io.Writer) error {
	var opt options
	fl := flag.NewFlagSet("genmigration", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.Usage = func() {
		fmt.Fprint(fl.Output(), usageText)
		fl.PrintDefaults()
	}
	fl.StringVar(&opt.from, "from", "", "git `revision` the database is at before the migration (required), e.g. the commit before the schema change")
	fl.StringVar(&opt.to, "to", "", "git `revision` the migration goes to; empty: the working tree (uncommitted edits included)")
	fl.StringVar(&opt.name, "name", "", "migration `name` NNNNNN_verb_object (required): the next free number, six digits, then lowercase words joined by _")
	fl.StringVar(&opt.dir, "dir", "migrations", "`folder` of the migrations")
	fl.StringVar(&opt.schema, "schema", "ordertimeout", "`schema` of the functions and views")
	fl.StringVar(&opt.upPrelude, "up-prelude", "", "`file` of hand-written SQL put first in the up migration, before the generated statements (ALTER TABLE ...)")
	fl.StringVar(&opt.downPostlude, "down-postlude", "", "`file` of hand-written SQL put last in the down migration, after the generated statements (undoing the prelude)")
	fl.StringVar(&opt.comment, "comment", "", "text `file` saying why: put at the top of both files as -- comment lines")
	fl.StringVar(&opt.exclude, "exclude", "", "`names` of functions, procedures or views to leave out, comma-separated: those a later migration changes, when this one is generated again")
	fl.BoolVar(&opt.force, "force", false, "overwrite the migration's files if they exist (to generate an unreleased migration again)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (every input is a flag; see -help)", fl.Arg(0))
	}
	if opt.from == "" {
		return errors.New("-from is required: the git revision the database is at before the migration")
	}
	if opt.name == "" {
		return errors.New("-name is required: NNNNNN_verb_object")
	}
	up, down, err := generate(ctx, dir, opt, stderr)
	if err != nil {
		return err
	}
	upPath := filepath.Join(dir, opt.dir, opt.name+".up.sql")
	downPath := filepath.Join(dir, opt.dir, opt.name+".down.sql")
	if err := os.WriteFile(upPath, []byte(up), 0o644); err != nil {
		return fmt.Errorf("write up migration: %w", err)
	}
	if err := os.WriteFile(downPath, []byte(down), 0o644); err != nil {
		return fmt.Errorf("write down migration: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", filepath.Join(opt.dir, opt.name+".up.sql"), filepath.Join(opt.dir, opt.name+".down.sql"))
	return nil
}

var nameRE = regexp.MustCompile(`^([0-9]{6})_[a-z][a-z0-9]*(_[a-z0-9]+)*$`)

// checkName refuses a malformed name, a number that is not the next free
// one, and files that exist (unless force). It returns the names of the
// migrations after this one when it exists already.
func checkName(dir string, opt options) ([]string, error) {
	m := nameRE.FindStringSubmatch(opt.name)
	if m == nil {
		return nil, fmt.Errorf("-name %q: want NNNNNN_verb_object (six digits, then lowercase words joined by _, e.g. 000013_add_refund_reason)", opt.name)
	}
	number, _ := strconv.Atoi(m[1])
	entries, err := os.ReadDir(filepath.Join(dir, opt.dir))
	if err != nil {
		return nil, fmt.Errorf("read migrations folder: %w", err)
	}
	fileRE := regexp.MustCompile(`^([0-9]+)_(.+)\.(up|down)\.sql$`)
	highest, exists := 0, false
	var later []string
	for _, e := range entries {
		f := fileRE.FindStringSubmatch(e.Name())
		if f == nil || e.IsDir() {
			continue
		}
		n, _ := strconv.Atoi(f[1])
		highest = max(highest, n)
		switch {
		case strings.HasPrefix(e.Name(), opt.name+"."):
			exists = true
		case n == number:
			return nil, fmt.Errorf("-name %s: number %s is taken by %s", opt.name, m[1], filepath.Join(opt.dir, f[1]+"_"+f[2]))
		case n > number && f[3] == "up":
			later = append(later, f[1]+"_"+f[2])
		}
	}
	if exists {
		if !opt.force {
			return nil, fmt.Errorf("%s exists: -force writes it again (only for a migration that has not shipped)", filepath.Join(opt.dir, opt.name+".up.sql"))
		}
		return later, nil
	}
	if number != highest+1 {
		return nil, fmt.Errorf("-name %s: the next free migration number is %06d", opt.name, highest+1)
	}
	return nil, nil
}

var identRE = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// leaveOut removes the -exclude names from both snapshots: this migration
// neither creates, changes nor drops them.
func leaveOut(exclude string, from, to *snapshot) error {
	if exclude == "" {
		return nil
	}
	for _, name := range strings.Split(exclude, ",") {
		name = strings.TrimSpace(name)
		if !identRE.MatchString(name) {
			return fmt.Errorf("-exclude %q: want names of functions, procedures or views, comma-separated", name)
		}
		_, inFrom := from.objects[name]
		_, inTo := to.objects[name]
		if !inFrom && !inTo {
			return fmt.Errorf("-exclude %s: no function, procedure or view of that name at %s or in %s", name, from.label, to.label)
		}
		delete(from.objects, name)
		delete(to.objects, name)
	}
	return nil
}

// generate returns the up and down migrations. It warns on stderr when
// later migrations sit on top of the one it writes again.
func generate(ctx context.Context, dir string, opt options, stderr io.Writer) (string, string, error) {
	later, err := checkName(dir, opt)
	if err != nil {
		return "", "", err
	}
	fromRev, err := resolveRevision(ctx, dir, opt.from)
	if err != nil {
		return "", "", err
	}
	var toFiles files = workTree{dir: dir}
	toLabel := "the working tree"
	if opt.to != "" {
		toRev, err := resolveRevision(ctx, dir, opt.to)
		if err != nil {
			return "", "", err
		}
		toFiles = toRev
		toLabel = fmt.Sprintf("%s (%s)", opt.to, toRev.hash)
	}
	from, err := load(fromRev, opt.schema)
	if err != nil {
		return "", "", err
	}
	to, err := load(toFiles, opt.schema)
	if err != nil {
		return "", "", err
	}
	var hand [3]string
	for i, name := range []string{opt.upPrelude, opt.downPostlude, opt.comment} {
		if hand[i], err = readHand(dir, name); err != nil {
			return "", "", err
		}
	}
	prelude, postlude, comment := hand[0], hand[1], hand[2]
	if err := leaveOut(opt.exclude, from, to); err != nil {
		return "", "", err
	}
	if len(later) > 0 {
		fmt.Fprintf(stderr, "genmigration: note: later migrations sit on top of %s (%s): what they change must be left out of it (-exclude) or the diff must end before them (-to)\n",
			opt.name, strings.Join(later, ", "))
	}
	p := diff(from, to)
	if p.empty() && prelude == "" && postlude == "" {
		return "", "", fmt.Errorf("nothing to migrate: no function, procedure or view differs between %s and %s, and there is no prelude or postlude", opt.from, toLabel)
	}

	fromLabel := fmt.Sprintf("%s (%s)", opt.from, fromRev.hash)
	header := func(down bool) string {
		var b strings.Builder
		b.WriteString("-- Code generated by genmigration; DO NOT EDIT.\n")
		if down {
			fmt.Fprintf(&b, "-- Down: the functions, procedures and views of plpgsql/ and %s\n", viewsFile)
			fmt.Fprintf(&b, "-- back from %s\n-- to %s, generated by\n", toLabel, fromLabel)
		} else {
			fmt.Fprintf(&b, "-- Up: the functions, procedures and views of plpgsql/ and %s\n", viewsFile)
			fmt.Fprintf(&b, "-- from %s\n-- to %s, generated by\n", fromLabel, toLabel)
		}
		for i, part := range commandLine(opt) {
			if i > 0 {
				b.WriteString(" \\\n--     ")
			} else {
				b.WriteString("--   ")
			}
			b.WriteString(part)
		}
		b.WriteString("\n")
		b.WriteString("-- Edit plpgsql/, sql/ or the hand-written files and generate it again.\n")
		if comment != "" {
			b.WriteString("--\n")
			for _, line := range strings.Split(strings.TrimRight(comment, "\n"), "\n") {
				b.WriteString(strings.TrimRight("-- "+strings.TrimPrefix(strings.TrimPrefix(line, "--"), " "), " ") + "\n")
			}
		}
		return b.String()
	}

	var up strings.Builder
	up.WriteString(header(false))
	if lines := p.summary(); len(lines) > 0 {
		up.WriteString("--\n")
		for _, line := range lines {
			up.WriteString(wrap(line, "-- ", 78))
		}
	}
	up.WriteString("\n")
	if prelude != "" {
		fmt.Fprintf(&up, "-- Hand-written, from %s:\n\n%s\n\n-- Generated:\n\n", filepath.ToSlash(opt.upPrelude), strings.TrimSpace(prelude))
	}
	up.WriteString(p.up().render())

	var down strings.Builder
	down.WriteString(header(true))
	down.WriteString("\n")
	down.WriteString(p.down().render())
	if postlude != "" {
		fmt.Fprintf(&down, "\n-- Hand-written, from %s:\n\n%s\n", filepath.ToSlash(opt.downPostlude), strings.TrimSpace(postlude))
	}
	return up.String(), down.String(), nil
}

// readHand reads a hand-written file; "" when no file is named.
func readHand(dir, name string) (string, error) {
	if name == "" {
		return "", nil
	}
	if !filepath.IsAbs(name) {
		name = filepath.Join(dir, name)
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("hand-written file %s does not exist", name)
	}
	if err != nil {
		return "", fmt.Errorf("read hand-written file: %w", err)
	}
	return string(b), nil
}

// commandLine is the command that generates the migration again, cut
// into lines: the command, then a flag and its value per line.
func commandLine(opt options) []string {
	parts := []string{"go run ./sidecar/cmd/genmigration", "-from " + opt.from}
	if opt.to != "" {
		parts = append(parts, "-to "+opt.to)
	}
	parts = append(parts, "-name "+opt.name)
	if opt.dir != "migrations" {
		parts = append(parts, "-dir "+opt.dir)
	}
	if opt.schema != "ordertimeout" {
		parts = append(parts, "-schema "+opt.schema)
	}
	for _, f := range []struct{ flag, value string }{
		{"-exclude", opt.exclude}, {"-up-prelude", opt.upPrelude}, {"-down-postlude", opt.downPostlude}, {"-comment", opt.comment},
	} {
		if f.value != "" {
			parts = append(parts, f.flag+" "+filepath.ToSlash(f.value))
		}
	}
	return parts
}

// wrap writes text as lines of at most width characters, each starting
// with prefix.
func wrap(text, prefix string, width int) string {
	var b strings.Builder
	line := prefix
	for _, word := range strings.Fields(text) {
		if len(line) > len(prefix) && len(line)+1+len(word) > width {
			b.WriteString(line + "\n")
			line = prefix + "  "
		}
		if len(line) > len(prefix) && !strings.HasSuffix(line, "  ") {
			line += " "
		}
		line += word
	}
	return b.String() + line + "\n"
}
