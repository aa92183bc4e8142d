// Package config reads a subcommand's configuration from flags and the
// environment, and prints the --help of each subcommand.
//
// Every flag --some-name can also be set with the environment variable
// ORDERTIMEOUT_SOME_NAME; the database URL is read from DATABASE_URL first.
// A flag given on the command line wins over the environment.
package config
