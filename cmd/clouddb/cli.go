package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"clouddb"
	"clouddb/cloudapi/client"
)

// Exit codes of every command.
const (
	exitOK = 0
	// exitError: the API refused a request, a task failed, a wait timed out, or the
	// service could not be reached.
	exitError = 1
	// exitUsage: a command line that cannot run: an unknown command or flag, a bad value,
	// a missing argument, or no API key to use.
	exitUsage = 2
	// exitInterrupted: the command was interrupted (Ctrl-C, SIGTERM), as a shell reports a
	// command that SIGINT ended.
	exitInterrupted = 130
)

// exitCodesHelp ends every command's help.
const exitCodesHelp = `
Exit status: 0 success; 1 an API error, a failed task or a wait that timed out (the
error's type, status and description are printed on stderr); 2 a usage error; 130
interrupted (Ctrl-C).
`

// Defaults of the client commands.
const (
	DefaultURL         = "http://127.0.0.1:8080/v1"
	DefaultWaitTimeout = 10 * time.Minute
	// defaultPollInterval is how often a wait polls: the server is usually local.
	defaultPollInterval = 250 * time.Millisecond
	// requestTimeout bounds one HTTP request, so that a hung server fails the command.
	requestTimeout = time.Minute
)

// CLI is one run of the clouddb command line. It holds everything a command reads or
// writes besides its arguments, so that tests run commands in process and side by side;
// the cobra commands it builds are its own.
type CLI struct {
	Stdout, Stderr io.Writer
	// LookupEnv reads the environment: os.LookupEnv in the binary, a map in tests.
	LookupEnv func(key string) (string, bool)
	// StderrTerminal says whether stderr is a terminal: a wait shows a spinner there,
	// and plain lines otherwise.
	StderrTerminal bool
	// PollInterval is how often a wait polls (defaultPollInterval when 0).
	PollInterval time.Duration
	// KeyCacheTTL is how long `admin keys revoke` waits for the running services to
	// forget the revoked key (keyCacheTTL when 0).
	KeyCacheTTL time.Duration
	// Transport carries the API requests (http.DefaultTransport when nil); tests check
	// every request and answer against the OpenAPI document with it.
	Transport http.RoundTripper

	flags cliFlags
	// command is the path of the command that ran, which the hint of a usage error names.
	command string
}

// cliFlags are the global flags, after their environment twins are applied.
type cliFlags struct {
	url, apiKey, apiSecretKey, dataDir string
	output, field                      string
	quiet                              bool
	timeout                            time.Duration
}

// usageError is a command line that cannot run (exit status 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// interruptedError is a wait for task that the end of the command's context (Ctrl-C)
// interrupted.
type interruptedError struct {
	task string
	err  error
}

func (e interruptedError) Error() string { return "interrupted: " + e.err.Error() }
func (e interruptedError) Unwrap() error { return e.err }

// actionError is an error a command's action returned, as opposed to one cobra found in
// the command line (which is a usage error).
type actionError struct{ err error }

func (e actionError) Error() string { return e.err.Error() }
func (e actionError) Unwrap() error { return e.err }

// Run runs the command line args and returns the exit status; errors are printed on
// stderr.
func (c *CLI) Run(ctx context.Context, args []string) int {
	err := c.execute(ctx, args)
	if err == nil {
		return exitOK
	}
	var ie interruptedError
	if errors.As(err, &ie) || (ctx.Err() != nil && errors.Is(err, context.Canceled)) {
		msg := "interrupted"
		if ie.task != "" {
			msg += "; the work goes on: clouddb tasks get " + ie.task
		}
		fmt.Fprintln(c.Stderr, "clouddb:", msg)
		return exitInterrupted
	}
	fmt.Fprintln(c.Stderr, "clouddb:", c.explain(err))
	if errors.As(err, new(usageError)) {
		fmt.Fprintf(c.Stderr, "Run '%s --help' for usage.\n", c.command)
		return exitUsage
	}
	return exitError
}

// execute runs args; a usage error comes back as a usageError.
func (c *CLI) execute(ctx context.Context, args []string) error {
	if c.LookupEnv == nil {
		c.LookupEnv = func(string) (string, bool) { return "", false }
	}
	root := c.rootCommand()
	root.SetArgs(args)
	root.SetOut(c.Stdout)
	root.SetErr(c.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	c.command = root.CommandPath()
	if cmd != nil {
		c.command = cmd.CommandPath()
	}
	if err == nil {
		return nil
	}
	var ae actionError
	if errors.As(err, &ae) {
		return ae.err
	}
	// Everything cobra itself reports is about the command line.
	if errors.As(err, new(usageError)) {
		return err
	}
	return usageError{err}
}

// action wraps a command's work: its errors are the command's own (exit 1), unless it
// says they are usage errors.
func action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := fn(cmd, args); err != nil {
			return actionError{err}
		}
		return nil
	}
}

// envAnnotation names a flag's environment twin.
const envAnnotation = "clouddb-env"

// envFlag gives the flag name of fs an environment twin.
func envFlag(fs *pflag.FlagSet, name, env string) {
	if err := fs.SetAnnotation(name, envAnnotation, []string{env}); err != nil {
		panic(err) // a flag registered just before: a programming error
	}
}

func (c *CLI) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "clouddb",
		Short: "A self-hosted cloud database service where every database is a real Redis server",
		Long: `clouddb is a self-hosted cloud database service where every database is a real Redis
server. "clouddb serve" runs the service; the other commands are clients of its API (/v1),
except "clouddb admin", which works on the service's store directly.

Configuration, each from its flag, else its environment variable, else the default:
  --url             CLOUDDB_URL             the URL clouddb serve wrote to <data-dir>/api-url,
                                            else ` + DefaultURL + ` ("/v1" may be left out)
  --api-key         CLOUDDB_API_KEY         with --api-secret-key (CLOUDDB_API_SECRET_KEY);
                                            when neither is given, the default account's
                                            key in <data-dir>/credentials.json
  --data-dir        CLOUDDB_DATA_DIR        ` + DefaultDataDir + `

Commands that make a task (create, update, delete) print the task; with --wait they follow
it, then the resource until it is active (or gone), and print the resource.`,
		Version:       clouddb.Version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          parentArgs,
		RunE:          parentRun,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return c.applyEnv(cmd)
		},
	}
	root.SetUsageTemplate(root.UsageTemplate() + exitCodesHelp)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	pf := root.PersistentFlags()
	pf.StringVar(&c.flags.url, "url", "", "URL of the clouddb API (env CLOUDDB_URL; default: the one clouddb serve wrote to <data-dir>/api-url, else "+DefaultURL+")")
	envFlag(pf, "url", "CLOUDDB_URL")
	pf.StringVar(&c.flags.apiKey, "api-key", "", "API key, x-api-key (env CLOUDDB_API_KEY; default: <data-dir>/credentials.json)")
	envFlag(pf, "api-key", "CLOUDDB_API_KEY")
	pf.StringVar(&c.flags.apiSecretKey, "api-secret-key", "", "API secret key, x-api-secret-key (env CLOUDDB_API_SECRET_KEY)")
	envFlag(pf, "api-secret-key", "CLOUDDB_API_SECRET_KEY")
	pf.StringVar(&c.flags.dataDir, "data-dir", DefaultDataDir, "data dir of clouddb serve, where credentials.json is read from (env CLOUDDB_DATA_DIR)")
	envFlag(pf, "data-dir", "CLOUDDB_DATA_DIR")
	pf.StringVarP(&c.flags.output, "output", "o", "table", "output format: table or json (the API's JSON as received)")
	pf.StringVar(&c.flags.field, "field", "", "print only this field of the result, e.g. id, publicEndpoint, security.password, taskId (one line per item of a list)")
	pf.BoolVar(&c.flags.quiet, "quiet", false, "show no progress while waiting")
	pf.DurationVar(&c.flags.timeout, "timeout", DefaultWaitTimeout, "longest a wait (--wait, tasks wait) may take")

	root.AddCommand(c.serveCommand(), c.versionCommand(), c.subscriptionsCommand(), c.databasesCommand(), c.tasksCommand(),
		c.cloudAccountsCommand(), c.aclCommand(), c.logsCommand(), c.adminCommand())
	return root
}

// parentArgs lets a command with subcommands take any arguments, so that parentRun can
// name an unknown one.
func parentArgs(*cobra.Command, []string) error { return nil }

// parentRun is the action of a command with subcommands: called with no subcommand (or an
// unknown one), it is a usage error.
func parentRun(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	cmd.SetOut(cmd.ErrOrStderr())
	_ = cmd.Usage() // on stderr, like the error; a failed write there cannot be reported
	return usagef("%s needs a command: %s", cmd.CommandPath(), strings.Join(subcommandNames(cmd), ", "))
}

func subcommandNames(cmd *cobra.Command) []string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return names
}

// group is a command with subcommands and no action of its own.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Args: parentArgs, RunE: parentRun}
	cmd.AddCommand(subs...)
	return cmd
}

// applyEnv sets every flag not given on the command line from its environment twin, and
// checks the global flags.
func (c *CLI) applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		env := f.Annotations[envAnnotation]
		if f.Changed || len(env) == 0 || err != nil {
			return
		}
		if v, ok := c.LookupEnv(env[0]); ok {
			if e := f.Value.Set(v); e != nil {
				err = usagef("%s=%q: %v", env[0], v, e)
			}
		}
	})
	if err != nil {
		return err
	}
	if o := c.flags.output; o != "table" && o != "json" {
		return usagef("--output %q: want table or json", o)
	}
	if f := cmd.Flags().Lookup("field"); f != nil && f.Changed && c.flags.field == "" {
		return usagef("--field is empty: give a field's path, such as id")
	}
	if c.flags.timeout <= 0 {
		return usagef("--timeout %s: want a positive duration such as 10m", c.flags.timeout)
	}
	return nil
}

func (c *CLI) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print clouddb's version",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintf(c.Stdout, "clouddb version %s\n", clouddb.Version())
			return nil
		}),
	}
}

// serveCommand runs the service. Its flags are the standard library's (with their
// environment twins, see Main.ParseFlags), parsed by Main, not by cobra.
func (c *CLI) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:                "serve [flags]",
		Short:              "Run the service (clouddb serve -h lists its flags, each with a CLOUDDB_* twin)",
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			m := NewMain(c.Stdout, c.Stderr)
			if err := m.ParseFlags(args); errors.Is(err, flag.ErrHelp) {
				return nil
			} else if err != nil {
				return usageError{err}
			}
			if err := m.Run(cmd.Context()); err != nil {
				return actionError{err}
			}
			return nil
		},
	}
}

// noArgs refuses arguments with a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments (got %q)", cmd.CommandPath(), args[0])
	}
	return nil
}

// oneArg requires exactly one argument, named what.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) == 0:
			return usagef("%s needs the %s", cmd.CommandPath(), what)
		case len(args) > 1:
			return usagef("%s takes one %s (got %d arguments)", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

// idArg parses a numeric id argument.
func idArg(what, s string) (int, error) {
	var id int
	if _, err := fmt.Sscan(s, &id); err != nil || id <= 0 || fmt.Sprint(id) != s {
		return 0, usagef("%s %q: want a positive number", what, s)
	}
	return id, nil
}

// baseURL is --url with /v1 added when it was left out.
func baseURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usagef("--url %q: want an http:// or https:// URL such as %s", raw, DefaultURL)
	}
	base := strings.TrimRight(raw, "/")
	if !strings.HasSuffix(base, "/v1") {
		base += "/v1"
	}
	return base, nil
}

// api returns a client of the configured API with the configured key: --api-key and
// --api-secret-key (or their environment twins), else the default account's key that
// clouddb serve wrote to <data-dir>/credentials.json.
func (c *CLI) api() (*client.Client, error) {
	if c.flags.url == "" {
		c.flags.url = c.servedURL()
	}
	base, err := baseURL(c.flags.url)
	if err != nil {
		return nil, err
	}
	key, secret := c.flags.apiKey, c.flags.apiSecretKey
	switch {
	case key == "" && secret == "":
		creds, err := c.readCredentials()
		if err != nil {
			return nil, err
		}
		key, secret = creds.APIKey, creds.SecretKey
	case key == "":
		return nil, usagef("--api-secret-key is given but --api-key (CLOUDDB_API_KEY) is not: give both")
	case secret == "":
		return nil, usagef("--api-key is given but --api-secret-key (CLOUDDB_API_SECRET_KEY) is not: give both")
	}
	poll := c.PollInterval
	if poll == 0 {
		poll = defaultPollInterval
	}
	return client.New(base, key, secret, client.WithHTTPClient(&http.Client{Timeout: requestTimeout, Transport: c.Transport}),
		client.WithUserAgent("clouddb-cli/"+clouddb.Version()), client.WithPollInterval(poll)), nil
}

// servedURL is the URL the clouddb serve of the data dir last listened at (it writes it to
// <data-dir>/api-url at every start, so that a CLI run beside it needs no --url whatever
// --listen said), else DefaultURL.
func (c *CLI) servedURL() string {
	b, err := os.ReadFile(filepath.Join(c.flags.dataDir, apiURLFile))
	if u := strings.TrimSpace(string(b)); err == nil && u != "" {
		return u
	}
	return DefaultURL
}

// readCredentials reads the default account's key pair from the data dir.
func (c *CLI) readCredentials() (*credentials, error) {
	path := filepath.Join(c.flags.dataDir, "credentials.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("no API key: give --api-key and --api-secret-key (or CLOUDDB_API_KEY and CLOUDDB_API_SECRET_KEY), "+
			"or point --data-dir (CLOUDDB_DATA_DIR) at the data dir of clouddb serve, whose credentials.json holds the default account's key (%v)", err)
	}
	var creds credentials
	if err := json.Unmarshal(b, &creds); err != nil || creds.APIKey == "" || creds.SecretKey == "" {
		return nil, usagef("%s does not hold an API key pair (apiKey, secretKey)", path)
	}
	return &creds, nil
}

// explain adds a hint to an error that says the service could not be reached.
func (c *CLI) explain(err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return fmt.Errorf("%w (is clouddb serve running at %s? see --url)", err, c.flags.url)
	}
	return err
}
