package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"clouddb/cloudapi/client"
)

// progress shows on stderr what a wait waits for: a spinner with the latest status on a
// terminal, a line per change of status otherwise (a log, a CI job), nothing with --quiet.
// stdout carries only the result.
type progress struct {
	c     *CLI
	bar   *progressbar.ProgressBar
	last  string
	start time.Time
}

func (c *CLI) newProgress() *progress { return &progress{c: c, start: time.Now()} }

// show reports the status of subject ("task <id>", "database <id>").
func (p *progress) show(subject, status string) {
	line := subject + ": " + status
	if p.c.flags.quiet || line == p.last {
		return
	}
	p.last = line
	if !p.c.StderrTerminal {
		fmt.Fprintln(p.c.Stderr, line)
		return
	}
	if p.bar == nil {
		p.bar = progressbar.NewOptions(-1, progressbar.OptionSetWriter(p.c.Stderr), progressbar.OptionSpinnerType(14),
			progressbar.OptionSetDescription(line), progressbar.OptionClearOnFinish(), progressbar.OptionSetElapsedTime(true))
		_ = p.bar.RenderBlank() // a terminal that fails to show the spinner fails nothing else
		return
	}
	p.bar.Describe(line)
}

// task reports a task's status.
func (p *progress) task(t *client.Task) { p.show("task "+t.ID, t.Status) }

// stop ends the spinner and leaves its last status on the terminal as a line.
func (p *progress) stop() {
	if p.bar == nil {
		return
	}
	_ = p.bar.Finish()
	p.bar = nil
	fmt.Fprintf(p.c.Stderr, "%s (%s)\n", p.last, time.Since(p.start).Round(100*time.Millisecond))
}

// gone is the status settle waits for when a resource is deleted.
const gone = ""

// getter reads a resource as received; IsNotFound(err) when it is gone.
type getter func(ctx context.Context) (json.RawMessage, error)

// settle polls a resource until its status is want (active, say), or, when want is gone,
// until it is gone (a 404, or the status deleted). A status of error fails the wait.
func (c *CLI) settle(ctx context.Context, p *progress, subject, want string, get getter) (json.RawMessage, error) {
	for {
		raw, err := get(ctx)
		if want == gone && client.IsNotFound(err) {
			p.show(subject, "deleted")
			return nil, nil
		}
		if d, retry := client.RetryDelay(err, c.pollInterval()); retry {
			// The rate limit, or a proxy before a restarting service: the work goes on.
			if perr := pause(ctx, d); perr != nil {
				return nil, fmt.Errorf("waiting for %s (last answer: %v): %w", subject, err, perr)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		var s struct {
			Status       string `json:"status"`
			StatusDetail string `json:"statusDetail"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: decode the answer: %w", subject, err)
		}
		p.show(subject, s.Status)
		switch {
		case s.Status == want || (want == gone && s.Status == "deleted"):
			return raw, nil
		case s.Status == "error" || strings.HasSuffix(s.Status, "-error"):
			detail := ""
			if s.StatusDetail != "" {
				detail = ": " + s.StatusDetail
			}
			return nil, fmt.Errorf("%s is in status %s%s", subject, s.Status, detail)
		}
		if err := pause(ctx, c.pollInterval()); err != nil {
			return nil, fmt.Errorf("waiting for %s (it is %s): %w", subject, s.Status, err)
		}
	}
}

func (c *CLI) pollInterval() time.Duration {
	if c.PollInterval > 0 {
		return c.PollInterval
	}
	return defaultPollInterval
}

// pause waits for d or the end of ctx, and says which.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// settleFunc follows what a completed task changed and returns what to print.
type settleFunc func(ctx context.Context, p *progress, done *client.Task) (*result, error)

// submit runs a command that makes a task. Without --wait it prints the task, which
// `clouddb tasks wait ID` follows later. With it, it follows the task, then settle, and
// prints what settle returns; a task that fails is its error (exit status 1).
func (c *CLI) submit(cmd *cobra.Command, api *client.Client, wait bool, send func(ctx context.Context) (*client.Task, error), then settleFunc) error {
	if !wait {
		if err := c.refuseTaskID(cmd, false); err != nil {
			return err
		}
	}
	t, err := send(cmd.Context())
	if err != nil {
		return err
	}
	var r *result
	if wait {
		r, err = c.follow(cmd, api, t.ID, then)
	} else {
		r, err = taskResult(t)
	}
	if err != nil {
		return err
	}
	return c.print(r)
}

// submitDelete is submit for a delete, which prints the task, --wait or not.
func (c *CLI) submitDelete(cmd *cobra.Command, api *client.Client, wait bool, send func(ctx context.Context) (*client.Task, error), then settleFunc) error {
	if err := c.refuseTaskID(cmd, true); err != nil {
		return err
	}
	return c.submit(cmd, api, wait, send, then)
}

// refuseTaskID refuses --field id (or id.…) on a command that will print a task, before
// it sends anything: a task's id is taskId, and a script that captures
// X=$(clouddb … create --field id) means the resource's id, which only --wait prints.
func (c *CLI) refuseTaskID(cmd *cobra.Command, deletes bool) error {
	if key, _, _ := strings.Cut(c.flags.field, "."); key != "id" {
		return nil
	}
	if deletes {
		return usagef("--field id: %s prints the task, whose id is taskId: give --field taskId", cmd.CommandPath())
	}
	return usagef("--field id: without --wait, %s prints its task, whose id is taskId: give --field taskId for the task's id, "+
		"or --wait to print the resource, whose id --field id reads", cmd.CommandPath())
}

// follow waits, within --timeout, for the task id and then for settle.
func (c *CLI) follow(cmd *cobra.Command, api *client.Client, id string, then settleFunc) (*result, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), c.flags.timeout)
	defer cancel()
	p := c.newProgress()
	defer p.stop()
	done, err := api.WatchTask(ctx, id, p.task)
	if err == nil {
		var r *result
		if r, err = then(ctx, p, done); err == nil {
			return r, nil
		}
	}
	if cmd.Context().Err() != nil {
		return nil, interruptedError{task: id, err: err}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("--timeout %s passed: %w (the work goes on: clouddb tasks get %s)", c.flags.timeout, err, id)
	}
	return nil, err
}

// taskOnly is the settle of a command whose task is all there is to wait for.
func taskOnly(_ context.Context, _ *progress, done *client.Task) (*result, error) {
	return taskResult(done)
}

// waitFlag adds --wait to a command that makes a task.
func waitFlag(cmd *cobra.Command, wait *bool, what string) {
	cmd.Flags().BoolVar(wait, "wait", false, "follow the task, then "+what+" (bounded by --timeout)")
}
