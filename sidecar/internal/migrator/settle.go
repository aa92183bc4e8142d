package migrator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5"

	"github.com/ordertimeout/ordertimeout/migrations"
)

// Settlement is what Settle found of a dirty version mark.
type Settlement struct {
	// Dirty reports whether the mark was dirty; when false nothing else is
	// set.
	Dirty bool
	// Marked is the version the dirty mark named (golang-migrate marks the
	// version a migration goes to: its own on up, the one before it on
	// down); 0 for none.
	Marked uint
	// Schema is the version whose schema the database has.
	Schema uint
	// Recorded reports whether Schema was recorded as the clean version
	// (Settle, not Diagnose).
	Recorded bool
	// How says how Schema was told: by the schema's fingerprint, or by the
	// probe of a migration the fingerprint cannot see.
	How string
	// Also is the version after Schema when the two have the same schema
	// and nothing tells them apart (a migration in migrations.Unseen
	// without a probe, which may run again): Schema is recorded, and up
	// runs Also's migration again; 0 otherwise.
	Also uint
}

// String describes the settlement in a sentence, for a log line or the
// output of `ordertimeout migrate`.
func (s Settlement) String() string {
	if !s.Dirty {
		return "not dirty"
	}
	var what string
	switch {
	case s.Also != 0:
		what = fmt.Sprintf("the schema is that of versions %d and %d alike (migration %d changes nothing the fingerprint sees): "+
			"taken as %d's, and migrate up runs %d again, which does no harm", s.Schema, s.Also, s.Also, s.Schema, s.Also)
	case s.Schema == s.Marked:
		what = fmt.Sprintf("the schema is version %d's, as marked: the migration (or rollback) to it committed", s.Schema)
	case s.Schema < s.Marked:
		what = fmt.Sprintf("the schema is version %d's: migration %d did not commit (killed midway, or failed and rolled back)", s.Schema, s.Marked)
	default:
		what = fmt.Sprintf("the schema is version %d's: its rollback to %d did not commit", s.Schema, s.Marked)
	}
	out := fmt.Sprintf("version %d was marked dirty; %s (%s)", s.Marked, what, s.How)
	if s.Recorded {
		out += fmt.Sprintf("; recorded version %d as clean", s.Schema)
	}
	return out
}

// ErrUnsettled marks a dirty version mark that Settle could not tell: the
// schema matches none of the versions a migration killed or failed there can
// leave. Nothing was recorded; a person compares the schema with the
// migrations and runs `migrate force`.
var ErrUnsettled = errors.New("the schema matches no version the dirty mark can stand for")

// Settle tells, when a migration left the version mark dirty (killed midway,
// or failed and rolled back), which version's schema the database has, and
// records that version as clean, so that `migrate up` can go on without a
// person's `migrate force`. golang-migrate marks the version dirty before
// it runs a migration and clean after, each in its own transaction, while
// the migration is one transaction of its own: the schema is the version's
// before the migration or after it, never between. Which one is told by the
// schema's fingerprint (migrations.Fingerprint) against the fingerprints of
// the migrations recorded at build time (migrations/fingerprints.txt), or,
// for a migration the fingerprint cannot see (migrations.Unseen), by its
// probe. It holds golang-migrate's lock while it reads and writes the mark,
// so it waits for a migrate running elsewhere and never acts on a migration
// still running. A mark that is not dirty is left alone; a schema that
// matches none of the versions is ErrUnsettled, and nothing is recorded.
func (g *Migrator) Settle(ctx context.Context) (Settlement, error) {
	return g.settle(ctx, true)
}

// Diagnose is Settle without the lock and without recording anything: what
// `migrate version` prints of a dirty mark.
func (g *Migrator) Diagnose(ctx context.Context) (Settlement, error) {
	return g.settle(ctx, false)
}

func (g *Migrator) settle(ctx context.Context, record bool) (s Settlement, err error) {
	if record {
		if err := g.driver.Lock(); err != nil {
			return s, fmt.Errorf("settle the dirty version: take the migration lock: %w", err)
		}
		defer func() {
			if uerr := g.driver.Unlock(); uerr != nil && err == nil {
				err = fmt.Errorf("settle the dirty version: release the migration lock: %w", uerr)
			}
		}()
	}
	marked, dirty, err := g.driver.Version()
	if err != nil {
		return s, fmt.Errorf("settle the dirty version: read the version: %w", err)
	}
	if !dirty {
		return s, nil
	}
	s.Dirty = true
	if marked > 0 {
		s.Marked = uint(marked)
	}
	versions, err := migrations.Versions()
	if err != nil {
		return s, err
	}
	fps, err := migrations.Fingerprints()
	if err != nil {
		return s, err
	}
	// The versions the mark can stand for: the one before it (an up to it
	// that did not commit), itself, and the one after it (a rollback to it
	// that did not commit). 0 is none applied.
	all := append([]uint{0}, versions...)
	i := slices.Index(all, s.Marked)
	if i < 0 {
		return s, fmt.Errorf("settle the dirty version: version %d is marked dirty, and no migration of this build has it (a newer build's?): %w", s.Marked, ErrUnsettled)
	}
	var candidates []uint
	for j := max(i-1, 0); j <= min(i+1, len(all)-1); j++ {
		candidates = append(candidates, all[j])
	}

	ctx, conn, done, err := g.connect(ctx)
	if err != nil {
		return s, fmt.Errorf("settle the dirty version: %w", err)
	}
	defer done()
	lines, err := migrations.FingerprintLines(ctx, conn)
	if err != nil {
		return s, fmt.Errorf("settle the dirty version: %w", err)
	}
	fp := migrations.Sum(lines)
	var matches []uint
	prebuilt := ""
	for _, v := range candidates {
		if migrations.IsVersion(lines, v, fps) {
			matches = append(matches, v)
			if fps[v] != fp {
				// The schema before a migration whose indexes an operator
				// built beforehand, as the README advises for large tables.
				prebuilt = ", with a later migration's indexes built beforehand"
			}
		}
	}
	switch len(matches) {
	case 0:
		return s, fmt.Errorf("settle the dirty version: version %d is marked dirty, and the schema's fingerprint %s is that of none of versions %s; "+
			"it was changed outside the migrations, or by a build whose migrations differ; nothing was recorded: "+
			"compare the schema with the migrations and `migrate force` the version it has: %w",
			s.Marked, fp, joinVersions(candidates), ErrUnsettled)
	case 1:
		s.Schema = matches[0]
		s.How = "told by the schema's fingerprint" + prebuilt
	default:
		// Two adjacent versions with one schema: the later one's migration
		// is one the fingerprint cannot see, and its probe tells.
		later := matches[len(matches)-1]
		probe, ok := migrations.Unseen[later]
		if len(matches) > 2 || !ok {
			return s, fmt.Errorf("settle the dirty version: version %d is marked dirty, and versions %s have the schema's fingerprint; nothing was recorded: %w",
				s.Marked, joinVersions(matches), ErrUnsettled)
		}
		s.Schema = matches[0]
		s.How = "told by the schema's fingerprint"
		s.Also = later
		if probe != "" {
			s.Also = 0
			var done bool
			if err := conn.QueryRow(ctx, probe).Scan(&done); err != nil {
				return s, fmt.Errorf("settle the dirty version: ask whether migration %d committed: %w", later, err)
			}
			if done {
				s.Schema = later
			}
			s.How = fmt.Sprintf("migration %d changes nothing the fingerprint sees; told by what it records", later)
		}
	}
	if !record {
		return s, nil
	}
	v := int(s.Schema)
	if s.Schema == 0 {
		v = database.NilVersion
	}
	if err := g.driver.SetVersion(v, false); err != nil {
		return s, fmt.Errorf("settle the dirty version: record version %d: %w", s.Schema, err)
	}
	s.Recorded = true
	return s, nil
}

// connect opens a connection of its own to read the schema, golang-migrate's
// being busy with its lock, bounded by a minute; done closes it.
func (g *Migrator) connect(ctx context.Context) (context.Context, *pgx.Conn, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	conn, err := pgx.Connect(ctx, g.url)
	if err != nil {
		cancel()
		return nil, nil, nil, fmt.Errorf("connect: %w", err)
	}
	return ctx, conn, func() {
		_ = conn.Close(context.WithoutCancel(ctx))
		cancel()
	}, nil
}

func joinVersions(vs []uint) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = fmt.Sprint(v)
	}
	return strings.Join(out, ", ")
}

// SchemaVersions returns the versions whose schema, as the migrations build
// it (migrations/fingerprints.txt), the database has now: one for a schema
// no one changed by hand (two for 000008 and 000021, whose change the
// fingerprint does not see), none for one changed by hand or by another
// build's migrations.
func (g *Migrator) SchemaVersions(ctx context.Context) ([]uint, error) {
	fps, err := migrations.Fingerprints()
	if err != nil {
		return nil, err
	}
	ctx, conn, done, err := g.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	defer done()
	// A comparison only: it waits a second for a lock on a table, not
	// the ten seconds a settlement does.
	lines, err := migrations.FingerprintLinesWaiting(ctx, conn, time.Second)
	if err != nil {
		return nil, err
	}
	var out []uint
	for v := range fps {
		if migrations.IsVersion(lines, v, fps) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}
