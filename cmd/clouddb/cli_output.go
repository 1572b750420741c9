package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"clouddb/cloudapi/client"
)

// result is what a command prints on stdout.
type result struct {
	// raw is the API's answer as received, which -o json prints indented.
	raw json.RawMessage
	// list says raw is a list; items are its elements, which --field reads one by one.
	list  bool
	items []json.RawMessage
	// idKey is the key of the resource's id when it is not "id" (databaseId): --field id
	// reads it too. A task has none: its id is read as taskId.
	idKey string
	// head and rows are the table.
	head []string
	rows [][]string
}

// columns renders a resource of wire type T as table rows.
type columns[T any] struct {
	idKey string
	head  []string
	row   func(*T) []string
}

// one is a result of a single resource.
func (t columns[T]) one(raw json.RawMessage) (*result, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("decode the answer: %w", err)
	}
	return &result{raw: raw, idKey: t.idKey, head: t.head, rows: [][]string{t.row(&v)}}, nil
}

// list is a result of a list whose elements are items.
func (t columns[T]) list(raw json.RawMessage, items []json.RawMessage) (*result, error) {
	r := &result{raw: raw, list: true, items: items, idKey: t.idKey, head: t.head}
	for _, item := range items {
		var v T
		if err := json.Unmarshal(item, &v); err != nil {
			return nil, fmt.Errorf("decode the answer: %w", err)
		}
		r.rows = append(r.rows, t.row(&v))
	}
	return r, nil
}

// elements returns the elements of the array found under path in raw (object keys, or
// array indexes as numbers); a missing or null array has none.
func elements(raw json.RawMessage, path ...string) ([]json.RawMessage, error) {
	cur := raw
	for _, key := range path {
		if i, err := strconv.Atoi(key); err == nil {
			var arr []json.RawMessage
			if err := json.Unmarshal(cur, &arr); err != nil {
				return nil, fmt.Errorf("decode the answer: %w", err)
			}
			if i >= len(arr) {
				return nil, nil
			}
			cur = arr[i]
			continue
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cur, &obj); err != nil {
			return nil, fmt.Errorf("decode the answer: %w", err)
		}
		if cur = obj[key]; cur == nil {
			return nil, nil
		}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(cur, &items); err != nil {
		return nil, fmt.Errorf("decode the answer: %w", err)
	}
	return items, nil
}

// print writes r as --output and --field say.
func (c *CLI) print(r *result) error {
	if c.flags.field != "" {
		values := []json.RawMessage{r.raw}
		if r.list {
			values = r.items
		}
		var out strings.Builder
		for _, v := range values {
			s, err := fieldOf(v, c.flags.field, r.idKey)
			if err != nil {
				return err
			}
			out.WriteString(s + "\n")
		}
		_, err := fmt.Fprint(c.Stdout, out.String())
		return err
	}
	if c.flags.output == "json" {
		var b bytes.Buffer
		if err := json.Indent(&b, r.raw, "", "  "); err != nil {
			return fmt.Errorf("the answer is not JSON: %w", err)
		}
		b.WriteByte('\n')
		_, err := c.Stdout.Write(b.Bytes())
		return err
	}
	tw := tabwriter.NewWriter(c.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(r.head, "\t"))
	for _, row := range r.rows {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// fieldOf reads the dotted path (keys, and indexes of arrays) in raw and renders it as
// jq -r does: a string bare, anything else as JSON. "id" as the first key reads idKey
// when raw has no "id".
func fieldOf(raw json.RawMessage, path, idKey string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // ids and sizes print as they were sent
	var cur any
	if err := dec.Decode(&cur); err != nil {
		return "", fmt.Errorf("the answer is not JSON: %w", err)
	}
	keys := strings.Split(path, ".")
	for i, key := range keys {
		at := strings.Join(keys[:i+1], ".")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[key]
			if !ok && i == 0 && key == "id" && idKey != "" {
				next, ok = v[idKey]
			}
			if !ok {
				return "", fmt.Errorf("--field %s: the result has no %s (it has %s)", path, at, strings.Join(slices.Sorted(maps.Keys(v)), ", "))
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(key)
			if err != nil || n < 0 || n >= len(v) {
				return "", fmt.Errorf("--field %s: %s is not an index of a list of %d", path, at, len(v))
			}
			cur = v[n]
		default:
			return "", fmt.Errorf("--field %s: %s is a value, with no field %q", path, strings.Join(keys[:i], "."), key)
		}
	}
	if s, ok := cur.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(cur)
	return string(b), err
}

// taskColumns is the table of tasks.
var taskColumns = columns[client.Task]{
	// No idKey: --field id of a task would pass a task id where a resource id is meant.
	head: []string{"TASK", "STATUS", "COMMAND", "RESOURCE", "UPDATED", "DESCRIPTION"},
	row: func(t *client.Task) []string {
		resource, desc := "", t.Description
		if t.ResourceID() != 0 {
			resource = strconv.Itoa(t.ResourceID())
		}
		if t.Response != nil && t.Response.Error != nil {
			desc = t.Response.Error.Type + ": " + t.Response.Error.Description
		}
		return []string{t.ID, t.Status, t.CommandType, resource, t.Timestamp.Local().Format(time.DateTime), desc}
	},
}

// taskResult is a task as a result: its JSON as received.
func taskResult(t *client.Task) (*result, error) {
	if len(t.Raw) == 0 {
		return nil, fmt.Errorf("task %s: the client kept no JSON of it", t.ID)
	}
	return taskColumns.one(t.Raw)
}

// gb renders a size in GB.
func gb(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// yesNo renders a flag of a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// getRaw reads the API's answer at path as received.
func getRaw(cmd *cobra.Command, api *client.Client, path string) (json.RawMessage, error) {
	return rawAt(api, path)(cmd.Context())
}

// rawAt reads the API's answer at path as received.
func rawAt(api *client.Client, path string) getter {
	return func(ctx context.Context) (json.RawMessage, error) {
		var raw json.RawMessage
		err := api.Do(ctx, http.MethodGet, path, nil, &raw)
		return raw, err
	}
}
