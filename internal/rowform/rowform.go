// Package rowform is the stored form of what the two stores (sqlite/, postgres/) write:
// the time precision, which values are sealed, and how nested structs become JSON. It is
// kept in one place so that the stores cannot drift apart in it; each store keeps only
// what its driver needs (placeholders, column scanners, error codes).
package rowform

import (
	"encoding/json"
	"time"

	"clouddb"
)

// Norm is t at the precision and in the zone the stores keep, so that what a create or
// update leaves in the caller's struct equals what a later read returns.
func Norm(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Truncate(time.Microsecond)
}

// JSON is the stored form of a nested struct.
func JSON(v any) (string, error) {
	buf, err := json.Marshal(v)
	return string(buf), err
}

// Sealer seals secret values on the way in and opens them on the way out; with no cipher
// it passes them through (tests of a store itself may want plain text).
type Sealer struct{ C *clouddb.Cipher }

// Seal is the stored form of a secret.
func (s Sealer) Seal(v string) string {
	if s.C == nil {
		return v
	}
	return s.C.Seal(v)
}

// SealBytes is the stored form of a secret held as bytes; nil (none) stays nil.
func (s Sealer) SealBytes(v []byte) []byte {
	if v == nil {
		return nil
	}
	return []byte(s.Seal(string(v)))
}

// Open is the secret a stored value holds.
func (s Sealer) Open(v string) (string, error) {
	if s.C == nil {
		return v, nil
	}
	return s.C.Open(v)
}

// Spec is the stored form of a database's spec. Spec.Password, which only a create
// command carries, is never stored (the password lives in Database.Password alone, so it
// cannot leak past whatever protects that field), nor are the sources (see Sources); it
// clears both in d. The fields that may carry credentials (the backup destinations) are
// sealed inside the JSON.
func (s Sealer) Spec(d *clouddb.Database) (string, error) {
	d.Spec.Password = ""
	d.Spec.ReplicaOf = nil
	spec, err := d.Spec.MapSecrets(func(v string) (string, error) { return s.Seal(v), nil })
	if err != nil {
		return "", err
	}
	return JSON(spec)
}

// OpenSpec opens in spec what Spec sealed.
func (s Sealer) OpenSpec(spec *clouddb.DatabaseSpec) error {
	opened, err := spec.MapSecrets(s.Open)
	*spec = opened
	return err
}

// Sources is the stored form of a database's sources (replicaOf): sealed JSON, as the
// URIs may carry credentials; no sources is the empty string.
func (s Sealer) Sources(uris []string) (string, error) {
	if len(uris) == 0 {
		return "", nil
	}
	j, err := JSON(uris)
	if err != nil {
		return "", err
	}
	return s.Seal(j), nil
}

// OpenSources is the sources a stored value holds (opened already).
func OpenSources(stored string, dst *[]string) error {
	if stored == "" {
		return nil
	}
	return json.Unmarshal([]byte(stored), dst)
}

// State is the stored form of a database's data-operation state; it normalises the
// times in s.
func State(s clouddb.DatabaseState) (string, error) {
	for _, op := range []*clouddb.OperationStatus{s.Backup, s.Import} {
		if op != nil {
			op.Time = Norm(op.Time)
		}
	}
	return JSON(s)
}
