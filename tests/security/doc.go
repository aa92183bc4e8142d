// Package security tests ordertimeout's privileges over real logins: what
// the application, sidecar and administrator roles may and may not do, that
// PUBLIC may do nothing, that the SECURITY DEFINER functions cannot be
// hijacked through search_path, and that SQL injection strings given as ids
// are stored verbatim and do no harm.
//
// Each test creates LOGIN roles of its own (roles are cluster-wide: the names
// are unique per test) and drops them when it ends. The tests need
// DATABASE_URL naming a superuser (run them through tests/bin/withpg).
package security
