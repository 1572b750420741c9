// Command clouddb is the clouddb binary: `clouddb serve` runs the service; `clouddb admin`
// works on the store directly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

const usage = `clouddb: a self-hosted cloud database service where every database is a real Redis server.

Usage:
  clouddb serve [flags]                          run the service (clouddb serve -h for flags)
  clouddb admin accounts create --name N --plan flexible|annual|fixed|free
  clouddb admin keys create --account ID [--name N] [--role owner|viewer]

Every flag has an environment twin: --data-dir is CLOUDDB_DATA_DIR, and so on.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	redis.SetLogger(redisLogger{})
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "clouddb:", err)
		}
		os.Exit(2)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return flag.ErrHelp
	}
	switch args[0] {
	case "serve":
		m := NewMain(stdout, stderr)
		if err := m.ParseFlags(args[1:]); err != nil {
			return err
		}
		return m.Run(ctx)
	case "admin":
		return runAdmin(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// envFlags gives every flag of fs an environment twin: --data-dir ↔ CLOUDDB_DATA_DIR. A
// flag given on the command line wins over its twin.
func envFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if set[f.Name] || err != nil {
			return
		}
		name := "CLOUDDB_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s=%q: %v", name, v, e)
			}
		}
	})
	return err
}

// shutdownTimeout bounds a graceful stop.
const shutdownTimeout = 30 * time.Second
