package clouddb

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Error types of Redis versions (the real API's catalogue).
const (
	ErrTypeRedisVersionNotSupported           = "DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED"
	ErrTypeRedisVersionInvalid                = "DATABASE_REDIS_VERSION_INVALID_VALUE"
	ErrTypeSubscriptionRedisVersionInvalid    = "SUBSCRIPTION_REDIS_VERSION_INVALID_VALUE"
	ErrTypeDatabaseUpgradeInvalidRedisVersion = "DATABASE_UPGRADE_INVALID_REDIS_VERSION"
)

// LatestRedisVersion is the value of a subscription's redisVersion that names the newest
// offered version.
const LatestRedisVersion = "latest"

// DefaultRedisVersion is the version a clouddb offers when it is given no binary's
// version (a service built in code, tests): that of the redis-server 7.0 this project is
// built and tested with.
const DefaultRedisVersion = "7.0"

// RedisVersions are the Redis versions clouddb offers: one per redis-server binary the
// operator gave it, named by major.minor.
type RedisVersions struct {
	// Default is the version of a database whose create names none.
	Default string
	// Offered lists the versions, oldest first.
	Offered []string
	// Full maps each offered version to the full version of its binary (7.0.15), which a
	// database reports as redisVersionCompliance.
	Full map[string]string
}

// OneRedisVersion offers a single version, given as major.minor or in full.
func OneRedisVersion(v string) RedisVersions {
	mm, ok := MajorMinor(v)
	if !ok {
		mm = v
	}
	return RedisVersions{Default: mm, Offered: []string{mm}, Full: map[string]string{mm: v}}
}

// NewRedisVersions offers one version per full version given (7.2.4; a bare major.minor
// is its own full version), the first the default: how a driver given one image or
// binary per version names them. A value that is not a version, or two of one
// major.minor (which of them would a database of that version run?), is an error.
func NewRedisVersions(full ...string) (RedisVersions, error) {
	if len(full) == 0 {
		return RedisVersions{}, errors.New("redis versions: none given")
	}
	r := RedisVersions{Full: make(map[string]string, len(full))}
	for _, f := range full {
		mm, ok := MajorMinor(f)
		if !ok {
			return RedisVersions{}, fmt.Errorf("redis versions: %q is not a Redis version such as 7.2.4", f)
		}
		if other, dup := r.Full[mm]; dup {
			return RedisVersions{}, fmt.Errorf("redis versions: %s and %s are both Redis %s: give one per major.minor", other, f, mm)
		}
		r.Full[mm] = f
		r.Offered = append(r.Offered, mm)
	}
	r.Default = r.Offered[0]
	slices.SortFunc(r.Offered, CompareRedisVersions)
	return r, nil
}

// redisVersionForm is a version as the API names it: major.minor.
var redisVersionForm = regexp.MustCompile(`^(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})$`)

// MajorMinor returns the major.minor of a version given as major.minor or
// major.minor.patch (and whatever redis-server --version adds after the patch).
func MajorMinor(v string) (string, bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return "", false
	}
	mm := parts[0] + "." + parts[1]
	return mm, redisVersionForm.MatchString(mm)
}

// CompareRedisVersions compares two major.minor versions numerically (7.10 is newer than
// 7.9): -1, 0 or +1. A malformed version sorts first.
func CompareRedisVersions(a, b string) int {
	pa, pb := versionParts(a), versionParts(b)
	for i := range pa {
		if c := pa[i] - pb[i]; c != 0 {
			if c < 0 {
				return -1
			}
			return 1
		}
	}
	return 0
}

func versionParts(v string) [2]int {
	if !redisVersionForm.MatchString(v) {
		return [2]int{-1, -1}
	}
	major, minor, _ := strings.Cut(v, ".")
	a, _ := strconv.Atoi(major)
	b, _ := strconv.Atoi(minor)
	return [2]int{a, b}
}

// OrDefault is r, or DefaultRedisVersion alone when r offers none.
func (r RedisVersions) OrDefault() RedisVersions {
	if len(r.Offered) == 0 {
		return OneRedisVersion(DefaultRedisVersion)
	}
	return r
}

// Keep is the version a database runs from now on when its data was last served by
// served and its stored version does not say otherwise: served itself when offered, else
// the oldest offered version newer than served (the only move its data allows), else
// served, which no binary runs until the operator gives one back.
func (r RedisVersions) Keep(served string) string {
	if r.Offers(served) {
		return served
	}
	if newer := r.Newer(served); len(newer) > 0 {
		return newer[0]
	}
	return served
}

// Offers reports whether v is one of the offered versions.
func (r RedisVersions) Offers(v string) bool { return slices.Contains(r.Offered, v) }

// Resolve is the version of a database that stores v: v itself, or the default when
// empty (a database made before versions were stored).
func (r RedisVersions) Resolve(v string) string {
	if v == "" {
		return r.Default
	}
	return v
}

// Latest is the newest offered version.
func (r RedisVersions) Latest() string {
	latest := r.Default
	for _, v := range r.Offered {
		if CompareRedisVersions(v, latest) > 0 {
			latest = v
		}
	}
	return latest
}

// Compliance is the full version of the binary that runs version v (v itself when its
// binary is not offered any more).
func (r RedisVersions) Compliance(v string) string {
	if full := r.Full[v]; full != "" {
		return full
	}
	return v
}

// Newer lists the offered versions newer than v, oldest first: the targets of an upgrade.
func (r RedisVersions) Newer(v string) []string {
	var out []string
	for _, o := range r.Offered {
		if CompareRedisVersions(o, v) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// list renders the offered versions for an error's description.
func (r RedisVersions) list() string { return strings.Join(r.Offered, ", ") }

// DatabaseVersion checks a database create's redisVersion and returns the version to
// store: the default when none is given, else the given one if it is offered. A value
// that is not major.minor is DATABASE_REDIS_VERSION_INVALID_VALUE; a well-formed one that
// is not offered is DATABASE_REDIS_VERSION_IS_NOT_SUPPORTED.
func (r RedisVersions) DatabaseVersion(v string) (string, error) {
	switch {
	case v == "":
		return r.Default, nil
	case r.Offers(v):
		return v, nil
	case !redisVersionForm.MatchString(v):
		return "", Invalid(ErrTypeRedisVersionInvalid, "database: redisVersion %q is not a version: give major.minor, one of %s (see GET /subscriptions/redis-versions)", v, r.list())
	}
	return "", Invalid(ErrTypeRedisVersionNotSupported, "database: redisVersion %q is not offered: this clouddb offers %s (see GET /subscriptions/redis-versions)", v, r.list())
}

// SubscriptionVersion checks a subscription create's redisVersion (the version of its
// creation-plan databases) and returns the version it names: an offered one, or the
// newest for "latest"; "" when none is given.
func (r RedisVersions) SubscriptionVersion(v string) (string, error) {
	switch {
	case v == "" || r.Offers(v):
		return v, nil
	case v == LatestRedisVersion:
		return r.Latest(), nil
	}
	return "", Invalid(ErrTypeSubscriptionRedisVersionInvalid, "subscription: redisVersion %q is not offered: give latest or one of %s (see GET /subscriptions/redis-versions)", v, r.list())
}

// UpgradeRequest is the body of a database upgrade.
type UpgradeRequest struct {
	TargetRedisVersion string `json:"targetRedisVersion"`
}

// CheckUpgrade checks an upgrade of a database that runs version current (resolved) to
// target: target must be offered and newer; there is no downgrade.
func (r RedisVersions) CheckUpgrade(current, target string) error {
	newer := r.Newer(current)
	targets := "none: it runs the newest version offered"
	if len(newer) > 0 {
		targets = strings.Join(newer, ", ")
	}
	switch {
	case target == "":
		return Invalid(ErrTypeDatabaseUpgradeInvalidRedisVersion, "database upgrade: targetRedisVersion is required; the database runs Redis %s and may be upgraded to %s", current, targets)
	case target == current:
		return Invalid(ErrTypeDatabaseUpgradeInvalidRedisVersion, "database upgrade: the database already runs Redis %s; it may be upgraded to %s", current, targets)
	case !r.Offers(target):
		return Invalid(ErrTypeDatabaseUpgradeInvalidRedisVersion, "database upgrade: targetRedisVersion %q is not offered (this clouddb offers %s); the database runs Redis %s and may be upgraded to %s", target, r.list(), current, targets)
	case CompareRedisVersions(target, current) < 0:
		return Invalid(ErrTypeDatabaseUpgradeInvalidRedisVersion, "database upgrade: targetRedisVersion %s is older than the Redis %s the database runs: there is no downgrade; it may be upgraded to %s", target, current, targets)
	}
	return nil
}
