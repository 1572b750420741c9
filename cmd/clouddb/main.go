// Command clouddb is the clouddb binary: `clouddb serve` runs the service, `clouddb admin`
// works on the store directly, and the other commands are clients of the API (see CLI).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/term"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	redis.SetLogger(redisLogger{})
	c := &CLI{Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv, StderrTerminal: term.IsTerminal(int(os.Stderr.Fd()))}
	code := c.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
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
