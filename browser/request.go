package browser

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"

	"clouddb"
)

// object is a JSON object of a request being validated. Fields are taken one by one with
// their rule; done refuses whatever is left, so that a request holds exactly the fields
// the spec allows, and every error names the field by its path (tls.clientAuth,
// seedNodes[1].port).
type object struct {
	path   string
	fields map[string]json.RawMessage
	taken  map[string]bool
}

// readBody decodes the request body as one JSON object.
func readBody(r *http.Request) (*object, error) {
	dec := json.NewDecoder(r.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return nil, err
		case errors.Is(err, io.EOF):
			return nil, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "a JSON request body is required")
		}
		return nil, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "malformed JSON: %v", err)
	}
	if dec.More() {
		return nil, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "request body must hold a single JSON object")
	}
	if !isObject(raw) {
		return nil, clouddb.Invalid(clouddb.ErrTypeMalformedBody, "request body must be a JSON object")
	}
	return newObject("", raw)
}

func isObject(raw json.RawMessage) bool {
	b := bytes.TrimSpace(raw)
	return len(b) > 0 && b[0] == '{'
}

func isNull(raw json.RawMessage) bool { return string(bytes.TrimSpace(raw)) == "null" }

func newObject(path string, raw json.RawMessage) (*object, error) {
	if !isObject(raw) {
		return nil, invalid(path, "must be an object")
	}
	o := &object{path: path, taken: map[string]bool{}}
	if err := json.Unmarshal(raw, &o.fields); err != nil {
		return nil, invalid(path, "must be an object")
	}
	return o, nil
}

// name is the path of one of the object's fields.
func (o *object) name(field string) string {
	if o.path == "" {
		return field
	}
	return o.path + "." + field
}

// has reports whether the field is present and not null.
func (o *object) has(field string) bool {
	v, ok := o.fields[field]
	return ok && !isNull(v)
}

// take returns a field's raw value; a null counts as absent.
func (o *object) take(field string, required bool) (json.RawMessage, bool, error) {
	o.taken[field] = true
	v, ok := o.fields[field]
	if !ok || isNull(v) {
		if required {
			return nil, false, invalid(o.name(field), "is required")
		}
		return nil, false, nil
	}
	return v, true, nil
}

// str takes a string field.
func (o *object) str(field string, required bool) (string, bool, error) {
	raw, ok, err := o.take(field, required)
	if !ok {
		return "", false, err
	}
	var s string
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false, invalid(o.name(field), "must be a string")
	}
	return s, true, nil
}

// nonEmpty takes a string field that must not be empty, of at most max bytes.
func (o *object) nonEmpty(field string, required bool, max int) (string, error) {
	s, ok, err := o.str(field, required)
	if err != nil || !ok {
		return "", err
	}
	if s == "" {
		return "", invalid(o.name(field), "must not be empty")
	}
	if len(s) > max {
		return "", invalid(o.name(field), "must be at most %d bytes long", max)
	}
	return s, nil
}

// integer takes an integer field within [lo, hi]. A number with a zero fraction (6379.0)
// is an integer; a quoted number is not.
func (o *object) integer(field string, required bool, lo, hi int) (int, bool, error) {
	raw, ok, err := o.take(field, required)
	if !ok {
		return 0, false, err
	}
	rule := func() error { return invalid(o.name(field), "must be an integer from %d to %d", lo, hi) }
	b := bytes.TrimSpace(raw)
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return 0, false, rule()
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(b), 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
			return 0, false, rule()
		}
		n = int64(f)
	}
	if n < int64(lo) || n > int64(hi) {
		return 0, false, rule()
	}
	return int(n), true, nil
}

// boolean takes an optional boolean field; absent is false.
func (o *object) boolean(field string) (bool, error) {
	raw, ok, err := o.take(field, false)
	if !ok {
		return false, err
	}
	switch string(bytes.TrimSpace(raw)) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, invalid(o.name(field), "must be a boolean")
}

// obj takes a nested object field.
func (o *object) obj(field string, required bool) (*object, error) {
	raw, ok, err := o.take(field, required)
	if !ok {
		return nil, err
	}
	return newObject(o.name(field), raw)
}

// array takes an array field.
func (o *object) array(field string, required bool) ([]json.RawMessage, bool, error) {
	raw, ok, err := o.take(field, required)
	if !ok {
		return nil, false, err
	}
	var items []json.RawMessage
	if b := bytes.TrimSpace(raw); len(b) == 0 || b[0] != '[' || json.Unmarshal(raw, &items) != nil {
		return nil, false, invalid(o.name(field), "must be an array")
	}
	return items, true, nil
}

// done refuses the first field (in name order) that no rule took; why explains it.
func (o *object) done(why string) error {
	var left []string
	for f := range o.fields {
		if !o.taken[f] {
			left = append(left, f)
		}
	}
	if len(left) == 0 {
		return nil
	}
	slices.Sort(left)
	return invalid(o.name(left[0]), "is not allowed%s", why)
}
