// Package race holds the concurrency tests of ordertimeout: several real
// sessions sweeping, paying, cancelling and creating the same orders at once.
// pgTAP runs inside one transaction and cannot prove any of this.
//
// The tests need DATABASE_URL (run them through tests/bin/withpg); each test
// gets its own database, cloned from a migrated template, and commits freely.
// They wait on database conditions with deadlines, never on sleeps.
package race
